// The zero-bubble schedules measured on this machine against 1F1B measured in the same round: a small GPT
// (8 layers, hidden 512, seq 64: the V's one-layer chunks at pp 4 take about 10 ms, far above a hand-off's
// latency; docs/training.md) at pp 4 (LOOM_BENCH_PP) with 8 micro-batches,
// every schedule trained by `loom-train --trace-out` under MPI, read back by `loom trace stats --json`, and
// predicted by `loom plan predict --json`. Prints per schedule the measured bubble (the mean of the stages'
// idle shares of the pipeline phase, and the busiest stage's), its ratio to 1F1B's (the median of the
// rounds' ratios), the simulator's and the closed form's bubble, and the memory high-water (the largest
// rank's resident memory) beside the prediction, both also as the increase over 1F1B's, since the resident
// memory holds the program and MPI as well. One thread per rank, niced, ranks waiting without spinning
// (pollUntil's sleeps); Open MPI's mpi_yield_when_idle on as well. Each zero-bubble schedule runs twice, with
// weight_fill "listed" (the default) and "idle" (the rows "<schedule>/idle"). Says for each of the goals
// (ZB-H1 at most half of 1F1B's measured bubble, ZB-H2 and ZB-V at most a quarter) whether this run met it; it fails
// only when a run or a command fails, since with fewer cores than ranks the goals measure the cores (docs/training.md).
// A benchmark (label bench): its figures are times.
//   LOOM_BENCH_ROUNDS (3) rounds of LOOM_BENCH_STEPS (6) steps each, at pp LOOM_BENCH_PP (4, or 2).

#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTemporaryDir>
#include <QTest>

#include <algorithm>
#include <map>
#include <vector>

namespace {
// Each zero-bubble schedule twice: with weight_fill "listed" (the default: every W where the schedule lists
// it) and, as "<schedule>/idle", with a W run early where a rank would wait.
const QStringList kSchedules { "1f1b", "zb-h1", "zb-h2", "zb-v", "dualpipe", "zb-h1/idle", "zb-h2/idle", "zb-v/idle",
    "dualpipe/idle" };

int envInt(const char* name, int fallback)
{
    bool ok = false;
    const int v = qEnvironmentVariableIntValue(name, &ok);
    return ok && v > 0 ? v : fallback;
}

double median(std::vector<double> v)
{
    if (v.empty())
        return 0;
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

QJsonObject runJson(const QString& program, const QStringList& args, const QProcessEnvironment& env, int ms)
{
    QProcess p;
    p.setProcessEnvironment(env);
    p.start(program, args);
    if (!p.waitForFinished(ms) || p.exitStatus() != QProcess::NormalExit || p.exitCode() != 0)
        qFatal("%s %s failed: %s%s", qPrintable(program), qPrintable(args.join(' ')),
            p.readAllStandardError().constData(), p.readAllStandardOutput().right(2000).constData());
    return QJsonDocument::fromJson(p.readAllStandardOutput()).object();
}

struct Measured {
    double meanBubble = 0, busiestBubble = 0, highWaterGb = 0, stepSeconds = 0;
};
} // namespace

class BenchZeroBubble : public QObject {
    Q_OBJECT
    QTemporaryDir m_dir;
    int m_pp = 4;
    QProcessEnvironment m_env = QProcessEnvironment::systemEnvironment();

    QString layoutFile(const QString& variant)
    {
        const QString schedule = variant.section('/', 0, 0);
        const bool v = schedule == QLatin1String("zb-v") || schedule == QLatin1String("dualpipe");
        const QString name = QString(variant).replace('/', '-');
        const QString path = m_dir.filePath(name + ".json");
        QFile f(path);
        if (!f.open(QIODevice::WriteOnly))
            qFatal("cannot write %s", qPrintable(path));
        QJsonObject parallel { { "tp", 1 }, { "pp", m_pp }, { "dp", 1 }, { "vpp", v ? 2 : 1 }, { "micro_batch", 2 },
            { "global_batch", 16 }, { "schedule", schedule } };
        if (variant.contains('/'))
            parallel.insert("weight_fill", variant.section('/', 1));
        f.write(
            QJsonDocument(QJsonObject { { "loom_layout", 1 }, { "name", "zb-" + name }, { "cluster", "local" },
                              { "model",
                                  QJsonObject { { "name", "small" }, { "layers", 8 }, { "hidden", 512 }, { "heads", 8 },
                                      { "ffn_hidden", 2048 }, { "vocab", 256 }, { "seq_len", 64 } } },
                              { "precision", "fp32" }, { "parallel", parallel } })
                .toJson());
        return path;
    }

    Measured measure(const QString& schedule, int steps)
    {
        const QString layout = layoutFile(schedule),
                      trace = m_dir.filePath(QString(schedule).replace('/', '-') + ".trace");
        QProcess p;
        p.setProcessEnvironment(m_env);
        p.setProcessChannelMode(QProcess::MergedChannels);
        p.start(QStringLiteral("nice"),
            { "-n", "10", QStringLiteral(MPIEXEC), "--allow-run-as-root", "--oversubscribe", "--bind-to", "none",
                "--mca", "mpi_yield_when_idle", "1", "-np", QString::number(m_pp), QStringLiteral(LOOM_TRAIN),
                "--layout", layout, "--steps", QString::number(steps), "--trace-out", trace });
        if (!p.waitForFinished(600000) || p.exitCode() != 0)
            qFatal("loom-train (%s) failed: %s", qPrintable(schedule), p.readAll().right(3000).constData());
        const QJsonObject s = runJson(QStringLiteral(LOOM_EXE), { "trace", "stats", trace, "--json" }, m_env, 120000);
        Measured m;
        const QJsonArray stages = s.value("stages").toArray();
        for (const auto& st : stages)
            m.meanBubble += st.toObject().value("bubble_fraction").toDouble() / std::max<qsizetype>(1, stages.size());
        m.busiestBubble = s.value("bottleneck_bubble_fraction").toDouble();
        m.stepSeconds = s.value("step_time_s").toDouble();
        for (const auto& gb : s.value("memory_high_water_gb").toArray())
            m.highWaterGb = std::max(m.highWaterGb, gb.toDouble());
        return m;
    }

private slots:
    void zeroBubbleAgainst1F1B()
    {
        m_env.insert("OPENBLAS_NUM_THREADS", "1");
        m_env.insert("LOOM_THREADS", "1");
        m_env.insert("OMPI_MCA_mpi_yield_when_idle", "1");
        const int rounds = envInt("LOOM_BENCH_ROUNDS", 3), steps = envInt("LOOM_BENCH_STEPS", 6);
        m_pp = envInt("LOOM_BENCH_PP", 4) == 2 ? 2 : 4;
        qInfo("pp %d, 8 micro-batches, %d rounds of %d steps", m_pp, rounds, steps);
        std::map<QString, std::vector<double>> mean, busiest, ratio, highWater, stepRatio;
        for (int r = 0; r < rounds; ++r) {
            double reference = 0, referenceStep = 0;
            for (const QString& s : kSchedules) {
                const Measured m = measure(s, steps);
                if (s == QLatin1String("1f1b"))
                    reference = m.meanBubble, referenceStep = m.stepSeconds;
                stepRatio[s].push_back(referenceStep > 0 ? m.stepSeconds / referenceStep : 0);
                mean[s].push_back(m.meanBubble);
                busiest[s].push_back(m.busiestBubble);
                highWater[s].push_back(m.highWaterGb);
                ratio[s].push_back(reference > 0 ? m.meanBubble / reference : 0);
                qInfo("round %d %-15s bubble %.1f %% (busiest stage %.1f %%), %.3f of 1F1B's; step %.3f s, %.3f of "
                      "1F1B's",
                    r + 1, qPrintable(s), 100 * m.meanBubble, 100 * m.busiestBubble, ratio[s].back(), m.stepSeconds,
                    stepRatio[s].back());
            }
        }
        QFile load(QStringLiteral("/proc/loadavg"));
        load.open(QIODevice::ReadOnly);
        qInfo("load average at the end: %s", load.readAll().trimmed().constData());
        qInfo("schedule | measured bubble (busiest stage) | ÷ 1F1B's | simulated (busiest) | closed form | "
              "high-water GB (+ over 1F1B) | predicted GB (+ over 1F1B; activations)");
        double highWater1F1B = 0, predicted1F1B = 0;
        for (const QString& s : kSchedules) {
            const QJsonObject p
                = runJson(QStringLiteral(LOOM_EXE), { "plan", "predict", layoutFile(s), "--json" }, m_env, 120000);
            const QJsonObject mem = p.value("memory_gb").toObject();
            const double hw = median(highWater[s]), total = mem.value("total").toDouble();
            if (s == QLatin1String("1f1b"))
                highWater1F1B = hw, predicted1F1B = total;
            qInfo("%-15s | %.1f %% (%.1f %%) | %.3f | %.1f %% (%.1f %%) | %.1f %% | %.3f (%+.3f) | %.3f (%+.3f; %.4f)",
                qPrintable(s), 100 * median(mean[s]), 100 * median(busiest[s]), median(ratio[s]),
                100 * p.value("bubble_fraction").toDouble(), 100 * p.value("bottleneck_bubble_fraction").toDouble(),
                100 * p.value("bubble_theory").toDouble(), hw, hw - highWater1F1B, total, total - predicted1F1B,
                mem.value("activations").toDouble());
        }
        const struct {
            const char* schedule;
            double goal;
        } goals[] = { { "zb-h1", 0.5 }, { "zb-h2", 0.25 }, { "zb-v", 0.25 }, { "zb-h1/idle", 0.5 },
            { "zb-h2/idle", 0.25 }, { "zb-v/idle", 0.25 } };
        for (const auto& g : goals) {
            const double r = median(ratio[QString::fromLatin1(g.schedule)]);
            qInfo("goal %s at most %.2f of 1F1B's bubble: %.3f, %s", g.schedule, g.goal, r,
                r <= g.goal ? "met" : "missed");
        }
        for (const QString& s : kSchedules)
            qInfo("%-15s step time %.3f of 1F1B's (median of the rounds' ratios)", qPrintable(s), median(stepRatio[s]));
    }
};

QTEST_GUILESS_MAIN(BenchZeroBubble)
#include "bench_zerobubble.moc"
