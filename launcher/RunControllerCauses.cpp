// RunController's reading of a failed run's log: the cause in one sentence, naming the rank and the host
// where the log says them (mpirun's and ssh's messages, the engine's own lines).
#include "launcher/RunController.h"

#include <QRegularExpression>

namespace loom::launcher {

namespace {

// Open MPI's report of an engine it could not start (missing, not executable, built for another machine):
// the host, the rank and the path from its "Node:", "Executable:" ... lines, in one sentence.
QString engineNotStarted(const QString& report)
{
    const auto field = [&report](const char* names) {
        return QRegularExpression(QStringLiteral("\\b(?:%1):[ \\t]+([^\\n]+)").arg(QLatin1String(names)))
            .match(report)
            .captured(1)
            .trimmed();
    };
    const QString host = field("Node|Local host"), engine = field("Executable|Application name");
    const QString error = field("Error"),
                  rank = QRegularExpression(QStringLiteral("process\\s+rank\\s+(\\d+)")).match(report).captured(1);
    if (host.isEmpty())
        return QStringLiteral("mpirun could not find or run the engine");
    return QStringLiteral("mpirun could not start the engine %1 on host %2%3%4; install loom-train at that path "
                          "there (the profile's launch.engine names it)")
        .arg(engine.isEmpty() ? QStringLiteral("loom-train") : engine, host,
            rank.isEmpty() ? QString() : QStringLiteral(" (rank %1)").arg(rank),
            error.isEmpty() ? QStringLiteral(": it is missing or not executable")
                            : QStringLiteral(": %1").arg(error.left(120)));
}

} // namespace

QString RunController::causeFromLog(const QString& log)
{
    static const QRegularExpression died(
        QStringLiteral("process rank (\\d+) with PID \\d+ on node (\\S+) exited on signal (\\d+)"));
    static const QRegularExpression rankError(QStringLiteral("loom-train: rank (\\d+): ([^\\n]+)"));
    static const QRegularExpression layoutError(QStringLiteral("loom-train: (the layout[^\\n]+)"));
    static const QRegularExpression folder(QStringLiteral("loom: (cannot write the run folder [^\\n]+)"));
    static const QRegularExpression daemons(
        QStringLiteral("ORTE was unable to reliably start one or more daemons|"
                       "ORTE does not know how to route|An ORTE daemon has unexpectedly failed"));
    // Open MPI breaks its lines where it likes ("could not access\nor execute"): match across them.
    static const QRegularExpression missing(
        QStringLiteral("was unable to find the(?:\\s+specified)?\\s+executable|could\\s+not\\s+access\\s+or\\s+"
                       "execute|tried to fork a new process via the \"execve\" system call"));
    static const QRegularExpression sshFailed(
        QStringLiteral("ssh: connect to host (\\S+) port \\d+: ([^\\n]+)|(\\S+): Permission denied \\(([^\\n)]+)"));
    if (auto m = died.match(log); m.hasMatch())
        return QStringLiteral("rank %1 died (signal %3 on node %2)").arg(m.captured(1), m.captured(2), m.captured(3));
    if (auto m = rankError.match(log); m.hasMatch())
        return QStringLiteral("rank %1 failed: %2").arg(m.captured(1), m.captured(2));
    if (auto m = layoutError.match(log); m.hasMatch())
        return m.captured(1);
    if (auto m = folder.match(log); m.hasMatch())
        return m.captured(1);
    if (auto m = sshFailed.match(log); m.hasMatch()) // the head node's mpirun could not reach a host
        return m.capturedLength(1) > 0
            ? QStringLiteral(
                "the head node could not reach host %1 by ssh (%2); check that it reaches every host by ssh "
                "without a password")
                  .arg(m.captured(1), m.captured(2).trimmed())
            : QStringLiteral("host %1 refused the head node's ssh key (%2); check that the head node reaches every "
                             "host by ssh without a password")
                  .arg(m.captured(3), m.captured(4));
    if (daemons.match(log).hasMatch())
        return QStringLiteral(
            "mpirun could not start its daemon on every host; check that the head node reaches each host "
            "by ssh without a password");
    if (const auto at = missing.match(log); at.hasMatch())
        return engineNotStarted(log.mid(at.capturedStart()));
    return {};
}

} // namespace loom::launcher
