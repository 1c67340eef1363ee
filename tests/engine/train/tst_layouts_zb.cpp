// Layout equivalence for the zero-bubble schedules (zb-h1, zb-h2, zb-v, dualpipe): gpt-tiny and llama-tiny
// trained for 20 steps under each gives the one-process loss at every step (within 1e-4 relative), at pp 2
// with tp 2, at pp 4, and at pp 2 with dp 2 under ZeRO-1; moe-tiny with ep 2 under zb-h1. ZB-V and DualPipe
// hold 2·pp virtual stages, so at pp 4 they train 8-layer forms of the same models (each beside its own
// one-process run). Runs loom-train under mpirun, as a user would; three launches per schedule and model,
// the pp 2 tp 2 rows with weight_fill "listed" (the default), the pp 4 and ZeRO-1 rows with "idle".
#include <QFile>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QTest>

#include "TrainRun.h"

#include <cmath>
#include <map>

namespace {

constexpr int kSteps = 20;

// The built-in model profile as a layout's model object, with `layers` blocks.
QJsonObject modelShape(const QString& profile, int layers)
{
    QFile f(QStringLiteral(LOOM_SOURCE_DIR "/engine/profiles/builtin/model-%1.json").arg(profile));
    if (!f.open(QIODevice::ReadOnly))
        return {};
    QJsonObject m = QJsonDocument::fromJson(f.readAll()).object();
    for (const char* key : { "loom_profile", "kind", "description", "source" })
        m.remove(QString::fromLatin1(key));
    m.insert("name", QStringLiteral("%1-%2").arg(profile).arg(layers));
    m.insert("layers", layers);
    return m;
}

QJsonObject layout(const QString& name, const QJsonValue& model, int tp, int pp, int dp, const QString& schedule,
    int globalBatch = 16, int ep = 1)
{
    const bool v = schedule == "zb-v" || schedule == "dualpipe";
    QJsonObject par { { "tp", tp }, { "pp", pp }, { "dp", dp }, { "micro_batch", 2 }, { "global_batch", globalBatch },
        { "schedule", schedule }, { "vpp", v ? 2 : 1 } };
    if (ep > 1)
        par.insert("ep", ep);
    return QJsonObject { { "loom_layout", 1 }, { "name", name }, { "model", model }, { "cluster", "local" },
        { "parallel", par }, { "comm", QJsonObject { { "backend", "mpi" } } } };
}

// The layout with weight_fill "idle": a rank whose input has not arrived runs an earlier B's W meanwhile.
QJsonObject idle(QJsonObject layout)
{
    QJsonObject par = layout.value("parallel").toObject();
    par.insert("weight_fill", "idle");
    layout.insert("parallel", par);
    return layout;
}

void compare(const std::vector<double>& losses, const std::vector<double>& reference)
{
    double worst = 0;
    for (std::size_t i = 0; i < losses.size(); ++i) {
        const double a = losses[i], b = reference[i];
        worst = std::max(worst, std::fabs(a - b) / std::fabs(b));
        if (!(std::fabs(a - b) <= 1e-4 * std::fabs(b)))
            QFAIL(qPrintable(QStringLiteral("step %1: loss %2, one process %3")
                                 .arg(static_cast<int>(i) + 1)
                                 .arg(a, 0, 'g', 9)
                                 .arg(b, 0, 'g', 9)));
    }
    qInfo("largest relative difference from one process over %d steps: %.1e", static_cast<int>(losses.size()), worst);
}

} // namespace

class TestLayoutsZeroBubble : public QObject {
    Q_OBJECT
    QTemporaryDir m_dir;
    std::map<QString, std::vector<double>> m_baseline; // by the model's JSON

    std::vector<double> train(const QJsonObject& l, QString& log)
    {
        return loom::test::trainLosses(l, m_dir.path(), kSteps, log);
    }
    // The one-process losses of `model` (trained once, then kept).
    const std::vector<double>& baseline(const QJsonValue& model, int globalBatch)
    {
        const QString key
            = QString::fromUtf8(QJsonDocument(QJsonObject { { "m", model } }).toJson()) + QString::number(globalBatch);
        auto it = m_baseline.find(key);
        if (it == m_baseline.end()) {
            QString log;
            const QString name = QStringLiteral("one-%1").arg(m_baseline.size());
            it = m_baseline.emplace(key, train(layout(name, model, 1, 1, 1, "1f1b", globalBatch), log)).first;
            if (it->second.size() != kSteps)
                qWarning("%s", qPrintable(log));
        }
        return it->second;
    }

private slots:
    void sameLossAsOneProcess_data()
    {
        QTest::addColumn<QJsonObject>("layout");
        for (const char* schedule : { "zb-h1", "zb-h2", "zb-v", "dualpipe" })
            for (const char* model : { "gpt-tiny", "llama-tiny" }) {
                const bool v = QString(schedule) == "zb-v" || QString(schedule) == "dualpipe";
                const QJsonValue deep = v ? QJsonValue(modelShape(model, 8)) : QJsonValue(QString(model));
                auto row = [&](const char* what, const QJsonObject& l) {
                    QTest::addRow("%s %s %s", schedule, model, what) << l;
                };
                row("pp2 tp2", layout(QStringLiteral("%1-%2-pp2-tp2").arg(schedule, model), model, 2, 2, 1, schedule));
                row("pp4 idle",
                    idle(layout(QStringLiteral("%1-%2-pp4").arg(schedule, model), deep, 1, 4, 1, schedule)));
                QJsonObject zero
                    = layout(QStringLiteral("%1-%2-pp2-dp2-zero1").arg(schedule, model), model, 1, 2, 2, schedule);
                zero.insert("memory", QJsonObject { { "zero", 1 } });
                row("pp2 dp2 ZeRO-1 idle", idle(zero));
            }
        QTest::newRow("zb-h1 moe-tiny pp2 dp2 ep2")
            << layout("zb-h1-moe-pp2-dp2-ep2", QString("moe-tiny"), 1, 2, 2, "zb-h1", 8, 2);
    }
    void sameLossAsOneProcess()
    {
        QFETCH(QJsonObject, layout);
        const auto& par = layout.value("parallel").toObject();
        const std::vector<double>& reference = baseline(layout.value("model"), par.value("global_batch").toInt());
        QVERIFY2(reference.size() == kSteps, "the one-process run failed");
        QString log;
        const auto losses = train(layout, log);
        QVERIFY2(losses.size() == kSteps, qPrintable(log));
        compare(losses, reference);
    }
};

QTEST_MAIN(TestLayoutsZeroBubble)
#include "tst_layouts_zb.moc"
