// Shared by the launcher tests: running the loom command line against a test's own store, and the JSON of its
// last run.
#pragma once

#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QString>
#include <QStringList>

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
