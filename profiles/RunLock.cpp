#include "profiles/RunLock.h"

#include <QFile>

#include <cerrno>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

namespace loom::profiles {

QString RunLock::path(const QString& storePath, qint64 run)
{
    return storePath + QStringLiteral(".run-%1.lock").arg(run);
}

RunLock::RunLock(const QString& storePath, qint64 run)
    : m_path(path(storePath, run))
{
    // Made and locked under another name, then renamed: whoever opens the lock's name finds it locked
    // already, never in the moment between open and flock. O_CLOEXEC: the ranks must not inherit it, or a
    // rank outliving Loom would keep the run "live". O_NOFOLLOW: a planted link is not followed.
    const QByteArray pending = QFile::encodeName(m_path + QStringLiteral(".new"));
    ::unlink(pending.constData());
    m_fd = ::open(pending.constData(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (m_fd < 0)
        return;
    if (::flock(m_fd, LOCK_EX | LOCK_NB) != 0 || ::rename(pending.constData(), QFile::encodeName(m_path)) != 0) {
        ::unlink(pending.constData());
        ::close(m_fd);
        m_fd = -1;
    }
}

RunLock::~RunLock()
{
    if (m_fd < 0)
        return;
    ::unlink(QFile::encodeName(m_path).constData()); // while still held: no one can take a stale file
    ::close(m_fd);
}

RunLock::Owner RunLock::owner(const QString& storePath, qint64 run)
{
    const QByteArray name = QFile::encodeName(path(storePath, run));
    const int fd = ::open(name.constData(), O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0)
        return errno == ENOENT ? Owner::Unknown : Owner::Alive; // unreadable: never guess "gone"
    const bool taken = ::flock(fd, LOCK_EX | LOCK_NB) == 0;
    if (taken) // its owner is gone: the file goes (while this process holds it, so no one else takes it)
        ::unlink(name.constData());
    ::close(fd);
    return taken ? Owner::Gone : Owner::Alive;
}

} // namespace loom::profiles
