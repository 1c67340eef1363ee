// Shared by the Slurm tests (tst_launcher_slurm, tst_launcher_slurm2, tst_workbench_slurm): the cluster that
// slurm-cluster.sh starts in a folder (one node, or two in network namespaces), its clients' environment and
// wrapper, and whether its queue is empty.
#pragma once

#include "LoomTestHelpers.h"

#include <QDir>
#include <QProcess>
#include <QProcessEnvironment>
#include <QString>
#include <QStringList>

namespace loomtest {

class SlurmTestCluster {
public:
    enum class Up { Started, NotHere, Failed };

    // Starts munged, slurmctld and slurmd under `dir` with `cpus` CPUs a node (two nodes: `nodes` 2, each in
    // its network namespace); *message holds why when not Started.
    Up up(const QString& dir, int cpus, QString* message, int nodes = 1)
    {
        m_dir = dir;
        QDir().mkpath(dir);
        QProcess up;
        up.start(QStringLiteral(LOOM_SOURCE_DIR "/tests/launcher/slurm-cluster.sh"),
            { nodes == 2 ? QStringLiteral("up2") : QStringLiteral("up"), dir, QString::number(cpus) });
        up.waitForFinished(60000);
        const QString out = QString::fromUtf8(up.readAllStandardOutput() + up.readAllStandardError()).trimmed();
        m_started = true;
        *message = out;
        if (up.exitCode() == 3)
            return Up::NotHere;
        if (up.exitCode() != 0)
            return Up::Failed;
        for (const QString& line : out.split(QLatin1Char('\n'))) {
            if (line.startsWith(QLatin1String("SLURM_CONF=")))
                m_conf = line.section(QLatin1Char('='), 1);
            if (line.startsWith(QLatin1String("NETNS=")))
                m_wrapper = { QStringLiteral("nsenter"), QStringLiteral("--net=") + line.section(QLatin1Char('='), 1) };
        }
        return QFile::exists(m_conf) ? Up::Started : Up::Failed;
    }

    // Cancels what is left in the test's partition and stops the daemons (safe to repeat).
    void down()
    {
        if (!m_started)
            return;
        if (!m_conf.isEmpty())
            run(QStringLiteral("scancel"), { QStringLiteral("--partition=loomtest") });
        QProcess down;
        down.start(
            QStringLiteral(LOOM_SOURCE_DIR "/tests/launcher/slurm-cluster.sh"), { QStringLiteral("down"), m_dir });
        down.waitForFinished(60000);
        m_started = false;
    }

    QString conf() const { return m_conf; }
    // What a client runs under: nothing for one node; nsenter into the first node's network namespace for two.
    QStringList wrapper() const { return m_wrapper; }
    QProcessEnvironment env() const
    {
        QProcessEnvironment e;
        e.insert(QStringLiteral("SLURM_CONF"), m_conf);
        return e;
    }

    // A Slurm client (squeue, scancel, sbatch) against this cluster; its merged output.
    QString run(const QString& program, const QStringList& args) const
    {
        QProcess p;
        QProcessEnvironment e = QProcessEnvironment::systemEnvironment();
        e.insert(env());
        p.setProcessEnvironment(e);
        p.setProcessChannelMode(QProcess::MergedChannels);
        const QStringList all = m_wrapper + QStringList { program } + args;
        p.start(all.first(), all.mid(1));
        p.waitForFinished(30000);
        return QString::fromUtf8(p.readAll());
    }

    bool queueEmpty() const { return run(QStringLiteral("squeue"), { QStringLiteral("-h") }).trimmed().isEmpty(); }

private:
    QString m_dir, m_conf;
    QStringList m_wrapper;
    bool m_started = false;
};

} // namespace loomtest
