#include "launcher/RunChecks.h"

#include <QDir>
#include <QFile>

#include <cstring>

namespace loom::launcher {

QString eventProblem(const trace::TraceEvent& e, std::int64_t world, std::int64_t steps)
{
    if (e.rank < 0 || e.rank >= world)
        return QStringLiteral("rank %1 is outside the run's %2 ranks").arg(e.rank).arg(world);
    if (e.peer < -1 || e.peer >= world)
        return QStringLiteral("peer %1 is outside the run's %2 ranks").arg(e.peer).arg(world);
    if (e.startNs < 0 || e.endNs < e.startNs)
        return QStringLiteral("it ends (%1 ns) before it starts (%2 ns)").arg(e.endNs).arg(e.startNs);
    if (e.step < -1 || e.step > steps)
        return QStringLiteral("step %1 is outside the run's steps 0 to %2").arg(e.step).arg(steps);
    if (e.groupSize < 0 || e.groupSize > world)
        return QStringLiteral("a group of %1 ranks is larger than the run's %2").arg(e.groupSize).arg(world);
    return {};
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
        if (!rank.isEmpty())
            out << QStringLiteral("rank %1 (pid %2)").arg(rank).arg(pid);
    }
    out.sort();
    return out;
}

} // namespace loom::launcher
