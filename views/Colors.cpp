#include "views/Colors.h"

#include <array>

namespace loom::views {

QColor eventColor(trace::EventKind kind, trace::GroupKind group)
{
    using trace::EventKind;
    switch (kind) {
    case EventKind::Forward:
        return colors::forward;
    case EventKind::Backward:
        return colors::backward;
    case EventKind::Recompute:
        return colors::recompute;
    case EventKind::Weight:
        return colors::weight;
    case EventKind::Send:
    case EventKind::Recv: // pipeline sends; ring attention's K/V blocks on a CP group
        return group == trace::GroupKind::Context ? colors::contextComm : colors::pipelineComm;
    case EventKind::Optimizer:
        return colors::optimizer;
    case EventKind::Launch:
        return colors::launch;
    case EventKind::Wait:
        return colors::idle;
    case EventKind::AllToAll:
        return colors::expertComm;
    case EventKind::AllReduce:
    case EventKind::ReduceScatter:
    case EventKind::AllGather:
    case EventKind::Broadcast:
        return group == trace::GroupKind::Tensor  ? colors::tensorComm
            : group == trace::GroupKind::Pipeline ? colors::pipelineComm
            : group == trace::GroupKind::Context  ? colors::contextComm
                                                  : colors::dataComm;
    default:
        return colors::misc;
    }
}

QPen contextGroupPen()
{
    QPen pen(colors::contextComm, 2.5, Qt::DashLine);
    pen.setCapStyle(Qt::FlatCap);
    return pen;
}

QColor stageColor(std::int64_t stage)
{
    static const std::array<QColor, 10> palette
        = { QColor(0xA6CEE3), QColor(0xFDBF6F), QColor(0xB2DF8A), QColor(0xFB9A99), QColor(0xCAB2D6), QColor(0xFFFF99),
              QColor(0x8DD3C7), QColor(0xBEBADA), QColor(0xD9D9A0), QColor(0xFCCDE5) };
    return palette[static_cast<std::size_t>(stage < 0 ? 0 : stage) % palette.size()];
}

QPen linkPen(plan::LinkKind kind)
{
    QPen pen(QColor(0x44, 0x44, 0x44));
    pen.setCosmetic(true);
    switch (kind) {
    case plan::LinkKind::NvLink:
        pen.setWidthF(4);
        pen.setColor(QColor(0x2E, 0x7D, 0x32));
        break;
    case plan::LinkKind::Xgmi:
        pen.setWidthF(4);
        pen.setColor(QColor(0xB7, 0x1C, 0x1C));
        break;
    case plan::LinkKind::Pcie:
        pen.setWidthF(2.5);
        pen.setColor(QColor(0x55, 0x55, 0x55));
        break;
    case plan::LinkKind::InfiniBand:
        pen.setWidthF(2);
        pen.setStyle(Qt::DashLine);
        pen.setColor(QColor(0x1F, 0x4E, 0x9A));
        break;
    case plan::LinkKind::Ethernet:
        pen.setWidthF(2);
        pen.setStyle(Qt::DotLine);
        break;
    case plan::LinkKind::Shm:
        pen.setWidthF(1);
        pen.setColor(QColor(0x77, 0x77, 0x77));
        break;
    }
    return pen;
}

QString linkName(plan::LinkKind kind)
{
    switch (kind) {
    case plan::LinkKind::NvLink:
        return QStringLiteral("NVLink / NVSwitch");
    case plan::LinkKind::Xgmi:
        return QStringLiteral("Infinity Fabric (xGMI)");
    case plan::LinkKind::Pcie:
        return QStringLiteral("PCIe");
    case plan::LinkKind::InfiniBand:
        return QStringLiteral("InfiniBand");
    case plan::LinkKind::Ethernet:
        return QStringLiteral("Ethernet");
    case plan::LinkKind::Shm:
        return QStringLiteral("shared memory");
    }
    return {};
}

} // namespace loom::views
