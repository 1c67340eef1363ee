// The lesson format (views/Lesson.h): every compiled-in lesson is valid; broken files are refused with a
// message naming the file, the field and what was expected; checks evaluate on facts; a layout's facts.
#include "views/teaching/Lesson.h"

#include "tests/views/ViewsTest.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>

using namespace loom;
using namespace loom::views;

namespace {

QJsonObject lessonJson(const char* file)
{
    QFile f(QStringLiteral(":/lessons/") + QLatin1String(file));
    if (!f.open(QIODevice::ReadOnly))
        qFatal("missing lesson %s", file);
    return QJsonDocument::fromJson(f.readAll()).object();
}

// Sets `value` at a path like "steps/1/check/check" (numbers index arrays).
QJsonValue setAt(QJsonValue node, QStringList path, const QJsonValue& value)
{
    if (path.isEmpty())
        return value;
    const QString head = path.takeFirst();
    bool isIndex = false;
    const int i = head.toInt(&isIndex);
    if (isIndex) {
        QJsonArray a = node.toArray();
        a[i] = setAt(a[i], path, value);
        return a;
    }
    QJsonObject o = node.toObject();
    if (value.isUndefined() && path.isEmpty())
        o.remove(head);
    else
        o[head] = setAt(o[head], path, value);
    return o;
}

} // namespace

class TestLessonFiles : public QObject {
    Q_OBJECT
    const profiles::BuiltinProfiles& m_profiles = profiles::BuiltinProfiles::instance();

private slots:
    void compiledLessonsAreValid()
    {
        QStringList errors;
        const auto lessons = loadLessons(m_profiles, &errors);
        QVERIFY2(errors.isEmpty(), qPrintable(errors.join(QLatin1Char('\n'))));
        QVERIFY(lessons.size() >= 10);
        QStringList ids;
        int runs = 0;
        for (const auto& l : lessons) {
            ids << l.id;
            QVERIFY(l.steps.size() >= 2 && l.steps.size() <= 5);
            for (const auto& s : l.steps) {
                QVERIFY(lessonWidgetNames().contains(s.widget));
                if (s.action.kind == LessonAction::Kind::Run) {
                    ++runs;
                    QVERIFY(s.action.steps <= 30);
                    QCOMPARE(QString::fromStdString(l.layout.cluster.name), QStringLiteral("local"));
                }
            }
        }
        QCOMPARE(ids.first(), QStringLiteral("one-device"));
        QVERIFY(runs >= 3); // predict, then run on this machine and compare
    }

    void brokenLessonsAreRefused_data()
    {
        QTest::addColumn<QString>("path");
        QTest::addColumn<QJsonValue>("value");
        QTest::addColumn<QString>("message");
        QTest::newRow("layout tp does not divide heads")
            << "layout/parallel/tp" << QJsonValue(3) << "04-pipeline-bubble.json: layout.parallel.tp";
        QTest::newRow("layout unknown model") << "layout/model" << QJsonValue("gpt-99") << "layout.model";
        QTest::newRow("layout missing") << "layout" << QJsonValue(42) << "layout: expected the starting layout";
        QTest::newRow("unknown widget") << "steps/0/widget" << QJsonValue("microBatchh")
                                        << "steps[0].widget: unknown widget \"microBatchh\"";
        QTest::newRow("unknown fact") << "steps/1/check/check" << QJsonValue("predicted.bubbel")
                                      << "steps[1].check.check: unknown fact \"predicted.bubbel\"";
        QTest::newRow("order on a word") << "steps/1/check"
                                         << QJsonValue(QJsonObject {
                                                { "check", "layout.schedule" }, { "op", "<" }, { "value", "1f1b" } })
                                         << "steps[1].check.op: layout.schedule is a string: compare it with == or !=";
        QTest::newRow("value of the wrong type") << "steps/1/check/value" << QJsonValue("small")
                                                 << "steps[1].check.value: predicted.bubbleTheory is a number";
        QTest::newRow("unknown comparison")
            << "steps/1/check/op" << QJsonValue("~") << "steps[1].check.op: unknown comparison";
        QTest::newRow("run too long") << "steps/0/action" << QJsonValue(QJsonObject { { "run", 500 } })
                                      << "steps[0].action.run: expected a whole number from 1 to 30";
        QTest::newRow("unknown action") << "steps/0/action" << QJsonValue(QJsonObject { { "shell", "ls" } })
                                        << "steps[0].action: expected one of set, open, run";
        QTest::newRow("unknown setting") << "steps/0/action/set" << QJsonValue("tpp")
                                         << "steps[0].action.set: \"tpp\" is not a Strategy setting";
        QTest::newRow("bad choice") << "steps/0/action"
                                    << QJsonValue(QJsonObject { { "set", "schedule" }, { "value", "zigzag" } })
                                    << "steps[0].action.value: schedule is one of gpipe, 1f1b, interleaved";
        QTest::newRow("too few steps") << "steps" << QJsonValue(QJsonArray {})
                                       << "steps: expected 2 to 5 steps, found 0";
        QTest::newRow("answer out of range")
            << "steps/0/question"
            << QJsonValue(QJsonObject {
                   { "text", "?" }, { "choices", QJsonArray { "a", "b" } }, { "answer", 5 }, { "explain", "x" } })
            << "steps[0].question.answer: expected the index of the right choice";
        QTest::newRow("bad id") << "id" << QJsonValue("Pipeline Bubble!") << "id: expected lower-case letters";
    }

    void brokenLessonsAreRefused()
    {
        QFETCH(QString, path);
        QFETCH(QJsonValue, value);
        QFETCH(QString, message);
        const QJsonObject broken
            = setAt(lessonJson("04-pipeline-bubble.json"), path.split(QLatin1Char('/')), value).toObject();
        QStringList errors;
        const auto lesson = readLesson(
            QJsonDocument(broken).toJson(), QStringLiteral("04-pipeline-bubble.json"), m_profiles, &errors);
        QVERIFY(!lesson);
        QVERIFY2(errors.join(QLatin1Char('\n')).contains(message), qPrintable(errors.join(QLatin1Char('\n'))));
        for (const QString& e : errors)
            QVERIFY2(e.startsWith(QStringLiteral("04-pipeline-bubble.json: ")), qPrintable(e));
    }

    // A "set" names the layout file's field path; the widget names earlier lesson files used still read,
    // and both drive the same Strategy widget. Text settings offer the layout's words (plan's tables).
    void settingsByFieldPath_data()
    {
        QTest::addColumn<QString>("field");
        QTest::addColumn<QString>("oldName");
        QTest::addColumn<QJsonValue>("value");
        QTest::newRow("micro-batch") << "parallel.micro_batch"
                                     << "microBatch" << QJsonValue(2);
        QTest::newRow("bucket") << "comm.bucket_mb"
                                << "bucket" << QJsonValue(8);
        QTest::newRow("chunk") << "comm.chunk_kb"
                               << "chunk" << QJsonValue(64);
        QTest::newRow("zero") << "memory.zero"
                              << "zero" << QJsonValue(1);
        QTest::newRow("error feedback") << "comm.error_feedback"
                                        << "errorFeedback" << QJsonValue(true);
        const auto word = [](std::string_view w) { return QJsonValue(QString::fromLatin1(w.data(), w.size())); };
        for (const auto& w : plan::kScheduleWords)
            QTest::addRow("schedule %s", w.word.data()) << "parallel.schedule"
                                                        << "schedule" << word(w.word);
        for (const auto& w : plan::kRecomputeWords)
            QTest::addRow("recompute %s", w.word.data()) << "memory.recompute"
                                                         << "recompute" << word(w.word);
        for (const auto& w : plan::kPrecisionWords)
            QTest::addRow("precision %s", w.word.data()) << "precision"
                                                         << "precision" << word(w.word);
        for (const auto& w : plan::kCodecWords)
            QTest::addRow("codec %s", w.word.data()) << "comm.dp_codec"
                                                     << "codec" << word(w.word);
        for (const auto& w : plan::kAllreduceWords)
            QTest::addRow("allreduce %s", w.word.data()) << "comm.allreduce"
                                                         << "allreduce" << word(w.word);
    }

    void settingsByFieldPath()
    {
        QFETCH(QString, field);
        QFETCH(QString, oldName);
        QFETCH(QJsonValue, value);
        QVERIFY(lessonSettableFields().contains(field));
        QVERIFY(lessonSettableNames().contains(oldName));
        for (const QString& name : { field, oldName }) {
            const QJsonObject lesson = setAt(lessonJson("04-pipeline-bubble.json"), { "steps", "0", "action" },
                QJsonObject { { "set", name },
                    { "value", value } }).toObject();
            QStringList errors;
            const auto read = readLesson(
                QJsonDocument(lesson).toJson(), QStringLiteral("04-pipeline-bubble.json"), m_profiles, &errors);
            QVERIFY2(read, qPrintable(errors.join(QLatin1Char('\n'))));
            QCOMPARE(read->steps[0].action.kind, LessonAction::Kind::Set);
            QCOMPARE(read->steps[0].action.target, oldName); // the widget the action drives
        }
    }

    void unreadableFiles()
    {
        QStringList errors;
        QVERIFY(!readLesson("{ not json", QStringLiteral("x.json"), m_profiles, &errors));
        QVERIFY(errors.value(0).startsWith(QStringLiteral("x.json: (file): not JSON")));
        errors.clear();
        QVERIFY(!readLesson(QByteArray(kMaxLessonBytes + 1, ' '), QStringLiteral("big.json"), m_profiles, &errors));
        QVERIFY(errors.value(0).contains(QStringLiteral("a lesson is at most")));
        // A folder with a good and a broken lesson: the good one loads, the broken one is reported.
        QTemporaryDir dir;
        QFile::copy(QStringLiteral(":/lessons/04-pipeline-bubble.json"), dir.filePath(QStringLiteral("a.json")));
        QFile bad(dir.filePath(QStringLiteral("b.json")));
        QVERIFY(bad.open(QIODevice::WriteOnly));
        bad.write(QJsonDocument(
            setAt(lessonJson("01-one-device.json"), { "steps", "0", "widget" }, QJsonValue("nothing")).toObject())
                      .toJson());
        bad.close();
        errors.clear();
        const auto lessons = loadLessons(m_profiles, &errors, dir.path());
        QCOMPARE(lessons.size(), std::size_t(1));
        QCOMPARE(errors.size(), 1);
        QVERIFY(errors[0].startsWith(QStringLiteral("b.json: steps[0].widget")));
    }

    void checksEvaluate()
    {
        Facts facts { { "predicted.bubble", 0.143 }, { "layout.schedule", std::string("1f1b") },
            { "predicted.fits", true } };
        LessonCheck below { "predicted.bubble", "<", 0.10, {} };
        CheckResult r = evaluateCheck(below, facts);
        QVERIFY(!r.pass);
        // In words, not the fact's internal name (issue 36), with the unit of a figure.
        QCOMPARE(r.detail, QStringLiteral("simulated bubble is 14.3 %, needs < 10.0 %"));
        facts["predicted.optimizerGB"] = 80.86;
        QCOMPARE(evaluateCheck({ "predicted.optimizerGB", "<", 20.0, {} }, facts).detail,
            QStringLiteral("optimizer state on the most loaded device is %1 GB, needs < 20 GB")
                .arg(QLocale().toString(80.86, 'g', 4)));
        facts["predicted.bubble"] = 0.05;
        QVERIFY(evaluateCheck(below, facts).pass);
        QVERIFY(evaluateCheck({ "layout.schedule", "==", std::string("1f1b"), {} }, facts).pass);
        QVERIFY(evaluateCheck({ "layout.schedule", "!=", std::string("gpipe"), {} }, facts).pass);
        QVERIFY(!evaluateCheck({ "predicted.fits", "==", false, {} }, facts).pass);
        // An absent fact fails with the reason.
        r = evaluateCheck({ "measured.steps", ">=", 20.0, {} }, facts);
        QVERIFY(!r.pass);
        QVERIFY(r.detail.contains(QStringLiteral("not known yet")));
        LessonCheck both;
        both.all = { below, { "measured.steps", ">=", 20.0, {} } };
        QVERIFY(!evaluateCheck(both, facts).pass);
        facts["measured.steps"] = 20.0;
        QVERIFY(evaluateCheck(both, facts).pass);
    }

    void layoutFacts()
    {
        const plan::Layout l = test::tinyLayout();
        Facts f;
        addLayoutFacts(l, true, nullptr, &f);
        QCOMPARE(std::get<double>(f.at("layout.tp")), 2.0);
        QCOMPARE(std::get<double>(f.at("layout.microBatches")), 4.0); // 16 / (2 · 2)
        QCOMPARE(std::get<std::string>(f.at("layout.schedule")), std::string("1f1b"));
        QCOMPARE(std::get<double>(f.at("layout.tpNodes")), 1.0);
        QCOMPARE(std::get<double>(f.at("layout.stage0Blocks")), 2.0);
        QVERIFY(!f.count("predicted.bubble")); // no prediction given
        // Every fact a layout gives is in the vocabulary, with its type.
        for (const auto& [name, value] : f) {
            const FactInfo* info = findFact(name);
            QVERIFY2(info, name.c_str());
            QCOMPARE(int(info->type), int(value.index()));
        }
    }
};

QTEST_GUILESS_MAIN(TestLessonFiles)
#include "tst_lessonfiles.moc"
