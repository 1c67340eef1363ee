#include "views/RunsPanel.h"
#include "views/FileDialogs.h"

#include "engine/trace/ChromeTrace.h"
#include "profiles/RunStore.h"
#include "views/RunHistoryModel.h"

#include <QHBoxLayout>
#include <QHeaderView>
#include <QMessageBox>
#include <QPushButton>
#include <QTableView>
#include <QVBoxLayout>

#include <fstream>

namespace loom::views {

RunsPanel::RunsPanel(profiles::Store* store, QWidget* parent)
    : QWidget(parent)
    , m_store(store)
    , m_model(new RunHistoryModel(store, this))
{
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(4, 4, 4, 4);
    m_table = new QTableView;
    m_table->setModel(m_model);
    m_table->setSelectionBehavior(QAbstractItemView::SelectRows);
    m_table->setSelectionMode(QAbstractItemView::ExtendedSelection);
    m_table->verticalHeader()->hide();
    m_table->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    m_table->horizontalHeader()->setStretchLastSection(true);
    layout->addWidget(m_table, 1);
    auto* buttons = new QHBoxLayout;
    auto* open = new QPushButton(tr("Open"));
    auto* compare = new QPushButton(tr("Compare"));
    compare->setToolTip(tr("Select two runs to see their metrics and timelines side by side."));
    auto* exportChromeButton = new QPushButton(tr("Export Chrome trace…"));
    auto* remove = new QPushButton(tr("Delete"));
    auto* refresh = new QPushButton(tr("Refresh"));
    for (auto* b : { open, compare, exportChromeButton, remove, refresh })
        buttons->addWidget(b);
    buttons->addStretch(1);
    layout->addLayout(buttons);

    connect(open, &QPushButton::clicked, this, [this] {
        const auto runs = selectedRuns();
        if (!runs.isEmpty())
            emit openRequested(runs.front());
    });
    connect(m_table, &QTableView::doubleClicked, this,
        [this](const QModelIndex& i) { emit openRequested(m_model->runIdAt(i.row())); });
    connect(compare, &QPushButton::clicked, this, [this] {
        const auto runs = selectedRuns();
        if (runs.size() != 2) {
            QMessageBox::information(
                this, tr("Compare runs"), tr("Select exactly two runs (Ctrl-click) to compare them."));
            return;
        }
        emit compareRequested(runs[0], runs[1]);
    });
    connect(remove, &QPushButton::clicked, this, [this] {
        const auto runs = selectedRuns();
        if (runs.isEmpty())
            return;
        if (QMessageBox::question(
                this, tr("Delete runs"), tr("Delete %1 run(s) with their metrics and events?").arg(runs.size()))
            != QMessageBox::Yes)
            return;
        for (qint64 id : runs) {
            QString error;
            if (!m_model->remove(id, &error))
                QMessageBox::warning(this, tr("Delete runs"), error);
        }
    });
    connect(exportChromeButton, &QPushButton::clicked, this, [this] {
        const auto runs = selectedRuns();
        if (runs.isEmpty())
            return;
        const QString path = saveFileName(this, tr("Export Chrome trace"),
            QStringLiteral("run-%1.json").arg(runs.front()), tr("Chrome trace (*.json)"));
        QString error;
        if (!path.isEmpty() && !exportChrome(runs.front(), path, &error))
            QMessageBox::warning(this, tr("Export Chrome trace"), error);
    });
    connect(refresh, &QPushButton::clicked, this, [this] {
        QString error;
        if (!m_model->refresh(&error))
            QMessageBox::warning(this, tr("Runs"), error);
    });
}

QList<qint64> RunsPanel::selectedRuns() const
{
    QList<qint64> out;
    for (const QModelIndex& i : m_table->selectionModel()->selectedRows())
        out << m_model->runIdAt(i.row());
    return out;
}

bool RunsPanel::exportChrome(qint64 runId, const QString& path, QString* error) const
{
    try {
        if (!m_store)
            throw std::runtime_error("no store");
        const auto events = profiles::RunStore(*m_store).events(runId);
        std::ofstream out(path.toStdString(), std::ios::trunc);
        if (!out) {
            if (error)
                *error = tr("Cannot write %1; choose a folder you may write to.").arg(path);
            return false;
        }
        trace::writeChromeTrace(out, events);
        return bool(out);
    } catch (const std::exception& e) {
        if (error)
            *error = tr("Run %1 could not be exported: %2").arg(runId).arg(QString::fromUtf8(e.what()));
        return false;
    }
}

} // namespace loom::views
