#pragma once

#include "engine/plan/Calibrate.h"

#include <QDialog>

#include <optional>

class QLabel;
class QLineEdit;
class QPushButton;
class QTableWidget;

namespace loom::profiles {
class Store;
}

namespace loom::views {

class TimelineData;

// "Calibrate from this run": fits the run's cluster profile to its measured events with the planner's
// calibrate (the code behind `loom plan calibrate`), lists every parameter before and after the fit with what
// it was fitted from, the fit's residuals and the predicted step before and after against the measured one,
// and saves the fitted cluster as a user profile in the store under a name the user may change (the same
// profile, name and source the CLI saves).
class CalibrateDialog : public QDialog {
    Q_OBJECT
public:
    // `store` may be null: then nothing can be saved. `runId` names the run in the saved profile's source.
    CalibrateDialog(const plan::Layout& layout, const TimelineData& measured, profiles::Store* store, qint64 runId,
        QWidget* parent = nullptr);

    // The fit, or none when the events could not be fitted (the reason is in summary()).
    const std::optional<plan::Calibration>& calibration() const { return m_fit; }
    QLabel* summary() const { return m_summary; }
    QTableWidget* parameters() const { return m_table; }
    QLineEdit* nameEdit() const { return m_name; }
    QPushButton* saveButton() const { return m_save; }
    // What the last save said: the profile saved, or why the store refused it.
    QLabel* saveStatus() const { return m_status; }

private:
    void fill();
    void save();

    plan::Layout m_layout;
    profiles::Store* m_store;
    qint64 m_run;
    std::optional<plan::Calibration> m_fit;
    QLabel *m_summary, *m_status;
    QTableWidget* m_table;
    QLineEdit* m_name;
    QPushButton* m_save;
};

} // namespace loom::views
