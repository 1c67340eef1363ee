#include "launcher/RunController.h"

#include "engine/plan/LayoutParser.h"

#include <QDir>
#include <QFile>
#include <QRegularExpression>

#include <nlohmann/json.hpp>

#include <csignal>
#include <sys/types.h>
#include <unistd.h>

namespace loom::launcher {

RunController::RunController(profiles::RunStore* store, QObject* parent) : QObject(parent), m_store(store)
{
    m_watchdog.setInterval(500);
    connect(&m_watchdog, &QTimer::timeout, this, &RunController::checkProgress);
}

RunController::~RunController()
{
    if (isRunning()) {
        signalJob(SIGKILL);
        m_process->waitForFinished(5000);
    }
}

bool RunController::isRunning() const
{
    return m_process && m_process->state() != QProcess::NotRunning;
}

qint64 RunController::start(const LaunchRequest& request)
{
    m_request = request;
    m_cancelling = m_ended = m_sawEnd = m_progressTimedOut = false;
    m_steps = 0;
    m_tail.clear();
    m_reader = trace::StreamReader();
    // The engine resolves only built-in profiles: write the layout with its model and cluster inline.
    plan::Layout inlined = request.layout;
    inlined.modelProfile.clear();
    inlined.clusterProfile.clear();
    const QString layoutJson = QString::fromStdString(plan::writeLayout(inlined));
    QDir().mkpath(request.workDir);
    const QString layoutFile = QDir(request.workDir).filePath(QStringLiteral("layout.json"));
    QFile f(layoutFile);
    if (!f.open(QIODevice::WriteOnly | QIODevice::Truncate) || f.write(layoutJson.toUtf8()) < 0) {
        emit finished(QStringLiteral("failed"), QStringLiteral("cannot write %1: %2").arg(layoutFile, f.errorString()), {});
        return 0;
    }
    f.close();
    // Every argument is its own argv entry: names, paths and hosts never pass through a shell.
    QStringList args;
    if (::geteuid() == 0)
        args << QStringLiteral("--allow-run-as-root");
    args << QStringLiteral("--oversubscribe") << QStringLiteral("-np") << QString::number(request.layout.parallel.worldSize())
         << QStringLiteral("--bind-to") << QStringLiteral("none") << QStringLiteral("-x") << QStringLiteral("OPENBLAS_NUM_THREADS=1")
         << request.engine << QStringLiteral("--layout") << layoutFile << QStringLiteral("--steps")
         << QString::number(request.steps) << QStringLiteral("--stream");
    m_command = QStringList{request.mpirun} + args;
    m_run = m_store ? m_store->startRun(QString::fromStdString(request.layout.name), layoutJson,
                                        QString::fromStdString(request.layout.cluster.name), m_command.join(QLatin1Char(' ')))
                    : 0;

    m_process = std::make_unique<QProcess>();
    m_process->setProcessChannelMode(QProcess::MergedChannels);
    m_process->setWorkingDirectory(request.workDir);
    m_process->setChildProcessModifier([] { ::setpgid(0, 0); });  // one process group: cancel reaches every rank
    connect(m_process.get(), &QProcess::readyReadStandardOutput, this, &RunController::readOutput);
    connect(m_process.get(), &QProcess::finished, this, &RunController::processFinished);
    connect(m_process.get(), &QProcess::errorOccurred, this, [this](QProcess::ProcessError e) {
        if (e == QProcess::FailedToStart)
            end(QStringLiteral("failed"), QStringLiteral("%1 could not be started (%2); install Open MPI (installer/bootstrap.sh)")
                                              .arg(m_request.mpirun, m_process->errorString()));
    });
    if (!QFile::exists(request.engine)) {
        end(QStringLiteral("failed"), QStringLiteral("the engine %1 does not exist; build it (cmake --build) or set LOOM_TRAIN")
                                          .arg(request.engine));
        return m_run;
    }
    m_process->start(request.mpirun, args);
    if (m_process->waitForStarted(10000))
        m_pgid = m_process->processId();
    m_sinceFrame.start();
    m_watchdog.start();
    return m_run;
}

void RunController::signalJob(int signal)
{
    if (m_pgid > 0)
        ::kill(static_cast<pid_t>(-m_pgid), signal);
}

void RunController::signalRanks(int signal)
{
    // The ranks are mpirun's children; signalling them (not mpirun) lets each finish its step and stop,
    // while mpirun stays to collect them and report.
    const QDir proc(QStringLiteral("/proc"));
    for (const QString& entry : proc.entryList(QDir::Dirs | QDir::NoDotAndDotDot)) {
        bool numeric = false;
        const qint64 pid = entry.toLongLong(&numeric);
        if (!numeric)
            continue;
        QFile stat(proc.filePath(entry + QStringLiteral("/stat")));
        if (!stat.open(QIODevice::ReadOnly))
            continue;
        const QString text = QString::fromUtf8(stat.readAll());
        const auto fields = text.mid(text.lastIndexOf(QLatin1Char(')')) + 2).split(QLatin1Char(' '));
        if (fields.size() > 1 && fields[1].toLongLong() == m_pgid)
            ::kill(static_cast<pid_t>(pid), signal);
    }
}

void RunController::cancel()
{
    if (!isRunning() || m_cancelling)
        return;
    m_cancelling = true;
    signalRanks(SIGTERM);
    QTimer::singleShot(static_cast<int>(m_request.cancelGraceSeconds * 1000), this, [this] {
        if (isRunning())
            signalJob(SIGKILL);
    });
}

void RunController::handleFrame(const trace::Frame& frame)
{
    m_sinceFrame.restart();
    const nlohmann::json j = frame.type == "events" ? nlohmann::json() : nlohmann::json::parse(frame.payload, nullptr, false);
    if (frame.type == "step" && j.is_object()) {
        profiles::StepRecord s{j.value("step", 0LL),         j.value("loss", 0.0), j.value("tokens_per_s", 0.0),
                               j.value("step_time_s", 0.0), j.value("grad_norm", 0.0), j.value("lr", 0.0)};
        m_steps = s.step;
        if (m_store && m_run)
            m_store->addStep(m_run, s);
        emit stepFinished(s, m_request.steps);
    } else if (frame.type == "events") {
        try {
            const auto events = trace::decodeEvents(frame.payload);
            if (m_store && m_run)
                m_store->addEvents(m_run, events);
            emit eventsArrived(static_cast<qint64>(events.size()));
        } catch (const std::exception&) {
            // a damaged events frame would have failed its CRC; a malformed one is skipped
        }
    } else if (frame.type == "end") {
        m_sawEnd = true;
    }
}

void RunController::readOutput()
{
    const QByteArray chunk = m_process->readAllStandardOutput();
    m_reader.feed(std::string_view(chunk.constData(), static_cast<std::size_t>(chunk.size())));
    for (const QString& line : QString::fromUtf8(chunk).split(QLatin1Char('\n')))
        if (!line.startsWith(QChar(0x1e)) && !line.isEmpty())
            m_tail += line.left(400) + QLatin1Char('\n');
    if (m_tail.size() > 6000)
        m_tail = m_tail.right(4000);
    trace::Frame frame;
    while (m_reader.next(frame)) {
        try {
            handleFrame(frame);
        } catch (const std::exception& e) {  // the store failed: keep following the run, say so once
            if (!m_storeProblem) {
                m_storeProblem = true;
                m_tail += QStringLiteral("loom: %1\n").arg(QString::fromUtf8(e.what()));
            }
        }
    }
}

void RunController::checkProgress()
{
    if (!isRunning() || m_cancelling)
        return;
    if (m_sinceFrame.elapsed() > m_request.progressTimeoutSeconds * 1000) {
        m_tail += QStringLiteral("loom: no progress for %1 s; stopping the run\n").arg(m_request.progressTimeoutSeconds);
        m_cancelling = true;
        signalRanks(SIGTERM);
        QTimer::singleShot(static_cast<int>(m_request.cancelGraceSeconds * 1000), this, [this] {
            if (isRunning())
                signalJob(SIGKILL);
        });
        m_progressTimedOut = true;
    }
}

QString RunController::causeFromLog(const QString& log)
{
    static const QRegularExpression died(QStringLiteral("process rank (\\d+) with PID \\d+ on node (\\S+) exited on signal (\\d+)"));
    static const QRegularExpression rankError(QStringLiteral("loom-train: rank (\\d+): ([^\\n]+)"));
    static const QRegularExpression layoutError(QStringLiteral("loom-train: (the layout[^\\n]+)"));
    static const QRegularExpression missing(QStringLiteral("was unable to find the executable|could not access or execute"));
    if (auto m = died.match(log); m.hasMatch())
        return QStringLiteral("rank %1 died (signal %3 on node %2)").arg(m.captured(1), m.captured(2), m.captured(3));
    if (auto m = rankError.match(log); m.hasMatch())
        return QStringLiteral("rank %1 failed: %2").arg(m.captured(1), m.captured(2));
    if (auto m = layoutError.match(log); m.hasMatch())
        return m.captured(1);
    if (missing.match(log).hasMatch())
        return QStringLiteral("mpirun could not find or run the engine");
    return {};
}

void RunController::processFinished(int exitCode, QProcess::ExitStatus status)
{
    readOutput();
    if (m_progressTimedOut) {
        end(QStringLiteral("failed"), QStringLiteral("no progress for %1 s: no step finished in that time (a rank may be stuck)")
                                          .arg(m_request.progressTimeoutSeconds));
        return;
    }
    if (m_cancelling) {
        end(QStringLiteral("cancelled"), QStringLiteral("cancelled after step %1").arg(m_steps));
        return;
    }
    if (status == QProcess::NormalExit && exitCode == 0 && m_sawEnd) {
        end(QStringLiteral("finished"), {});
        return;
    }
    QString cause = causeFromLog(m_tail);
    if (cause.isEmpty())
        cause = status == QProcess::CrashExit ? QStringLiteral("mpirun crashed")
                                              : QStringLiteral("the job ended with exit code %1 before finishing").arg(exitCode);
    end(QStringLiteral("failed"), cause);
}

void RunController::end(const QString& state, const QString& cause)
{
    if (m_ended)
        return;
    m_ended = true;
    m_watchdog.stop();
    if (isRunning()) {
        signalJob(SIGKILL);
        m_process->waitForFinished(5000);
    }
    signalJob(SIGKILL);  // anything of the group still alive
    if (m_store && m_run) {
        try {
            m_store->finishRun(m_run, state, cause);
        } catch (const std::exception& e) {
            m_tail += QStringLiteral("loom: %1\n").arg(QString::fromUtf8(e.what()));
        }
    }
    emit finished(state, cause, m_tail.right(2000));
}

}  // namespace loom::launcher
