// Shared by the launcher tests: running the loom command line against a test's own store, and the JSON of its
// last run.
#pragma once

#include <QElapsedTimer>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QString>
#include <QStringList>
#include <QThread>

namespace loomtest {

struct LoomResult {
    int exitCode = -1;
    QString output;
};

// Runs LOOM_EXE with `args` (optionally under `wrapper`, e.g. {"ip", "netns", "exec", NS}) and LOOM_DB=db.
inline LoomResult loom(const QString& db, const QStringList& args, const QStringList& wrapper = {},
    const QProcessEnvironment& extra = {}, int timeoutMs = 180000)
{
    QProcess p;
    QProcessEnvironment e = QProcessEnvironment::systemEnvironment();
    e.insert(QStringLiteral("LOOM_DB"), db);
    e.insert(extra);
    p.setProcessEnvironment(e);
    p.setProcessChannelMode(QProcess::MergedChannels);
    const QStringList all = wrapper + QStringList { QStringLiteral(LOOM_EXE) } + args;
    p.start(all.first(), all.mid(1));
    if (!p.waitForFinished(timeoutMs)) {
        p.kill();
        p.waitForFinished(5000);
    }
    return { p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1, QString::fromUtf8(p.readAll()) };
}

// Reads `p`'s output into `seen` until it holds `until`, `p` ends or `timeoutMs` pass; whether it holds it.
inline bool readUntil(QProcess& p, const QByteArray& until, QByteArray& seen, int timeoutMs = 60000)
{
    QElapsedTimer t;
    t.start();
    while (t.elapsed() < timeoutMs && !seen.contains(until) && p.state() != QProcess::NotRunning) {
        p.waitForReadyRead(100);
        seen += p.readAll();
    }
    seen += p.readAll();
    return seen.contains(until);
}

// `loom run ARGS` in the background (under `wrapper` when given) with LOOM_DB=db, `extra` added to the
// environment and `removed` taken out of it, read until its output shows `until` (readUntil).
inline bool startLoomUntil(QProcess& p, const QString& db, const QStringList& args, const QByteArray& until,
    QByteArray& seen, const QStringList& wrapper = {}, const QProcessEnvironment& extra = {},
    const QStringList& removed = {})
{
    QProcessEnvironment e = QProcessEnvironment::systemEnvironment();
    e.insert(QStringLiteral("LOOM_DB"), db);
    e.insert(extra);
    for (const QString& name : removed)
        e.remove(name);
    p.setProcessEnvironment(e);
    p.setProcessChannelMode(QProcess::MergedChannels);
    const QStringList all = wrapper + QStringList { QStringLiteral(LOOM_EXE), QStringLiteral("run") } + args;
    p.start(all.first(), all.mid(1));
    return readUntil(p, until, seen);
}

// Polls `condition` every 200 ms until it holds or `timeoutMs` pass; whether it held.
template <class Condition> bool waitFor(Condition condition, int timeoutMs)
{
    QElapsedTimer t;
    t.start();
    while (!condition()) {
        if (t.elapsed() > timeoutMs)
            return false;
        QThread::msleep(200);
    }
    return true;
}

inline QJsonObject lastRun(const QString& db)
{
    const LoomResult r = loom(db, { QStringLiteral("runs"), QStringLiteral("list"), QStringLiteral("--json") });
    const QJsonArray runs = QJsonDocument::fromJson(r.output.toUtf8()).array();
    return runs.isEmpty() ? QJsonObject {} : runs.last().toObject();
}

inline bool writeFile(const QString& path, const QByteArray& text)
{
    QFile f(path);
    return f.open(QIODevice::WriteOnly | QIODevice::Truncate) && f.write(text) == text.size();
}

} // namespace loomtest
