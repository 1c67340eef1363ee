#pragma once

#include "launcher/LaunchCommands.h"

#include <QObject>
#include <QProcess>

#include <functional>
#include <memory>
#include <vector>

namespace loom::launcher {

// The ranks of a run started by Loom itself on this machine (no mpirun): one process per rank, all in one
// process group (the first rank's), so that a signal reaches every rank. What mpirun would do on its own is
// done here: rank 0's standard output (the telemetry stream) and every rank's messages are passed on, and
// when a rank fails (non-zero exit or a signal) the others are killed, since they would wait for it.
// finished() comes once, when every rank has exited.
class LocalRanks : public QObject {
    Q_OBJECT
public:
    explicit LocalRanks(QObject* parent = nullptr);
    ~LocalRanks() override;

    // Starts every rank in `workDir`; false (with *error) when one could not be started, or `stop` said so
    // between two starts, after killing and reaping those already started.
    bool start(const std::vector<RankCommand>& ranks, const QString& workDir, QString* error,
        const std::function<bool()>& stop = {});
    bool isRunning() const;
    // The process group of the ranks (0 before start()).
    qint64 processGroup() const { return m_pgid; }
    // Sends `signal` to every rank still running.
    void signalAll(int signal);
    // Waits up to `ms` for every rank to exit (for destructors; otherwise follow finished()).
    void waitForAll(int ms);

signals:
    // Rank 0's standard output (frames and text).
    void streamOutput(const QByteArray& chunk);
    // Text from the other ranks, one line at a time, prefixed with nothing (they say "loom-train: rank N: …").
    void messages(const QString& text);
    // Every rank has exited. `failedRank` is the first rank that failed (-1 when none did) and `cause` says how
    // ("rank 1 died (signal 9 on node vm)", "rank 0 exited with code 3").
    void finished(int failedRank, const QString& cause);

private:
    void rankExited(int rank, int exitCode, QProcess::ExitStatus status);
    void blame(int rank, int exitCode, bool crashed);
    // Collects, for up to kReapMs, the exits of ranks that have already ended (rankExited then names a
    // rank killed by a signal, and nothing else).
    void reapTheDead();
    // Kills and reaps every rank started so far, without finished() (start() reports the error).
    void abandon();

    static constexpr int kReapMs = 300;

    std::vector<std::unique_ptr<QProcess>> m_ranks;
    qint64 m_pgid = 0;
    int m_failedRank = -1;
    QString m_cause;
    bool m_done = false;
    bool m_reaping = false;
};

} // namespace loom::launcher
