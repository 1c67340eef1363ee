// Shared by the launcher tests: the process tree below a process, a process's name and environment, and which
// of a list of processes still exist (zombies included), all from /proc.
#pragma once

#include <QDir>
#include <QFile>
#include <QList>
#include <QString>
#include <QStringList>

#include <cerrno>
#include <csignal>
#include <map>

namespace loomtest {

// Every process below `root` (children, grandchildren, ...), from /proc.
inline QList<qint64> descendants(qint64 root)
{
    std::multimap<qint64, qint64> children;
    for (const QString& entry : QDir(QStringLiteral("/proc")).entryList(QDir::Dirs | QDir::NoDotAndDotDot)) {
        bool numeric = false;
        const qint64 pid = entry.toLongLong(&numeric);
        QFile stat(QStringLiteral("/proc/%1/stat").arg(entry));
        if (!numeric || !stat.open(QIODevice::ReadOnly))
            continue;
        const QString text = QString::fromUtf8(stat.readAll());
        const auto fields = text.mid(text.lastIndexOf(QLatin1Char(')')) + 2).split(QLatin1Char(' '));
        if (fields.size() > 1)
            children.emplace(fields[1].toLongLong(), pid);
    }
    QList<qint64> out, todo { root };
    while (!todo.isEmpty()) {
        const qint64 p = todo.takeFirst();
        for (auto [it, end] = children.equal_range(p); it != end; ++it) {
            out << it->second;
            todo << it->second;
        }
    }
    return out;
}

inline QString commOf(qint64 pid)
{
    QFile f(QStringLiteral("/proc/%1/comm").arg(pid));
    return f.open(QIODevice::ReadOnly) ? QString::fromUtf8(f.readAll()).trimmed() : QString();
}

// The value of `name` in the process's environment ("" when unset or unreadable).
inline QString environmentOf(qint64 pid, const QByteArray& name)
{
    QFile f(QStringLiteral("/proc/%1/environ").arg(pid));
    if (!f.open(QIODevice::ReadOnly))
        return {};
    for (const QByteArray& kv : f.readAll().split('\0'))
        if (kv.startsWith(name + '='))
            return QString::fromUtf8(kv.mid(name.size() + 1));
    return {};
}

inline QStringList stillThere(const QList<qint64>& pids)
{
    QStringList left;
    for (const qint64 pid : pids)
        if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH)
            left << QStringLiteral("%1 (%2)").arg(pid).arg(commOf(pid));
    return left;
}

} // namespace loomtest
