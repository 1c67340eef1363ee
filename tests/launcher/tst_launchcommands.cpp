// The commands and scripts the launcher generates, checked without starting a job: shell quoting round-trips
// through a real sh, the head node's script (run here by sh, with echo in mpirun's place) writes the layout
// and hostfile and passes every word through unchanged, the hostfile, and the exact sbatch script.
#include "engine/plan/ClusterSpec.h"
#include "launcher/LaunchCommands.h"
#include "launcher/RunController.h"

#include <nlohmann/json.hpp>

#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QProcess>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QTest>

#include <unistd.h>

using namespace loom::launcher;

namespace {

const QString kEvil = QStringLiteral("$(touch pwned); `touch pwned2` 'quoted' \"double\" \\ * ~ \n newline");

LaunchRequest request(const QString& method)
{
    LaunchRequest r;
    r.layout.name = kEvil.toStdString();
    r.layout.nodes = 2;
    r.layout.parallel.tp = 2;
    r.layout.parallel.pp = 1;
    r.layout.parallel.dp = 4;
    r.layout.cluster.name = "lab";
    r.layout.cluster.hosts = { "node01", "node02", "node03" };
    r.layout.cluster.launch.method = method.toStdString();
    r.steps = 7;
    r.engine = QStringLiteral("/opt/loom/bin/loom-train");
    r.workDir = QStringLiteral("/shared/runs/20250101-000000-000");
    return r;
}

QStringList runSh(const QString& script, const QString& cwd, int* exitCode = nullptr)
{
    QProcess p;
    p.setWorkingDirectory(cwd);
    p.start(QStringLiteral("sh"), { QStringLiteral("-c"), script });
    p.closeWriteChannel();
    p.waitForFinished(10000);
    if (exitCode)
        *exitCode = p.exitCode();
    QStringList words = QString::fromUtf8(p.readAllStandardOutput()).split(QChar(0));
    words.removeLast(); // after the last NUL
    return words;
}

} // namespace

class TestLaunchCommands : public QObject {
    Q_OBJECT
private slots:
    void launchSettingsInTheProfile()
    {
        nlohmann::json j = nlohmann::json::parse(R"({"name": "lab", "nodes": 2, "devices_per_node": 2,
            "device": {"name": "d", "memory_gb": 1, "memory_bandwidth_gbs": 1, "peak_tflops": {"fp32": 1, "fp16": 1, "bf16": 1}},
            "intra_node": {"link": "shm", "bandwidth_gbs": 1, "latency_us": 1},
            "inter_node": {"link": "ethernet", "bandwidth_gbs": 1, "latency_us": 1}, "hosts": ["a", "b"],
            "launch": {"method": "ssh", "head_node": "me@a", "ssh_options": ["-p", "2222"], "engine": "/opt/loom-train",
                       "mpirun_options": ["--mca", "btl", "tcp,self"], "run_dir": "runs", "partition": "gpu",
                       "time_limit": "00:10:00", "gpus_per_node": 4, "sbatch_options": ["--account", "x"]}})");
        loom::plan::Diagnostics d;
        const auto c = loom::plan::parseClusterSpec(j, "cluster", d);
        QVERIFY2(c && !d.hasErrors(), d.format().c_str());
        QCOMPARE(c->launch.method, std::string("ssh"));
        QCOMPARE(c->launch.headNode, std::string("me@a"));
        QCOMPARE(c->launch.sshOptions, (std::vector<std::string> { "-p", "2222" }));
        QCOMPARE(c->launch.mpirun, std::string("mpirun"));
        QCOMPARE(c->launch.gpusPerNode, std::int64_t(4));
        // written back and read again: the same
        loom::plan::Diagnostics d2;
        const auto again
            = loom::plan::parseClusterSpec(nlohmann::json::parse(loom::plan::toJson(*c).dump()), "cluster", d2);
        QVERIFY(again && *again == *c);

        j["launch"] = { { "method", "ssh" }, { "head_node", "-oProxyCommand=x" }, { "ssh_options", "-p 22" } };
        loom::plan::Diagnostics bad;
        QVERIFY(!loom::plan::parseClusterSpec(j, "cluster", bad));
        const std::string text = bad.format();
        QVERIFY2(text.find("cluster.launch.head_node=\"-oProxyCommand=x\" cannot start with '-'") != std::string::npos,
            text.c_str());
        QVERIFY2(text.find("cluster.launch.ssh_options") != std::string::npos, text.c_str());
        j["launch"] = { { "method", "pbs" } };
        loom::plan::Diagnostics unknown;
        QVERIFY(!loom::plan::parseClusterSpec(j, "cluster", unknown));
        QVERIFY2(unknown.format().find("local") != std::string::npos, unknown.format().c_str());
    }

    void quotingRoundTrips()
    {
        QTemporaryDir dir;
        const QStringList words { kEvil, QString(), QStringLiteral("'"), QStringLiteral("plain-word_1.2"),
            QStringLiteral("-n"), QStringLiteral("tab\there"), QStringLiteral("ünïcode") };
        QCOMPARE(runSh(QStringLiteral("printf '%s\\0' ") + shellJoin(words), dir.path()), words);
        QVERIFY(QDir(dir.path()).entryList(QDir::Files).isEmpty()); // nothing was run
        QCOMPARE(shellQuote(QStringLiteral("node01")), QStringLiteral("node01"));
        QCOMPARE(shellQuote(QStringLiteral("it's")), QStringLiteral("'it'\\''s'"));
    }

    void hostfileFromProfile()
    {
        LaunchRequest r = request(QStringLiteral("ssh"));
        QString error;
        QCOMPARE(hostfile(r.layout, &error), QStringLiteral("node01 slots=4\nnode02 slots=4\n"));
        r.layout.cluster.hosts = { "node01" };
        QVERIFY(hostfile(r.layout, &error).isEmpty());
        QCOMPARE(error,
            QStringLiteral(
                "the layout asks for 2 nodes but cluster lab lists 1 hosts; add them to the profile's \"hosts\""));
        r.layout.cluster.hosts = { "node01", "node02 slots=99" };
        QVERIFY(hostfile(r.layout, &error).isEmpty());
        QVERIFY2(
            error.startsWith(QStringLiteral("hosts[1]=\"node02 slots=99\" is not a host name")), qPrintable(error));
    }

    // LOOM_COMM_TIMEOUT_S where Loom runs reaches every rank over ssh (mpirun -x in the head node's script,
    // without the profile naming it in mpirun_options); a value mpirun would split or a shell would read is
    // not passed; without it the script has no -x.
    void commTimeoutReachesTheRanksOverSsh_data()
    {
        QTest::addColumn<QByteArray>("value");
        QTest::addColumn<bool>("passed");
        QTest::newRow("seconds") << QByteArray("7") << true;
        QTest::newRow("unset") << QByteArray() << false;
        QTest::newRow("two words") << QByteArray("7 -x PATH") << false;
        QTest::newRow("shell") << QByteArray("$(touch pwned)") << false;
    }
    void commTimeoutReachesTheRanksOverSsh()
    {
        QFETCH(QByteArray, value);
        QFETCH(bool, passed);
        const QByteArray before = qgetenv("LOOM_COMM_TIMEOUT_S");
        if (value.isEmpty())
            qunsetenv("LOOM_COMM_TIMEOUT_S");
        else
            qputenv("LOOM_COMM_TIMEOUT_S", value);
        QString error;
        const QString script
            = sshCommand(request(QStringLiteral("ssh")), QStringLiteral("{}"), QStringLiteral("run-1"), &error)
                  .args.last();
        if (before.isEmpty())
            qunsetenv("LOOM_COMM_TIMEOUT_S");
        else
            qputenv("LOOM_COMM_TIMEOUT_S", before);
        QVERIFY2(error.isEmpty(), qPrintable(error));
        QCOMPARE(script.contains(QLatin1String("LOOM_COMM_TIMEOUT_S")), passed);
        if (passed)
            QVERIFY2(script.contains(QLatin1String("-x LOOM_COMM_TIMEOUT_S=7 ")), qPrintable(script));
    }

    void sshCommandAndHeadScript()
    {
        QTemporaryDir home;
        LaunchRequest r = request(QStringLiteral("ssh"));
        r.layout.cluster.launch.headNode = "me@login";
        r.layout.cluster.launch.sshOptions = { "-p", "2222" };
        r.layout.cluster.launch.mpirun = "echo"; // in mpirun's place: prints what it was given
        r.layout.cluster.launch.mpirunOptions = { kEvil.toStdString() };
        r.layout.cluster.launch.runDir = (home.path() + QStringLiteral("/runs $(touch pwned)")).toStdString();
        r.layout.cluster.launch.engine = "/cluster/bin/loom-train";
        r.checkpointDir = QStringLiteral("ckpt dir");
        r.checkpointEvery = 2;
        QString error;
        const Command c
            = sshCommand(r, QStringLiteral("{\"name\": \"%1\"}").arg(kEvil), QStringLiteral("run-1"), &error);
        QVERIFY2(error.isEmpty(), qPrintable(error));
        QCOMPARE(c.program, QStringLiteral("ssh"));
        const QStringList before = c.args.mid(0, c.args.indexOf(QStringLiteral("--")));
        QVERIFY(before.contains(QStringLiteral("BatchMode=yes")) && before.contains(QStringLiteral("2222")));
        QCOMPARE(c.args.at(c.args.indexOf(QStringLiteral("--")) + 1), QStringLiteral("me@login"));
        QCOMPARE(c.args.size(), c.args.indexOf(QStringLiteral("--")) + 3); // host, then the one remote command
        // What sshd would hand to the remote shell, run here by sh: 'echo' stands for mpirun and prints its words.
        int exitCode = -1;
        const QString remote = c.args.last();
        QProcess p;
        p.setWorkingDirectory(home.path());
        p.start(QStringLiteral("sh"), { QStringLiteral("-c"), remote });
        // standard input stays open (Loom is there), so the watcher waits and is stopped when echo is done
        QVERIFY(p.waitForFinished(10000));
        exitCode = p.exitCode();
        QCOMPARE(exitCode, 0);
        const QString runDir = home.path() + QStringLiteral("/runs $(touch pwned)/run-1");
        const QString printed = QString::fromUtf8(p.readAllStandardOutput()).trimmed();
        // mpirun's own ssh to the other hosts first (Loom's settings and the profile's options), then the
        // profile's mpirun options, each word unchanged.
        QVERIFY2(printed.startsWith(QStringLiteral("--mca plm_rsh_args -o BatchMode=yes -o ConnectTimeout=10 -p 2222 ")
                     + kEvil.left(10)),
            qPrintable(printed));
        QVERIFY2(printed.contains(QStringLiteral("--hostfile %1/hostfile").arg(runDir)), qPrintable(printed));
        QVERIFY2(printed.endsWith(QStringLiteral("/cluster/bin/loom-train --layout %1/layout.json --steps 7 --stream "
                                                 "--checkpoint-dir ckpt dir --checkpoint-every 2 --new-checkpoint-dir")
                                      .arg(runDir)),
            qPrintable(printed));
        // Open MPI would hand this run folder's name to the other hosts' shells: no rank logs there.
        QVERIFY2(!printed.contains(QStringLiteral("--output-filename")), qPrintable(printed));
        QFile layout(runDir + QStringLiteral("/layout.json"));
        QVERIFY(layout.open(QIODevice::ReadOnly));
        QCOMPARE(QString::fromUtf8(layout.readAll()), QStringLiteral("{\"name\": \"%1\"}").arg(kEvil));
        QFile hosts(runDir + QStringLiteral("/hostfile"));
        QVERIFY(hosts.open(QIODevice::ReadOnly));
        QCOMPARE(hosts.readAll(), QByteArray("node01 slots=4\nnode02 slots=4\n"));
        for (const QString& where : { home.path(), runDir, home.path() + QStringLiteral("/runs $(touch pwned)") })
            QVERIFY(
                !QFile::exists(where + QStringLiteral("/pwned")) && !QFile::exists(where + QStringLiteral("/pwned2")));

        r.layout.cluster.launch.headNode = "-oProxyCommand=touch pwned";
        QVERIFY(sshCommand(r, QStringLiteral("{}"), QStringLiteral("run-1"), &error).args.isEmpty());
        QVERIFY2(error.contains(QStringLiteral("cannot start with '-'")), qPrintable(error));
    }

    void headScriptReportsAFolderItCannotWrite()
    {
        LaunchRequest r = request(QStringLiteral("ssh"));
        r.layout.cluster.launch.runDir = "/proc/loom-cannot-write-here";
        r.layout.cluster.launch.mpirun = "true";
        QString error;
        const Command c = sshCommand(r, QStringLiteral("{}"), QStringLiteral("run-1"), &error);
        QProcess p;
        p.start(QStringLiteral("sh"), { QStringLiteral("-c"), c.args.last() });
        p.closeWriteChannel();
        QVERIFY(p.waitForFinished(10000));
        QCOMPARE(p.exitCode(), 97);
        QVERIFY(p.readAllStandardError().contains(
            "loom: cannot write the run folder /proc/loom-cannot-write-here/run-1 on "));
    }

    void sbatchScriptText()
    {
        LaunchRequest r = request(QStringLiteral("slurm"));
        r.layout.cluster.launch.gpusPerNode = 8;
        r.layout.cluster.launch.timeLimit = "01:30:00";
        r.layout.cluster.launch.partition = "gpu";
        r.layout.cluster.launch.mpirun = "/usr/bin/mpirun";
        r.layout.cluster.launch.mpirunOptions = { "--mca", "btl", "^openib" };
        const QString layoutFile = QStringLiteral("/shared/runs/$(touch pwned)/layout.json");
        const QString root = ::geteuid() == 0 ? QStringLiteral("--allow-run-as-root ") : QString();
        QCOMPARE(sbatchScript(r, layoutFile),
            QStringLiteral(
                "#!/bin/sh\n"
                "# Written by Loom for one run; every word below is quoted, so names and paths stay names.\n"
                "#SBATCH --nodes=2\n"
                "#SBATCH --ntasks-per-node=4\n"
                "#SBATCH --gpus-per-node=8\n"
                "#SBATCH --time=01:30:00\n"
                "#SBATCH --partition=gpu\n"
                "exec /usr/bin/mpirun %1--mca btl '^openib' --output-filename /shared/runs/20250101-000000-000/logs "
                "-np 8 --bind-to none "
                "/opt/loom/bin/loom-train --layout '/shared/runs/$(touch pwned)/layout.json' --steps 7 --stream\n")
                .arg(root));
        // Without GPUs, time limit or partition those lines are left out.
        r.layout.cluster.launch = {};
        r.layout.cluster.launch.method = "slurm";
        const QString plain = sbatchScript(r, layoutFile);
        QVERIFY(!plain.contains(QLatin1String("--gpus-per-node")) && !plain.contains(QLatin1String("--time"))
            && !plain.contains(QLatin1String("--partition")));

        const Command c
            = sbatchCommand(r, QStringLiteral("/shared/runs/x/job.sbatch"), QStringLiteral("/shared/runs/x/job.out"));
        QCOMPARE(c.program, QStringLiteral("sbatch"));
        QCOMPARE(c.args,
            (QStringList { QStringLiteral("--parsable"), QStringLiteral("--job-name"),
                QStringLiteral("loom-__touch_pwned____touch_pwned2___quoted___double__________new"),
                QStringLiteral("--output"), QStringLiteral("/shared/runs/x/job.out"), QStringLiteral("--chdir"),
                r.workDir, QStringLiteral("/shared/runs/x/job.sbatch") }));
    }

    // Only Slurm's own syntax reaches the #SBATCH header: one word more there is one sbatch option more
    // (--export=ALL,OMPI_MCA_…=cmd ran a command; --error=FILE truncated a file).
    void slurmHeaderValues_data()
    {
        QTest::addColumn<QString>("partition");
        QTest::addColumn<QString>("timeLimit");
        QTest::addColumn<bool>("valid");
        QTest::newRow("minutes") << "gpu"
                                 << "90" << true;
        QTest::newRow("MM:SS") << "gpu"
                               << "90:30" << true;
        QTest::newRow("HH:MM:SS") << "gpu"
                                  << "01:30:00" << true;
        QTest::newRow("D-HH") << "gpu"
                              << "2-12" << true;
        QTest::newRow("D-HH:MM") << "gpu"
                                 << "2-12:30" << true;
        QTest::newRow("D-HH:MM:SS") << "gpu"
                                    << "2-12:30:05" << true;
        QTest::newRow("UNLIMITED") << "a100_x.2-b"
                                   << "UNLIMITED" << true;
        QTest::newRow("infinite") << "gpu,debug"
                                  << "infinite" << true;
        QTest::newRow("partition --export") << "gpu --export=ALL,OMPI_MCA_orte_fork_agent=/tmp/x"
                                            << "10" << false;
        QTest::newRow("partition =option") << "gpu=--error=/etc/passwd"
                                           << "10" << false;
        QTest::newRow("partition tab") << "gpu\t--wrap=id"
                                       << "10" << false;
        QTest::newRow("partition option") << "--export=ALL,PATH=/tmp/evil"
                                          << "10" << false;
        QTest::newRow("partition empty in list") << "gpu,,debug"
                                                 << "10" << false;
        QTest::newRow("partition non-ASCII") << "g\u0440u"
                                             << "10" << false;
        QTest::newRow("time --error") << "gpu"
                                      << "10 --error=/tmp/clobbered" << false;
        QTest::newRow("time newline") << "gpu"
                                      << "10\n#SBATCH --wrap=id" << false;
        QTest::newRow("time four fields") << "gpu"
                                          << "1:2:3:4" << false;
        QTest::newRow("time two dashes") << "gpu"
                                         << "1-2-3" << false;
        QTest::newRow("time negative") << "gpu"
                                       << "-5" << false;
        QTest::newRow("time words") << "gpu"
                                    << "forever" << false;
        QTest::newRow("time huge") << "gpu"
                                   << "1234567890123" << false;
        QTest::newRow("time empty field") << "gpu"
                                          << "1::3" << false;
    }
    void slurmHeaderValues()
    {
        QFETCH(QString, partition);
        QFETCH(QString, timeLimit);
        QFETCH(bool, valid);
        QCOMPARE(loom::plan::isSlurmPartition(partition.toStdString())
                && loom::plan::isSlurmTimeLimit(timeLimit.toStdString()),
            valid);
        LaunchRequest r = request(QStringLiteral("slurm"));
        r.layout.cluster.launch.partition = partition.toStdString();
        r.layout.cluster.launch.timeLimit = timeLimit.toStdString();
        const QString refusal = launchRefusal(r);
        QCOMPARE(refusal.isEmpty(), valid);
        // The header never carries more than the options Loom writes, each one word.
        const QString script = sbatchScript(r, QStringLiteral("/shared/layout.json"));
        for (const QString& line : script.split(QLatin1Char('\n')))
            if (line.startsWith(QLatin1String("#SBATCH")))
                QVERIFY2(line.count(QLatin1Char(' ')) == 1 && !line.contains(QLatin1Char('\t'))
                        && QRegularExpression(
                            QStringLiteral("^#SBATCH --(nodes|ntasks-per-node|time|partition)=[^ ]+$"))
                               .match(line)
                               .hasMatch(),
                    qPrintable(line));
        QCOMPARE(script.contains(QLatin1String("--partition=")), loom::plan::isSlurmPartition(partition.toStdString()));
        // The layout parser refuses the same values (validate and run), naming the field.
        nlohmann::json launch = { { "method", "slurm" }, { "partition", partition.toStdString() },
            { "time_limit", timeLimit.toStdString() } };
        nlohmann::json cluster = { { "loom_profile", 1 }, { "kind", "cluster" }, { "name", "lab" }, { "nodes", 1 },
            { "devices_per_node", 1 },
            { "device",
                { { "name", "CPU" }, { "memory_gb", 2 }, { "memory_bandwidth_gbs", 10 },
                    { "peak_tflops", { { "fp32", 1 }, { "fp16", 1 }, { "bf16", 1 } } } } },
            { "intra_node", { { "link", "shm" }, { "bandwidth_gbs", 5 }, { "latency_us", 1 } } },
            { "launch", launch } };
        loom::plan::Diagnostics d;
        const auto parsed = loom::plan::parseClusterSpec(cluster, "cluster", d);
        QCOMPARE(parsed.has_value(), valid);
        if (!valid)
            QVERIFY2(d.hasErrorAt(loom::plan::isSlurmPartition(partition.toStdString()) ? "cluster.launch.time_limit"
                                                                                        : "cluster.launch.partition"),
                d.format().c_str());
    }

    // The head node's script stops mpirun with SIGUSR1 first (mpirun passes it to every rank, which finishes
    // its step, saves and stops): on "cancel", when ssh's input ends (Loom gone), and when no "alive" came
    // for the watchdog's time (the link is down while sshd has not noticed); "alive" lines keep it running.
    void headScriptStopsMpirunWithUsr1_data()
    {
        QTest::addColumn<QString>("how");
        QTest::newRow("cancel line") << "cancel";
        QTest::newRow("input closed") << "eof";
        QTest::newRow("no word from Loom") << "silence";
        QTest::newRow("alive lines, then cancel") << "alive";
    }
    void headScriptStopsMpirunWithUsr1()
    {
        QFETCH(QString, how);
        QTemporaryDir dir;
        const QString log = dir.filePath(QStringLiteral("signals"));
        const QString fake = dir.filePath(QStringLiteral("mpirun"));
        { // in mpirun's place: notes what reached it and ends as mpirun does once its ranks stopped
            QFile f(fake);
            QVERIFY(f.open(QIODevice::WriteOnly));
            f.write(QStringLiteral("#!/bin/sh\ntrap 'echo USR1 >> \"%1\"; exit 0' USR1\n"
                                   "trap 'echo TERM >> \"%1\"; exit 1' TERM\necho started >> \"%1\"\n"
                                   "while :; do sleep 0.1; done\n")
                        .arg(log)
                        .toUtf8());
            f.setPermissions(QFile::ReadOwner | QFile::WriteOwner | QFile::ExeOwner);
        }
        LaunchRequest r = request(QStringLiteral("ssh"));
        r.layout.cluster.launch.mpirun = fake.toStdString();
        r.layout.cluster.launch.runDir = dir.filePath(QStringLiteral("runs")).toStdString();
        r.progressTimeoutSeconds = 8;
        QCOMPARE(sshWatchdogSeconds(r), 4);
        QCOMPARE(sshHeartbeatSeconds(r), 1);
        QString error;
        const Command c = sshCommand(r, QStringLiteral("{}"), QStringLiteral("run-1"), &error);
        QVERIFY2(error.isEmpty(), qPrintable(error));
        QProcess p;
        p.start(QStringLiteral("sh"), { QStringLiteral("-c"), c.args.last() });
        const auto logText = [&log] {
            QFile f(log);
            return f.open(QIODevice::ReadOnly) ? QString::fromUtf8(f.readAll()) : QString();
        };
        QElapsedTimer t;
        t.start();
        while (!logText().contains(QLatin1String("started")) && t.elapsed() < 20000)
            p.waitForFinished(50);
        QCOMPARE(logText(), QStringLiteral("started\n"));
        if (how == QLatin1String("alive")) {
            // Twice the watchdog's time with a word each second: still running.
            for (t.restart(); t.elapsed() < 8000;) {
                p.write("alive\n");
                QVERIFY(!p.waitForFinished(1000));
            }
            QCOMPARE(logText(), QStringLiteral("started\n"));
        }
        if (how == QLatin1String("cancel") || how == QLatin1String("alive"))
            p.write("cancel\n");
        else if (how == QLatin1String("eof"))
            p.closeWriteChannel();
        QVERIFY(p.waitForFinished(30000));
        QCOMPARE(logText(), QStringLiteral("started\nUSR1\n"));
        const QString err = QString::fromUtf8(p.readAllStandardError());
        QCOMPARE(err.contains(QLatin1String("no word from Loom for 4 s")), how == QLatin1String("silence"));
        QCOMPARE(p.exitCode(), 0);
    }

    // Without --resume a run refuses a checkpoint folder in use (the engine, which sees the folder wherever it
    // is, checks); with it, it continues from the folder's latest.
    void resumeOrANewCheckpointFolder_data()
    {
        QTest::addColumn<QString>("method");
        QTest::addColumn<bool>("resume");
        for (const char* m : { "local", "ssh", "slurm" }) {
            QTest::addRow("%s, new folder", m) << QString::fromLatin1(m) << false;
            QTest::addRow("%s, --resume", m) << QString::fromLatin1(m) << true;
        }
    }
    void resumeOrANewCheckpointFolder()
    {
        QFETCH(QString, method);
        QFETCH(bool, resume);
        LaunchRequest r = request(method);
        r.checkpointDir = QStringLiteral("/shared/ckpt");
        r.resume = resume;
        QString error;
        QStringList commands; // every command line the method may run
        if (method == QLatin1String("local"))
            commands << localCommand(r, QStringLiteral("l.json")).args.join(QLatin1Char(' '));
        else if (method == QLatin1String("ssh"))
            commands << sshCommand(r, QStringLiteral("{}"), QStringLiteral("run-1"), &error).args.last();
        else
            commands << srunCommand(r, QStringLiteral("l.json")).args.join(QLatin1Char(' '))
                     << sbatchScript(r, QStringLiteral("l.json"));
        if (method == QLatin1String("ssh")) { // a plain run folder: each rank's output is kept there
            QVERIFY2(commands.first().contains(QLatin1String(" --output-filename loom-runs/run-1/logs -np 8 ")),
                qPrintable(commands.first()));
            // ssh options a shell would read stay out of what mpirun hands to the other hosts' shells.
            r.layout.cluster.launch.sshOptions = { "-i", "/keys/$(touch pwned)", "-p", "2222" };
            const QString script = sshCommand(r, QStringLiteral("{}"), QStringLiteral("run-1"), &error).args.last();
            QVERIFY2(
                script.contains(QLatin1String("'-o BatchMode=yes -o ConnectTimeout=10 -p 2222'")), qPrintable(script));
        }
        for (const QString& all : commands) {
            QVERIFY2(all.contains(QLatin1String("--checkpoint-dir /shared/ckpt ")
                         + (resume ? QLatin1String("--resume") : QLatin1String("--new-checkpoint-dir"))),
                qPrintable(all));
            QVERIFY(!all.contains(resume ? QLatin1String("--new-checkpoint-dir") : QLatin1String("--resume")));
        }
        r.checkpointDir.clear();
        QVERIFY(!engineArgs(r, r.engine, QStringLiteral("l.json")).contains(QStringLiteral("--resume")));
    }

    // Start-up failures in one sentence naming the host (and the rank where Open MPI says it), from Open MPI
    // 4.1's own messages with their line breaks.
    void startFailuresNameTheHost_data()
    {
        QTest::addColumn<QString>("log");
        QTest::addColumn<QString>("cause");
        QTest::newRow("missing engine")
            << "-----\nmpirun was unable to launch the specified application as it could not access\nor execute an "
               "executable:\n\nExecutable: /opt/loom/bin/loom-train\nNode: hostb\n\nwhile attempting to start process "
               "rank 2.\n-----\n"
            << "mpirun could not start the engine /opt/loom/bin/loom-train on host hostb (rank 2): it is missing or "
               "not "
               "executable; install loom-train at that path there (the profile's launch.engine names it)";
        QTest::newRow("engine for another machine")
            << "Open MPI tried to fork a new process via the \"execve\" system call but\nfailed.  Open MPI checks many "
               "things\n\n  Local host:        hosta\n  Working dir:       /tmp\n  Application name:  /opt/lt\n"
               "  Error:             Exec format error\n-----\nmpirun was unable to start\nError code: 1\n"
            << "mpirun could not start the engine /opt/lt on host hosta: Exec format error; install loom-train at that "
               "path there (the profile's launch.engine names it)";
        QTest::newRow("silent second host")
            << "ssh: connect to host 10.234.5.9 port 22: Connection timed out\n-----\nORTE was unable to reliably "
               "start one or more daemons.\n"
            << "the head node could not reach host 10.234.5.9 by ssh (Connection timed out); check that it reaches "
               "every host by ssh without a password";
        QTest::newRow("key refused by a host")
            << "root@hostb: Permission denied (publickey).\nORTE was unable to reliably start one or more daemons.\n"
            << "host root@hostb refused the head node's ssh key (publickey); check that the head node reaches every "
               "host by ssh without a password";
    }
    void startFailuresNameTheHost()
    {
        QFETCH(QString, log);
        QFETCH(QString, cause);
        QCOMPARE(RunController::causeFromLog(log), cause);
    }

    void srunInsideAnAllocation()
    {
        LaunchRequest r = request(QStringLiteral("slurm"));
        r.layout.cluster.launch.gpusPerNode = 4;
        const Command c = srunCommand(r, QStringLiteral("/shared/x/layout.json"));
        QCOMPARE(c.program, QStringLiteral("srun"));
        QCOMPARE(c.args,
            (QStringList { QStringLiteral("--mpi=pmix"), QStringLiteral("--kill-on-bad-exit=1"),
                QStringLiteral("--nodes=2"), QStringLiteral("--ntasks-per-node=4"), QStringLiteral("--export=ALL"),
                QStringLiteral("--gpus-per-node=4"),
                QStringLiteral("--error=/shared/runs/20250101-000000-000/logs/rank.%t.stderr"),
                QStringLiteral("/opt/loom/bin/loom-train"), QStringLiteral("--layout"),
                QStringLiteral("/shared/x/layout.json"), QStringLiteral("--steps"), QStringLiteral("7"),
                QStringLiteral("--stream") }));
    }

    void ranksStartedWithoutMpirun()
    {
        // A gloo layout on this machine: one engine per rank, told who it is through the environment.
        LaunchRequest r = request(QStringLiteral("local"));
        r.layout.nodes = 1;
        r.checkpointDir = QStringLiteral("/tmp/ck pt");
        const QString rendezvous = r.workDir + QStringLiteral("/rendezvous");
        const auto ranks = localRankCommands(r, QStringLiteral("/runs/x/layout.json"), rendezvous);
        QCOMPARE(int(ranks.size()), 8);
        for (int k = 0; k < 8; ++k) {
            const RankCommand& c = ranks[static_cast<std::size_t>(k)];
            QCOMPARE(c.rank, k);
            QCOMPARE(c.command.program, r.engine); // the engine itself: no mpirun, no shell
            QCOMPARE(c.command.args,
                (QStringList { QStringLiteral("--layout"), QStringLiteral("/runs/x/layout.json"),
                    QStringLiteral("--steps"), QStringLiteral("7"), QStringLiteral("--stream"),
                    QStringLiteral("--checkpoint-dir"), QStringLiteral("/tmp/ck pt"),
                    QStringLiteral("--new-checkpoint-dir") }));
            QCOMPARE(c.environment,
                (QStringList { QStringLiteral("LOOM_RANK=%1").arg(k), QStringLiteral("LOOM_WORLD_SIZE=8"),
                    QStringLiteral("LOOM_LOCAL_RANK=%1").arg(k), QStringLiteral("LOOM_RENDEZVOUS=") + rendezvous,
                    QStringLiteral("OPENBLAS_NUM_THREADS=1") }));
        }
        // Only gloo on a local cluster: an MPI layout (the default backend) keeps mpirun, and ssh and Slurm
        // clusters use their own launch method.
        QVERIFY(!startsRanksItself(r.layout));
        r.layout.comm.backend = loom::plan::CommBackend::Gloo;
        QVERIFY(startsRanksItself(r.layout));
        for (const QString& method : { QStringLiteral("ssh"), QStringLiteral("slurm") }) {
            LaunchRequest other = request(method);
            other.layout.comm.backend = loom::plan::CommBackend::Gloo;
            QVERIFY(!startsRanksItself(other.layout));
        }
    }
};

QTEST_GUILESS_MAIN(TestLaunchCommands)
#include "tst_launchcommands.moc"
