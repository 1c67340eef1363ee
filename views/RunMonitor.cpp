#include "views/RunMonitor.h"

#include "launcher/LaunchCommands.h"
#include "launcher/RunController.h"

#include <QFileInfo>
#include <QFutureWatcher>
#include <QThread>
#include <QtConcurrent/QtConcurrentRun>

#include <utility>

namespace loom::views {

RunMonitor::RunMonitor(profiles::Store* store, QObject* parent)
    : QObject(parent)
    , m_store(store)
    , m_runs(store ? std::make_unique<profiles::RunStore>(*store) : nullptr)
    , m_timeline(new TimelineModel(this))
{
    if (m_runs)
        m_runs->markInterrupted();
}

RunMonitor::~RunMonitor()
{
    if (m_controller && m_controller->isActive())
        m_controller->cancel();
}

QString RunMonitor::enginePath()
{
    return launcher::defaultEnginePath();
}

bool RunMonitor::running() const
{
    // Active, not only running here: a Slurm job (sbatch) runs on the cluster while nothing of it runs here.
    return m_controller && m_controller->isActive();
}

void RunMonitor::clear()
{
    m_steps.clear();
    m_bandwidth = trace::BandwidthSeries();
    m_stats = {};
    m_state = profiles::RunState::Running;
    m_cause.clear();
    m_log.clear();
    m_timeline->clear();
    m_run = 0;
    m_total = 0;
    m_statsEvents = 0;
    m_openedOn = nullptr;
    m_statsOn = nullptr;
    m_statsRunning = m_statsAgain = false;
    ++m_generation;
}

void RunMonitor::setLayout(const plan::Layout& layout)
{
    m_layout = layout;
    m_prediction = runPrediction(layout);
    m_bandwidth = bandwidthSeriesFor(layout);
}

qint64 RunMonitor::start(const plan::Layout& layout, qint64 steps, QString* error)
{
    if (running()) {
        if (error)
            *error = tr("A run is in progress; cancel it or wait for it to end.");
        return 0;
    }
    if (!m_runs) {
        if (error)
            *error = tr("The store could not be opened, so runs cannot be recorded; check LOOM_DB.");
        return 0;
    }
    const QString engine = enginePath();
    // Over ssh or Slurm the engine is on the cluster (launch.engine): only a local run needs it here.
    const std::string& method = layout.cluster.launch.method;
    const bool here = method.empty() || method == "local";
    if (here && !QFileInfo(engine).isExecutable()) {
        if (error)
            *error = tr("The training engine %1 is missing; build it (cmake --build) or set LOOM_TRAIN.").arg(engine);
        return 0;
    }
    clear();
    setLayout(layout);
    m_total = steps;
    emit reset();
    m_controller = std::make_unique<launcher::RunController>(m_runs.get());
    connect(m_controller.get(), &launcher::RunController::stepFinished, this,
        [this](const profiles::StepRecord& s, qint64 total) {
            m_steps.push_back(s);
            m_total = total;
            updateStats();
            emit stepAdded(s, total);
        });
    connect(m_controller.get(), &launcher::RunController::groupsReceived, this,
        [this](const std::vector<trace::GroupInfo>& groups) { m_timeline->addGroups(groups); });
    connect(m_controller.get(), &launcher::RunController::eventsReceived, this, &RunMonitor::addEvents);
    connect(m_controller.get(), &launcher::RunController::jobStateChanged, this,
        [this](const QString& job, const QString& state, const QString& reason) {
            emit remoteStatus(state == QLatin1String("SUBMITTING") ? tr("Submitting the Slurm job…")
                    : state == QLatin1String("SUBMITTED")          ? tr("Submitted Slurm job %1.").arg(job)
                    : state == QLatin1String("PENDING") ? tr("Slurm job %1 is PENDING (%2).").arg(job, reason)
                                                        : tr("Slurm job %1 is %2.").arg(job, state));
        });
    connect(m_controller.get(), &launcher::RunController::notice, this, &RunMonitor::remoteStatus);
    connect(m_controller.get(), &launcher::RunController::finished, this,
        [this](profiles::RunState state, const QString& cause, const QString& tail) {
            m_state = state;
            m_cause = cause;
            m_log = tail;
            updateStats();
            if (m_starting)
                m_endedWhileStarting = true; // reported by start(), after started()
            else
                emit finished(state, cause, tail);
        });
    launcher::LaunchRequest request;
    request.layout = layout;
    request.steps = steps;
    request.engine = engine;
    request.workDir = launcher::newRunFolder(m_store->path());
    m_state = profiles::RunState::Running;
    // A refusal (the launch policy, the local-rank cap, a missing engine) ends the run inside start(): its
    // finished() is held back until the run's id is known and started() has gone out, so every listener
    // sees started, then finished, and the panels return to idle.
    m_starting = true;
    m_endedWhileStarting = false;
    m_run = m_controller->start(request);
    m_starting = false;
    if (m_run != 0)
        emit started(m_run);
    if (m_run == 0 || m_endedWhileStarting) {
        if (m_run != 0)
            emit finished(m_state, m_cause, m_log);
        if (error)
            *error = m_cause.isEmpty() ? tr("The run could not start.") : m_cause;
        return 0;
    }
    return m_run;
}

void RunMonitor::cancel()
{
    if (running())
        m_controller->cancel();
}

QString RunMonitor::whyNotOpen(qint64 runId) const
{
    if (!m_runs)
        return tr("The store could not be opened; check LOOM_DB.");
    if ((running() && runId != m_run) || m_loading)
        return tr("A run is in progress or loading; wait for it to end before opening another.");
    return {};
}

bool RunMonitor::open(qint64 runId, QString* error)
{
    QString why = whyNotOpen(runId);
    OpenedRun opened;
    if (why.isEmpty()) {
        opened = openRun(m_store, *m_runs, runId);
        why = opened.error;
    }
    if (!why.isEmpty()) {
        if (error)
            *error = why;
        return false;
    }
    show(runId, std::move(opened));
    return true;
}

void RunMonitor::openInBackground(qint64 runId)
{
    if (const QString why = whyNotOpen(runId); !why.isEmpty()) {
        emit openFailed(why);
        return;
    }
    m_loading = true;
    auto* watcher = new QFutureWatcher<OpenedRun>(this);
    connect(watcher, &QFutureWatcher<OpenedRun>::finished, this, [this, watcher, runId] {
        // Taken, not copied: the GUI thread only moves the finished run into place.
        OpenedRun opened = watcher->future().takeResult();
        watcher->deleteLater();
        m_loading = false;
        if (!opened.error.isEmpty()) {
            emit openFailed(opened.error);
            return;
        }
        show(runId, std::move(opened));
    });
    // QtSql connections belong to the thread that opens them: the worker opens its own.
    watcher->setFuture(QtConcurrent::run([path = m_store->path(), runId] {
        try {
            profiles::Store store(path);
            profiles::RunStore runs(store);
            return openRun(&store, runs, runId);
        } catch (const std::exception& e) {
            OpenedRun failed;
            failed.error = tr("The run could not be read from the store: %1").arg(QString::fromUtf8(e.what()));
            return failed;
        }
    }));
}

// Everything heavy was done by openRun; here the results only move into place, in the order live views
// expect: reset(), then the events, then the statistics.
void RunMonitor::show(qint64 runId, OpenedRun opened)
{
    clear();
    m_layout = opened.layout ? std::move(*opened.layout) : plan::Layout {};
    m_prediction = std::move(opened.prediction);
    m_bandwidth = std::move(opened.bandwidth);
    m_openedOn = opened.builtOn;
    m_run = runId;
    m_state = opened.record->state;
    m_cause = opened.record->exitCause;
    m_steps = std::move(opened.steps);
    m_total = std::max<qint64>(opened.record->steps, m_steps.empty() ? 0 : m_steps.back().step);
    emit reset();
    const auto events = qint64(opened.timeline.events().size());
    if (events == 0)
        return;
    m_timeline->setTimeline(std::move(opened.timeline));
    emit eventsAdded(events);
    m_stats = std::move(*opened.stats);
    m_statsEvents = std::size_t(events);
    m_statsOn = opened.builtOn;
    emit statsChanged();
}

void RunMonitor::addEvents(const std::vector<trace::TraceEvent>& events)
{
    if (events.empty())
        return;
    m_timeline->append(events);
    m_bandwidth.add(events, m_timeline->timeline().groups());
    emit eventsAdded(qint64(events.size()));
}

void RunMonitor::updateStats()
{
    const auto& events = m_timeline->timeline().events();
    if (events.empty())
        return;
    // The statistics re-read every event: while the run goes on, refresh them only when the events have grown
    // by a tenth since the last time (so all refreshes together cost about ten passes over the final events,
    // not one pass per step), and above two million events only when the run ends, so the window keeps its
    // pace over any number of steps. They are computed on a worker, one computation at a time: events that
    // arrive meanwhile are counted by the next one.
    const bool live = running();
    if (live
        && (events.size() > 2000000
            || (m_statsEvents > 0 && events.size() < m_statsEvents + std::max<std::size_t>(m_statsEvents / 10, 2000))))
        return;
    if (m_statsRunning) {
        m_statsAgain = true;
        return;
    }
    m_statsEvents = events.size();
    computeStatsInBackground();
}

void RunMonitor::computeStatsInBackground()
{
    struct Computed {
        trace::TraceStats stats;
        const QThread* thread = nullptr;
    };
    m_statsRunning = true;
    auto* watcher = new QFutureWatcher<Computed>(this);
    connect(watcher, &QFutureWatcher<Computed>::finished, this, [this, watcher, generation = m_generation] {
        Computed done = watcher->future().takeResult();
        watcher->deleteLater();
        if (generation != m_generation)
            return; // another run is shown now
        m_stats = std::move(done.stats);
        m_statsOn = done.thread;
        m_statsRunning = false;
        emit statsChanged();
        if (std::exchange(m_statsAgain, false))
            updateStats();
    });
    // The worker reads its own copy: the timeline keeps growing here meanwhile. Copying the events is one
    // linear pass; the statistics sort and group them several times over.
    // The context too: for the zero-bubble schedules it replays the schedule (plan::predict).
    watcher->setFuture(QtConcurrent::run(
        [events = m_timeline->timeline().events(), groups = m_timeline->timeline().groups(), layout = m_layout] {
            trace::StatsContext context = plan::statsContext(layout);
            context.groups = groups;
            return Computed { trace::computeStats(events, context), QThread::currentThread() };
        }));
}

} // namespace loom::views
