// The lesson format (views/Lesson.h): every compiled-in lesson is valid; broken files are refused with a
// message naming the file, the field and what was expected; checks evaluate on facts; a layout's facts.
#include "views/teaching/Lesson.h"

#include "engine/plan/CostModel.h"
#include "tests/views/ViewsTest.h"

#include <QDirIterator>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QRegularExpression>
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

    // A setting's type is the fact's of its field path: every setting must be a fact.
    void settablesAreFacts()
    {
        for (const QString& field : lessonSettableFields())
            QVERIFY2(findFact(field.toStdString()), qPrintable(field));
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
        Facts facts { { "predicted.bubble", 0.143 }, { "parallel.schedule", std::string("1f1b") },
            { "predicted.fits", true } };
        LessonCheck below { "predicted.bubble", "<", 0.10, {} };
        CheckResult r = evaluateCheck(below, facts);
        QVERIFY(!r.pass);
        // In words, not the fact's internal name (issue 36), with the unit of a figure.
        QCOMPARE(r.detail, QStringLiteral("simulated bubble is 14.3 %, needs to be below 10.0 %"));
        facts["predicted.optimizerGB"] = 80.86;
        QCOMPARE(evaluateCheck({ "predicted.optimizerGB", "<", 20.0, {} }, facts).detail,
            QStringLiteral("optimizer state on the most loaded device is %1 GB, needs to be below 20 GB")
                .arg(QLocale().toString(80.86, 'g', 4)));
        facts["predicted.bubble"] = 0.05;
        QVERIFY(evaluateCheck(below, facts).pass);
        QVERIFY(evaluateCheck({ "parallel.schedule", "==", std::string("1f1b"), {} }, facts).pass);
        QVERIFY(evaluateCheck({ "parallel.schedule", "!=", std::string("gpipe"), {} }, facts).pass);
        // The name the fact had before it took the field path reads the same fact.
        QVERIFY(evaluateCheck({ "layout.schedule", "==", std::string("1f1b"), {} }, facts).pass);
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

    // Issue 36: every check of every lesson gives its feedback in plain words, on the facts of the lesson's own
    // layout and before anything is known: the figure by its name, never a fact's internal name, an Explain topic
    // key ("split.dp") or an operator ("needs == memory").
    void everyCheckReadsAsWords()
    {
        QStringList errors;
        const auto lessons = loadLessons(m_profiles, &errors);
        QVERIFY(errors.isEmpty());
        static const QRegularExpression code(
            QStringLiteral("==|!=|<|>|\\.\\.\\.|\\b[a-z]+\\.[a-z_]+|\\b[a-z]+[A-Z]\\w*|\\b[a-z]+_[a-z_]+\\b"));
        int leaves = 0;
        for (const Lesson& lesson : lessons) {
            Facts known;
            const Facts nothing;
            const plan::Prediction p = plan::predict(lesson.layout);
            addLayoutFacts(lesson.layout, true, &p, &known);
            for (std::size_t i = 0; i < lesson.steps.size(); ++i) {
                std::vector<LessonCheck> pending { lesson.steps[i].check };
                while (!pending.empty()) {
                    const LessonCheck c = pending.back();
                    pending.pop_back();
                    pending.insert(pending.end(), c.all.begin(), c.all.end());
                    if (c.fact.empty())
                        continue;
                    ++leaves;
                    for (const Facts* facts : std::initializer_list<const Facts*> { &known, &nothing }) {
                        const QString detail = evaluateCheck(c, *facts).detail;
                        const QString where = QStringLiteral("%1 step %2 (%3): %4")
                                                  .arg(lesson.id)
                                                  .arg(i + 1)
                                                  .arg(QString::fromStdString(c.fact), detail);
                        const auto match = code.match(detail);
                        QVERIFY2(!match.hasMatch(), qPrintable(where + QStringLiteral(" [") + match.captured() + ']'));
                        QVERIFY2(detail.contains(QStringLiteral(", needs "))
                                || detail.contains(QStringLiteral("(needs to be ")),
                            qPrintable(where));
                    }
                }
            }
        }
        QVERIFY(leaves >= 40);
        // The Explain dock's topics by their captions, as the dock's list shows them.
        const CheckResult topic = evaluateCheck(
            { "explain.topic", "==", std::string("split.dp"), {} }, { { "explain.topic", std::string("step") } });
        QCOMPARE(topic.detail,
            QStringLiteral(
                "the figure the Explain dock shows is “Step time (predicted)”, needs to be “Step split: exposed DP "
                "communication”"));
        const CheckResult fits = evaluateCheck({ "predicted.fits", "==", true, {} }, { { "predicted.fits", false } });
        QCOMPARE(fits.detail, QStringLiteral("the most loaded device's memory fits: no, needs yes"));
        const CheckResult schedule = evaluateCheck(
            { "parallel.schedule", "!=", std::string("gpipe"), {} }, { { "parallel.schedule", std::string("gpipe") } });
        QCOMPARE(schedule.detail, QStringLiteral("the pipeline schedule is gpipe, needs to be anything but gpipe"));
    }

    // Issue 31 item 6: facts go by the layout file's field paths, as "set" does; the names earlier lesson
    // files used still read, as the same fact.
    void factsByFieldPath_data()
    {
        QTest::addColumn<QString>("field");
        QTest::addColumn<QString>("oldName");
        QTest::addColumn<QJsonValue>("value");
        QTest::newRow("micro-batch") << "parallel.micro_batch"
                                     << "layout.microBatch" << QJsonValue(2);
        QTest::newRow("bucket") << "comm.bucket_mb"
                                << "layout.bucketMb" << QJsonValue(25);
        QTest::newRow("chunk") << "comm.chunk_kb"
                               << "layout.chunkKb" << QJsonValue(64);
        QTest::newRow("zero") << "memory.zero"
                              << "layout.zero" << QJsonValue(1);
        QTest::newRow("tp") << "parallel.tp"
                            << "layout.tp" << QJsonValue(8);
        QTest::newRow("codec") << "comm.dp_codec"
                               << "layout.codec" << QJsonValue("int8");
        QTest::newRow("error feedback") << "comm.error_feedback"
                                        << "layout.errorFeedback" << QJsonValue(true);
        QTest::newRow("allreduce") << "comm.allreduce"
                                   << "layout.allreduce" << QJsonValue("ring");
        QTest::newRow("schedule") << "parallel.schedule"
                                  << "layout.schedule" << QJsonValue("gpipe");
    }

    void factsByFieldPath()
    {
        QFETCH(QString, field);
        QFETCH(QString, oldName);
        QFETCH(QJsonValue, value);
        // A layout's facts carry the field path, never the old name.
        Facts facts;
        addLayoutFacts(test::tinyLayout(), true, nullptr, &facts);
        QVERIFY(facts.count(field.toStdString()));
        QVERIFY(!facts.count(oldName.toStdString()));
        for (const QString& name : { field, oldName }) {
            const QJsonObject lesson = setAt(lessonJson("04-pipeline-bubble.json"), { "steps", "0", "check" },
                QJsonObject { { "check", name }, { "op", "==" },
                    { "value", value } }).toObject();
            QStringList errors;
            const auto read = readLesson(
                QJsonDocument(lesson).toJson(), QStringLiteral("04-pipeline-bubble.json"), m_profiles, &errors);
            QVERIFY2(read, qPrintable(errors.join(QLatin1Char('\n'))));
            QCOMPARE(QString::fromStdString(read->steps[0].check.fact), field);
            const FactValue v = value.isDouble() ? FactValue(value.toDouble())
                : value.isBool()                 ? FactValue(value.toBool())
                                                 : FactValue(value.toString().toStdString());
            const Facts f { { field.toStdString(), v } };
            QVERIFY(evaluateCheck(read->steps[0].check, f).pass);
        }
        // The bundled lessons use the field paths only.
        for (const Lesson& l : loadLessons(m_profiles, nullptr))
            for (const LessonStep& s : l.steps)
                for (const QString& raw : { s.instruction, s.pass, s.fail })
                    QVERIFY2(!raw.contains(QStringLiteral("{{%1}}").arg(oldName))
                            && !raw.contains(QStringLiteral(":%1}}").arg(oldName)),
                        qPrintable(l.id));
        QDirIterator files(QStringLiteral(":/lessons"));
        while (files.hasNext()) {
            QFile f(files.next());
            QVERIFY(f.open(QIODevice::ReadOnly));
            QVERIFY2(!f.readAll().contains(("\"" + oldName + "\"").toUtf8()), qPrintable(f.fileName()));
        }
    }

    // Issue 36: a lesson's texts print no figure of their own: every number is a placeholder filled from the
    // facts the checks read (digits left are a formula's constants, stuck to its symbols, or a citation's year).
    void lessonTextsPrintNoFigureOfTheirOwn()
    {
        const QRegularExpression placeholder(QStringLiteral("\\{\\{[^{}]*\\}\\}")), tag(QStringLiteral("<[^>]*>")),
            year(QStringLiteral("et al\\.,? (19|20)\\d\\d")), digits(QStringLiteral("\\d+(?:[.,]\\d+)?"));
        const QString formula = QStringLiteral("·/()−+²×-_^");
        for (const Lesson& l : loadLessons(m_profiles, nullptr)) {
            QStringList texts { l.text };
            for (const LessonStep& s : l.steps)
                texts << s.instruction << s.pass << s.fail;
            for (QString t : texts) {
                t.remove(placeholder).remove(tag).remove(year);
                for (auto it = digits.globalMatch(t); it.hasNext();) {
                    const auto m = it.next();
                    const QChar before = m.capturedStart() > 0 ? t[m.capturedStart() - 1] : QChar(' ');
                    const QChar after = m.capturedEnd() < t.size() ? t[m.capturedEnd()] : QChar(' ');
                    const bool inFormula
                        = formula.contains(before) || formula.contains(after) || before.isLetter() || after.isLetter();
                    QVERIFY2(inFormula,
                        qPrintable(
                            QStringLiteral("%1: \"%2\" prints %3 of its own")
                                .arg(l.id, t.mid(std::max<qsizetype>(0, m.capturedStart() - 30), 70), m.captured())));
                }
            }
        }
    }

    // The figures follow the facts: lesson 1's ZeRO step prints the optimizer state the check reads before
    // and after (80.86 GB became 10.11 GB, never a rounded 84 → 10.5), and another layout prints its own.
    void lessonFiguresFollowTheLayout_data()
    {
        QTest::addColumn<int>("dp");
        QTest::newRow("the lesson's dp 8") << 8;
        QTest::newRow("dp 4") << 4;
    }

    void lessonFiguresFollowTheLayout()
    {
        QFETCH(int, dp);
        QStringList errors;
        const auto lessons = loadLessons(m_profiles, &errors);
        const Lesson& one = lessons.front();
        QCOMPARE(one.id, QStringLiteral("one-device"));
        plan::Layout start = one.layout;
        start.parallel.dp = dp;
        start.parallel.globalBatch = 8 * dp;
        plan::Layout after = start;
        after.memory.zero = 1;
        Facts before, now;
        const plan::Prediction p0 = plan::predict(start, false), p1 = plan::predict(after, false);
        addLayoutFacts(start, true, &p0, &before);
        addLayoutFacts(after, true, &p1, &now);
        const LessonStep& zero = one.steps[1];
        const QString pass = fillLessonText(zero.pass, { &now, &before, &before, &zero.action });
        const QString was = factText("predicted.optimizerGB", p0.memory.optimizer);
        const QString is = factText("predicted.optimizerGB", p1.memory.optimizer);
        QVERIFY2(pass.contains(was + QStringLiteral(" became ") + is), qPrintable(pass));
        QVERIFY2(pass.contains(QStringLiteral("dp = %1").arg(dp)), qPrintable(pass));
        QVERIFY2(!pass.contains(QStringLiteral("…")), qPrintable(pass));
        // The check reads the same figure the text prints.
        QVERIFY(evaluateCheck(zero.check, now).detail.contains(is));
        QVERIFY(fillLessonText(zero.instruction, { &now, &before, &before, &zero.action })
                    .contains(QStringLiteral("to 1")));
        // The lesson's text: the formula and figures of the layout, no placeholder left unfilled.
        const QString text = fillLessonText(one.text, { &before, &before, &before, nullptr });
        QVERIFY2(!text.contains(QStringLiteral("…")) && !text.contains(QStringLiteral("{{")), qPrintable(text));
        QVERIFY(text.contains(QString::fromStdString(std::get<std::string>(before.at("formula.activations")))));
        QVERIFY(text.contains(factText("predicted.modelStatesGB", p0.memory.modelStates())));
        QVERIFY(text.contains(QStringLiteral("from %1 replicas").arg(dp)));
    }

    void placeholdersAreChecked_data()
    {
        QTest::addColumn<QString>("path");
        QTest::addColumn<QJsonValue>("value");
        QTest::addColumn<QString>("message");
        QTest::newRow("unknown fact") << "steps/0/pass" << QJsonValue("it is {{predicted.bubbel}}")
                                      << "steps[0].pass: {{predicted.bubbel}}: unknown fact \"predicted.bubbel\"";
        QTest::newRow("unknown time") << "steps/0/do" << QJsonValue("{{after:predicted.bubble}}")
                                      << "steps[0].do: {{after:predicted.bubble}}: expected {{FACT}}";
        QTest::newRow("unclosed") << "steps/1/fail" << QJsonValue("{{predicted.bubble")
                                  << "steps[1].fail: an unclosed {{";
        QTest::newRow("action in the text") << "text" << QJsonValue("set {{action.value}}")
                                            << "text: {{action.value}}: the lesson's text has no action";
    }

    void placeholdersAreChecked()
    {
        QFETCH(QString, path);
        QFETCH(QJsonValue, value);
        QFETCH(QString, message);
        const QJsonObject broken
            = setAt(lessonJson("04-pipeline-bubble.json"), path.split(QLatin1Char('/')), value).toObject();
        QStringList errors;
        QVERIFY(!readLesson(
            QJsonDocument(broken).toJson(), QStringLiteral("04-pipeline-bubble.json"), m_profiles, &errors));
        QVERIFY2(errors.join(QLatin1Char('\n')).contains(message), qPrintable(errors.join(QLatin1Char('\n'))));
        // Old fact names read in placeholders too.
        const QJsonObject old = setAt(
            lessonJson("04-pipeline-bubble.json"), { "steps", "0", "pass" }, QJsonValue("m = {{layout.microBatch}}"))
                                    .toObject();
        QVERIFY(
            readLesson(QJsonDocument(old).toJson(), QStringLiteral("04-pipeline-bubble.json"), m_profiles, nullptr));
    }

    void layoutFacts()
    {
        const plan::Layout l = test::tinyLayout();
        Facts f;
        addLayoutFacts(l, true, nullptr, &f);
        QCOMPARE(std::get<double>(f.at("parallel.tp")), 2.0);
        QCOMPARE(std::get<double>(f.at("layout.microBatches")), 4.0); // 16 / (2 · 2)
        QCOMPARE(std::get<std::string>(f.at("parallel.schedule")), std::string("1f1b"));
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
