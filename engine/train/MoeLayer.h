#pragma once

#include "engine/comm/Communicator.h"
#include "engine/plan/Layout.h"
#include "engine/plan/ModelSpec.h"
#include "engine/train/Kernels.h"
#include "engine/train/Parameters.h"

#include <cstdint>
#include <string>
#include <vector>

namespace loom::train {

// What one MoE layer keeps from a micro-batch's forward for its backward.
struct MoeCache {
    std::vector<float> x; // [T, h] the layer's input (the second LayerNorm's output)
    std::vector<float> probs; // [T, E] router softmax
    std::vector<int> expert; // [T·k] the chosen experts of each token, best first
    std::vector<float> gate; // [T·k] their probabilities (the combine weights)
    std::vector<int> row; // [T·k] each choice's row in the dispatch order
    std::vector<float> fraction; // [E] f_e: share of the T·k choices that went to expert e
    std::vector<std::size_t> sendCounts, recvCounts; // elements to and from each EP member
    std::vector<std::int64_t> recvPerExpert; // [ep·E/ep] rows from member i for local expert j
    std::vector<float> returned; // [T·k, h] expert outputs, in dispatch order
    // Per local expert: its input rows, the MLP's pre-activation and activation.
    std::vector<std::vector<float>> in, fc, act;
};

// The mixture-of-experts MLP of one block (Switch Transformer / GShard / Mixtral form, with GPT-2's GELU
// experts): a router (h -> E linear, softmax over the experts) sends each token to its top_k experts,
// ties broken towards the lower expert index; the block's output is Σ p_e·expert_e(x) over the chosen ones
// (the probabilities are not renormalised). Routing is dropless: every choice is computed, whatever the
// load, so every layout computes the same function.
//
// Expert parallelism: the EP group's members hold E/ep experts each (member i: experts [i·E/ep,
// (i+1)·E/ep)). Forward sends each chosen (token, expert) row to the expert's holder with a variable
// all-to-all (dispatch), the holder runs its experts over the rows from every member, and a second
// all-to-all brings the outputs back (combine); backward runs the same two exchanges on the gradients.
// With tensor parallelism every TP rank holds whole experts and computes them on the same tokens (experts
// are not split over tp: Megatron-Core's expert tensor parallel size 1).
//
// The load-balancing loss of the layer, aux = E·Σ_e f_e·P_e (f_e: share of the choices that went to e,
// P_e: mean router probability of e, over the micro-batch's tokens on this rank), is returned by forward;
// its gradient (through P_e only) enters backward with weight `auxScale`.
class MoeLayer {
public:
    // Adds the router ("<prefix>router.w") and this member's experts ("<prefix>expert<e>.fc.w", ...) to
    // `params`. `ep` may be null when epSize = 1.
    MoeLayer(const plan::ModelSpec& model, const std::string& prefix, ParamSet& params, int epRank, int epSize,
        comm::Communicator* ep, Kernels& kernels);

    // out[T, h] = MoE(x[T, h]); returns the load-balancing loss (without its coefficient).
    double forward(MoeCache& cache, const float* x, int T, float* out);
    // dx[T, h] = d/dx (overwrites) from dOut; gradients accumulate into the parameters.
    void backward(MoeCache& cache, const float* dOut, float* dx, float auxScale);

    // Parameter indices: the router, and this member's experts.
    std::vector<int> params() const;
    int router() const { return m_router; }
    const std::vector<int>& expertParams() const { return m_expertParams; }

private:
    struct Expert {
        int fcw, fcb, prw, prb;
    };
    void route(MoeCache& c, int T);
    // Sends rows to the experts' holders (forward: dispatch) or back (combine), `rowsOut` rows laid out
    // as `outCounts`; returns what arrives, laid out as `inCounts`.
    std::vector<float> exchange(const std::vector<float>& rows, const std::vector<std::size_t>& outCounts,
        const std::vector<std::size_t>& inCounts);
    // The rows of received buffer `recv` that belong to local expert j, in arrival order (member-major).
    std::vector<std::pair<std::size_t, std::size_t>> segments(const MoeCache& c, int j) const;

    std::int64_t m_h, m_E, m_k, m_f, m_local;
    int m_epRank, m_epSize;
    comm::Communicator* m_ep;
    Kernels& m_kern;
    ParamSet& m_params;
    int m_router = -1;
    std::vector<Expert> m_experts;
    std::vector<int> m_expertParams;
};

} // namespace loom::train
