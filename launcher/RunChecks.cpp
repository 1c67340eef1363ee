#include "launcher/RunChecks.h"

#include <QDir>
#include <QFile>
#include <QRegularExpression>

#include <algorithm>
#include <cstring>
#include <limits>
#include <utility>

namespace loom::launcher {

QString eventProblem(const trace::TraceEvent& e, std::int64_t world, std::int64_t steps)
{
    if (e.rank < 0 || e.rank >= world)
        return QStringLiteral("rank %1 is outside the run's %2 ranks").arg(e.rank).arg(world);
    if (e.peer < -1 || e.peer >= world)
        return QStringLiteral("peer %1 is outside the run's %2 ranks").arg(e.peer).arg(world);
    if (e.startNs < 0)
        return QStringLiteral("it starts at %1 ns, before the run's clock began").arg(e.startNs);
    if (e.endNs < e.startNs)
        return QStringLiteral("it ends (%1 ns) before it starts (%2 ns)").arg(e.endNs).arg(e.startNs);
    if (e.step < -1 || e.step > steps)
        return QStringLiteral("step %1 is outside the run's steps 0 to %2").arg(e.step).arg(steps);
    if (e.groupSize < 0 || e.groupSize > world)
        return QStringLiteral("a group of %1 ranks is larger than the run's %2").arg(e.groupSize).arg(world);
    // What a Chrome trace reader (loom trace stats) refuses: -1 means "none", anything lower is damage.
    for (const auto& [name, value] : { std::pair { "micro-batch", e.microBatch }, std::pair { "stage", e.stage },
             std::pair { "chunk", e.chunk }, std::pair { "group", e.group }, std::pair { "stream", e.stream } })
        if (value < -1)
            return QStringLiteral("its %1 is %2 (-1 or more expected)").arg(QLatin1String(name)).arg(value);
    constexpr auto kMaxBytes = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
    if (e.bytes > kMaxBytes || e.wireBytes > kMaxBytes)
        return QStringLiteral("its %1 bytes are more than a store can hold").arg(std::max(e.bytes, e.wireBytes));
    return {};
}

std::vector<trace::TraceEvent> eventsOfTheRun(std::vector<trace::TraceEvent> events, std::int64_t world,
    std::int64_t steps, std::int64_t* skipped, QString* firstProblem)
{
    *skipped = 0;
    std::vector<trace::TraceEvent> kept;
    kept.reserve(events.size());
    for (std::size_t i = 0; i < events.size(); ++i) {
        if (const QString bad = eventProblem(events[i], world, steps); !bad.isEmpty()) {
            if ((*skipped)++ == 0)
                *firstProblem = QStringLiteral("event %1: %2").arg(i).arg(bad);
            continue;
        }
        kept.push_back(std::move(events[i]));
    }
    return kept;
}

QString causeText(const QString& text, qsizetype maxChars)
{
    QString out;
    const QString cut = text.left(maxChars);
    for (const QChar c : cut) {
        const char16_t u = c.unicode();
        const bool control = u < 0x20 || (u >= 0x7f && u <= 0x9f);
        const bool bidi
            = u == 0x061c || u == 0x200e || u == 0x200f || (u >= 0x202a && u <= 0x202e) || (u >= 0x2066 && u <= 0x2069);
        if (control || bidi)
            out += QStringLiteral("\\u%1").arg(static_cast<unsigned>(u), 4, 16, QLatin1Char('0'));
        else
            out += c;
    }
    return text.size() > maxChars ? out + QChar(0x2026) : out;
}

bool RunWorld::knowsHost(const QString& host) const
{
    static const QRegularExpression hostName(QStringLiteral("^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$"));
    if (!hostName.match(host).hasMatch())
        return false;
    if (hosts.isEmpty())
        return true;
    // mpirun names a node by its short name ("node1" for node1.cluster) or as the hosts list says.
    for (const QString& h : hosts)
        if (h.compare(host, Qt::CaseInsensitive) == 0
            || h.section(QLatin1Char('.'), 0, 0).compare(host, Qt::CaseInsensitive) == 0
            || host.section(QLatin1Char('.'), 0, 0).compare(h, Qt::CaseInsensitive) == 0)
            return true;
    return false;
}

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
        .arg(causeText(engine.isEmpty() ? QStringLiteral("loom-train") : engine), causeText(host),
            rank.isEmpty() ? QString() : QStringLiteral(" (rank %1)").arg(rank),
            error.isEmpty() ? QStringLiteral(": it is missing or not executable")
                            : QStringLiteral(": %1").arg(causeText(error.left(120))));
}

} // namespace

QString causeFromLog(const QString& log, const RunWorld& world)
{
    static const QRegularExpression died(
        QStringLiteral("process rank (\\d{1,9}) with PID \\d+ on node (\\S+) exited on signal (\\d{1,3})"));
    static const QRegularExpression rankError(QStringLiteral("loom-train: rank (\\d{1,9}): ([^\\n]+)"));
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
    for (auto it = died.globalMatch(log); it.hasNext();)
        if (const auto m = it.next(); world.knowsRank(m.captured(1).toLongLong()) && world.knowsHost(m.captured(2)))
            return QStringLiteral("rank %1 died (signal %3 on node %2)")
                .arg(m.captured(1), m.captured(2), m.captured(3));
    for (auto it = rankError.globalMatch(log); it.hasNext();)
        if (const auto m = it.next(); world.knowsRank(m.captured(1).toLongLong()))
            return QStringLiteral("rank %1 failed: %2").arg(m.captured(1), causeText(m.captured(2)));
    if (auto m = layoutError.match(log); m.hasMatch())
        return causeText(m.captured(1));
    if (auto m = folder.match(log); m.hasMatch())
        return causeText(m.captured(1));
    if (auto m = sshFailed.match(log); m.hasMatch()) // the head node's mpirun could not reach a host
        return m.capturedLength(1) > 0
            ? QStringLiteral(
                "the head node could not reach host %1 by ssh (%2); check that it reaches every host by ssh "
                "without a password")
                  .arg(causeText(m.captured(1)), causeText(m.captured(2).trimmed()))
            : QStringLiteral("host %1 refused the head node's ssh key (%2); check that the head node reaches every "
                             "host by ssh without a password")
                  .arg(causeText(m.captured(3)), causeText(m.captured(4)));
    if (daemons.match(log).hasMatch())
        return QStringLiteral(
            "mpirun could not start its daemon on every host; check that the head node reaches each host "
            "by ssh without a password");
    if (const auto at = missing.match(log); at.hasMatch())
        return engineNotStarted(log.mid(at.capturedStart()));
    return {};
}

QStringList lastCollectives(const QString& log, const RunWorld& world, int maxRanks)
{
    static const QRegularExpression said(
        QStringLiteral("loom-train: rank (\\d{1,9}): not stopped [^\\n]*; last collectives: ([^\\n]+)"));
    QStringList out;
    QList<qint64> seen;
    for (auto it = said.globalMatch(log); it.hasNext() && out.size() < maxRanks;) {
        const auto m = it.next();
        const qint64 rank = m.captured(1).toLongLong();
        if (!world.knowsRank(rank) || seen.contains(rank))
            continue;
        seen << rank;
        out << QStringLiteral("rank %1: %2").arg(rank).arg(causeText(m.captured(2), 300));
    }
    return out;
}

QList<qint64> childProcesses(qint64 parent)
{
    QList<qint64> out;
    const QByteArray wanted = QByteArray::number(parent);
    for (const QString& entry : QDir(QStringLiteral("/proc")).entryList(QDir::Dirs | QDir::NoDotAndDotDot)) {
        QFile stat(QStringLiteral("/proc/%1/stat").arg(entry));
        if (entry.toLongLong() <= 0 || !stat.open(QIODevice::ReadOnly))
            continue;
        const QByteArray text = stat.read(4096);
        const QList<QByteArray> fields = text.mid(text.lastIndexOf(')') + 2).split(' ');
        if (fields.size() > 1 && fields[1] == wanted) // fields[1] is the parent
            out << entry.toLongLong();
    }
    return out;
}

QStringList stoppedRanks(const QList<qint64>& pids)
{
    QStringList out;
    for (const qint64 pid : pids) {
        QFile stat(QStringLiteral("/proc/%1/stat").arg(pid));
        if (!stat.open(QIODevice::ReadOnly))
            continue;
        const QByteArray text = stat.read(4096);
        const qsizetype close = text.lastIndexOf(')');
        const char state = close >= 0 && close + 2 < text.size() ? text[close + 2] : '?';
        if (state != 'T' && state != 't')
            continue;
        QFile environ(QStringLiteral("/proc/%1/environ").arg(pid));
        if (!environ.open(QIODevice::ReadOnly))
            continue;
        QString rank;
        for (const QByteArray& kv : environ.read(1 << 20).split('\0'))
            for (const char* name : { "LOOM_RANK=", "OMPI_COMM_WORLD_RANK=", "PMIX_RANK=" })
                if (rank.isEmpty() && kv.startsWith(name))
                    rank = QString::fromLatin1(kv.mid(static_cast<qsizetype>(std::strlen(name)))).left(12);
        bool number = false;
        rank.toUInt(&number); // a process can rewrite its own environment: only a rank number is said
        if (number)
            out << QStringLiteral("rank %1 (pid %2)").arg(rank).arg(pid);
    }
    out.sort();
    return out;
}

} // namespace loom::launcher
