#pragma once

#include "engine/plan/CostModel.h"
#include "engine/plan/Layout.h"
#include "profiles/RunStore.h"

#include <QWidget>

#include <optional>

class QLabel;
class QPlainTextEdit;
class QProgressBar;
class QPushButton;
class QSpinBox;

namespace loom::views {

class RunMonitor;

// Launching the current layout: where it will run (the cluster profile's launch method: mpirun on this
// machine, mpirun on a head node over ssh, or Slurm), how many steps, Run and Cancel; then live status
// (step, loss, tokens/s, ETA) and, when a run fails, its cause and the tail of its log.
class RunPanel : public QWidget {
    Q_OBJECT
public:
    explicit RunPanel(RunMonitor* monitor, QWidget* parent = nullptr);

    // The layout Run launches and whether it is valid (Run is disabled, with the reason, when not).
    void setLayout(const plan::Layout& layout, bool valid, const QString& whyNot = {});
    // Starts the run; false with the reason shown when it cannot start.
    bool run();
    QPushButton* runButton() const { return m_run; }
    QPushButton* cancelButton() const { return m_cancel; }
    // Opens each rank's log of the shown run (RankLogsDialog).
    QPushButton* logsButton() const { return m_logs; }
    QSpinBox* stepsBox() const { return m_steps; }
    QString status() const;
    QString target() const;

private:
    void updateButtons();
    void showStep();
    void showLogs();

    RunMonitor* m_monitor;
    plan::Layout m_layout;
    bool m_valid = false;
    bool m_cancelRequested = false; // until the run ends, step updates keep saying that it is being cancelled
    QString m_whyNot;
    QString m_engineRefusal; // why loom-train cannot train the valid layout (plan::engineSupport); empty if it can
    QString m_launchRefusal; // why the launcher would refuse it here (policy, local-rank cap: launchRefusal)
    QLabel* m_target;
    QSpinBox* m_steps;
    QPushButton *m_run, *m_cancel, *m_logs;
    QProgressBar* m_progress;
    QLabel* m_status;
    QPlainTextEdit* m_log;
};

// The measured memory beside the prediction for a step's status line: "; memory 2.372 GB measured, 2.399 GB
// predicted (the most loaded rank)", from the step frame's per-rank high-water marks; empty when not measured.
QString measuredMemoryText(const profiles::StepRecord& step, const std::optional<plan::Prediction>& prediction);

} // namespace loom::views
