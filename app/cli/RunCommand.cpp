#include "app/cli/CommandLine.h"
#include "app/cli/Commands.h"

#include "engine/plan/LayoutParser.h"
#include "engine/plan/MachineMemory.h"
#include "engine/trace/ChromeTrace.h"
#include "launcher/RankLogs.h"
#include "launcher/RunChecks.h"
#include "launcher/RunController.h"
#include "profiles/RunStore.h"

#include <QCoreApplication>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QTimer>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <limits>
#include <sstream>

namespace loom::app {

namespace {

volatile std::sig_atomic_t g_interrupted = 0;
void onInterrupt(int)
{
    g_interrupted = 1;
}

// Each rank's output, where mpirun or srun kept it (the run's command says): the files when the folder is
// on this machine, else where it is on the cluster.
void printRankLogs(CliContext& context, const QString& command)
{
    const launcher::RankLogs logs = launcher::rankLogsOf(command);
    if (logs.dir.isEmpty())
        return;
    const auto found = launcher::rankLogFiles(logs.dir);
    if (found.empty()) {
        context.out << "  rank logs: " << logs.dir.toStdString() << "/1/rank.N/stdout and stderr (on the cluster)\n";
        return;
    }
    for (const launcher::RankLogFile& f : found)
        context.out << "  log of rank." << f.rank << " (" << f.stream.toStdString() << "): " << f.path.toStdString()
                    << "\n";
}

// `loom runs show`'s loss: as it always printed a number (the stream's default form), "diverged (null)" for none.
std::string shownLoss(double loss)
{
    if (!std::isfinite(loss))
        return profiles::lossText(loss).toStdString();
    std::ostringstream text;
    text << loss;
    return text.str();
}

} // namespace

int runCommand(CliContext& context, const QStringList& args)
{
    QString file, cluster, checkpointDir;
    qint64 steps = 20, checkpointEvery = 0, maxLocalRanks = 0;
    double timeout = 300;
    bool ignoreMemory = false, resume = false;
    const char* usage
        = "usage: loom run LAYOUT.json [--steps N] [--cluster NAME] [--progress-timeout S]\n"
          "                [--checkpoint-dir DIR [--checkpoint-every N] [--resume]] [--max-local-ranks N]\n"
          "                [--ignore-memory]\n";
    for (int i = 0; i < args.size(); ++i) {
        const bool hasValue = i + 1 < args.size();
        if (args[i] == QLatin1String("--ignore-memory"))
            ignoreMemory = true;
        else if (args[i] == QLatin1String("--resume"))
            resume = true;
        else if (args[i] == QLatin1String("--steps") && hasValue)
            steps = args[++i].toLongLong();
        else if (args[i] == QLatin1String("--progress-timeout") && hasValue)
            timeout = args[++i].toDouble();
        else if (args[i] == QLatin1String("--cluster") && hasValue)
            cluster = args[++i];
        else if (args[i] == QLatin1String("--checkpoint-dir") && hasValue)
            checkpointDir = args[++i];
        else if (args[i] == QLatin1String("--checkpoint-every") && hasValue)
            checkpointEvery = args[++i].toLongLong();
        else if (args[i] == QLatin1String("--max-local-ranks") && hasValue)
            maxLocalRanks = args[++i].toLongLong() > 0 ? args[i].toLongLong() : -1;
        else if (file.isEmpty() && !args[i].startsWith(QLatin1String("--")))
            file = args[i];
        else {
            context.err << usage;
            return ExitUsage;
        }
    }
    if (file.isEmpty() || steps < 1 || maxLocalRanks < 0 || timeout <= 0 || checkpointEvery < 0
        || ((checkpointEvery > 0 || resume) && checkpointDir.isEmpty())) {
        context.err << usage;
        return ExitUsage;
    }
    // --cluster NAME runs the layout on that cluster profile instead of the one it names, checked against it.
    auto read = plan::readLayoutFile(file.toStdString(), context.catalog());
    if (!cluster.isEmpty() && read.layout) {
        QFile f(file);
        nlohmann::json j = f.open(QIODevice::ReadOnly)
            ? nlohmann::json::parse(f.readAll().toStdString(), nullptr, false)
            : nlohmann::json();
        if (j.is_object()) {
            j["cluster"] = cluster.toStdString();
            read = plan::readLayout(j.dump(), context.catalog());
        }
    }
    if (!read.ok()) {
        context.err << "error: the layout is not valid"
                    << (cluster.isEmpty() ? "" : " on cluster " + cluster.toStdString()) << "; nothing was started:\n"
                    << read.diagnostics.format();
        return ExitInvalid;
    }
    launcher::LaunchRequest request;
    request.layout = *read.layout;
    request.maxLocalRanks = maxLocalRanks;
    if (const QString refused = launcher::launchRefusal(request); !refused.isEmpty()) {
        context.err << "error: " << refused.toStdString() << "; nothing was started\n";
        return ExitInvalid;
    }
    // Every rank of a local run shares this machine's memory: refuse what cannot fit before starting any.
    if (request.layout.cluster.launch.method == "local" && !ignoreMemory) {
        const std::string tooBig
            = plan::machineMemoryProblem(request.layout, request.layout.parallel.worldSize(), plan::machineMemoryGB());
        if (!tooBig.empty()) {
            context.err << "error: " << tooBig << "; nothing was started\n";
            return ExitInvalid;
        }
    }
    if (ignoreMemory) // the engine makes the same check before it allocates (engine/tools/Train.cpp)
        qputenv("LOOM_IGNORE_MEMORY", "1");
    profiles::Store* store = context.requireStore();
    if (!store)
        return ExitFailure;
    profiles::RunStore runs(*store);
    runs.markInterrupted();
    request.steps = steps;
    request.engine = launcher::defaultEnginePath();
    request.progressTimeoutSeconds = timeout;
    if (!checkpointDir.isEmpty())
        request.checkpointDir = QFileInfo(checkpointDir).isAbsolute() || read.layout->cluster.launch.method != "local"
            ? checkpointDir
            : QFileInfo(checkpointDir).absoluteFilePath();
    request.checkpointEvery = checkpointEvery;
    request.resume = resume;
    launcher::RunController controller(&runs);
    std::optional<profiles::RunState> state;
    QString cause, tail;
    QObject::connect(
        &controller, &launcher::RunController::stepFinished, [&](const profiles::StepRecord& s, qint64 total) {
            const double eta = s.stepTimeSeconds * double(total - s.step);
            std::fprintf(stdout, "\rstep %lld/%lld  loss %s  %.0f tokens/s  ETA %.0f s   ",
                static_cast<long long>(s.step), static_cast<long long>(total),
                profiles::lossText(s.loss).toUtf8().constData(), s.tokensPerSecond, eta);
            std::fflush(stdout);
        });
    QObject::connect(&controller, &launcher::RunController::jobStateChanged,
        [&](const QString& job, const QString& jobState, const QString& reason) {
            if (jobState == QLatin1String("SUBMITTED"))
                std::fprintf(stdout, "submitted Slurm job %s (scancel %s stops it if Loom cannot)\n", qPrintable(job),
                    qPrintable(job));
            else if (jobState == QLatin1String("PENDING"))
                std::fprintf(stdout, "Slurm job %s PENDING (%s)\n", qPrintable(job), qPrintable(reason));
            else if (jobState == QLatin1String("RUNNING"))
                std::fprintf(stdout, "Slurm job %s RUNNING\n", qPrintable(job));
            std::fflush(stdout);
        });
    QObject::connect(&controller, &launcher::RunController::notice, [&](const QString& text) {
        std::fprintf(stdout, "\n");
        context.err << (text.startsWith(QLatin1String("Slurm")) ? "warning: " : "") << text.toStdString() << std::endl;
    });
    QObject::connect(&controller, &launcher::RunController::recordFailed, [&](const QString& why) {
        std::fprintf(stdout, "\n");
        context.err << "error: " << why.toStdString() << "; stopping the run" << std::endl;
    });
    QObject::connect(&controller, &launcher::RunController::finished,
        [&](profiles::RunState st, const QString& c, const QString& t) {
            state = st;
            cause = c;
            tail = t;
            QCoreApplication::exit(0);
        });
    // SIGTERM (a job scheduler, kill) cancels like Ctrl-C: Loom's exit alone would leave the ranks spinning.
    std::signal(SIGINT, onInterrupt);
    std::signal(SIGTERM, onInterrupt);
    request.stopRequested = [] { return g_interrupted != 0; };
    QTimer poll;
    QObject::connect(&poll, &QTimer::timeout, [&] {
        if (g_interrupted) {
            g_interrupted = 0;
            std::fprintf(stdout, "\ncancelling (every rank finishes its step%s and stops; killed after 10 s)...\n",
                request.checkpointDir.isEmpty() ? "" : " and saves a checkpoint");
            controller.cancel();
        }
    });
    poll.start(100);
    request.workDir = launcher::newRunFolder(store->path());
    const qint64 id = controller.start(request);
    if (!state)
        QCoreApplication::exec();
    std::signal(SIGINT, SIG_DFL);
    std::signal(SIGTERM, SIG_DFL);
    std::fprintf(stdout, "\n");
    context.out << "run " << id << " " << profiles::toString(*state).toStdString()
                << (cause.isEmpty() ? "" : ": " + cause.toStdString()) << "\n";
    if (state == profiles::RunState::Failed && !tail.isEmpty())
        context.out << "last output:\n" << tail.toStdString();
    return state == profiles::RunState::Finished ? ExitOk : state == profiles::RunState::Cancelled ? 130 : ExitFailure;
}

int runsCommand(CliContext& context, const QStringList& argsIn)
{
    QStringList args = argsIn;
    const bool json = args.removeAll(QStringLiteral("--json")) > 0;
    profiles::Store* store = context.requireStore();
    if (!store)
        return ExitFailure;
    profiles::RunStore runs(*store);
    // Runs whose Loom died are marked as such, when the store can be written: reading never needs a write
    // (a full disk or a read-only store still lists and shows every run).
    try {
        runs.markInterrupted();
    } catch (const std::exception&) {
    }
    const QString verb = args.value(0);
    if (verb == QLatin1String("list") && args.size() == 1) {
        const auto all = runs.runs();
        if (json) {
            auto a = nlohmann::ordered_json::array();
            for (const auto& r : all)
                a.push_back({ { "id", r.id }, { "name", r.name.toStdString() },
                    { "state", profiles::toString(r.state).toStdString() }, { "steps", r.steps },
                    { "cluster", r.cluster.toStdString() }, { "started_at", r.startedAt.toStdString() },
                    { "ended_at", r.endedAt.toStdString() }, { "exit_cause", r.exitCause.toStdString() } });
            context.out << a.dump(2) << "\n";
            return ExitOk;
        }
        for (const auto& r : all)
            context.out << r.id << "  " << profiles::toString(r.state).toStdString() << "  " << r.steps << " steps  "
                        << r.name.toStdString() << "  on " << (r.cluster.isEmpty() ? "?" : r.cluster.toStdString())
                        << "  " << r.startedAt.toStdString()
                        << (r.exitCause.isEmpty() ? "" : "  (" + r.exitCause.toStdString() + ")") << "\n";
        return ExitOk;
    }
    const qint64 id = args.value(1).toLongLong();
    const auto run = id > 0 ? runs.run(id) : std::nullopt;
    if ((verb == QLatin1String("show") || verb == QLatin1String("export")) && !run) {
        context.err << "error: there is no run " << args.value(1).toStdString() << "; see loom runs list\n";
        return ExitFailure;
    }
    if (verb == QLatin1String("show") && args.size() == 2) {
        context.out << "run " << run->id << ": " << run->name.toStdString() << ", "
                    << profiles::toString(run->state).toStdString()
                    << (run->exitCause.isEmpty() ? "" : " (" + run->exitCause.toStdString() + ")") << "\n  started "
                    << run->startedAt.toStdString() << ", ended " << run->endedAt.toStdString() << "\n  command "
                    << run->command.toStdString() << "\n";
        for (const auto& c : runs.checkpoints(id))
            context.out << "  checkpoint at step " << c.step << ": " << c.path.toStdString() << "\n";
        printRankLogs(context, run->command);
        for (const auto& s : runs.steps(id))
            context.out << "  step " << s.step << ": loss " << shownLoss(s.loss) << ", " << s.tokensPerSecond
                        << " tokens/s, " << s.stepTimeSeconds << " s\n";
        return ExitOk;
    }
    if (verb == QLatin1String("export") && args.size() == 4 && args[2] == QLatin1String("--chrome")) {
        std::ofstream out(args[3].toStdString(), std::ios::trunc);
        const nlohmann::ordered_json other
            = { { "generator", "loom runs export" }, { "loom_trace", 1 }, { "run", run->id },
                  { "layout", nlohmann::ordered_json::parse(run->layoutJson.toStdString(), nullptr, false) } };
        // The run's world bounds its events; a stored layout that no longer reads leaves only the checks
        // that need no world (times, steps' and groups' ranges).
        const auto read = plan::readLayout(run->layoutJson.toStdString(), context.catalog());
        constexpr std::int64_t kAny = std::numeric_limits<std::int32_t>::max();
        std::int64_t skipped = 0;
        QString problem;
        const auto events
            = launcher::eventsOfTheRun(runs.events(id), read.layout ? read.layout->parallel.worldSize() : kAny,
                std::max<qint64>(run->steps, 0) + 1, &skipped, &problem);
        if (skipped > 0)
            context.err << "warning: left out " << skipped << " stored events that cannot belong to run " << id
                        << " (first, " << problem.toStdString() << ")\n";
        trace::writeChromeTrace(out, events, {}, other.dump());
        if (!out.flush()) {
            context.err << "error: cannot write " << args[3].toStdString() << "\n";
            return ExitFailure;
        }
        context.out << "wrote " << events.size() << " events of run " << id << " to " << args[3].toStdString() << "\n";
        return ExitOk;
    }
    context.err << "usage: loom runs list [--json] | show ID | export ID --chrome FILE\n";
    return ExitUsage;
}

} // namespace loom::app
