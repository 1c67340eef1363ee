// Measured pipeline bubble against the closed form: a small GPT (8 layers, hidden 256) with 8 micro-batches,
// pp 2 and 4, GPipe and 1F1B: the slowest stage's bubble is within 5 points of (p-1)/(m+p-1); interleaved
// (pp 2, vpp 2) is lower than 1F1B. Runs serially: the numbers are times.
#include "engine/trace/TraceStats.h"

#include <QFile>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTemporaryDir>
#include <QTest>

#include <algorithm>

using namespace loom::trace;

class TestBubble : public QObject {
    Q_OBJECT
    QTemporaryDir m_dir;

    // The smallest stage bubble (the busiest, slowest stage) and the closed form.
    std::pair<double, double> measure(int pp, const QString& schedule, int vpp)
    {
        const QString name = QStringLiteral("pp%1-%2").arg(pp).arg(schedule);
        const QString layout = m_dir.filePath(name + ".json"), trace = m_dir.filePath(name + ".trace");
        QFile f(layout);
        f.open(QIODevice::WriteOnly);
        f.write(
            QJsonDocument(QJsonObject { { "loom_layout", 1 }, { "name", name }, { "cluster", "local" },
                              { "model",
                                  QJsonObject { { "name", "small" }, { "layers", 8 }, { "hidden", 256 }, { "heads", 4 },
                                      { "ffn_hidden", 1024 }, { "vocab", 256 }, { "seq_len", 64 } } },
                              { "parallel",
                                  QJsonObject { { "tp", 1 }, { "pp", pp }, { "dp", 1 }, { "vpp", vpp },
                                      { "micro_batch", 2 }, { "global_batch", 16 }, { "schedule", schedule } } } })
                .toJson());
        f.close();
        QProcess p;
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        env.insert("OPENBLAS_NUM_THREADS", "1");
        p.setProcessEnvironment(env);
        p.setProcessChannelMode(QProcess::MergedChannels);
        p.start(QStringLiteral(MPIEXEC),
            { "--allow-run-as-root", "--oversubscribe", "-np", QString::number(pp), QStringLiteral(LOOM_TRAIN),
                "--layout", layout, "--steps", "8", "--trace-out", trace });
        if (!p.waitForFinished(240000) || p.exitCode() != 0)
            qFatal("loom-train failed: %s", p.readAll().constData());
        QFile t(trace);
        t.open(QIODevice::ReadOnly);
        const std::string text = t.readAll().toStdString();
        StatsContext c;
        c.pp = pp;
        c.vpp = vpp;
        c.interleaved = schedule == QLatin1String("interleaved");
        c.microBatches = 8;
        const TraceStats s = computeStats(readChromeTrace(text), c);
        double least = 1;
        for (const auto& st : s.stages)
            least = std::min(least, st.bubbleFraction);
        qInfo("%s: slowest stage's bubble %.1f %%, closed form %.1f %%", qPrintable(name), 100 * least,
            100 * s.stages.front().bubbleTheory);
        return { least, s.stages.front().bubbleTheory };
    }

private slots:
    void closedForm_data()
    {
        QTest::addColumn<int>("pp");
        QTest::addColumn<QString>("schedule");
        for (int pp : { 2, 4 })
            for (const char* s : { "gpipe", "1f1b" })
                QTest::newRow(qPrintable(QStringLiteral("pp%1 %2").arg(pp).arg(s))) << pp << QString::fromLatin1(s);
    }
    void closedForm()
    {
        QFETCH(int, pp);
        QFETCH(QString, schedule);
        const auto [measured, theory] = measure(pp, schedule, 1);
        QVERIFY2(
            std::fabs(measured - theory) <= 0.05, qPrintable(QStringLiteral("%1 vs %2").arg(measured).arg(theory)));
    }

    void interleavingShrinksTheBubble()
    {
        const double oneFOneB = measure(2, "1f1b", 1).first;
        const double interleaved = measure(2, "interleaved", 2).first;
        QVERIFY2(interleaved < oneFOneB - 0.02, qPrintable(QStringLiteral("%1 vs %2").arg(interleaved).arg(oneFOneB)));
    }
};

QTEST_GUILESS_MAIN(TestBubble)
#include "tst_bubble.moc"
