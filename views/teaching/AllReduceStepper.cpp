#include "views/teaching/AllReduceStepper.h"

#include "engine/plan/CollectiveCost.h"
#include "engine/plan/CostModel.h"
#include "engine/plan/RankGrid.h"
#include "views/Colors.h"
#include "views/Explain.h"
#include "views/TopologyScene.h"

#include <QComboBox>
#include <QFormLayout>
#include <QGraphicsObject>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLocale>
#include <QPainter>
#include <QPushButton>
#include <QSignalBlocker>
#include <QSpinBox>
#include <QTableWidget>
#include <QTimer>
#include <QVBoxLayout>

#include <algorithm>
#include <cmath>

namespace loom::views {

// The current step's transfers as arrows between the devices of the map (dashed when they cross nodes),
// each labelled with its chunk; the group's devices outlined.
class AllReduceOverlay : public QGraphicsObject {
public:
    explicit AllReduceOverlay(const TopologyScene* scene)
        : m_scene(scene)
    {
        setZValue(10);
        setAcceptedMouseButtons(Qt::NoButton);
        setAcceptHoverEvents(false);
    }
    void set(std::vector<std::int64_t> ranks, std::vector<plan::Transfer> transfers, QColor color)
    {
        prepareGeometryChange();
        m_ranks = std::move(ranks);
        m_transfers = std::move(transfers);
        m_color = color;
        // The group's devices and a margin for the arrows' bends and labels (never the scene's rect: that
        // would ask this item for its own bounds).
        m_bounds = QRectF();
        for (std::int64_t r : m_ranks)
            m_bounds |= rectOf(r);
        if (!m_bounds.isNull())
            m_bounds = m_bounds.adjusted(-60, -60, 60, 60);
        update();
    }
    QRectF boundingRect() const override { return m_bounds; }
    void paint(QPainter* p, const QStyleOptionGraphicsItem*, QWidget*) override
    {
        p->setRenderHint(QPainter::Antialiasing);
        p->setBrush(Qt::NoBrush);
        p->setPen(QPen(m_color, 3));
        for (std::int64_t r : m_ranks)
            p->drawRoundedRect(rectOf(r).adjusted(-2, -2, 2, 2), 4, 4);
        QFont f = p->font();
        f.setBold(true);
        p->setFont(f);
        for (const auto& t : m_transfers) {
            const QRectF a = rectOf(t.src), b = rectOf(t.dst);
            if (a.isNull() || b.isNull())
                continue;
            // Arrows leave the top half and arrive at the bottom half, so the two directions of a pair differ.
            QPointF from = a.center() + QPointF(0, -a.height() / 6), to = b.center() + QPointF(0, b.height() / 6);
            const QLineF line(from, to);
            const qreal bend = std::min<qreal>(40, line.length() / 4);
            const QPointF normal = QPointF(-line.dy(), line.dx()) / std::max<qreal>(1, line.length());
            const QPointF control = (from + to) / 2 + normal * bend;
            QPainterPath path(from);
            path.quadTo(control, to);
            p->setPen(QPen(m_color.darker(120), 2.5, t.interNode ? Qt::DashLine : Qt::SolidLine, Qt::RoundCap));
            p->drawPath(path);
            const QLineF tip(control, to);
            const qreal angle = std::atan2(-tip.dy(), tip.dx());
            const QPointF p1 = to - QPointF(std::cos(angle + 0.45) * 10, -std::sin(angle + 0.45) * 10);
            const QPointF p2 = to - QPointF(std::cos(angle - 0.45) * 10, -std::sin(angle - 0.45) * 10);
            p->setBrush(m_color.darker(120));
            p->drawPolygon(QPolygonF({ to, p1, p2 }));
            p->setBrush(Qt::NoBrush);
            const QPointF mid = path.pointAtPercent(0.5);
            const QString label = QStringLiteral("c%1").arg(t.chunk);
            const QRectF box(mid.x() - 14, mid.y() - 9, 28, 18);
            p->setPen(Qt::NoPen);
            p->setBrush(QColor(255, 255, 255, 225));
            p->drawRoundedRect(box, 4, 4);
            p->setPen(m_color.darker(160));
            p->drawText(box, Qt::AlignCenter, label);
            p->setBrush(Qt::NoBrush);
        }
    }

private:
    QRectF rectOf(std::int64_t rank) const
    {
        const std::int64_t perNode = m_scene->devicesPerNode();
        if (perNode <= 0 || rank / perNode >= m_scene->nodeCount())
            return {};
        return m_scene->deviceRect(rank / perNode, rank % perNode);
    }
    const TopologyScene* m_scene;
    std::vector<std::int64_t> m_ranks;
    std::vector<plan::Transfer> m_transfers;
    QColor m_color;
    QRectF m_bounds;
};

namespace {
QString bytesText(double b)
{
    if (b >= 1e9)
        return QLocale().toString(b / 1e9, 'f', 2) + QStringLiteral(" GB");
    if (b >= 1e6)
        return QLocale().toString(b / 1e6, 'f', 2) + QStringLiteral(" MB");
    return QLocale().toString(b / 1e3, 'f', 1) + QStringLiteral(" KB");
}
} // namespace

double allReduceBytes(const plan::Layout& l, bool dataParallel, std::int64_t pipelineRank)
{
    const double width = l.precision == plan::Precision::Fp32 ? 4.0 : 2.0;
    if (!dataParallel)
        return double(l.parallel.microBatch) * double(l.model.seqLen) * double(l.model.hidden) * width;
    const auto ranges = l.stageRanges();
    const std::int64_t pp = l.parallel.pp;
    double params = 0;
    for (std::int64_t vs = pipelineRank; vs < std::int64_t(ranges.size()); vs += pp)
        params += double(ranges[std::size_t(vs)].size()) * double(l.model.blockParameters());
    if (pipelineRank == 0)
        params += double(l.model.embeddingParameters());
    if (pipelineRank == pp - 1)
        params += double(l.model.headParameters());
    return params / double(std::max<std::int64_t>(1, l.parallel.tp)) * width;
}

AllReduceStepper::AllReduceStepper(TopologyScene* scene, QWidget* parent)
    : QWidget(parent)
    , m_scene(scene)
{
    auto* outer = new QVBoxLayout(this);
    auto* controls = new QHBoxLayout;
    m_kind = new QComboBox;
    m_kind->addItem(tr("DP group (gradients)"), QStringLiteral("dp"));
    m_kind->addItem(tr("TP group (activations)"), QStringLiteral("tp"));
    m_kind->setObjectName(QStringLiteral("allreduceGroup"));
    m_group = new QSpinBox;
    m_group->setPrefix(tr("group "));
    m_algorithm = new QComboBox;
    m_algorithm->addItem(tr("ring"), QStringLiteral("ring"));
    m_algorithm->addItem(tr("hierarchical"), QStringLiteral("hierarchical"));
    m_algorithm->setObjectName(QStringLiteral("allreduceAlgorithm"));
    m_algorithm->setToolTip(tr("Ring: 2(n−1) steps around all members. Hierarchical: reduce-scatter inside each node, "
                               "all-reduce across the nodes, all-gather inside each node."));
    m_back = new QPushButton(tr("◀ Back"));
    m_next = new QPushButton(tr("Next ▶"));
    m_next->setObjectName(QStringLiteral("allreduceNext"));
    m_play = new QPushButton(tr("Play"));
    m_play->setCheckable(true);
    m_play->setObjectName(QStringLiteral("allreducePlay"));
    m_end = new QPushButton(tr("To end ⏭"));
    m_end->setObjectName(QStringLiteral("allreduceEnd"));
    m_end->setToolTip(tr("Show the last step (the whole all-reduce done)"));
    m_speed = new QComboBox;
    m_speed->setObjectName(QStringLiteral("allreduceSpeed"));
    m_speed->setToolTip(tr("Steps a second while playing"));
    for (int perSecond : { 1, 2, 5, 10, 20 })
        m_speed->addItem(tr("%1 steps/s").arg(perSecond), perSecond);
    m_speed->setCurrentIndex(1);
    m_position = new QLabel;
    for (QWidget* w : std::initializer_list<QWidget*> {
             m_kind, m_group, m_algorithm, m_back, m_next, m_play, m_speed, m_end, m_position })
        controls->addWidget(w);
    controls->addStretch(1);
    outer->addLayout(controls);
    m_summary = new QLabel;
    m_summary->setWordWrap(true);
    m_summary->setTextFormat(Qt::RichText);
    outer->addWidget(m_summary);
    m_nccl = new QLabel;
    m_nccl->setWordWrap(true);
    m_nccl->setTextFormat(Qt::RichText);
    m_nccl->setObjectName(QStringLiteral("allreduceNccl"));
    outer->addWidget(m_nccl);
    m_table = new QTableWidget(0, 6);
    m_table->setHorizontalHeaderLabels(
        { tr("from rank"), tr("to rank"), tr("chunk"), tr("bytes"), tr("link"), tr("α + bytes/β") });
    m_table->horizontalHeader()->setSectionResizeMode(QHeaderView::Stretch);
    m_table->verticalHeader()->hide();
    m_table->setEditTriggers(QAbstractItemView::NoEditTriggers);
    outer->addWidget(m_table, 1);
    m_timer = new QTimer(this);
    setSpeed(2); // 62 steps of a 32-GPU ring in half a minute; faster in the box
    connect(m_speed, &QComboBox::currentIndexChanged, this,
        [this] { m_timer->setInterval(1000 / std::max(1, m_speed->currentData().toInt())); });
    connect(m_end, &QPushButton::clicked, this, [this] {
        m_play->setChecked(false);
        toEnd();
    });

    connect(m_kind, &QComboBox::currentIndexChanged, this, [this] { recompute(); });
    connect(m_algorithm, &QComboBox::currentIndexChanged, this, [this] { recompute(); });
    connect(m_group, &QSpinBox::valueChanged, this, [this] { recompute(); });
    connect(m_back, &QPushButton::clicked, this, &AllReduceStepper::back);
    connect(m_next, &QPushButton::clicked, this, &AllReduceStepper::next);
    connect(m_play, &QPushButton::toggled, this, [this](bool on) {
        if (on && m_step >= stepCount())
            setStep(0);
        on ? m_timer->start() : m_timer->stop();
    });
    connect(m_timer, &QTimer::timeout, this, [this] {
        if (m_step >= stepCount())
            m_play->setChecked(false);
        else
            next();
    });
}

void AllReduceStepper::setSpeed(int stepsPerSecond)
{
    const int index = m_speed->findData(stepsPerSecond);
    m_speed->setCurrentIndex(index >= 0 ? index : 1);
    m_timer->setInterval(1000 / std::max(1, m_speed->currentData().toInt()));
}

int AllReduceStepper::speed() const
{
    return m_speed->currentData().toInt();
}

bool AllReduceStepper::playing() const
{
    return m_timer->isActive();
}

std::int64_t AllReduceStepper::nodesSpanned() const
{
    const std::int64_t perNode = m_layout.cluster.devicesPerNode;
    if (m_ranks.empty() || perNode <= 0)
        return m_ranks.empty() ? 0 : 1;
    std::vector<std::int64_t> nodes;
    for (std::int64_t r : m_ranks)
        nodes.push_back(r / perNode);
    std::sort(nodes.begin(), nodes.end());
    return std::int64_t(std::unique(nodes.begin(), nodes.end()) - nodes.begin());
}

std::int64_t AllReduceStepper::membersPerNode() const
{
    return members() / std::max<std::int64_t>(1, nodesSpanned());
}

int AllReduceStepper::interNodeSteps() const
{
    return int(std::count_if(m_steps.begin(), m_steps.end(), [](const plan::AllReduceStep& st) {
        return std::any_of(st.transfers.begin(), st.transfers.end(), [](const auto& t) { return t.interNode; });
    }));
}

QString AllReduceStepper::ncclAlgorithm() const
{
    if (members() < 2 || !plan::usesNcclModel(m_layout))
        return {};
    const plan::CollectiveTime t
        = plan::ncclCollective(m_layout.cluster, plan::Collective::AllReduce, m_bytes, { members(), nodesSpanned() });
    return QString::fromLatin1(plan::toString(t.algorithm).data(), qsizetype(plan::toString(t.algorithm).size()));
}

// What NCCL would do with the same all-reduce on the layout's cluster: the planner's model of its tuner
// (plan::ncclCollective) picks ring, tree or NVLS; across nodes each member gets its share of the node's NICs
// (one ring per rail).
QString AllReduceStepper::ncclText() const
{
    if (members() < 2)
        return {};
    if (!plan::usesNcclModel(m_layout))
        return tr("NCCL does not run this layout's collectives (%1 on the %2 cluster): the planner prices them as "
                  "the α-β ring above.")
            .arg(QString::fromStdString(std::string(plan::toString(m_layout.commBackend()))),
                QString::fromStdString(m_layout.cluster.name));
    const std::int64_t nodes = nodesSpanned(), perNode = membersPerNode();
    const plan::CollectiveTime t
        = plan::ncclCollective(m_layout.cluster, plan::Collective::AllReduce, m_bytes, { members(), nodes });
    QString text = tr("<b>NCCL</b> on %1 would pick <b>%2</b> for this all-reduce (its tuner's fastest of ring, "
                      "tree%3 for %4 over %5 ranks on %6 node(s)): %7, bus bandwidth %8 GB/s.")
                       .arg(QString::fromStdString(m_layout.cluster.name), ncclAlgorithm(),
                           m_layout.cluster.intraNode.nvls ? tr(" and NVLS") : QString(), bytesText(m_bytes))
                       .arg(members())
                       .arg(nodes)
                       .arg(formatSeconds(t.seconds), QLocale().toString(t.busBandwidthGBs, 'f', 1));
    if (nodes > 1 && m_layout.cluster.interNode) {
        const auto& net = *m_layout.cluster.interNode;
        text += tr(" Across nodes: %1 NIC(s) (rails) a node of %2 GB/s each, shared by its %3 devices; this group's "
                   "%4 member(s) a node get %5 GB/s each.")
                    .arg(net.nicsPerNode)
                    .arg(QLocale().toString(net.bandwidthGBs, 'g', 4))
                    .arg(m_layout.cluster.devicesPerNode)
                    .arg(perNode)
                    .arg(QLocale().toString(plan::interNodeBandwidthGBs(m_layout.cluster, perNode), 'g', 4));
    }
    return text;
}

AllReduceStepper::~AllReduceStepper()
{
    if (m_overlay)
        delete m_overlay.data();
}

void AllReduceStepper::showEvent(QShowEvent* event)
{
    QWidget::showEvent(event);
    display();
}

void AllReduceStepper::hideEvent(QHideEvent* event)
{
    QWidget::hideEvent(event);
    if (m_overlay)
        m_overlay->setVisible(false);
}

QString AllReduceStepper::groupKind() const
{
    return m_kind->currentData().toString();
}
QString AllReduceStepper::algorithm() const
{
    return m_algorithm->currentData().toString();
}

void AllReduceStepper::setGroupKind(const QString& kind)
{
    m_kind->setCurrentIndex(std::max(0, m_kind->findData(kind)));
}
void AllReduceStepper::setAlgorithm(const QString& a)
{
    m_algorithm->setCurrentIndex(std::max(0, m_algorithm->findData(a)));
}

void AllReduceStepper::setLayout(const plan::Layout& layout)
{
    m_layout = layout;
    recompute();
}

double AllReduceStepper::interNodeBytes() const
{
    double most = 0;
    for (std::int64_t r : m_ranks)
        most = std::max(most, plan::bytesSentBy(m_steps, r, true));
    return most;
}

void AllReduceStepper::recompute()
{
    const auto& par = m_layout.parallel;
    m_steps.clear();
    m_ranks.clear();
    if (par.tp >= 1 && par.pp >= 1 && par.dp >= 1 && par.worldSize() <= 1 << 20) {
        const bool dp = groupKind() == QLatin1String("dp");
        const plan::RankGrid grid = plan::RankGrid::forLayout(m_layout);
        const auto groups = grid.groups(dp ? plan::GroupKind::Data : plan::GroupKind::Tensor);
        {
            const QSignalBlocker block(m_group);
            m_group->setRange(0, std::max(0, int(groups.size()) - 1));
        }
        m_ranks = groups.empty() ? std::vector<std::int64_t> {} : groups[std::size_t(m_group->value())];
        m_bytes = allReduceBytes(m_layout, dp, m_ranks.empty() ? 0 : grid.coordOf(m_ranks.front()).pp);
        const auto& intra = m_layout.cluster.intraNode;
        const auto inter = m_layout.cluster.interNode.value_or(intra);
        m_steps = algorithm() == QLatin1String("hierarchical")
            ? plan::hierarchicalAllReduceSteps(m_ranks, m_bytes, grid.devicesPerNode(), intra, inter)
            : plan::ringAllReduceSteps(m_ranks, m_bytes, grid.devicesPerNode(), intra, inter);
    }
    m_step = 0;
    display();
}

void AllReduceStepper::setStep(int step)
{
    m_step = std::clamp(step, 0, stepCount());
    display();
}

void AllReduceStepper::next()
{
    setStep(m_step + 1);
}
void AllReduceStepper::back()
{
    setStep(m_step - 1);
}

void AllReduceStepper::display()
{
    const bool dp = groupKind() == QLatin1String("dp");
    const QColor color = dp ? colors::dataComm : colors::tensorComm;
    QStringList members;
    for (auto r : m_ranks)
        members << QString::number(r);
    const auto n = std::int64_t(m_ranks.size());
    const double total = plan::totalSeconds(m_steps);
    if (n < 2) {
        m_summary->setText(
            tr("This group has %1 member(s): there is nothing to all-reduce. Choose a layout with %2 ≥ 2.")
                .arg(n)
                .arg(dp ? QStringLiteral("dp") : QStringLiteral("tp")));
    } else {
        const bool crosses = interNodeBytes() > 0 && m_layout.cluster.interNode;
        const double formula = plan::ringAllReduceSeconds(
            m_bytes, n, crosses ? *m_layout.cluster.interNode : m_layout.cluster.intraNode);
        m_summary->setText(
            tr("All-reduce of %1 over ranks {%2}: %3 steps, each member sends %4 in all (2(n−1)/n·B for the ring), at "
               "most %5 of it between nodes. α-β time: %6, the sum of every step's α + bytes/β on the slowest link it "
               "uses (the ring formula 2(n−1)·α + 2(n−1)/n·B/β on the group's slowest link gives %7).")
                .arg(bytesText(m_bytes), members.join(QStringLiteral(", ")))
                .arg(stepCount())
                .arg(bytesText(plan::bytesSentBy(m_steps, m_ranks.front())), bytesText(interNodeBytes()),
                    formatSeconds(total), formatSeconds(formula)));
    }
    m_position->setText(m_step == 0 ? tr("step 0 of %1").arg(stepCount())
                                    : tr("step %1 of %2: %3")
                                          .arg(m_step)
                                          .arg(stepCount())
                                          .arg(QString::fromStdString(m_steps[std::size_t(m_step - 1)].phase)));
    m_back->setEnabled(m_step > 0);
    m_next->setEnabled(m_step < stepCount());
    m_end->setEnabled(m_step < stepCount());
    m_nccl->setText(ncclText());
    std::vector<plan::Transfer> transfers;
    if (m_step > 0)
        transfers = m_steps[std::size_t(m_step - 1)].transfers;
    m_table->setRowCount(int(transfers.size()));
    const auto& intra = m_layout.cluster.intraNode;
    const auto inter = m_layout.cluster.interNode.value_or(intra);
    for (int i = 0; i < int(transfers.size()); ++i) {
        const auto& t = transfers[std::size_t(i)];
        const auto& link = t.interNode ? inter : intra;
        const double seconds = link.latencyUs * 1e-6 + t.bytes / (std::max(1e-9, link.bandwidthGBs) * 1e9);
        const QString cells[] = { QString::number(t.src), QString::number(t.dst),
            QStringLiteral("%1 of %2").arg(t.chunk).arg(m_steps[std::size_t(m_step - 1)].chunks), bytesText(t.bytes),
            linkName(link.kind), formatSeconds(seconds) };
        for (int c = 0; c < 6; ++c)
            m_table->setItem(i, c, new QTableWidgetItem(cells[c]));
    }
    if (!m_overlay && m_scene) {
        m_overlay = new AllReduceOverlay(m_scene);
        m_scene->addItem(m_overlay);
    }
    if (m_overlay) {
        m_overlay->set(m_step > 0 ? m_ranks : std::vector<std::int64_t> {}, transfers, color);
        m_overlay->setVisible(m_step > 0 && isVisible()); // drawn while the stepper is in view and stepping
    }
    emit stepChanged(m_step);
}

} // namespace loom::views
