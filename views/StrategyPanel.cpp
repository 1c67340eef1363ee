#include "views/StrategyPanel.h"
#include "views/StrategyWidgets.h"

#include "engine/plan/Choices.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFormLayout>
#include <QGroupBox>
#include <QIntValidator>
#include <QLabel>
#include <QLineEdit>
#include <QSignalBlocker>
#include <QSpinBox>
#include <QStandardItemModel>
#include <QTabWidget>
#include <QVBoxLayout>

#include <algorithm>

namespace loom::views {

namespace {

QString name(Degree d)
{
    return d == Degree::Tp ? QStringLiteral("tp") : d == Degree::Pp ? QStringLiteral("pp") : QStringLiteral("dp");
}

} // namespace

using namespace strategy;

StrategyPanel::StrategyPanel(const plan::ProfileResolver* profiles, QWidget* parent)
    : QWidget(parent)
    , m_profiles(profiles)
{
    build();
}

QComboBox* StrategyPanel::degreeBox(Degree degree) const
{
    return degree == Degree::Tp ? m_tp : degree == Degree::Pp ? m_pp : m_dp;
}

void StrategyPanel::build()
{
    auto* outer = new QVBoxLayout(this);
    outer->setContentsMargins(6, 6, 6, 6);
    // One group a tab: the tallest fits above Prediction at 1280×800, where the stacked groups needed a page of
    // scrolling. A lesson's step brings its widget's tab forward (LessonDock).
    m_groups = new QTabWidget;
    m_groups->setObjectName(QStringLiteral("strategyGroups"));
    m_groups->setDocumentMode(true);
    m_groups->addTab(buildWhere(), tr("Model"));
    m_groups->addTab(buildParallelism(), tr("Parallel"));
    m_groups->addTab(m_scheduleGroup, tr("Schedule"));
    m_groups->addTab(buildMemory(), tr("Memory"));
    m_groups->addTab(buildComm(), tr("Comm."));
    outer->addWidget(m_groups);
    m_message = new QLabel;
    m_message->setWordWrap(true);
    m_message->setObjectName(QStringLiteral("refusal"));
    m_message->setStyleSheet(QStringLiteral("QLabel#refusal { color: #C01F1F; }"));
    m_message->setTextInteractionFlags(Qt::TextSelectableByMouse);
    outer->addWidget(m_message);
    outer->addStretch(1);
    nameControls();
    // A combo box as wide as a few characters, not as its longest entry (a profile's name, "interleaved"):
    // the panel then fits the right side at 1280 px, and the popup still shows the whole entries.
    for (QComboBox* box : findChildren<QComboBox*>()) {
        box->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
        box->setMinimumContentsLength(6);
    }
    connectPlacement();
    connectParallelism();
    connectMemory();
    connectComm();
}

void StrategyPanel::setLayout(const plan::Layout& layout)
{
    m_layout = layout;
    const QList<QWidget*> all = findChildren<QWidget*>();
    std::vector<std::unique_ptr<QSignalBlocker>> blockers;
    for (QWidget* w : all)
        blockers.push_back(std::make_unique<QSignalBlocker>(w));

    auto fillProfiles = [](QComboBox* box, const std::vector<std::string>& names, const std::string& current,
                            const std::string& inlineName) {
        box->clear();
        if (current.empty())
            box->addItem(QObject::tr("%1 (in the file)").arg(QString::fromStdString(inlineName)), QString());
        for (const auto& n : names)
            box->addItem(QString::fromStdString(n), QString::fromStdString(n));
        box->setCurrentIndex(std::max(0, box->findData(QString::fromStdString(current))));
    };
    fillProfiles(m_model, m_profiles ? m_profiles->modelNames() : std::vector<std::string> {}, layout.modelProfile,
        layout.model.name);
    fillProfiles(m_cluster, m_profiles ? m_profiles->clusterNames() : std::vector<std::string> {},
        layout.clusterProfile, layout.cluster.name);
    m_nodes->setValue(int(layout.nodes));
    m_nodes->setEnabled(layout.cluster.interNode.has_value());
    const auto& p = layout.parallel;
    m_cp->setValue(int(p.cp));
    m_vpp->setValue(int(p.vpp));
    m_vpp->setEnabled(p.schedule == plan::ScheduleKind::Interleaved);
    m_group->setValue(int(p.microbatchGroup));
    if (auto* form = qobject_cast<QFormLayout*>(m_group->parentWidget()->layout()))
        form->setRowVisible(m_group, p.schedule == plan::ScheduleKind::Interleaved);
    m_weightFill->setChecked(p.weightFill == plan::WeightFill::Idle);
    if (auto* form = qobject_cast<QFormLayout*>(m_weightFill->parentWidget()->layout()))
        form->setRowVisible(m_weightFill, plan::splitsBackward(p.schedule));
    m_endsAsLayers->setChecked(endsCountedAsLayers(layout));
    m_endsAsLayers->setEnabled(p.pp > 1
        && (m_endsAsLayers->isChecked()
            || !plan::accountedStageSplit(layout.model.layers, layout.virtualStages()).empty()));
    m_microBatch->setValue(int(p.microBatch));
    m_globalBatch->setValue(int(p.globalBatch));
    select(m_schedule, p.schedule);
    select(m_order, p.order);
    m_zero->setCurrentIndex(layout.memory.zero);
    select(m_recompute, layout.memory.recompute);
    select(m_precision, layout.precision);
    m_attention->setCurrentIndex(int(layout.memory.attention));
    m_efficientNorm->setChecked(layout.memory.efficientNorm);
    m_sp->setChecked(p.sp);
    m_sp->setEnabled(p.tp > 1 || p.sp);
    const auto& c = layout.comm;
    select(m_codec, c.dpCodec.kind);
    m_topk->setEnabled(c.dpCodec.kind == plan::Codec::Kind::TopK);
    if (c.dpCodec.kind == plan::Codec::Kind::TopK)
        m_topk->setValue(c.dpCodec.topkFraction);
    else if (m_topk->value() <= 0.0001)
        m_topk->setValue(0.01);
    m_errorFeedback->setChecked(c.errorFeedback);
    m_errorFeedback->setEnabled(c.dpCodec.lossy());
    m_overlap->setChecked(c.overlap);
    m_bucket->setValue(c.bucketMb);
    m_chunk->setValue(c.chunkKb);
    select(m_allreduce, c.allreduce);
    refreshChoices();
}

void StrategyPanel::refreshChoices()
{
    for (Degree d : { Degree::Tp, Degree::Pp, Degree::Dp }) {
        QComboBox* box = degreeBox(d);
        const QSignalBlocker block(box);
        auto* model = static_cast<QStandardItemModel*>(box->model());
        model->clear();
        const std::int64_t current = d == Degree::Tp ? m_layout.parallel.tp
            : d == Degree::Pp                        ? m_layout.parallel.pp
                                                     : m_layout.parallel.dp;
        int currentRow = 0;
        for (const auto& [value, refusal] : degreeChoices(m_layout, d)) {
            auto* item = new QStandardItem(QString::number(value));
            item->setData(qlonglong(value), Qt::UserRole);
            if (!refusal.empty()) {
                item->setEnabled(false);
                item->setToolTip(QString::fromStdString(refusal));
            }
            if (value == current)
                currentRow = model->rowCount();
            model->appendRow(item);
        }
        box->setCurrentIndex(currentRow);
        box->setEditText(QString::number(current));
    }
}

bool StrategyPanel::requestDegree(Degree degree, std::int64_t value)
{
    const EditResult r = withDegree(m_layout, degree, value);
    if (!r.ok()) {
        refuse(QString::fromStdString(r.refusal));
        setLayout(m_layout); // back to the current value
        return false;
    }
    requestEdit(*r.layout, tr("Set %1 to %2").arg(name(degree)).arg(value));
    return true;
}

QString StrategyPanel::message() const
{
    return m_message->text();
}

void StrategyPanel::refuse(const QString& why)
{
    m_message->setText(why);
}

void StrategyPanel::requestEdit(const plan::Layout& next, const QString& text, int mergeId)
{
    m_message->clear();
    if (next == m_layout)
        return;
    emit editRequested(next, text, mergeId);
}

} // namespace loom::views
