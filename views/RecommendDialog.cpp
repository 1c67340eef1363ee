#include "views/RecommendDialog.h"

#include "views/CandidateModel.h"

#include <QDialogButtonBox>
#include <QHeaderView>
#include <QLabel>
#include <QProgressBar>
#include <QPushButton>
#include <QTableView>
#include <QTimer>
#include <QVBoxLayout>
#include <QtConcurrent/QtConcurrentRun>

namespace loom::views {

RecommendDialog::RecommendDialog(const plan::Layout& current, QWidget* parent)
    : QDialog(parent)
    , m_current(current)
    , m_shared(std::make_shared<Shared>())
    , m_model(new CandidateModel(this))
{
    setWindowTitle(tr("Recommend a layout"));
    auto* layout = new QVBoxLayout(this);
    auto* intro = new QLabel(tr("Every valid tp, pp, dp, vpp, micro-batch, schedule, ZeRO and recompute for %1 on %2 "
                                "node(s) of %3 with a global batch of %4, ranked by predicted tokens per second; only "
                                "layouts that fit in memory are listed.")
                                 .arg(QString::fromStdString(current.model.name))
                                 .arg(current.nodes)
                                 .arg(QString::fromStdString(current.cluster.name))
                                 .arg(current.parallel.globalBatch));
    intro->setWordWrap(true);
    layout->addWidget(intro);
    m_progress = new QProgressBar;
    m_progress->setRange(0, 1000);
    layout->addWidget(m_progress);
    m_table = new QTableView;
    m_table->setModel(m_model);
    m_table->setSelectionBehavior(QAbstractItemView::SelectRows);
    m_table->setSelectionMode(QAbstractItemView::SingleSelection);
    m_table->verticalHeader()->hide();
    m_table->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    layout->addWidget(m_table, 1);
    m_message = new QLabel;
    m_message->setWordWrap(true);
    m_message->setTextInteractionFlags(Qt::TextSelectableByMouse);
    layout->addWidget(m_message);
    auto* buttons = new QDialogButtonBox;
    m_apply = buttons->addButton(tr("Apply"), QDialogButtonBox::AcceptRole);
    m_apply->setEnabled(false);
    m_cancel = buttons->addButton(QDialogButtonBox::Cancel);
    layout->addWidget(buttons);
    connect(m_apply, &QPushButton::clicked, this, &RecommendDialog::apply);
    connect(m_table, &QTableView::doubleClicked, this, &RecommendDialog::apply);
    connect(m_cancel, &QPushButton::clicked, this, [this] {
        if (running()) {
            m_shared->cancel = true;
            m_message->setText(tr("Cancelling…"));
        } else {
            reject();
        }
    });
    m_poll = new QTimer(this);
    m_poll->setInterval(50);
    connect(m_poll, &QTimer::timeout, this, [this] { m_progress->setValue(int(m_shared->progress * 1000)); });
    connect(&m_watcher, &QFutureWatcher<plan::SearchResult>::finished, this, &RecommendDialog::finished);
    resize(900, 480);
}

RecommendDialog::~RecommendDialog()
{
    m_shared->cancel = true;
    m_watcher.waitForFinished();
}

bool RecommendDialog::running() const
{
    return m_watcher.isRunning();
}

QString RecommendDialog::message() const
{
    return m_message->text();
}

void RecommendDialog::start()
{
    plan::SearchRequest request;
    request.model = m_current.model;
    request.modelProfile = m_current.modelProfile;
    request.cluster = m_current.cluster;
    request.clusterProfile = m_current.clusterProfile;
    request.nodes = m_current.nodes;
    request.globalBatch = m_current.parallel.globalBatch;
    request.precision = m_current.precision;
    request.top = 10;
    QString scope;
    if (request.cluster.autoDevices()) {
        // A cluster whose device count the layout sets (the example's "local": processes on this machine):
        // search the layouts of as many ranks as the current one has, on one node of that many devices.
        const std::int64_t ranks = std::max<std::int64_t>(1, m_current.parallel.worldSize());
        request.cluster.devicesPerNode = ranks;
        request.nodes = 1;
        scope = tr("%1 has no fixed number of devices, so the search keeps the current %2 rank(s). ")
                    .arg(QString::fromStdString(m_current.cluster.name))
                    .arg(ranks);
    }
    m_scope = scope;
    auto shared = m_shared;
    request.progress = [shared](double fraction) {
        shared->progress = fraction;
        return !shared->cancel.load();
    };
    m_message->setText(tr("Searching…"));
    m_poll->start();
    m_watcher.setFuture(QtConcurrent::run([request] {
        try {
            return plan::search(request);
        } catch (const std::exception& e) {
            plan::SearchResult r;
            r.why = std::string("error: ") + e.what();
            return r;
        }
    }));
}

void RecommendDialog::finished()
{
    m_poll->stop();
    plan::SearchResult r = m_watcher.result();
    m_progress->setValue(1000);
    if (r.why.rfind("error: ", 0) == 0)
        m_progress->hide(); // nothing was searched: no bar at 100 %
    if (r.cancelled) {
        m_message->setText(tr("Search cancelled after %1 layouts.").arg(r.evaluated));
    } else if (r.why.rfind("error: ", 0) == 0) {
        m_message->setText(tr("The search cannot run: %1").arg(QString::fromStdString(r.why.substr(7))));
    } else if (r.ranked.empty()) {
        m_message->setText(tr("%1 valid layouts evaluated; none fits in memory. Use more nodes, a smaller model, or "
                              "a smaller global batch.")
                               .arg(r.evaluated + r.pruned + r.bounded)); // pruned ones were ruled out by memory too
    } else {
        // Bounded ones were not estimated: even their compute and bubble are slower than the best found.
        const QString skipped
            = r.bounded > 0 ? tr(" %1 more could not beat the best and were not estimated.").arg(r.bounded) : QString();
        m_message->setText(m_scope
            + tr("%1 valid layouts evaluated, %2 fit.%3 %4")
                  .arg(r.evaluated)
                  .arg(r.fitting)
                  .arg(skipped)
                  .arg(QString::fromStdString(r.why.empty() ? std::string() : r.why + ".")));
    }
    m_model->setCandidates(std::move(r.ranked));
    if (m_model->rowCount() > 0) {
        m_table->selectRow(0);
        m_apply->setEnabled(true);
    }
    m_cancel->setText(tr("Close"));
    emit searchFinished();
}

plan::Layout RecommendDialog::layoutFor(int row) const
{
    plan::Layout l = m_model->candidate(row).layout;
    l.name = m_current.name;
    l.description = m_current.description;
    l.comm = m_current.comm;
    if (m_current.cluster.autoDevices()) // the search's stand-in cluster gives way to the layout's own
        l.cluster = m_current.cluster;
    if (l.parallel.dp == 1)
        l.comm.dpCodec = {};
    return l;
}

void RecommendDialog::apply()
{
    const auto rows = m_table->selectionModel()->selectedRows();
    if (rows.isEmpty())
        return;
    emit layoutChosen(layoutFor(rows.front().row()));
    accept();
}

} // namespace loom::views
