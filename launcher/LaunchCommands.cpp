#include "launcher/LaunchCommands.h"

#include "engine/plan/EngineSupport.h"

#include <QCoreApplication>
#include <QDateTime>
#include <QDir>
#include <QFileInfo>
#include <QRegularExpression>
#include <QStandardPaths>
#include <QThread>

#include <algorithm>

#include <unistd.h>

namespace loom::launcher {

namespace {

// Runs on the head node as `sh -c SCRIPT loom-run DIR LAYOUT_B64 HOSTFILE_B64 GRACE WATCHDOG MPIRUN ARGS...`.
// Its text is fixed: user values only ever arrive as its positional parameters. mpirun runs in the
// background with its own standard input closed (as root, Open MPI's two variables allow it). A reader
// takes ssh's standard input: "alive" marks the run folder's .alive, "cancel" or the input's end (Loom or
// ssh gone) stops the job. A watchdog stops it when no "alive" came for WATCHDOG seconds: with the link
// down, sshd may not notice for hours. Stopping is SIGUSR1 (mpirun passes it to every rank, which finishes
// its step, saves and stops), SIGTERM after the grace period, SIGKILL 2 s later. When the watchdog stops it,
// mpirun cannot flush the ranks' last output into the dead link and would wait for the SIGKILL, so once its
// ranks and its ssh to the other hosts are gone (no live process has it as parent: it cannot reap them) it is
// killed at once; a host without a working `ps -e -o ppid= -o stat=` waits the grace period instead. The loops
// sleep 1 s at a time, so nothing of the script outlives mpirun by more than a second.
const char* kHeadScript
    = "dir=$1; layout=$2; hosts=$3; grace=$4; alive=$5; shift 5\n"
      "mkdir -p -- \"$dir\" && printf %s \"$layout\" | base64 -d > \"$dir/layout.json\" &&"
      " printf %s \"$hosts\" | base64 -d > \"$dir/hostfile\" ||"
      " { echo \"loom: cannot write the run folder $dir on $(hostname)\" >&2; exit 97; }\n"
      "[ \"$(id -u)\" = 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1\n"
      "exec 3<&0\n"
      ": > \"$dir/.alive\"\n"
      "\"$@\" </dev/null 3<&- &\n"
      "pid=$!\n"
      "waitfor() { i=0; while [ $i -lt $1 ] && kill -0 $pid 2>/dev/null; do sleep 1; i=$((i+1)); done; }\n"
      "finish() { kill -TERM $pid 2>/dev/null; waitfor 2; kill -KILL $pid 2>/dev/null; }\n"
      "stop() { kill -USR1 $pid 2>/dev/null; waitfor $grace; finish; }\n"
      "alone() { t=$(ps -e -o ppid= -o stat= 2>/dev/null) && [ -n \"$t\" ] &&"
      " ! printf '%s\\n' \"$t\" | grep -q \"^ *$pid  *[^Z]\"; }\n"
      "lost() { kill -USR1 $pid 2>/dev/null; i=0; while [ $i -lt $grace ] && kill -0 $pid 2>/dev/null && ! alone;"
      " do sleep 1; i=$((i+1)); done; alone && kill -KILL $pid 2>/dev/null; finish; }\n"
      "( while read line <&3; do [ \"$line\" = cancel ] && break; : > \"$dir/.alive\"; done; stop ) &\n"
      "watcher=$!\n"
      "( n=0; while kill -0 $pid 2>/dev/null; do sleep 1;"
      " if [ -e \"$dir/.alive\" ]; then rm -f \"$dir/.alive\"; n=0; else n=$((n+1)); fi;"
      " if [ $n -ge $alive ]; then echo \"loom: no word from Loom for $alive s (the link to it is down);"
      " stopping the job on $(hostname)\" >&2; lost; break; fi; done ) 3<&- &\n"
      "watchdog=$!\n"
      "wait $pid; rc=$?\n"
      "kill $watcher $watchdog 2>/dev/null\n"
      "rm -f \"$dir/.alive\"\n"
      "exit $rc\n";

QString tasksPerNode(const plan::Layout& layout)
{
    const std::int64_t nodes = std::max<std::int64_t>(1, layout.nodes);
    return QString::number(layout.parallel.worldSize() / nodes);
}

QStringList asList(const std::vector<std::string>& v)
{
    QStringList out;
    for (const auto& s : v)
        out << QString::fromStdString(s);
    return out;
}

QString clusterEngine(const LaunchRequest& request)
{
    const auto& e = request.layout.cluster.launch.engine;
    return e.empty() ? request.engine : QString::fromStdString(e);
}

// Open MPI hands the values of its MCA parameters (plm_rsh_args, orte_output_filename) to the shell of every
// other host, on orted's command line, in double quotes at best: a `$(…)` there would run. So only plain
// words (those shellQuote leaves as they are) go that way.
bool passesThroughMpirun(const QString& word)
{
    return !word.isEmpty() && shellQuote(word) == word;
}

// The head node's mpirun reaches the other hosts by ssh with the settings Loom's own ssh uses: BatchMode, a
// ConnectTimeout (a silent host fails in 10 s, not after the system's 2 minutes) and the profile's
// ssh_options. Open MPI splits plm_rsh_args at spaces, so an option with a space in it stays out; a profile
// that sets plm_rsh_args itself keeps its own.
QStringList headNodeSshArgs(const plan::LaunchSpec& l)
{
    for (const auto& o : l.mpirunOptions)
        if (QString::fromStdString(o).contains(QLatin1String("plm_rsh_args")))
            return {};
    QStringList words { QStringLiteral("-o"), QStringLiteral("BatchMode=yes"), QStringLiteral("-o"),
        QStringLiteral("ConnectTimeout=10") };
    const QStringList options = asList(l.sshOptions);
    for (qsizetype i = 0; i < options.size(); ++i) {
        // ssh's options that take a value (ssh(1)) go with it, or not at all: never a flag without its value.
        const QString& o = options[i];
        const bool takesValue = o.size() == 2 && o[0] == QLatin1Char('-')
            && QStringLiteral("BbcDEeFIiJLlmOopQRSWw").contains(o[1]) && i + 1 < options.size();
        const QStringList option = takesValue ? QStringList { o, options[++i] } : QStringList { o };
        if (std::all_of(option.begin(), option.end(), passesThroughMpirun))
            words << option;
    }
    return { QStringLiteral("--mca"), QStringLiteral("plm_rsh_args"), words.join(QLatin1Char(' ')) };
}

// Variables of Loom's environment that the ranks on other hosts need too (mpirun -x): the collectives'
// timeout (docs/launcher.md).
QStringList forwardedVariables()
{
    QStringList out;
    for (const char* name : { "LOOM_COMM_TIMEOUT_S" })
        if (const QString v = qEnvironmentVariable(name); passesThroughMpirun(v))
            out << QStringLiteral("-x") << QString::fromLatin1(name) + QLatin1Char('=') + v;
    return out;
}

QStringList rootFlag()
{
    return ::geteuid() == 0 ? QStringList { QStringLiteral("--allow-run-as-root") } : QStringList {};
}

} // namespace

QString shellQuote(const QString& word)
{
    static const QRegularExpression plain(QStringLiteral("^[A-Za-z0-9_./=:,+@%-]+$"));
    if (plain.match(word).hasMatch())
        return word;
    QString out = word;
    out.replace(QLatin1Char('\''), QStringLiteral("'\\''"));
    return QLatin1Char('\'') + out + QLatin1Char('\'');
}

QString shellJoin(const QStringList& words)
{
    QStringList quoted;
    for (const QString& w : words)
        quoted << shellQuote(w);
    return quoted.join(QLatin1Char(' '));
}

QStringList engineArgs(const LaunchRequest& request, const QString& engine, const QString& layoutFile)
{
    QStringList a { engine, QStringLiteral("--layout"), layoutFile, QStringLiteral("--steps"),
        QString::number(request.steps), QStringLiteral("--stream") };
    if (!request.checkpointDir.isEmpty()) {
        a << QStringLiteral("--checkpoint-dir") << request.checkpointDir;
        if (request.checkpointEvery > 0)
            a << QStringLiteral("--checkpoint-every") << QString::number(request.checkpointEvery);
        // The folder may be on the cluster: the engine, which sees it, refuses one in use unless resumed.
        a << (request.resume ? QStringLiteral("--resume") : QStringLiteral("--new-checkpoint-dir"));
    }
    return a;
}

QString rankLogDir(const QString& runDir)
{
    return runDir + QStringLiteral("/logs");
}

QString srunRankLogPattern(const QString& runDir)
{
    // srun reads %x in the name (%% is a plain %) and a backslash turns that off, %t included.
    if (runDir.isEmpty() || runDir.contains(QLatin1Char('\\')))
        return {};
    QString dir = rankLogDir(runDir);
    dir.replace(QLatin1Char('%'), QStringLiteral("%%"));
    return dir + QStringLiteral("/rank.%t.stderr");
}

Command localCommand(const LaunchRequest& request, const QString& layoutFile)
{
    QStringList args = rootFlag();
    args << QStringLiteral("--oversubscribe") << QStringLiteral("-np")
         << QString::number(request.layout.parallel.worldSize()) << QStringLiteral("--bind-to")
         << QStringLiteral("none");
    if (!request.shmDir.isEmpty())
        args << QStringLiteral("--mca") << QStringLiteral("btl_vader_backing_directory") << request.shmDir;
    args << QStringLiteral("--output-filename") << rankLogDir(request.workDir);
    args << engineArgs(request, request.engine, layoutFile);
    return { request.mpirun, args };
}

bool startsRanksItself(const plan::Layout& layout)
{
    if (layout.cluster.launch.method != "local" && !layout.cluster.launch.method.empty())
        return false;
    return layout.commBackend() == plan::CommBackend::Gloo;
}

std::vector<RankCommand> localRankCommands(
    const LaunchRequest& request, const QString& layoutFile, const QString& rendezvousDir)
{
    const std::int64_t world = request.layout.parallel.worldSize();
    const QStringList args = engineArgs(request, request.engine, layoutFile);
    std::vector<RankCommand> out;
    for (std::int64_t r = 0; r < world; ++r) {
        RankCommand c;
        c.rank = static_cast<int>(r);
        c.command = { args.first(), args.mid(1) };
        c.environment = QStringList { QStringLiteral("LOOM_RANK=%1").arg(r),
            QStringLiteral("LOOM_WORLD_SIZE=%1").arg(world), QStringLiteral("LOOM_LOCAL_RANK=%1").arg(r),
            QStringLiteral("LOOM_RENDEZVOUS=") + rendezvousDir, QStringLiteral("OPENBLAS_NUM_THREADS=1") };
        out.push_back(std::move(c));
    }
    return out;
}

QString hostfile(const plan::Layout& layout, QString* error)
{
    static const QRegularExpression hostName(QStringLiteral("^[A-Za-z0-9_][A-Za-z0-9_.:-]*$"));
    const auto& hosts = layout.cluster.hosts;
    const std::int64_t nodes = std::max<std::int64_t>(1, layout.nodes);
    if (static_cast<std::int64_t>(hosts.size()) < nodes) {
        *error = QStringLiteral(
            "the layout asks for %1 nodes but cluster %2 lists %3 hosts; add them to the profile's \"hosts\"")
                     .arg(nodes)
                     .arg(QString::fromStdString(layout.cluster.name))
                     .arg(hosts.size());
        return {};
    }
    QString text;
    for (std::int64_t i = 0; i < nodes; ++i) {
        const QString h = QString::fromStdString(hosts[static_cast<std::size_t>(i)]);
        if (!hostName.match(h).hasMatch()) {
            *error = QStringLiteral(
                "hosts[%1]=\"%2\" is not a host name; write letters, digits, '.', '-', '_' or ':' only")
                         .arg(i)
                         .arg(h);
            return {};
        }
        text += h + QStringLiteral(" slots=") + tasksPerNode(layout) + QLatin1Char('\n');
    }
    return text;
}

Command sshCommand(const LaunchRequest& request, const QString& layoutJson, const QString& runFolder, QString* error)
{
    const plan::LaunchSpec& l = request.layout.cluster.launch;
    const QString hosts = hostfile(request.layout, error);
    if (hosts.isEmpty())
        return {};
    QString head = QString::fromStdString(l.headNode);
    if (head.isEmpty())
        head = QString::fromStdString(request.layout.cluster.hosts.front());
    if (head.startsWith(QLatin1Char('-'))) {
        *error = QStringLiteral("the head node \"%1\" cannot start with '-'; write a host name").arg(head);
        return {};
    }
    const QString runDir = remoteRunDir(request, runFolder);
    QStringList mpirun { QString::fromStdString(l.mpirun) };
    mpirun << headNodeSshArgs(l) << asList(l.mpirunOptions) << forwardedVariables();
    if (keepsRankLogs(request, runFolder))
        mpirun << QStringLiteral("--output-filename") << rankLogDir(runDir);
    mpirun << QStringLiteral("-np") << QString::number(request.layout.parallel.worldSize())
           << QStringLiteral("--hostfile") << runDir + QStringLiteral("/hostfile") << QStringLiteral("--bind-to")
           << QStringLiteral("none")
           << engineArgs(request, clusterEngine(request), runDir + QStringLiteral("/layout.json"));
    QStringList remote { QStringLiteral("sh"), QStringLiteral("-c"), QString::fromLatin1(kHeadScript),
        QStringLiteral("loom-run"), runDir, QString::fromLatin1(layoutJson.toUtf8().toBase64()),
        QString::fromLatin1(hosts.toUtf8().toBase64()), QString::number(static_cast<int>(request.cancelGraceSeconds)),
        QString::number(sshWatchdogSeconds(request)) };
    remote << mpirun;
    QStringList args { QStringLiteral("-o"), QStringLiteral("BatchMode=yes"), QStringLiteral("-o"),
        QStringLiteral("ConnectTimeout=10"), QStringLiteral("-o"), QStringLiteral("ServerAliveInterval=15") };
    args << asList(l.sshOptions) << QStringLiteral("--") << head << shellJoin(remote);
    return { QStringLiteral("ssh"), args };
}

QString remoteRunDir(const LaunchRequest& request, const QString& runFolder)
{
    const plan::LaunchSpec& l = request.layout.cluster.launch;
    return (l.runDir.empty() ? QStringLiteral("loom-runs") : QString::fromStdString(l.runDir)) + QLatin1Char('/')
        + runFolder;
}

bool keepsRankLogs(const LaunchRequest& request, const QString& runFolder)
{
    return passesThroughMpirun(rankLogDir(remoteRunDir(request, runFolder)));
}

int sshWatchdogSeconds(const LaunchRequest& request)
{
    return std::max(4, static_cast<int>(request.progressTimeoutSeconds / 2));
}

int sshHeartbeatSeconds(const LaunchRequest& request)
{
    return std::clamp(sshWatchdogSeconds(request) / 3, 1, 15);
}

QString sbatchScript(const LaunchRequest& request, const QString& layoutFile)
{
    const plan::Layout& layout = request.layout;
    const plan::LaunchSpec& l = layout.cluster.launch;
    QString s = QStringLiteral(
        "#!/bin/sh\n# Written by Loom for one run; every word below is quoted, so names and paths stay names.\n");
    s += QStringLiteral("#SBATCH --nodes=%1\n").arg(std::max<std::int64_t>(1, layout.nodes));
    s += QStringLiteral("#SBATCH --ntasks-per-node=%1\n").arg(tasksPerNode(layout));
    if (l.gpusPerNode > 0)
        s += QStringLiteral("#SBATCH --gpus-per-node=%1\n").arg(l.gpusPerNode);
    // launchRefusal refuses other values before a script is written; this keeps any that slipped past out
    // of the header, where one word more would be one sbatch option more.
    if (plan::isSlurmTimeLimit(l.timeLimit))
        s += QStringLiteral("#SBATCH --time=%1\n").arg(QString::fromStdString(l.timeLimit));
    if (plan::isSlurmPartition(l.partition))
        s += QStringLiteral("#SBATCH --partition=%1\n").arg(QString::fromStdString(l.partition));
    QStringList mpirun { QString::fromStdString(l.mpirun) };
    mpirun << rootFlag() << asList(l.mpirunOptions) << QStringLiteral("--output-filename")
           << rankLogDir(request.workDir) << QStringLiteral("-np") << QString::number(layout.parallel.worldSize())
           << QStringLiteral("--bind-to") << QStringLiteral("none")
           << engineArgs(request, clusterEngine(request), layoutFile);
    s += QStringLiteral("exec ") + shellJoin(mpirun) + QLatin1Char('\n');
    return s;
}

Command sbatchCommand(const LaunchRequest& request, const QString& scriptFile, const QString& outputFile)
{
    static const QRegularExpression notName(QStringLiteral("[^A-Za-z0-9._-]"));
    QString name = QString::fromStdString(request.layout.name);
    name.replace(notName, QStringLiteral("_"));
    QStringList args { QStringLiteral("--parsable"), QStringLiteral("--job-name"),
        QStringLiteral("loom-") + name.left(60), QStringLiteral("--output"), outputFile, QStringLiteral("--chdir"),
        request.workDir };
    args << asList(request.layout.cluster.launch.sbatchOptions) << scriptFile;
    return { QStringLiteral("sbatch"), args };
}

Command srunCommand(const LaunchRequest& request, const QString& layoutFile)
{
    const plan::Layout& layout = request.layout;
    QStringList args { QStringLiteral("--mpi=pmix"), QStringLiteral("--kill-on-bad-exit=1"),
        QStringLiteral("--nodes=%1").arg(std::max<std::int64_t>(1, layout.nodes)),
        QStringLiteral("--ntasks-per-node=%1").arg(tasksPerNode(layout)), QStringLiteral("--export=ALL") };
    if (layout.cluster.launch.gpusPerNode > 0)
        args << QStringLiteral("--gpus-per-node=%1").arg(layout.cluster.launch.gpusPerNode);
    if (const QString pattern = srunRankLogPattern(request.workDir); !pattern.isEmpty())
        args << QStringLiteral("--error=") + pattern;
    args << engineArgs(request, clusterEngine(request), layoutFile);
    return { QStringLiteral("srun"), args };
}

QString newRunFolder(const QString& storePath)
{
    const QString base = QFileInfo(storePath).absolutePath() + QStringLiteral("/runs");
    QDir().mkpath(base);
    return base + QLatin1Char('/') + QDateTime::currentDateTimeUtc().toString(QStringLiteral("yyyyMMdd-HHmmss-zzz"));
}

namespace {

// ssh options a layout file may bring: each with the pattern its value must match (empty: a flag).
struct AllowedSshOption {
    const char* flag;
    const char* value;
};
constexpr AllowedSshOption kLayoutSshOptions[] = {
    { "-p", "^[0-9]{1,5}$" },
    { "-l", "^[A-Za-z0-9._][A-Za-z0-9._-]{0,63}$" },
    { "-i", "^[^-].*$" },
    { "-4", "" },
    { "-6", "" },
    { "-C", "" },
    { "-q", "" },
    { "-v", "" },
};

QString policyHint()
{
    return QStringLiteral(
        "put launch options in a cluster profile in your store (loom profiles import FILE) and name it in the layout "
        "(\"cluster\": \"NAME\") or with loom run --cluster NAME; see docs/launcher.md");
}

void checkLayoutSshOptions(const plan::LaunchSpec& l, QStringList& problems)
{
    for (std::size_t i = 0; i < l.sshOptions.size(); ++i) {
        const QString o = QString::fromStdString(l.sshOptions[i]);
        const AllowedSshOption* allowed = nullptr;
        for (const auto& a : kLayoutSshOptions)
            if (o == QLatin1String(a.flag))
                allowed = &a;
        const QString field = QStringLiteral("cluster.launch.ssh_options[%1]").arg(i);
        if (!allowed) {
            problems << QStringLiteral(
                "%1=\"%2\" is refused: a layout file may give ssh only -p PORT, -l USER, -i FILE, -4, -6, "
                "-C, -q and -v (options such as -o, -F and -J can run commands on this machine); %3")
                            .arg(field, o.left(80), policyHint());
            continue;
        }
        if (*allowed->value == '\0')
            continue;
        const QString value = i + 1 < l.sshOptions.size() ? QString::fromStdString(l.sshOptions[++i]) : QString();
        if (!QRegularExpression(QString::fromLatin1(allowed->value)).match(value).hasMatch())
            problems << QStringLiteral("%1=\"%2\" needs a value of its own after it (%3), not \"%4\"")
                            .arg(field, o,
                                o == QLatin1String("-p") ? QStringLiteral("a port number")
                                    : o == QLatin1String("-l")
                                    ? QStringLiteral("a user name")
                                    : QStringLiteral("a key file that does not start with '-'"),
                                value.left(80));
    }
}

bool hasFileName(const std::string& path, std::initializer_list<const char*> names)
{
    const QString name = QFileInfo(QString::fromStdString(path)).fileName();
    for (const char* n : names)
        if (name == QLatin1String(n))
            return true;
    return false;
}

} // namespace

QStringList launchPolicyProblems(const plan::Layout& layout)
{
    QStringList problems;
    if (!layout.clusterProfile.empty())
        return problems; // a profile in the user's store: its launch settings are the user's own
    const plan::LaunchSpec& l = layout.cluster.launch;
    checkLayoutSshOptions(l, problems);
    for (const auto& [key, list] :
        { std::pair { "mpirun_options", &l.mpirunOptions }, std::pair { "sbatch_options", &l.sbatchOptions } })
        if (!list->empty())
            problems << QStringLiteral(
                "cluster.launch.%1 is refused: a layout file may not pass options to %2 (they can run "
                "commands, e.g. --mca plm_rsh_agent or --wrap); %3")
                            .arg(QLatin1String(key),
                                QLatin1String(key == std::string("mpirun_options") ? "mpirun" : "sbatch"),
                                policyHint());
    if (l.mpirun != "mpirun" && !hasFileName(l.mpirun, { "mpirun", "mpiexec" }))
        problems << QStringLiteral(
            "cluster.launch.mpirun=\"%1\" is refused: in a layout file it must be a path to mpirun or "
            "mpiexec; %2")
                        .arg(QString::fromStdString(l.mpirun).left(80), policyHint());
    if (!l.engine.empty() && !hasFileName(l.engine, { "loom-train" }))
        problems << QStringLiteral(
            "cluster.launch.engine=\"%1\" is refused: in a layout file it must be a path to loom-train; %2")
                        .arg(QString::fromStdString(l.engine).left(80), policyHint());
    return problems;
}

std::int64_t defaultMaxLocalRanks()
{
    return std::max<std::int64_t>(kMinLocalRanks, kLocalRanksPerCore * std::max(1, QThread::idealThreadCount()));
}

QString localRanksProblem(const plan::Layout& layout, std::int64_t maxLocalRanks)
{
    const std::int64_t ranks = layout.parallel.worldSize();
    if (layout.cluster.launch.method != "local" || ranks <= maxLocalRanks)
        return {};
    return QStringLiteral(
        "the layout needs %1 ranks (tp·pp·dp) and its cluster launches them all on this machine, which has "
        "%2 cores: a local run starts at most %3 ranks (%4 per core); lower tp, pp or dp, use a cluster "
        "profile that launches over ssh or Slurm, or raise the limit with loom run --max-local-ranks N")
        .arg(ranks)
        .arg(QThread::idealThreadCount())
        .arg(maxLocalRanks)
        .arg(kLocalRanksPerCore);
}

QString launchRefusal(const LaunchRequest& request)
{
    QStringList problems = launchPolicyProblems(request.layout);
    // Whoever wrote them (a layout or a stored profile), these reach the script's #SBATCH header as text.
    const plan::LaunchSpec& l = request.layout.cluster.launch;
    if (!l.partition.empty() && !plan::isSlurmPartition(l.partition))
        problems << QStringLiteral("cluster.launch.partition=\"%1\" is not a Slurm partition name")
                        .arg(QString::fromStdString(l.partition).left(80));
    if (!l.timeLimit.empty() && !plan::isSlurmTimeLimit(l.timeLimit))
        problems << QStringLiteral("cluster.launch.time_limit=\"%1\" is not a Slurm time (minutes, HH:MM:SS, D-HH…)")
                        .arg(QString::fromStdString(l.timeLimit).left(80));
    const QString many
        = localRanksProblem(request.layout, request.maxLocalRanks > 0 ? request.maxLocalRanks : defaultMaxLocalRanks());
    if (!many.isEmpty())
        problems << many;
    if (const plan::EngineSupport support = plan::engineSupport(request.layout); !support.trainable())
        problems << QString::fromStdString(plan::kEngineCannotTrain + support.reason());
    return problems.join(QStringLiteral("; "));
}

QString defaultEnginePath()
{
    const QString fromEnv = qEnvironmentVariable("LOOM_TRAIN");
    if (!fromEnv.isEmpty())
        return fromEnv;
    const QString beside = QDir(QCoreApplication::applicationDirPath()).filePath(QStringLiteral("loom-train"));
    if (QFileInfo(beside).isExecutable())
        return beside;
    const QString onPath = QStandardPaths::findExecutable(QStringLiteral("loom-train"));
    return onPath.isEmpty() ? beside : onPath;
}
} // namespace loom::launcher
