#include "views/CalibrateDialog.h"

#include "engine/profiles/CalibratedProfile.h"
#include "engine/trace/PlainWhat.h"
#include "profiles/ProfileCatalog.h"
#include "views/Explain.h"
#include "views/TimelineData.h"

#include <QDialogButtonBox>
#include <QFormLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QLocale>
#include <QPushButton>
#include <QTableWidget>
#include <QVBoxLayout>

namespace loom::views {

namespace {
QString figure(double v)
{
    return QLocale().toString(v, 'g', 4);
}
} // namespace

CalibrateDialog::CalibrateDialog(
    const plan::Layout& layout, const TimelineData& measured, profiles::Store* store, qint64 runId, QWidget* parent)
    : QDialog(parent)
    , m_layout(layout)
    , m_store(store)
    , m_run(runId)
{
    setWindowTitle(tr("Calibrate %1 from run %2").arg(QString::fromStdString(layout.cluster.name)).arg(runId));
    auto* box = new QVBoxLayout(this);
    m_summary = new QLabel;
    m_summary->setWordWrap(true);
    m_summary->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_table = new QTableWidget(0, 4);
    m_table->setHorizontalHeaderLabels({ tr("Parameter"), tr("Before"), tr("After"), tr("Fitted from") });
    m_table->setEditTriggers(QAbstractItemView::NoEditTriggers);
    m_table->horizontalHeader()->setStretchLastSection(true);
    m_table->verticalHeader()->hide();
    m_name = new QLineEdit(QString::fromStdString(profiles::calibratedName(layout.cluster.name)));
    m_name->setToolTip(tr("The name of the calibrated cluster profile; a layout uses it as its \"cluster\"."));
    auto* form = new QFormLayout;
    form->addRow(tr("Save as"), m_name);
    m_status = new QLabel;
    m_status->setWordWrap(true);
    auto* buttons = new QDialogButtonBox(QDialogButtonBox::Close);
    m_save = buttons->addButton(tr("Save profile"), QDialogButtonBox::ApplyRole);
    box->addWidget(m_summary);
    box->addWidget(m_table, 1);
    box->addLayout(form);
    box->addWidget(m_status);
    box->addWidget(buttons);
    connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
    connect(m_save, &QPushButton::clicked, this, &CalibrateDialog::save);
    resize(760, 420);

    // The kind of each group as the trace names it, as readCalibrationTrace gives the CLI.
    std::map<std::int32_t, trace::GroupKind> kinds;
    for (const auto& g : measured.groups())
        kinds[g.id] = g.kind;
    try {
        m_fit = plan::calibrate(layout, measured.events(), kinds);
    } catch (const std::exception& e) {
        m_summary->setText(tr("This run cannot calibrate %1: %2")
                               .arg(QString::fromStdString(layout.cluster.name), QString::fromStdString(plainWhat(e))));
    }
    fill();
}

void CalibrateDialog::fill()
{
    m_save->setEnabled(m_fit.has_value() && m_store);
    m_name->setEnabled(m_fit.has_value() && m_store);
    if (!m_fit)
        return;
    const plan::Calibration& fit = *m_fit;
    const QLocale l;
    QString text
        = tr("%1 measured steps of %2 (tp %3, pp %4, dp %5): measured step %6; predicted %7 before, "
             "%8 after calibration (measured ÷ predicted × %9 before, × %10 after).")
              .arg(fit.steps)
              .arg(QString::fromStdString(m_layout.name))
              .arg(m_layout.parallel.tp)
              .arg(m_layout.parallel.pp)
              .arg(m_layout.parallel.dp)
              .arg(formatSeconds(fit.measuredStepSeconds), formatSeconds(fit.predictedBefore),
                  formatSeconds(fit.predictedAfter),
                  fit.predictedBefore > 0 ? l.toString(fit.measuredStepSeconds / fit.predictedBefore, 'f', 2) : tr("–"),
                  fit.predictedAfter > 0 ? l.toString(fit.measuredStepSeconds / fit.predictedAfter, 'f', 2) : tr("–"));
    for (const auto& r : fit.residuals)
        text += QStringLiteral("\n")
            + tr("Residual of %1 (%2 events): %3 % before, %4 % after.")
                  .arg(QString::fromStdString(r.what))
                  .arg(r.events)
                  .arg(l.toString(100 * r.rmsBefore, 'f', 1), l.toString(100 * r.rmsAfter, 'f', 1));
    if (!m_store)
        text += QStringLiteral("\n") + tr("No store is open: the profile cannot be saved.");
    m_summary->setText(text);
    m_table->setRowCount(int(fit.parameters.size()));
    for (int i = 0; i < int(fit.parameters.size()); ++i) {
        const auto& p = fit.parameters[std::size_t(i)];
        m_table->setItem(i, 0, new QTableWidgetItem(QString::fromStdString(p.name)));
        m_table->setItem(i, 1, new QTableWidgetItem(figure(p.before)));
        m_table->setItem(i, 2, new QTableWidgetItem(p.fitted ? figure(p.after) : tr("kept")));
        m_table->setItem(i, 3, new QTableWidgetItem(QString::fromStdString(p.note)));
    }
    m_table->resizeColumnsToContents();
}

void CalibrateDialog::save()
{
    if (!m_fit || !m_store)
        return;
    const std::string name = m_name->text().trimmed().toStdString();
    const profiles::Profile profile = profiles::calibratedProfile(
        *m_fit, m_layout.cluster, m_layout, name, "the workbench's Calibrate from run " + std::to_string(m_run));
    profiles::ProfileCatalog catalog(m_store);
    if (const std::string refused = catalog.add(profile); !refused.empty()) {
        m_status->setText(tr("Not saved: %1").arg(QString::fromStdString(refused)));
        return;
    }
    m_status->setText(tr("Saved cluster profile \"%1\" in %2; use it with \"cluster\": \"%1\" in a layout.")
                          .arg(QString::fromStdString(name), m_store->path()));
}

} // namespace loom::views
