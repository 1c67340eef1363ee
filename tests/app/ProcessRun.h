// Running a program to its end for the command-line tests: its exit code, its standard output (as bytes and
// as text) and its standard error.
#pragma once

#include <QByteArray>
#include <QProcess>
#include <QProcessEnvironment>
#include <QString>
#include <QStringList>

namespace loomtest {

struct Run {
    int exitCode = -1; // -1: still running after the timeout (then killed); -2: ended by a signal (a crash)
    QString out, err;
    QByteArray rawOut;
    QString all() const { return out + err; }
};

// Runs `program` in `workDir` under `env`, standard input from `stdinFile` when one is named; what it wrote is
// kept even when it outlived `timeoutMs` and was killed.
inline Run runProcess(const QString& program, const QStringList& args, const QProcessEnvironment& env,
    const QString& workDir, int timeoutMs, const QString& stdinFile = {})
{
    QProcess p;
    p.setProcessEnvironment(env);
    p.setWorkingDirectory(workDir);
    if (!stdinFile.isEmpty())
        p.setStandardInputFile(stdinFile);
    p.start(program, args);
    Run r;
    if (!p.waitForFinished(timeoutMs)) {
        p.kill();
        p.waitForFinished();
    } else {
        r.exitCode = p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -2;
    }
    r.rawOut = p.readAllStandardOutput();
    r.out = QString::fromUtf8(r.rawOut);
    r.err = QString::fromUtf8(p.readAllStandardError());
    return r;
}

} // namespace loomtest
