#include "launcher/RunShm.h"

#include <QCoreApplication>
#include <QDir>
#include <QFileInfo>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <sys/types.h>

namespace loom::launcher {

namespace {

const QString kShm = QStringLiteral("/dev/shm");
const QString kPrefix = QStringLiteral("loom-mpi-");

// Folders of Loom processes that no longer exist.
void removeLeftovers()
{
    const QDir shm(kShm);
    for (const QString& name : shm.entryList({ kPrefix + QLatin1Char('*') }, QDir::Dirs | QDir::NoDotAndDotDot)) {
        bool ok = false;
        const qint64 pid = name.mid(kPrefix.size()).section(QLatin1Char('-'), 0, 0).toLongLong(&ok);
        if (ok && pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH)
            QDir(shm.filePath(name)).removeRecursively();
    }
}

} // namespace

QString makeRunShmDir()
{
    if (!QFileInfo(kShm).isDir())
        return {};
    removeLeftovers();
    QByteArray pattern
        = QDir(kShm)
              .filePath(kPrefix + QString::number(QCoreApplication::applicationPid()) + QStringLiteral("-XXXXXX"))
              .toLocal8Bit();
    if (!::mkdtemp(pattern.data()))
        return {};
    return QString::fromLocal8Bit(pattern);
}

void removeRunShmDir(const QString& dir)
{
    if (QFileInfo(dir).fileName().startsWith(kPrefix))
        QDir(dir).removeRecursively();
}

} // namespace loom::launcher
