#pragma once

#include <QString>

namespace loom::profiles {

// The lock a live run holds for its whole life: flock(2) on "<store>.run-<id>.lock" beside the store. The
// kernel drops it when the Loom that holds it ends in any way (kill -9 included), whatever its pid or PID
// namespace, so "is this run still followed?" is asked of the lock, not of a pid that may have been reused
// or may belong to another namespace (a container).
class RunLock {
public:
    // Takes the lock of `run` in the store at `storePath`; isHeld() is false when the file cannot be made.
    RunLock(const QString& storePath, qint64 run);
    ~RunLock(); // releases the lock and removes its file
    RunLock(const RunLock&) = delete;
    RunLock& operator=(const RunLock&) = delete;

    bool isHeld() const { return m_fd >= 0; }

    enum class Owner { Alive, Gone, Unknown }; // Unknown: no lock file (a Loom older than the lock)
    // Whether the Loom that followed `run` still holds its lock. When it is gone its lock file is removed.
    static Owner owner(const QString& storePath, qint64 run);

    static QString path(const QString& storePath, qint64 run);

private:
    QString m_path;
    int m_fd = -1;
};

} // namespace loom::profiles
