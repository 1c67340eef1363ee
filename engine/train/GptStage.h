#pragma once

#include "engine/comm/Communicator.h"
#include "engine/plan/Layout.h"
#include "engine/train/Kernels.h"
#include "engine/train/MoeLayer.h"
#include "engine/train/Parameters.h"

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <vector>

namespace loom::train {

// The part of a GPT-2 model that one pipeline rank holds, split over its tensor-parallel group in the
// manner of Megatron-LM: QKV and MLP-up column-parallel, attention-output and MLP-down row-parallel (one
// all-reduce per sub-block in forward, one in backward), a vocab-parallel embedding and a vocab-parallel
// cross-entropy. Its chunks are the virtual stages it runs; the first virtual stage adds the token and
// position embeddings, the last the final LayerNorm and the LM head (tied to the token embedding).
class GptStage {
public:
    struct Chunk {
        plan::StageRange blocks;
        bool embedding = false; // virtual stage 0
        bool head = false; // the last virtual stage
    };

    // `tp` may be null when tp = 1. `fullRecompute` keeps only each block's input and re-runs its forward
    // (with its all-reduces) during backward.
    // Mixture-of-experts blocks (model.moeLayer) hold experts [epRank·E/epSize, ...) and trade tokens over
    // `ep` (null when epSize = 1); see MoeLayer.h.
    GptStage(const plan::ModelSpec& model, std::vector<Chunk> chunks, int tpRank, int tpSize, comm::Communicator* tp,
        Kernels& kernels, bool fullRecompute, int epRank = 0, int epSize = 1, comm::Communicator* ep = nullptr);

    ParamSet& params() { return m_params; }
    int tokensPerMicroBatch(int microBatch) const { return microBatch * static_cast<int>(m_seq); }
    std::int64_t hidden() const { return m_h; }
    const std::vector<Chunk>& chunks() const { return m_chunks; }
    // Parameter indices of one block (for bucketing), of the embedding and of the head.
    std::vector<int> blockParams(std::int64_t layer) const;
    int tokenEmbedding() const { return m_wte; }
    // Mixture of experts: whether parameter `index` is an expert's (reduced over the expert-data-parallel
    // group), and the load-balancing losses of the forwards since the last call (Σ over MoE blocks of
    // aux_loss_coeff·aux), which the trainer adds to the loss.
    bool isExpertParam(int index) const;
    double takeAuxLoss();

    // Forward of micro-batch `mb` (B sequences) through `chunk`. The embedding chunk reads `tokens`; others
    // read `input` [B·s, h]. A head chunk computes the cross-entropy against `targets` and returns the mean
    // over its tokens; others write `output` [B·s, h] and return 0.
    double forward(int mb, int chunk, int B, const std::int32_t* tokens, const std::int32_t* targets,
        const float* input, float* output);
    // Backward of the same: a head chunk starts from its loss scaled by `lossScale` (d loss_total / d mean
    // loss of this micro-batch); others from `dOutput`. Writes `dInput` unless this is the embedding chunk.
    // Gradients accumulate into params().grads. `onBlockDone(layer)` runs after each block's gradients are
    // final for this micro-batch.
    void backward(int mb, int chunk, const float* dOutput, float* dInput, float lossScale,
        const std::function<void(std::int64_t layer)>& onBlockDone = {});

private:
    struct BlockParams {
        int ln1g, ln1b, wqkv, bqkv, wo, bo, ln2g, ln2b, wfc, bfc, wpr, bpr;
    };
    struct BlockCache {
        std::vector<float> x, ln1, ln1Mean, ln1Rstd, qkv, probs, att, x2, ln2, ln2Mean, ln2Rstd, fc, act;
        MoeCache moe; // MoE blocks
    };
    struct ChunkCache {
        int B = 0;
        std::vector<std::int32_t> tokens, targets;
        std::vector<BlockCache> blocks;
        std::vector<float> headIn, lnf, lnfMean, lnfRstd, probs; // probs: softmax over the local vocab slice
    };

    void blockForward(std::int64_t layer, BlockCache& c, int B, const float* in, float* out);
    void blockBackward(std::int64_t layer, BlockCache& c, int B, const float* dOut, float* dIn);
    void allReduce(float* data, std::size_t n, comm::ReduceOp op = comm::ReduceOp::Sum);

    std::int64_t m_h, m_heads, m_ffn, m_vocab, m_paddedVocab, m_seq;
    std::vector<Chunk> m_chunks;
    int m_tpRank, m_tpSize;
    comm::Communicator* m_tp;
    Kernels& m_k;
    bool m_recompute;
    ParamSet m_params;
    std::map<std::int64_t, BlockParams> m_block;
    int m_wte = -1, m_wpe = -1, m_lnfg = -1, m_lnfb = -1;
    std::map<std::pair<int, int>, ChunkCache> m_cache;
    std::map<std::int64_t, std::unique_ptr<MoeLayer>> m_moe; // MoE blocks by layer
    double m_aux = 0; // aux_loss_coeff·aux of the forwards since takeAuxLoss()
    double m_auxCoeff = 0;
    float m_lossScale = 1; // the current backward's
};

} // namespace loom::train
