#pragma once

#include "engine/plan/CostModel.h"
#include "engine/plan/Layout.h"
#include "engine/trace/TraceStats.h"

#include <QString>

#include <vector>

namespace loom::views {

// Tooltips that teach: each names the published formula behind a number (docs/formulas.md collects them)
// and shows it with the layout's values substituted. Rich text. The Explain dock (views/ExplainDock.h)
// shows the same texts at length.
namespace explain {
QString stepTime(const plan::Layout& layout, const plan::Prediction& prediction);
QString tokensPerSecond(const plan::Layout& layout, const plan::Prediction& prediction);
QString tflopsPerGpu(const plan::Layout& layout, const plan::Prediction& prediction);
QString mfu(const plan::Layout& layout, const plan::Prediction& prediction);
QString bubble(const plan::Layout& layout, const plan::Prediction& prediction);
// Load imbalance: the stages' uneven work, apart from the bubble.
QString imbalance(const plan::Layout& layout, const plan::Prediction& prediction);
// One part of the step split: "compute", "tp", "pp", "dp", "bubble", "optimizer".
QString stepPart(const plan::Layout& layout, const plan::Prediction& prediction, const QString& part);
// One kind of memory: "params", "grads", "optimizer", "activations", "reserve", "total".
QString memory(const plan::Layout& layout, const plan::Prediction& prediction, const QString& kind);
// The memory of the most loaded device by kind, in the order the breakdown lists them: each part's key (as
// memory() takes it), caption and GB; they add up to MemoryEstimate::total(). Parts that are zero for the
// layout (gathered parameters without ZeRO-3, FP8 state, a codec's residual) are left out.
struct MemoryPart {
    QString key, caption;
    double gb = 0;
};
std::vector<MemoryPart> memoryParts(const plan::MemoryEstimate& memory);
// "Where the gigabytes come from": the total, each kind with its share and how it arises, the model states'
// bytes per parameter, and (`stages`) every pipeline stage's memory with its blocks, the most loaded marked.
// The Memory figure's tooltip leaves the stages out; the Explain dock shows them.
QString memoryBreakdown(const plan::Layout& layout, const plan::Prediction& prediction, bool stages = true);
// Measured figures of a run, from engine/trace's statistics (what `loom trace stats` prints).
QString measuredBubble(const plan::Layout& layout, const trace::TraceStats& stats);
QString busBandwidth(const trace::TraceStats& stats);
QString measuredTokens(const plan::Layout& layout, const trace::TraceStats& stats);
} // namespace explain

// "1.23 s", "45.6 ms", "789 µs".
QString formatSeconds(double seconds);

} // namespace loom::views
