#pragma once

#include "engine/plan/CostModel.h"
#include "engine/plan/Layout.h"

#include <QString>

namespace loom::views {

// Tooltips that teach: each names the published formula behind a number (../shared/FORMULAS.md) and shows
// it with the layout's values substituted. Rich text.
namespace explain {
QString stepTime(const plan::Layout& layout, const plan::Prediction& prediction);
QString tokensPerSecond(const plan::Layout& layout, const plan::Prediction& prediction);
QString tflopsPerGpu(const plan::Layout& layout, const plan::Prediction& prediction);
QString mfu(const plan::Layout& layout, const plan::Prediction& prediction);
QString bubble(const plan::Layout& layout, const plan::Prediction& prediction);
// One part of the step split: "compute", "tp", "pp", "dp", "bubble", "optimizer".
QString stepPart(const plan::Layout& layout, const plan::Prediction& prediction, const QString& part);
// One kind of memory: "params", "grads", "optimizer", "activations", "reserve", "total".
QString memory(const plan::Layout& layout, const plan::Prediction& prediction, const QString& kind);
} // namespace explain

// "1.23 s", "45.6 ms", "789 µs".
QString formatSeconds(double seconds);

} // namespace loom::views
