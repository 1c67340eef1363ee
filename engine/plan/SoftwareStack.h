#pragma once

// The software stack a layout is trained with (layout key "stack", `loom plan predict --stack`): what of the
// compute differs by framework while the hardware stays, as a profile of its own beside the model and the
// cluster. The cluster profiles' efficiencies are the newest Megatron-Core's (its GEMMs, Transformer Engine's
// fused kernels, cuDNN's flash attention); a stack says how another framework's kernels stand to those
// (docs/planner.md, "Software stacks"; docs/profiles.md lists the built-in ones with their sources).

#include "engine/plan/Diagnostics.h"
#include "engine/plan/WordTable.h"

#include <nlohmann/json_fwd.hpp>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace loom::plan {

struct Layout;
struct DeviceSpec;

// How a block's element-wise work runs: "fused" (norms, rotary embedding, SwiGLU and the residual adds as
// Megatron's, apex's and Transformer Engine's fused kernels, each reading its inputs and writing its output
// once in 16 bits), or "eager" (PyTorch's modules op by op, as torchtitan writes them: each op a kernel of its
// own, the norm and the rotary embedding in fp32; the passes are counted in eagerElementwiseBytes).
enum class Elementwise { Fused, Eager };
inline constexpr WordTable<Elementwise, 2> kElementwiseWords { { { Elementwise::Fused, "fused" },
    { Elementwise::Eager, "eager" } } };

struct StackSpec {
    std::string name = "megatron-core";
    Elementwise elementwise = Elementwise::Fused;
    // The fraction of the cluster profile's compute efficiency (the GEMM ceiling, the FP8 ceiling and the flash
    // kernel's) the stack keeps: its gaps between kernels, host and launch overheads, against Megatron-Core's.
    // Fitted per stack to the published rows its entry names (1 where none is fitted).
    double compute = 1.0;

    bool operator==(const StackSpec&) const = default;
};

// A built-in stack: its figures, what they are and which published rows fixed them.
struct BuiltinStack {
    StackSpec spec;
    std::string_view description;
    std::string_view source; // where each figure comes from: counted from code, or fitted to which rows
};

// The built-in stacks, the default (the newest Megatron-Core) first.
const std::vector<BuiltinStack>& builtinStacks();
const BuiltinStack* findBuiltinStack(std::string_view name);
std::vector<std::string> builtinStackNames();
// "megatron-core, megatron-2021, megatron-deepspeed or torchtitan"
std::string builtinStackList();

// Reads the layout's "stack": a built-in stack's name, or an object {"name", "elementwise", "compute"} (a stack of
// one's own). Problems go into `diagnostics` under `path`; nullopt then.
std::optional<StackSpec> parseStack(const nlohmann::json& value, const std::string& path, Diagnostics& diagnostics);
// The layout file's form: the name for a built-in stack, else the object.
nlohmann::ordered_json toJson(const StackSpec& stack);

// The device as the layout's stack drives it: the GEMM, FP8 and flash ceilings times `compute`. GPU clusters
// only: on CPU clusters Loom's own engine is the stack, and the profile is its calibration.
DeviceSpec stackDevice(const Layout& layout);
// Whether the stack changes anything the cost model prices for this layout (false for the default).
bool stackApplies(const Layout& layout);

// The HBM bytes an eager stack's element-wise ops move per layer and micro-batch on one rank in the forward,
// beyond the fused kernels' count (the backward moves twice as many, as the rest of the memory-bound work;
// 0 for a fused stack or a CPU cluster). Counted op by op from torchtitan's Llama (docs/formulas.md):
// each RMSNorm widens its input to fp32 and runs square, mean, multiply, narrow and gain as kernels of their
// own (36 bytes an element instead of the fused 4), the rotary embedding widens q and k to complex fp32,
// multiplies and narrows (20 instead of 4), the attention output is copied back to token-major order (4),
// SwiGLU runs SiLU and the product apart (10 bytes an ffn element instead of 6), and grouped K/V heads are
// repeated to the query heads before the attention (read k, write h, for K and for V).
double eagerElementwiseBytes(const Layout& layout);

} // namespace loom::plan
