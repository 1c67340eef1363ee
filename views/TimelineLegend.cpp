#include "views/TimelineLegend.h"

#include "views/Colors.h"

#include <QHBoxLayout>
#include <QLabel>
#include <QPainter>
#include <QToolButton>

namespace loom::views {

LegendKind legendKindOf(trace::EventKind kind, trace::GroupKind group)
{
    using trace::EventKind;
    switch (kind) {
    case EventKind::Forward:
        return LegendKind::Forward;
    case EventKind::Backward:
        return LegendKind::Backward;
    case EventKind::Recompute:
        return LegendKind::Recompute;
    case EventKind::Weight:
        return LegendKind::Weight;
    case EventKind::Optimizer:
        return LegendKind::Optimizer;
    case EventKind::Launch:
        return LegendKind::Launch;
    case EventKind::Wait:
        return LegendKind::Wait;
    case EventKind::AllToAll:
        return LegendKind::AllToAll;
    case EventKind::Send:
    case EventKind::Recv:
        return group == trace::GroupKind::Context ? LegendKind::ContextComm : LegendKind::PipelineComm;
    case EventKind::AllReduce:
    case EventKind::ReduceScatter:
    case EventKind::AllGather:
    case EventKind::Broadcast:
        return group == trace::GroupKind::Tensor  ? LegendKind::TensorComm
            : group == trace::GroupKind::Pipeline ? LegendKind::PipelineComm
            : group == trace::GroupKind::Context  ? LegendKind::ContextComm
                                                  : LegendKind::DataComm;
    default:
        return LegendKind::Other;
    }
}

QString legendName(LegendKind kind)
{
    static const char* names[kLegendKinds]
        = { "forward", "backward", "recompute", "optimizer", "TP all-reduce / gather", "PP send / recv",
              "DP all-reduce", "CP K/V", "all-to-all", "wait", "other", "weight gradients (W)", "launch" };
    return QObject::tr(names[int(kind)]);
}

QColor legendColor(LegendKind kind)
{
    static const QColor c[kLegendKinds] = { colors::forward, colors::backward, colors::recompute, colors::optimizer,
        colors::tensorComm, colors::pipelineComm, colors::dataComm, colors::contextComm, colors::expertComm,
        colors::idle, colors::misc, colors::weight, colors::launch };
    return c[int(kind)];
}

namespace {
QIcon swatch(const QColor& c, bool hatched)
{
    QPixmap pm(12, 12);
    pm.fill(Qt::transparent);
    QPainter p(&pm);
    p.fillRect(pm.rect(), c);
    if (hatched)
        p.fillRect(pm.rect(), QBrush(colors::misc, Qt::BDiagPattern));
    p.setPen(c.darker(150));
    p.drawRect(pm.rect().adjusted(0, 0, -1, -1));
    return QIcon(pm);
}
} // namespace

TimelineLegend::TimelineLegend(QWidget* parent)
    : QWidget(parent)
{
    auto* row = new QHBoxLayout(this);
    row->setContentsMargins(6, 0, 6, 0);
    row->setSpacing(2);
    for (int k = 0; k < kLegendKinds; ++k) {
        auto* b = new QToolButton;
        const auto kind = LegendKind(k);
        b->setText(legendName(kind));
        b->setIcon(swatch(legendColor(kind), kind == LegendKind::Wait));
        b->setToolButtonStyle(Qt::ToolButtonTextBesideIcon);
        b->setAutoRaise(true);
        b->setCheckable(true);
        b->setChecked(true);
        b->setToolTip(tr("Click to hide or show %1 events").arg(legendName(kind)));
        connect(b, &QToolButton::toggled, this, [this, b, kind](bool shown) {
            QFont f = b->font();
            f.setStrikeOut(!shown);
            b->setFont(f);
            emit kindToggled(kind, !shown);
        });
        m_chips[k] = b;
        row->addWidget(b);
    }
    auto* idle = new QLabel(tr("hatched: idle (bubble)"));
    idle->setToolTip(tr("Time a compute lane has no event: the pipeline bubble and other idle time"));
    row->addWidget(idle);
    row->addStretch(1);
}

void TimelineLegend::setHidden(LegendKind kind, bool hidden)
{
    m_chips[int(kind)]->setChecked(!hidden);
}

} // namespace loom::views
