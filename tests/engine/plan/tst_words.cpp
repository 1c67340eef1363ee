// One word table per enumerated layout choice (engine/plan/WordTable.h): every value round-trips word ->
// value -> word, toString prints the table's word (the trace's word for the all-reduce), the reader takes
// each word into that value, and a word outside the table is refused with a message listing the table.
#include "engine/plan/Choices.h"
#include "engine/plan/LayoutParser.h"
#include "engine/profiles/BuiltinProfiles.h"

#include <QFile>
#include <QTest>

#include <functional>
#include <nlohmann/json.hpp>

using namespace loom;
using namespace loom::plan;

namespace {

// One table seen through strings: its words, the word each value prints as, the field the layout file
// keeps it in, and how to read that value back from a parsed layout (as the table's word).
struct TableCase {
    std::vector<std::string> words;
    std::function<std::optional<std::string>(const std::string&)> roundTrip; // word -> value -> word
    std::function<std::string(const std::string&)> printed; // word -> value -> toString
    std::string field; // "parallel.schedule"
    std::function<std::string(const Layout&)> read;
};

template <typename E, std::size_t N, typename Print>
TableCase tableCase(
    const WordTable<E, N>& table, Print print, std::string field, std::function<std::string(const Layout&)> read)
{
    TableCase c;
    c.words = wordsOf(table);
    c.roundTrip = [&table](const std::string& w) -> std::optional<std::string> {
        const auto v = valueOf(table, w);
        if (!v)
            return std::nullopt;
        return std::string(wordOf(table, *v));
    };
    c.printed = [&table, print](const std::string& w) { return std::string(print(*valueOf(table, w))); };
    c.field = std::move(field);
    c.read = std::move(read);
    return c;
}

nlohmann::json example()
{
    QFile f(QStringLiteral(LOOM_SOURCE_DIR "/resources/examples/tiny-local.json"));
    if (!f.open(QIODevice::ReadOnly))
        qFatal("example layout missing");
    return nlohmann::json::parse(f.readAll().toStdString());
}

nlohmann::json& at(nlohmann::json& j, const std::string& field)
{
    const auto dot = field.find('.');
    if (dot == std::string::npos)
        return j[field];
    return at(j[field.substr(0, dot)], field.substr(dot + 1));
}

LayoutReadResult readWith(const std::string& field, const std::string& word)
{
    nlohmann::json j = example();
    at(j, field) = word;
    return readLayout(j.dump(), profiles::BuiltinProfiles::instance());
}

} // namespace

Q_DECLARE_METATYPE(TableCase)

class TestWords : public QObject {
    Q_OBJECT
private slots:
    void tables_data()
    {
        QTest::addColumn<TableCase>("table");
        auto s = [](auto v) { return std::string(toString(v)); };
        QTest::newRow("schedule") << tableCase(
            kScheduleWords, s, "parallel.schedule", [s](const Layout& l) { return s(l.parallel.schedule); });
        QTest::newRow("rank order") << tableCase(
            kRankOrderWords, s, "parallel.order", [s](const Layout& l) { return s(l.parallel.order); });
        QTest::newRow("recompute") << tableCase(
            kRecomputeWords, s, "memory.recompute", [s](const Layout& l) { return s(l.memory.recompute); });
        QTest::newRow("attention") << tableCase(
            kAttentionWords, s, "memory.attention", [s](const Layout& l) { return s(l.memory.attention); });
        QTest::newRow("precision") << tableCase(
            kPrecisionWords, s, "precision", [s](const Layout& l) { return s(l.precision); });
        QTest::newRow("fp8") << tableCase(kFp8RecipeWords, s, "fp8", [s](const Layout& l) { return s(l.fp8); });
        // The all-reduce prints with the trace's word: the engine's events and the layout agree.
        QTest::newRow("allreduce") << tableCase(
            kAllreduceWords, [](auto v) { return trace::toString(v); }, "comm.allreduce",
            [](const Layout& l) { return std::string(trace::toString(l.comm.allreduce)); });
        QTest::newRow("backend") << tableCase(kCommBackendWords, s, "comm.backend",
            [s](const Layout& l) { return l.comm.backend ? s(*l.comm.backend) : std::string("(unset)"); });
        // The codec's text: topk carries its fraction, so the layout gets "topk:0.25".
        QTest::newRow("codec") << tableCase(
            kCodecWords, [](auto v) { return toString(v); }, "comm.dp_codec",
            [](const Layout& l) { return std::string(toString(l.comm.dpCodec.kind)); });
    }

    void tables()
    {
        QFETCH(TableCase, table);
        QVERIFY(!table.words.empty());
        for (const std::string& w : table.words) {
            QCOMPARE(table.roundTrip(w), std::optional<std::string>(w));
            QCOMPARE(table.printed(w), w);
            const std::string text = w == "topk" ? "topk:0.25" : w;
            const LayoutReadResult r = readWith(table.field, text);
            // Read, not necessarily valid here (interleaved wants vpp 2, nccl a GPU cluster): the word itself
            // is not refused.
            QVERIFY2(r.layout, (w + ": " + r.diagnostics.format()).c_str());
            QVERIFY2(r.diagnostics.format().find("one of \"") == std::string::npos,
                (w + ": " + r.diagnostics.format()).c_str());
            QCOMPARE(table.read(*r.layout), w);
            // The writer prints the same word, and the file reads back to it.
            const LayoutReadResult again = readLayout(writeLayout(*r.layout), profiles::BuiltinProfiles::instance());
            QVERIFY(again.layout);
            QCOMPARE(table.read(*again.layout), w);
        }
        QVERIFY(!table.roundTrip("no-such-word"));
    }

    // A word outside the table is refused, and the message offers the table's words.
    void refusedWordListsTheTable_data()
    {
        QTest::addColumn<QString>("field");
        QTest::addColumn<QStringList>("words");
        auto list = [](const std::vector<std::string>& words) {
            QStringList out;
            for (const std::string& w : words)
                out << QString::fromStdString(w);
            return out;
        };
        QTest::newRow("schedule") << "parallel.schedule" << list(wordsOf(kScheduleWords));
        QTest::newRow("recompute") << "memory.recompute" << list(wordsOf(kRecomputeWords));
        QTest::newRow("precision") << "precision" << list(wordsOf(kPrecisionWords));
        QTest::newRow("allreduce") << "comm.allreduce" << list(wordsOf(kAllreduceWords));
        QTest::newRow("backend") << "comm.backend" << list(wordsOf(kCommBackendWords));
    }

    void refusedWordListsTheTable()
    {
        QFETCH(QString, field);
        QFETCH(QStringList, words);
        const LayoutReadResult r = readWith(field.toStdString(), "no-such-word");
        QVERIFY(r.diagnostics.hasErrors());
        const QString text = QString::fromStdString(r.diagnostics.format());
        for (const QString& w : words)
            QVERIFY2(text.contains(QLatin1Char('"') + w + QLatin1Char('"')), qPrintable(w + " not in: " + text));
    }

    // The panels' lists are the tables' values, in the tables' order.
    void choicesAreTheTables()
    {
        QCOMPARE(allScheduleKinds(), valuesOf(kScheduleWords));
        QCOMPARE(allRecomputes(), valuesOf(kRecomputeWords));
        QCOMPARE(allAllreduceAlgorithms(), valuesOf(kAllreduceWords));
        QCOMPARE(allRankOrders(), valuesOf(kRankOrderWords));
        QCOMPARE(allPrecisions(), valuesOf(kPrecisionWords));
        QCOMPARE(allCodecKinds(), valuesOf(kCodecWords));
        QCOMPARE(wordList(kScheduleWords), std::string("gpipe, 1f1b, interleaved, zb-h1, zb-h2, zb-v or dualpipe"));
    }
};

QTEST_GUILESS_MAIN(TestWords)
#include "tst_words.moc"
