#include "engine/train/EngineLimits.h"

#include <stdexcept>

namespace loom::train {

void checkOptimizerTrainable(const plan::Layout& layout)
{
    const auto& o = layout.optimizer;
    const std::string where = "layout " + layout.name + ": ";
    for (auto [dtype, field] :
        { std::pair { o.expAvgDtype, "exp_avg_dtype" }, { o.expAvgSqDtype, "exp_avg_sq_dtype" } })
        if (dtype != plan::OptimizerSpec::StateDtype::Fp32)
            throw std::runtime_error(where + "optimizer." + field
                + " is \"bf16\", but loom-train keeps AdamW's moments in fp32 (the planner counts bf16 states); "
                  "remove it or use \"fp32\"");
}

} // namespace loom::train
