#include "engine/plan/Flops.h"

#include "engine/plan/Formulas.h"

namespace loom::plan {

StepFlops stepFlops(const ModelSpec& m, std::int64_t globalBatch, Recompute recompute)
{
    StepFlops f;
    f.model = modelFlops(m, globalBatch, false);
    switch (recompute) {
    case Recompute::Full:
        f.hardware = modelFlops(m, globalBatch, true);
        break;
    case Recompute::Selective: {
        const double tokens = double(globalBatch) * double(m.seqLen);
        f.hardware = f.model + tokens * double(m.layers) * 4.0 * double(m.seqLen) * double(m.hidden);
        break;
    }
    case Recompute::None:
        f.hardware = f.model;
        break;
    }
    return f;
}

StepFlops stepFlops(const Layout& l)
{
    return stepFlops(l.model, l.parallel.globalBatch, l.memory.recompute);
}

} // namespace loom::plan
