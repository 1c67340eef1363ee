#pragma once

#include "engine/plan/Layout.h"

#include <QString>
#include <QStringList>

#include <functional>

namespace loom::launcher {

// What to launch and where: the layout's cluster says how (cluster.launch: local, ssh or slurm).
struct LaunchRequest {
    plan::Layout layout; // validated
    std::int64_t steps = 20;
    QString engine; // loom-train on this machine (also on the cluster unless launch.engine says otherwise)
    QString mpirun = QStringLiteral("mpirun"); // local runs
    QString workDir; // the run's folder here: its layout file and output
    QString checkpointDir; // empty: no checkpoints
    std::int64_t checkpointEvery = 0;
    // Continue from checkpointDir's `latest` (loom run --resume). Without it the engine refuses a folder that
    // already holds a checkpoint (--new-checkpoint-dir), so an earlier run's steps are never overwritten.
    bool resume = false;
    double progressTimeoutSeconds = 300; // no frame for this long: the run is stuck
    double cancelGraceSeconds = 10; // SIGTERM, then SIGKILL after this
    std::int64_t maxLocalRanks = 0; // local runs start at most this many ranks; 0: defaultMaxLocalRanks()
    // Local mpirun runs: the folder for Open MPI's shared-memory files (RunShm.h); empty: its default.
    QString shmDir;
    // Polled between the starts of local ranks (a signal handler's flag): true stops the start-up, and every
    // rank already started is killed and reaped. Empty: never.
    std::function<bool()> stopRequested;
};

// The launch policy (docs/launcher.md, "What a layout file may launch"). A layout is a document people
// share, so a cluster written inline in a layout file may carry only launch settings that cannot run a
// command: ssh options from a short allow-list (-p PORT, -l USER, -i FILE, -4, -6, -C, -q, -v), mpirun
// and the engine by their usual names, and no mpirun or sbatch options. Anything else must come from a
// cluster profile in the user's own store (built in, or imported on purpose with loom profiles import),
// which the layout names ("cluster": "NAME") or loom run --cluster NAME picks. Each problem is one
// sentence naming the field and the fix; empty: the layout may be launched.
QStringList launchPolicyProblems(const plan::Layout& layout);
// Local runs: at most kLocalRanksPerCore ranks per core of this machine (at least kMinLocalRanks).
constexpr std::int64_t kLocalRanksPerCore = 8;
constexpr std::int64_t kMinLocalRanks = 16;
std::int64_t defaultMaxLocalRanks();
// Empty, or the sentence saying that a local run of `layout` would start more than `maxLocalRanks` ranks.
QString localRanksProblem(const plan::Layout& layout, std::int64_t maxLocalRanks);
// Everything a run of `request` refuses before starting anything (the policy, the local-rank cap and what
// loom-train cannot train, plan::engineSupport), joined into one message; empty when it may start.
QString launchRefusal(const LaunchRequest& request);

// A program and its arguments, each its own argv entry.
struct Command {
    QString program;
    QStringList args;
    QStringList all() const { return QStringList { program } + args; }
};

// The training engine on this machine: $LOOM_TRAIN when set, else loom-train beside the running program
// (build/<preset>/bin, or /usr/bin when installed), else the first loom-train on PATH; when none exists,
// the path beside the program (so the error names where it was expected).
QString defaultEnginePath();

// A new run folder beside the store (`<store folder>/runs/<UTC time to the millisecond>`), created; the
// run's layout file and output go there.
QString newRunFolder(const QString& storePath);

// One word for a POSIX shell: 'it'\''s' — whatever it holds ($(…), `…`, ;, newlines) stays one literal word.
QString shellQuote(const QString& word);
QString shellJoin(const QStringList& words);

// The engine's own arguments: ENGINE --layout FILE --steps N --stream [--checkpoint-dir D --checkpoint-every K
// (--resume | --new-checkpoint-dir)].
QStringList engineArgs(const LaunchRequest& request, const QString& engine, const QString& layoutFile);

// Where mpirun keeps each rank's output in the run folder `runDir`: Open MPI writes
// <runDir>/logs/1/rank.N/stdout and stderr (--output-filename) and still passes it all on to Loom.
QString rankLogDir(const QString& runDir);

// Under srun: where each rank's standard error (the engine's messages) goes, <runDir>/logs/rank.N.stderr,
// as srun's --error pattern (%t: the task's rank). Standard output, which carries the telemetry stream,
// still reaches Loom. Empty when the folder's name holds a backslash (srun would not read %t then).
QString srunRankLogPattern(const QString& runDir);

// mpirun on this machine.
Command localCommand(const LaunchRequest& request, const QString& layoutFile);

// A rank that Loom starts itself, without mpirun: its command line and the variables it adds to the
// environment ("NAME=value").
struct RankCommand {
    int rank = 0;
    Command command;
    QStringList environment;
};

// Whether `loom run` starts the layout's ranks itself: a layout with comm.backend "gloo" on a cluster whose
// launch method is local. Over ssh and Slurm the cluster's own launch method starts them.
bool startsRanksItself(const plan::Layout& layout);

// One engine per rank on this machine, each with LOOM_RANK, LOOM_WORLD_SIZE, LOOM_LOCAL_RANK (all ranks are
// on this one node), LOOM_RENDEZVOUS (`rendezvousDir`: an empty folder of the run where Gloo's file store
// meets) and OPENBLAS_NUM_THREADS=1, as mpirun's command gives them.
std::vector<RankCommand> localRankCommands(
    const LaunchRequest& request, const QString& layoutFile, const QString& rendezvousDir);

// Open MPI's hostfile for the layout: the cluster's first `nodes` hosts, each with worldSize/nodes slots.
// Empty with *error set when the cluster lists too few hosts or a host name is not one.
QString hostfile(const plan::Layout& layout, QString* error);

// ssh to the head node, where a small fixed sh script writes the layout and the hostfile into the run folder
// and runs mpirun; every value reaches that script as a quoted positional argument. "cancel" on ssh's
// standard input (or its end, when Loom dies) makes the script send mpirun SIGUSR1, which mpirun passes to
// every rank (they finish their step, save a checkpoint and stop), then SIGTERM and SIGKILL after the
// grace period. Loom writes "alive" every sshHeartbeatSeconds(); when none arrives for
// sshWatchdogSeconds() (the link or Loom is gone while sshd has not noticed) the script stops the job the
// same way. mpirun's own ssh to the other hosts gets BatchMode, a ConnectTimeout and the profile's
// ssh_options (plm_rsh_args). `runFolder` is the run's folder name under launch.run_dir.
Command sshCommand(const LaunchRequest& request, const QString& layoutJson, const QString& runFolder, QString* error);
// The run's folder on the head node: launch.run_dir (default loom-runs, under the home folder)/runFolder.
QString remoteRunDir(const LaunchRequest& request, const QString& runFolder);
// Over ssh: whether mpirun keeps each rank's output in the run folder. Not when that folder's path holds
// characters a shell would read (Open MPI passes it to the other hosts' shells, where `$(…)` would run).
bool keepsRankLogs(const LaunchRequest& request, const QString& runFolder);
// The head node's watchdog: half the progress timeout (at least 4 s), so a lost link ends the job within it.
int sshWatchdogSeconds(const LaunchRequest& request);
// How often Loom tells the head node it is there: a third of the watchdog's time, at most 15 s.
int sshHeartbeatSeconds(const LaunchRequest& request);

// The batch script for sbatch: #SBATCH lines from the layout (nodes, tasks per node, GPUs per node) and the
// profile (time limit, partition), then mpirun of the engine, each word quoted.
QString sbatchScript(const LaunchRequest& request, const QString& layoutFile);
// sbatch --parsable --job-name … --output OUT --chdir DIR [sbatch_options] SCRIPT.
Command sbatchCommand(const LaunchRequest& request, const QString& scriptFile, const QString& outputFile);
// Inside an allocation (SLURM_JOB_ID set): srun --mpi=pmix with the layout's nodes and tasks per node, each
// rank's standard error into the run folder (srunRankLogPattern).
Command srunCommand(const LaunchRequest& request, const QString& layoutFile);

} // namespace loom::launcher
