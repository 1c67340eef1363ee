// Malformed input never crashes, hangs or throws: every case below is rejected with a message.
// Besides the named cases: every truncation of the example, and thousands of seeded random mutations.
#include "engine/plan/LayoutParser.h"
#include "engine/profiles/BuiltinProfiles.h"

#include <QFile>
#include <QTemporaryDir>
#include <QTest>

#include <random>

using namespace loom::plan;
using loom::profiles::BuiltinProfiles;

namespace {

std::string example()
{
    QFile f(QStringLiteral(LOOM_SOURCE_DIR "/resources/examples/tiny-local.json"));
    if (!f.open(QIODevice::ReadOnly))
        qFatal("example layout missing");
    return f.readAll().toStdString();
}

std::string replaceOnce(std::string s, const std::string& from, const std::string& to)
{
    auto at = s.find(from);
    if (at == std::string::npos)
        qFatal("test bug: '%s' not in the example", from.c_str());
    return s.replace(at, from.size(), to);
}

LayoutReadResult read(const std::string& text)
{
    return readLayout(text, BuiltinProfiles::instance());
}

} // namespace

class TestMalformed : public QObject {
    Q_OBJECT
private slots:
    void rejected_data()
    {
        QTest::addColumn<QByteArray>("input");
        QTest::addColumn<QString>("message"); // words the first error must contain
        const std::string ex = example();
        auto row = [](const char* name, const std::string& text, const char* message) {
            QTest::newRow(name) << QByteArray(text.data(), static_cast<qsizetype>(text.size())) << message;
        };
        row("empty file", "", "the file is empty");
        row("only whitespace", " \n\t\r\n", "the file is empty");
        row("lone brace", "{", "the file is not valid JSON at line 1, column 2");
        row("truncated in a string", ex.substr(0, 120), "looks cut short");
        row("truncated mid-number", ex.substr(0, ex.find("\"tp\": 2") + 6), "looks cut short");
        row("truncated before the last brace", ex.substr(0, ex.rfind('}')), "looks cut short");
        row("null", "null", "the layout is null");
        row("number", "42", "the layout is a number");
        row("string", "\"layout\"", "the layout is a string");
        row("array", "[1, 2, 3]", "the layout is an array");
        row("true", "true", "the layout is a boolean");
        row("NUL bytes", std::string("{\"loom_layout\"\0\0: 1}", 20), "the file is not text");
        row("invalid UTF-8", "{\"name\": \"\xff\xfe\"}", "the file is not text");
        row("UTF-8 cut mid-character", "{\"name\": \"\xc3", "the file is not text");
        row(
            "random bytes",
            [] {
                std::mt19937 g(7);
                std::string s(512, '\0');
                for (auto& c : s)
                    c = static_cast<char>(g());
                return s;
            }(),
            "the file is not text");
        row("trailing garbage", ex + "garbage", "not valid JSON");
        row("two objects", ex + ex, "not valid JSON");
        row("comments", "// layout\n" + ex, "not valid JSON");
        row("single quotes", "{'loom_layout': 1}", "not valid JSON");
        row("NaN literal", replaceOnce(ex, "\"tp\": 2", "\"tp\": NaN"), "not valid JSON at line");
        row("Infinity literal", replaceOnce(ex, "\"tp\": 2", "\"tp\": Infinity"), "not valid JSON");
        row("trailing comma", replaceOnce(ex, "\"schedule\": \"1f1b\"", "\"schedule\": \"1f1b\","), "not valid JSON");
        row("deep nesting", std::string(100000, '[') + std::string(100000, ']'), "nested deeper than 128 levels");
        row("deep nesting unclosed", std::string(200000, '{'), "nested deeper than 128 levels");
        row("number overflows double", replaceOnce(ex, "\"tp\": 2", "\"tp\": 1e400"), "");
        row("huge integer", replaceOnce(ex, "\"pp\": 2", "\"pp\": 99999999999999999999999"), "parallel.pp");
        row("negative huge", replaceOnce(ex, "\"dp\": 2", "\"dp\": -9223372036854775808"), "parallel.dp=");
        row("float degree", replaceOnce(ex, "\"tp\": 2", "\"tp\": 2.5"), "parallel.tp=2.5 is not a whole number");
        row("model is an array", replaceOnce(ex, "\"gpt-tiny\"", "[1, 2]"), "model is an array");
        row("model is null", replaceOnce(ex, "\"gpt-tiny\"", "null"), "model is null");
        row("cluster is a number", replaceOnce(ex, "\"local\"", "7"), "cluster is a number");
        row("parallel is a string",
            "{\"loom_layout\": 1, \"name\": \"x\", \"model\": \"gpt-tiny\", \"cluster\": \"local\", \"parallel\": "
            "\"2x2\"}",
            "parallel=\"2x2\" is a string");
        row("stages is an object",
            replaceOnce(ex, "\"schedule\": \"1f1b\"", "\"schedule\": \"1f1b\", \"stages\": {\"0\": 1}"),
            "parallel.stages={\"0\":1} is an object");
        row("stage with strings",
            replaceOnce(ex, "\"schedule\": \"1f1b\"", "\"schedule\": \"1f1b\", \"stages\": [[\"a\", \"b\"], [2, 3]]"),
            "parallel.stages[0]");
        row("stage with negative layer",
            replaceOnce(ex, "\"schedule\": \"1f1b\"", "\"schedule\": \"1f1b\", \"stages\": [[-1, 1], [2, 3]]"),
            "parallel.stages[0]");
        row("very long name", replaceOnce(ex, "\"tiny-local\"", "\"" + std::string(100000, 'x') + "\""),
            "name is 100000 characters long; it must be at most 256");
        row("name is a number", replaceOnce(ex, "\"tiny-local\"", "12"), "name=12 is a number");
        row("memory is an array", replaceOnce(ex, "{ \"zero\": 0, \"recompute\": \"none\" }", "[0]"),
            "memory=[0] is an array");
        row("comm is true",
            "{\"loom_layout\": 1, \"name\": \"x\", \"model\": \"gpt-tiny\", \"cluster\": \"local\", \"comm\": true, "
            "\"parallel\": {\"tp\": 1, \"pp\": 1, \"dp\": 1, \"micro_batch\": 1, \"global_batch\": 1}}",
            "comm=true is a boolean");
        row("version as string", replaceOnce(ex, "\"loom_layout\": 1", "\"loom_layout\": \"1\""),
            "loom_layout=\"1\" is a string");
        row("version as float", replaceOnce(ex, "\"loom_layout\": 1", "\"loom_layout\": 1.5"),
            "loom_layout=1.5 is a number");
        row("version 0", replaceOnce(ex, "\"loom_layout\": 1", "\"loom_layout\": 0"), "is not supported");
        row("inline model missing fields", replaceOnce(ex, "\"gpt-tiny\"", "{\"name\": \"m\"}"),
            "model.layers is missing");
        row("inline cluster empty", replaceOnce(ex, "\"local\"", "{}"), "cluster.name is missing");
        row(
            "UTF-16 text",
            [] {
                std::string s;
                for (char c : std::string("{\"loom_layout\": 1}")) {
                    s += c;
                    s += '\0';
                }
                return "\xff\xfe" + s;
            }(),
            "the file is not text");
        row("oversized file", std::string(kMaxLayoutBytes + 1, ' '), "a layout file is at most 16 MiB");
    }

    void rejected()
    {
        QFETCH(QByteArray, input);
        QFETCH(QString, message);
        const auto r = read(input.toStdString());
        QVERIFY(!r.ok());
        const auto errors = r.diagnostics.errors();
        QVERIFY(!errors.empty());
        bool found = false;
        for (const auto& e : errors)
            found = found || e.message.find(message.toStdString()) != std::string::npos;
        QVERIFY2(found,
            qPrintable(QStringLiteral("no error contains \"%1\"; got:\n%2")
                           .arg(message, QString::fromStdString(r.diagnostics.format()))));
    }

    void everyTruncationRejected()
    {
        const std::string ex = example();
        for (std::size_t n = 0; n < ex.size() - 1; ++n) {
            const auto r = read(ex.substr(0, n));
            if (r.ok() || r.diagnostics.errors().empty())
                QFAIL(qPrintable(QStringLiteral("the first %1 bytes were accepted").arg(n)));
        }
        QVERIFY(read(ex).ok());
    }

    void randomMutationsNeverCrash()
    {
        // Single- and multi-byte mutations of a valid layout: the reader may accept or reject each, but
        // must return, with an error message whenever it rejects.
        const std::string ex = example();
        std::mt19937 rng(20261129);
        const std::string alphabet = "{}[]\",:0123456789.-eE truefalsnul\\\x01\xff";
        int rejected = 0;
        for (int i = 0; i < 4000; ++i) {
            std::string s = ex;
            const int edits = 1 + static_cast<int>(rng() % 4);
            for (int k = 0; k < edits; ++k) {
                std::size_t at = rng() % s.size();
                switch (rng() % 3) {
                case 0:
                    s[at] = alphabet[rng() % alphabet.size()];
                    break;
                case 1:
                    s.erase(at, 1 + rng() % 8);
                    break;
                default:
                    s.insert(at, 1, alphabet[rng() % alphabet.size()]);
                    break;
                }
                if (s.empty())
                    s = "{";
            }
            const auto r = read(s);
            if (!r.ok()) {
                ++rejected;
                QVERIFY(!r.diagnostics.errors().empty());
                for (const auto& e : r.diagnostics.errors())
                    QVERIFY(!e.message.empty());
            }
        }
        QVERIFY(rejected > 1000); // the mutations really do break the file most of the time
    }

    void filesThatAreNotLayouts()
    {
        QTemporaryDir dir;
        QVERIFY(dir.isValid());
        const auto& profiles = BuiltinProfiles::instance();

        auto missing = readLayoutFile(dir.filePath("nope.json").toStdString(), profiles);
        QVERIFY(!missing.ok());
        QVERIFY(missing.diagnostics.format().find("cannot open") != std::string::npos);

        auto folder = readLayoutFile(dir.path().toStdString(), profiles);
        QVERIFY(!folder.ok());
        QVERIFY2(!folder.diagnostics.errors().empty(), "a folder must be rejected");

        QFile binary(dir.filePath("binary.json"));
        QVERIFY(binary.open(QIODevice::WriteOnly));
        binary.write(QByteArray("\x7f"
                                "ELF\x02\x01\x01\0\0\0",
            10));
        binary.close();
        auto bin = readLayoutFile(binary.fileName().toStdString(), profiles);
        QVERIFY(!bin.ok());
        QVERIFY(bin.diagnostics.format().find("not text") != std::string::npos);
    }
};

QTEST_GUILESS_MAIN(TestMalformed)
#include "tst_malformed.moc"
