#pragma once

#include "engine/trace/TraceEvent.h"

#include <QColor>
#include <QWidget>

#include <cstdint>

class QToolButton;

namespace loom::views {

// The colour meanings of docs/workbench.md as legend entries: every event belongs to one, the same one
// that gives it its colour (eventColor).
enum class LegendKind : std::uint8_t {
    Forward,
    Backward,
    Recompute,
    Optimizer,
    TensorComm,
    PipelineComm,
    DataComm,
    ContextComm,
    AllToAll,
    Wait,
    Other,
    Weight, // appended: the W of zero-bubble schedules
    Launch, // appended: imported GPU traces' launches on the host row
};
constexpr int kLegendKinds = 13;
LegendKind legendKindOf(trace::EventKind kind, trace::GroupKind group);
QString legendName(LegendKind kind);
QColor legendColor(LegendKind kind);

// A row of colour chips, one a legend entry, with the idle hatching last. Clicking a chip hides its kind
// (the chip is struck through) and clicking again shows it: kindToggled tells the timeline.
class TimelineLegend : public QWidget {
    Q_OBJECT
public:
    explicit TimelineLegend(QWidget* parent = nullptr);
    QToolButton* chip(LegendKind kind) const { return m_chips[int(kind)]; }
    void setHidden(LegendKind kind, bool hidden);

signals:
    void kindToggled(loom::views::LegendKind kind, bool hidden);

private:
    QToolButton* m_chips[kLegendKinds] {};
};

} // namespace loom::views
