#include "views/RunPanel.h"

#include "engine/plan/EngineSupport.h"
#include "launcher/LaunchCommands.h"
#include "views/Explain.h"
#include "views/RankLogsDialog.h"
#include "views/RunMonitor.h"

#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLocale>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QSpinBox>
#include <QVBoxLayout>

namespace loom::views {

RunPanel::RunPanel(RunMonitor* monitor, QWidget* parent)
    : QWidget(parent)
    , m_monitor(monitor)
{
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(6, 6, 6, 6);
    auto* form = new QFormLayout;
    m_target = new QLabel;
    m_target->setWordWrap(true);
    m_steps = new QSpinBox;
    m_steps->setRange(1, 10000000);
    m_steps->setValue(30);
    m_steps->setToolTip(tr("Optimizer steps to train."));
    form->addRow(tr("Target"), m_target);
    form->addRow(tr("Steps"), m_steps);
    layout->addLayout(form);
    auto* buttons = new QHBoxLayout;
    m_run = new QPushButton(tr("Run"));
    m_run->setToolTip(tr("Launch the training engine with this layout (Ctrl+R)."));
    m_cancel = new QPushButton(tr("Cancel"));
    m_cancel->setToolTip(tr("Stop the run: SIGTERM to every rank (they finish their step), SIGKILL after 10 s."));
    m_logs = new QPushButton(tr("Logs"));
    m_logs->setToolTip(tr("Each rank's log of this run: its standard output and error, kept in the run folder."));
    buttons->addWidget(m_run);
    buttons->addWidget(m_cancel);
    buttons->addWidget(m_logs);
    layout->addLayout(buttons);
    m_progress = new QProgressBar;
    m_progress->setRange(0, 1);
    m_progress->setValue(0);
    layout->addWidget(m_progress);
    m_status = new QLabel(tr("No run yet."));
    m_status->setWordWrap(true);
    m_status->setTextInteractionFlags(Qt::TextSelectableByMouse);
    layout->addWidget(m_status);
    m_log = new QPlainTextEdit;
    m_log->setReadOnly(true);
    m_log->setPlaceholderText(tr("The tail of a failed run's log appears here."));
    m_log->setMaximumBlockCount(400);
    QFont mono(QStringLiteral("monospace"));
    mono.setStyleHint(QFont::TypeWriter);
    m_log->setFont(mono);
    layout->addWidget(m_log, 1);

    connect(m_run, &QPushButton::clicked, this, &RunPanel::run);
    connect(m_logs, &QPushButton::clicked, this, &RunPanel::showLogs);
    connect(m_cancel, &QPushButton::clicked, this, [this] {
        m_monitor->cancel();
        m_cancelRequested = m_monitor->running();
        m_status->setText(tr("Cancelling: every rank finishes its step (and saves a checkpoint when asked to), "
                             "then stops…"));
    });
    connect(monitor, &RunMonitor::stepAdded, this, &RunPanel::showStep);
    connect(monitor, &RunMonitor::reset, this, &RunPanel::updateButtons); // a run opened from history has logs
    connect(monitor, &RunMonitor::remoteStatus, this, [this](const QString& text) {
        if (!m_cancelRequested)
            m_status->setText(text);
    });
    connect(monitor, &RunMonitor::finished, this,
        [this](profiles::RunState state, const QString& cause, const QString& tail) {
            m_cancelRequested = false;
            QString text = tr("Run %1 %2.").arg(m_monitor->runId()).arg(profiles::toString(state));
            if (!cause.isEmpty())
                text += QLatin1Char(' ') + cause;
            if (!m_monitor->steps().empty())
                text += tr(" Last step %1: loss %2.")
                            .arg(m_monitor->steps().back().step)
                            .arg(profiles::lossText(m_monitor->steps().back().loss));
            m_status->setText(text);
            m_status->setStyleSheet(
                state == profiles::RunState::Finished ? QString() : QStringLiteral("color: #C01F1F;"));
            m_log->setPlainText(state == profiles::RunState::Failed ? tail : QString());
            updateButtons();
        });
    connect(monitor, &RunMonitor::started, this, [this](qint64 id) {
        m_status->setStyleSheet(QString());
        m_status->setText(tr("Run %1 starting: %2").arg(id).arg(target()));
        m_log->clear();
        m_progress->setRange(0, int(m_monitor->totalSteps()));
        m_progress->setValue(0);
        updateButtons();
    });
    updateButtons();
}

QString RunPanel::target() const
{
    const auto& c = m_layout.cluster;
    const std::string& method = c.launch.method;
    if (method == "ssh")
        return tr("%1: mpirun on %2 over ssh, %3 node(s)")
            .arg(QString::fromStdString(c.name),
                QString::fromStdString(
                    c.launch.headNode.empty() && !c.hosts.empty() ? c.hosts.front() : c.launch.headNode))
            .arg(m_layout.nodes);
    if (method == "slurm")
        return tr("%1: a Slurm job of %2 node(s)").arg(QString::fromStdString(c.name)).arg(m_layout.nodes);
    return tr("%1: mpirun on this machine, %2 process(es)")
        .arg(QString::fromStdString(c.name))
        .arg(m_layout.parallel.worldSize());
}

void RunPanel::setLayout(const plan::Layout& layout, bool valid, const QString& whyNot)
{
    m_layout = layout;
    m_valid = valid;
    m_whyNot = whyNot;
    // A valid layout the bundled engine cannot train: Run stays disabled and says why (plan::engineSupport).
    const plan::EngineSupport support = plan::engineSupport(layout);
    m_engineRefusal = valid && !support.trainable() ? QString::fromStdString(support.reason()) : QString();
    // What the launcher would refuse before starting a rank (8,192 local processes, a policy, a Slurm
    // header value) disables Run too, so a click never ends in a run that fails at once.
    launcher::LaunchRequest request;
    request.layout = layout;
    m_launchRefusal = valid && m_engineRefusal.isEmpty() ? launcher::launchRefusal(request) : QString();
    m_target->setText(target());
    updateButtons();
}

void RunPanel::updateButtons()
{
    const bool running = m_monitor->running();
    m_run->setEnabled(!running && m_valid && m_engineRefusal.isEmpty() && m_launchRefusal.isEmpty());
    m_run->setToolTip(!m_valid ? tr("The layout is not valid: %1").arg(m_whyNot)
            : !m_engineRefusal.isEmpty()
            ? tr("The planner models this; loom-train cannot train it: %1").arg(m_engineRefusal)
            : !m_launchRefusal.isEmpty() ? tr("Loom would refuse to launch this: %1").arg(m_launchRefusal)
                                         : tr("Launch the training engine with this layout (Ctrl+R)."));
    m_cancel->setEnabled(running);
    m_steps->setEnabled(!running);
    m_logs->setEnabled(m_monitor->runId() > 0);
}

void RunPanel::showLogs()
{
    const qint64 id = m_monitor->runId();
    std::optional<profiles::RunRecord> record;
    try {
        record = profiles::RunStore(*m_monitor->store()).run(id);
    } catch (const std::exception& e) {
        m_status->setText(tr("Cannot read run %1 from the store: %2").arg(id).arg(QString::fromUtf8(e.what())));
        return;
    }
    if (!record)
        return;
    auto* dialog = new RankLogsDialog(id, record->command, this);
    dialog->setAttribute(Qt::WA_DeleteOnClose);
    dialog->show(); // not modal: the run goes on beside it
}

bool RunPanel::run()
{
    if (!m_valid) {
        m_status->setText(tr("Cannot run: the layout is not valid. %1").arg(m_whyNot));
        return false;
    }
    if (!m_engineRefusal.isEmpty()) {
        m_status->setText(
            tr("Cannot run: the planner models this; loom-train cannot train it: %1").arg(m_engineRefusal));
        return false;
    }
    if (!m_launchRefusal.isEmpty()) {
        m_status->setText(tr("Cannot run: %1").arg(m_launchRefusal));
        return false;
    }
    QString error;
    m_cancelRequested = false;
    if (m_monitor->start(m_layout, m_steps->value(), &error) == 0) {
        m_status->setText(tr("Cannot run: %1").arg(error));
        m_status->setStyleSheet(QStringLiteral("color: #C01F1F;"));
        updateButtons();
        return false;
    }
    return true;
}

QString RunPanel::status() const
{
    return m_status->text();
}

void RunPanel::showStep()
{
    const auto& steps = m_monitor->steps();
    if (steps.empty())
        return;
    const auto& s = steps.back();
    const qint64 total = m_monitor->totalSteps();
    m_progress->setRange(0, int(total));
    m_progress->setValue(int(s.step));
    if (m_cancelRequested) { // the ranks are finishing their step: say so, not the ETA of a run that stops
        m_status->setText(tr("Cancelling run %1: every rank finishes its step, then stops (step %2 done)…")
                              .arg(m_monitor->runId())
                              .arg(s.step));
        return;
    }
    const double eta = s.stepTimeSeconds * double(std::max<qint64>(0, total - s.step));
    m_status->setText(tr("Run %1: step %2 of %3, loss %4, %5 tokens/s, ETA %6")
                          .arg(m_monitor->runId())
                          .arg(s.step)
                          .arg(total)
                          .arg(profiles::lossText(s.loss))
                          .arg(QLocale().toString(s.tokensPerSecond, 'f', 0))
                          .arg(formatSeconds(eta))
        + measuredMemoryText(s, m_monitor->prediction()));
}

QString measuredMemoryText(const profiles::StepRecord& step, const std::optional<plan::Prediction>& prediction)
{
    const qint64 peak = step.peakMemoryBytes();
    if (peak <= 0)
        return {};
    const QString measured = QLocale().toString(double(peak) / 1e9, 'f', 3);
    if (!prediction)
        return QObject::tr("; memory %1 GB (the most loaded rank's high-water mark)").arg(measured);
    return QObject::tr("; memory %1 GB measured, %2 GB predicted (the most loaded rank)")
        .arg(measured, QLocale().toString(prediction->memory.total(), 'f', 3));
}

} // namespace loom::views
