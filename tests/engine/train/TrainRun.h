#pragma once
// Runs loom-train on a layout as a user would (mpirun for more than one rank) and reads the losses of its
// --metrics file. Shared by the tests that compare a layout's losses with another run's. Needs MPIEXEC and
// LOOM_TRAIN defined by CMake.
#include <QFile>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QString>
#include <QStringList>

#include <algorithm>
#include <vector>

namespace loom::test {

// Ranks a layout asks for: the product of its parallel degrees (absent ones count 1).
inline int layoutRanks(const QJsonObject& layout)
{
    const QJsonObject p = layout.value("parallel").toObject();
    int ranks = 1;
    for (const char* key : { "tp", "pp", "dp", "cp" })
        ranks *= std::max(1, p.value(QLatin1String(key)).toInt(1));
    return ranks;
}

// Writes `layout` to DIR/NAME.json, trains `steps` steps (plus `extraArgs`) and returns each step's loss;
// empty on failure, with `log` holding the processes' output.
inline std::vector<double> trainLosses(const QJsonObject& layout, const QString& dir, int steps, QString& log,
    const QStringList& extraArgs = {}, int timeoutMs = 240000)
{
    const QString name = layout.value("name").toString();
    const QString file = dir + "/" + name + ".json", metrics = dir + "/" + name + ".metrics";
    QFile f(file);
    if (!f.open(QIODevice::WriteOnly)) {
        log = "cannot write " + file;
        return {};
    }
    f.write(QJsonDocument(layout).toJson());
    f.close();
    const int ranks = layoutRanks(layout);
    const QStringList args = QStringList { QStringLiteral("--layout"), file, QStringLiteral("--steps"),
        QString::number(steps), QStringLiteral("--metrics"), metrics }
        + extraArgs;
    QProcess proc;
    proc.setProcessChannelMode(QProcess::MergedChannels);
    if (ranks == 1)
        proc.start(QStringLiteral(LOOM_TRAIN), args);
    else
        proc.start(QStringLiteral(MPIEXEC),
            QStringList { QStringLiteral("--allow-run-as-root"), QStringLiteral("--oversubscribe"),
                QStringLiteral("-np"), QString::number(ranks), QStringLiteral(LOOM_TRAIN) }
                + args);
    const bool finished = proc.waitForFinished(timeoutMs);
    if (!finished)
        proc.kill();
    log = QString::fromUtf8(proc.readAll());
    if (!finished || proc.exitStatus() != QProcess::NormalExit || proc.exitCode() != 0)
        return {};
    std::vector<double> losses;
    QFile m(metrics);
    if (!m.open(QIODevice::ReadOnly))
        return {};
    for (const QByteArray& line : m.readAll().split('\n'))
        if (!line.trimmed().isEmpty())
            losses.push_back(QJsonDocument::fromJson(line).object().value("loss").toDouble());
    return losses;
}

} // namespace loom::test
