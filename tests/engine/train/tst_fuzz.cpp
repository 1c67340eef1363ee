// Random and structured garbage for every file reader: layout, profile, Chrome trace, telemetry stream,
// checkpoint metadata, llm.c model and token files. Each reader must answer with a value or a message
// (std::exception with a sentence, never the JSON library's own text) within bounded time: no crash, no
// hang, no other exception. A few seconds in the default suite (LOOM_FUZZ_SECONDS changes it); the seed is
// printed, so a failure can be replayed with LOOM_FUZZ_SEED.
#include "engine/plan/LayoutParser.h"
#include "engine/profiles/BuiltinProfiles.h"
#include "engine/profiles/ProfileFile.h"
#include "engine/trace/ChromeTrace.h"
#include "engine/trace/TelemetryStream.h"
#include "engine/trace/TraceStats.h"
#include "engine/train/Corpus.h"
#include "engine/train/InputChecks.h"
#include "engine/train/LlmcModel.h"

#include <QElapsedTimer>
#include <QFile>
#include <QTemporaryDir>
#include <QTest>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>

using namespace loom;

namespace {

std::string readSource(const char* relative)
{
    QFile f(QStringLiteral(LOOM_SOURCE_DIR "/") + QLatin1String(relative));
    return f.open(QIODevice::ReadOnly) ? f.readAll().toStdString() : std::string();
}

// Mutations that keep part of the structure: the interesting garbage.
class Mutator {
public:
    explicit Mutator(std::uint64_t seed)
        : m_rng(seed)
    {
    }

    std::size_t below(std::size_t n)
    {
        return n == 0 ? 0 : std::uniform_int_distribution<std::size_t>(0, n - 1)(m_rng);
    }

    std::string random(std::size_t maxLength)
    {
        std::string s(below(maxLength + 1), '\0');
        for (char& c : s)
            c = static_cast<char>(below(256));
        return s;
    }

    std::string mutate(std::string s)
    {
        static const char* const tokens[] = { "1e300", "-1", "1e400", "NaN", "null", "\"x\"", "[]", "{}",
            "-9223372036854775809", "18446744073709551616", "0.5", "true", "\"\\u0000\"", "\"\x1b]0;t\x07\"", "[[[[[[",
            "}}}}", "\"\\ud800\"", "2147483648", "-2147483649", "\xff\xfe" };
        const int edits = 1 + static_cast<int>(below(4));
        for (int e = 0; e < edits && !s.empty(); ++e) {
            const std::size_t at = below(s.size());
            switch (below(7)) {
            case 0: // flip a byte
                s[at] = static_cast<char>(below(256));
                break;
            case 1: // cut short
                s.resize(at);
                break;
            case 2: // replace a number or word by a hostile token
            {
                const std::size_t end = s.find_first_of(",}]", at);
                s.replace(at, end == std::string::npos ? 1 : end - at, tokens[below(std::size(tokens))]);
                break;
            }
            case 3: // insert a token
                s.insert(at, tokens[below(std::size(tokens))]);
                break;
            case 4: // nest deeply
            {
                const std::size_t depth = 100 + below(3000);
                s.insert(at, std::string(depth, below(2) ? '[' : '{'));
                break;
            }
            case 5: // duplicate a slice
                s.insert(at, s.substr(below(s.size()), below(64)));
                break;
            default: // erase a slice
                s.erase(at, below(32));
                break;
            }
        }
        return s;
    }

    std::string input(const std::string& valid)
    {
        switch (below(5)) {
        case 0:
            return random(512);
        case 1:
            return valid;
        default:
            return mutate(valid);
        }
    }

private:
    std::mt19937_64 m_rng;
};

void writeBytes(const std::string& path, const std::string& bytes)
{
    std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

template <typename T> std::string raw(const T& v)
{
    return std::string(reinterpret_cast<const char*>(&v), sizeof v);
}

// An llm.c model file for gpt-tiny (4 layers, 4 heads, hidden 64, vocab 256, 32 positions) of small weights.
std::string llmcModel()
{
    const std::int64_t C = 64, L = 4, T = 32, Vp = 256;
    std::int32_t header[256] = {};
    header[0] = 20240326;
    header[1] = 3;
    header[2] = T;
    header[3] = 256;
    header[4] = L;
    header[5] = 4;
    header[6] = C;
    header[7] = Vp;
    const std::int64_t perLayer = 2 * C + C * 3 * C + 3 * C + C * C + C + 2 * C + C * 4 * C + 4 * C + 4 * C * C + C;
    const std::int64_t floats = Vp * C + T * C + L * perLayer + 2 * C;
    std::string s(reinterpret_cast<const char*>(header), sizeof header);
    std::vector<float> w(static_cast<std::size_t>(floats));
    for (std::size_t i = 0; i < w.size(); ++i)
        w[i] = 0.01f * static_cast<float>(static_cast<int>(i % 7) - 3);
    s.append(reinterpret_cast<const char*>(w.data()), w.size() * 4);
    return s;
}

std::string tokenFile()
{
    std::int32_t header[256] = {};
    header[0] = 20240520;
    header[1] = 1;
    header[2] = 200;
    std::string s(reinterpret_cast<const char*>(header), sizeof header);
    for (std::uint16_t t = 0; t < 200; ++t)
        s += raw(static_cast<std::uint16_t>(t % 256));
    return s;
}

} // namespace

class TestFuzz : public QObject {
    Q_OBJECT
    QTemporaryDir m_dir;
    std::uint64_t m_seed = 0;
    double m_seconds = 4;
    std::map<std::string, std::size_t> m_counts;

    // Calls `read` on inputs made from `valid` until this reader's share of the time is used.
    void fuzz(
        const char* name, const std::string& valid, double share, const std::function<void(const std::string&)>& read)
    {
        Mutator m(m_seed ^ std::hash<std::string>()(name));
        QElapsedTimer t;
        t.start();
        std::size_t n = 0;
        while (n < 20 || t.elapsed() < static_cast<qint64>(m_seconds * share * 1000)) {
            const std::string input = m.input(valid);
            try {
                read(input);
            } catch (const std::exception& e) {
                const std::string what = e.what();
                QVERIFY2(!what.empty() && what.find("json.exception") == std::string::npos,
                    (std::string(name) + ": " + what).c_str());
            }
            ++n;
        }
        m_counts[name] = n;
        qInfo("%s: %zu inputs in %lld ms", name, n, static_cast<long long>(t.elapsed()));
    }

    static void noLibraryText(const plan::Diagnostics& d, const char* what)
    {
        const std::string text = d.format();
        QVERIFY2(text.find("json.exception") == std::string::npos, (std::string(what) + ": " + text).c_str());
    }

private slots:
    void initTestCase()
    {
        m_seed = qEnvironmentVariableIsSet("LOOM_FUZZ_SEED") ? qEnvironmentVariable("LOOM_FUZZ_SEED").toULongLong()
                                                             : std::random_device()();
        if (qEnvironmentVariableIsSet("LOOM_FUZZ_SECONDS"))
            m_seconds = qEnvironmentVariable("LOOM_FUZZ_SECONDS").toDouble();
        qInfo("seed %llu (replay with LOOM_FUZZ_SEED=%llu), %.1f s", static_cast<unsigned long long>(m_seed),
            static_cast<unsigned long long>(m_seed), m_seconds);
    }

    void layouts()
    {
        fuzz("layout", readSource("resources/examples/tiny-local.json"), 0.2, [](const std::string& text) {
            const auto r = plan::readLayout(text, profiles::BuiltinProfiles::instance());
            noLibraryText(r.diagnostics, "layout");
            if (r.ok())
                (void)plan::writeLayout(*r.layout);
        });
    }

    void profileFiles()
    {
        fuzz("profile", readSource("engine/profiles/builtin/cluster-dgx-a100.json"), 0.1, [](const std::string& text) {
            const auto r = profiles::readProfile(text);
            noLibraryText(r.diagnostics, "profile");
            if (r.profile && !r.diagnostics.hasErrors())
                (void)profiles::writeProfile(*r.profile);
        });
        fuzz("model profile", readSource("engine/profiles/builtin/model-gpt-tiny.json"), 0.05,
            [](const std::string& text) { noLibraryText(profiles::readProfile(text).diagnostics, "model profile"); });
    }

    void traces()
    {
        std::vector<trace::TraceEvent> events(6);
        for (std::size_t i = 0; i < events.size(); ++i) {
            auto& e = events[i];
            e.rank = static_cast<std::int32_t>(i % 2);
            e.kind = i % 3 ? trace::EventKind::Forward : trace::EventKind::AllReduce;
            e.lane = i % 3 ? trace::Lane::Compute : trace::Lane::Comm;
            e.step = 0;
            e.startNs = static_cast<std::int64_t>(1000 * i);
            e.endNs = e.startNs + 700;
            e.bytes = 4096;
            e.group = 0;
            e.groupSize = 2;
        }
        std::ostringstream out;
        trace::writeChromeTrace(out, events, {}, R"({"layout": {"loom_layout": 1}})");
        fuzz("trace", out.str(), 0.15, [](const std::string& text) {
            std::string other;
            std::vector<trace::GroupInfo> groups;
            const auto read = trace::readChromeTrace(text, &other, &groups);
            (void)trace::computeStats(read, {});
        });
        const QString file = m_dir.filePath(QStringLiteral("trace.json"));
        fuzz("trace file", out.str(), 0.05, [&file](const std::string& text) {
            writeBytes(file.toStdString(), text);
            (void)trace::readChromeTraceFile(file.toStdString());
        });
    }

    void telemetryStream()
    {
        std::vector<trace::TraceEvent> events(3);
        const std::string frames = trace::encodeFrame("run", R"({"loom_stream": 1})")
            + trace::encodeFrame("events", trace::encodeEvents(events))
            + trace::encodeFrame("step", R"({"step": 1, "loss": 2.5})");
        fuzz("stream", frames, 0.1, [](const std::string& bytes) {
            trace::StreamReader reader;
            for (std::size_t at = 0; at < bytes.size(); at += 7) // in pieces, as a pipe delivers it
                reader.feed(std::string_view(bytes).substr(at, 7));
            trace::Frame f;
            while (reader.next(f))
                if (f.type == "events")
                    (void)trace::decodeEvents(f.payload);
        });
        fuzz("events payload", trace::encodeEvents(events), 0.05,
            [](const std::string& payload) { (void)trace::decodeEvents(payload); });
    }

    void checkpointMetadata()
    {
        const QString folder = m_dir.filePath(QStringLiteral("step-3"));
        std::filesystem::create_directories(folder.toStdString());
        const std::string valid = R"({"loom_checkpoint": 1, "step": 3, "adam_steps": 3, "seed": 1234,
                                      "model": {"name": "gpt-tiny"}, "layout": {"loom_layout": 1}})";
        fuzz("checkpoint", valid, 0.1, [&folder](const std::string& text) {
            writeBytes((folder + QStringLiteral("/checkpoint.json")).toStdString(), text);
            train::checkResumable(folder.toStdString(), 10);
        });
        fuzz("latest", "step-3\n", 0.05, [this](const std::string& text) {
            writeBytes(m_dir.filePath(QStringLiteral("latest")).toStdString(), text);
            (void)train::latestCheckpointChecked(m_dir.path().toStdString());
        });
    }

    void llmcFiles()
    {
        const auto model = *profiles::BuiltinProfiles::instance().findModel("gpt-tiny");
        const std::string layout = R"({"loom_layout": 1})";
        const QString file = m_dir.filePath(QStringLiteral("model.bin")),
                      folder = m_dir.filePath(QStringLiteral("import"));
        const std::string valid = llmcModel();
        Mutator m(m_seed);
        QElapsedTimer t;
        t.start();
        std::size_t n = 0;
        // Binary: flip header words and weights, cut the file, put NaN in; structure is what matters here.
        while (n < 20 || t.elapsed() < static_cast<qint64>(m_seconds * 0.1 * 1000)) {
            std::string bytes = valid;
            switch (m.below(5)) {
            case 0:
                bytes.resize(m.below(bytes.size()));
                break;
            case 1:
                std::memcpy(bytes.data() + 4 * m.below(8),
                    raw(static_cast<std::int32_t>(
                            static_cast<std::int64_t>(m.below(std::size_t(1) << 31)) - (std::int64_t(1) << 30)))
                        .data(),
                    4);
                break;
            case 2:
                std::memcpy(bytes.data() + 1024 + 4 * m.below((bytes.size() - 1024) / 4), raw(std::nanf("")).data(), 4);
                break;
            case 3:
                bytes = m.random(2048);
                break;
            default:
                break;
            }
            writeBytes(file.toStdString(), bytes);
            try {
                train::importLlmc(file.toStdString(), model, layout, folder.toStdString());
            } catch (const std::exception& e) {
                QVERIFY(std::string(e.what()).find("json.exception") == std::string::npos);
            }
            ++n;
        }
        qInfo("llm.c model: %zu inputs", n);
        fuzz("token file", tokenFile(), 0.05, [&file](const std::string& bytes) {
            writeBytes(file.toStdString(), bytes);
            const auto corpus = train::Corpus::fromFile(file.toStdString());
            QVERIFY(!corpus.tokens().empty());
        });
    }
};

QTEST_GUILESS_MAIN(TestFuzz)
#include "tst_fuzz.moc"
