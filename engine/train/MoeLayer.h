#pragma once

#include "engine/comm/Communicator.h"
#include "engine/plan/Layout.h"
#include "engine/plan/ModelSpec.h"
#include "engine/train/Kernels.h"
#include "engine/train/Parameters.h"
#include "engine/train/WeightGradQueue.h"

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
    // Per local expert: its input rows, the MLP's pre-activation (SwiGLU: the gate), up projection
    // (SwiGLU) and activation.
    std::vector<std::vector<float>> in, fc, up, act;
    std::vector<float> sharedFc, sharedUp, sharedAct; // the shared experts' (on every token)
    std::vector<float> logZ; // [T] log Σ_e exp(logit_e), for the z-loss
};

// The mixture-of-experts MLP of one block (Switch Transformer / GShard / Mixtral / DeepSeek-MoE form): a
// router (h -> E linear, softmax over the experts) sends each token to its top_k experts, ties broken
// towards the lower expert index; the block's output is Σ g_e·expert_e(x) over the chosen ones, with
// g_e = p_e (router_norm_topk false) or p_e / Σ_chosen p (true, Mixtral), plus the shared experts' MLP on
// every token (shared_experts: one MLP of shared_experts·shared_expert_hidden, which equals the sum of that
// many). Experts are the model's MLP: GELU (fc, proj) or SwiGLU (gate, up, down), with biases when the
// model has them. Routing is dropless: every choice is computed, whatever the load, so every layout
// computes the same function.
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
// its gradient (through P_e only) enters backward. The z-loss (router_z_loss; ST-MoE, Zoph et al. 2022) is the
// mean over the same tokens of (log Σ_e exp(logit_e))². Both come back from forward already weighted by
// their coefficients; backward takes the loss scale of the micro-batch.
class MoeLayer {
public:
    // Adds the router ("<prefix>router.w"), the shared experts ("<prefix>shared.up.w", ...) and this member's
    // experts ("<prefix>expert<e>.fc.w", ...) to `params`, matrices normal of `stddev` (`projStddev` for the
    // output projections). `ep` may be null when epSize = 1.
    MoeLayer(const plan::ModelSpec& model, const std::string& prefix, ParamSet& params, int epRank, int epSize,
        comm::Communicator* ep, Kernels& kernels, float stddev = 0.02f, float projStddev = 0);

    // out[T, h] = MoE(x[T, h]); returns aux_loss_coeff·aux + router_z_loss·z.
    double forward(MoeCache& cache, const float* x, int T, float* out);
    // dx[T, h] = d/dx (overwrites) from dOut; gradients accumulate into the parameters. `lossScale` weighs the
    // auxiliary losses' gradients as the cross-entropy's.
    void backward(MoeCache& cache, const float* dOut, float* dx, float lossScale);

    // Parameter indices: the router, and this member's experts.
    std::vector<int> params() const;
    int router() const { return m_router; }
    const std::vector<int>& expertParams() const { return m_expertParams; }
    // The weight matrices' products go through `queue` (GptStage::setSplitBackward); null: run at once.
    void setWeightGradQueue(WeightGradQueue* queue) { m_wgrad = queue; }

private:
    // GELU: up (fc) and down (proj); SwiGLU: gate, up and down. -1: absent.
    struct Expert {
        int gatew = -1, gateb = -1, upw = -1, upb = -1, downw = -1, downb = -1;
    };
    Expert addMlp(const std::string& prefix, std::int64_t ffn, float stddev, float projStddev);
    // y[R, h] = mlp(in[R, h]) with inner size F, keeping fc (gate), up and act for the backward.
    void mlpForward(const Expert& p, const float* in, int R, int F, std::vector<float>& fc, std::vector<float>& up,
        std::vector<float>& act, float* y);
    // dIn[R, h] (overwrites) and the parameter gradients from dY.
    void mlpBackward(const Expert& p, const float* in, int R, int F, const std::vector<float>& fc,
        const std::vector<float>& up, const std::vector<float>& act, const float* dY, float* dIn);
    void route(MoeCache& c, int T);
    // dW[K×N] += Xᵀ·dY for parameter `tensor`, now or through m_wgrad.
    void weightGradient(int tensor, int K, int N, int T, const float* X, const float* dY);
    // Sends rows to the experts' holders (forward: dispatch) or back (combine), `rowsOut` rows laid out
    // as `outCounts`; returns what arrives, laid out as `inCounts`.
    std::vector<float> exchange(const std::vector<float>& rows, const std::vector<std::size_t>& outCounts,
        const std::vector<std::size_t>& inCounts);
    // The rows of received buffer `recv` that belong to local expert j, in arrival order (member-major).
    std::vector<std::pair<std::size_t, std::size_t>> segments(const MoeCache& c, int j) const;

    std::int64_t m_h, m_E, m_k, m_f, m_local, m_sharedF;
    bool m_swiglu, m_bias, m_normTopK;
    double m_auxCoeff, m_zCoeff;
    Expert m_shared; // shared experts (m_sharedF > 0)
    int m_epRank, m_epSize;
    comm::Communicator* m_ep;
    Kernels& m_kern;
    ParamSet& m_params;
    int m_router = -1;
    std::vector<Expert> m_experts;
    std::vector<int> m_expertParams;
    WeightGradQueue* m_wgrad = nullptr;
};

} // namespace loom::train
