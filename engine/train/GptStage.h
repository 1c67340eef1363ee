#pragma once

#include "engine/comm/Communicator.h"
#include "engine/plan/Layout.h"
#include "engine/train/Kernels.h"
#include "engine/train/MoeLayer.h"
#include "engine/train/Parameters.h"
#include "engine/train/RingAttention.h"
#include "engine/train/WeightGradQueue.h"

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
//
// A model profile that departs from GPT-2 in any of `mlp`, `norm`, `position`, `bias`, `tie_embeddings` or
// `kv_heads` (the Llama form) runs the general block of LlamaBlock.cpp instead: RMSNorm, SwiGLU, rotary
// positions, grouped-query attention (TP splits the KV heads like the query heads: tp divides kv_heads),
// optional biases and an untied, vocab-parallel LM head on the last stage; each field is honoured on its own.
//
// With sequence parallelism (Korthikanti et al. 2022) each TP rank's norm and residual regions hold s/tp
// positions of every sequence (rank j: positions [j·s/tp, (j+1)·s/tp)); the input of QKV and MLP-up is
// all-gathered along the sequence and the row-parallel outputs are reduce-scattered back (the reverse in
// backward), and activations between pipeline stages are the sequence shards (SequenceParallel.cpp).
class GptStage {
public:
    struct Chunk {
        plan::StageRange blocks;
        bool embedding = false; // virtual stage 0
        bool head = false; // the last virtual stage
    };

    // Who holds what of the model on this rank and how it runs. `tensor.comm` may be null when tensor.size
    // = 1. `fullRecompute` keeps only each block's input and re-runs its forward (with its all-reduces)
    // during backward. `sequenceParallel` (with tensor.size > 1) needs seq_len divisible by it.
    // Mixture-of-experts blocks (model.moeLayer) hold experts [rank·E/size, ...) of `expert` and trade
    // tokens over it (comm null when size = 1); see MoeLayer.h. MoE blocks refuse sequence parallelism and
    // context parallelism (their load-balancing loss is a product of per-sequence means).
    struct Group {
        comm::Communicator* comm = nullptr;
        int rank = 0;
        int size = 1;
    };
    struct Config {
        plan::ModelSpec model = {};
        std::vector<Chunk> chunks = {};
        Group tensor = {}; // tensor parallelism
        Group expert = {}; // expert parallelism
        bool fullRecompute = false;
        bool sequenceParallel = false;
        plan::InitSpec init = {};
        device::Device* device = nullptr; // where the parameters and gradients live (null: hostDevice())
    };
    // Throws std::invalid_argument when the model does not split over tensor.size or its rotary head size
    // is odd.
    GptStage(Config config, Kernels& kernels);

    // Context parallelism (call once, before the first forward): this rank holds chunks cpRank and
    // 2·cp-1-cpRank of every sequence (RingAttention.h); attention runs as ring attention over `cp`, the
    // position embedding reads the tokens' global positions, and micro-batches carry s/cp tokens a sequence.
    void setContextParallel(comm::Communicator* cp, int cpRank, int cpSize);
    // Memory-efficient norms (memory.efficient_norm; call before the first forward): each norm keeps only its
    // output, which the next product keeps anyway; its input (a block's input and its attention residual, the
    // head's input) is freed after the forward and recovered from the output and the gain in the backward.
    // A gain with a zero entry cannot be inverted: the backward then throws std::runtime_error naming it.
    void setEfficientNorm(bool on) { m_efficientNorm = on; }
    // Floats of activations kept for the backward of the forwards in flight (the blocks' dense tensors and
    // the head's; MoE caches not counted).
    std::size_t cachedFloats() const;
    // Global positions (0 .. s-1) of the tokens of one local sequence, in local order: what position
    // embeddings (learned or rotary) must use.
    std::int64_t positionOf(int localToken) const;

    ParamSet& params() { return m_params; }
    int tokensPerMicroBatch(int microBatch) const { return microBatch * static_cast<int>(m_seq); }
    std::int64_t hidden() const { return m_h; }
    const std::vector<Chunk>& chunks() const { return m_chunks; }
    // Parameter indices of one block (for bucketing), of the embedding and of the head.
    std::vector<int> blockParams(std::int64_t layer) const;
    int tokenEmbedding() const { return m_wte; }
    // Parameter indices outside the blocks: embeddings, final norm, untied LM head (those this rank holds).
    std::vector<int> outerParams() const;
    // Activation rows of B sequences on this rank (between blocks and pipeline stages): B·s, or B·s/tp with
    // sequence parallelism.
    int localTokens(int microBatch) const;
    // Sequence parallelism: the TP-replicated tensors among `indices` (norms, biases after a reduce-scatter,
    // positions) saw only this rank's part of the sequence; sums their gradients over the TP group. Call it
    // once per step, after the last micro-batch's backward has finished them. No-op without sequence
    // parallelism.
    void sumSequenceParallelGrads(const std::vector<int>& indices);
    // Mixture of experts: whether parameter `index` is an expert's (reduced over the expert-data-parallel
    // group), and the auxiliary losses of the forwards since the last call (Σ over MoE blocks of
    // aux_loss_coeff·aux + router_z_loss·z), which the trainer adds to the loss.
    bool isExpertParam(int index) const { return m_params.spec(index).role == TensorRole::Expert; }
    double takeAuxLoss();

    // Forward of micro-batch `mb` (B sequences) through `chunk`. The embedding chunk reads `tokens`; others
    // read `input` [B·s, h]. A head chunk computes the cross-entropy against `targets` and returns the mean
    // over its tokens; others write `output` [B·s, h] and return 0.
    double forward(int mb, int chunk, int B, const std::int32_t* tokens, const std::int32_t* targets,
        const float* input, float* output);
    // Backward of the same: a head chunk starts from its loss scaled by `lossScale` (d loss_total / d mean
    // loss of this micro-batch); others from `dOutput`. Writes `dInput` unless this is the embedding chunk.
    // Gradients accumulate into params().grads. `onBlockDone(layer)` runs after each block's gradients are
    // final for this micro-batch, except the rows of shared weights (shareWeightGradient), which are added
    // after the next block's backward (or at the end of this one) and are not reduced.
    void backward(int mb, int chunk, const float* dOutput, float* dInput, float lossScale,
        const std::function<void(std::int64_t layer)>& onBlockDone = {});
    // Zero-bubble schedules (call before the first backward): backward() is then B, the gradients of the
    // inputs, norms and biases, and keeps the weight matrices' products (WeightGradQueue) for W,
    // weightBackward() of the same micro-batch and chunk, which runs them and calls `onBlockDone(layer)`
    // after each block's (backward() then calls none). B then W adds the same gradients as one backward.
    void setSplitBackward(bool on);
    bool splitBackward() const { return m_wgrad.deferring(); }
    void weightBackward(int mb, int chunk, const std::function<void(std::int64_t layer)>& onBlockDone = {});
    // Floats the deferred W passes hold now (their copies of activations and output gradients).
    std::size_t deferredFloats() const;
    // Run around each block's forward and backward (ZeRO-3 gathers a block's parameters before it and frees
    // them after; ZeRO-2/3 reduce-scatter its gradients after its backward). Unset ones are skipped.
    struct BlockHooks {
        std::function<void(std::int64_t layer, bool backward)> before;
        std::function<void(std::int64_t layer, bool backward)> after;
    };
    void setBlockHooks(BlockHooks hooks) { m_hooks = std::move(hooks); }
    // Runs right after the product that adds a micro-batch's share to a block weight matrix's gradient,
    // while that gradient is still in the cache (the trainer takes the clipping norm's squares there when
    // the share is the last one). Unset: nothing runs.
    void setWeightGradientDone(std::function<void(int tensor)> done) { m_weightGradientDone = std::move(done); }

    // Data parallelism under ZeRO-1 (the trainer; tp = pp = cp = 1 and tied embeddings): member j of `group`
    // owns rows rows[j] = [first, end) of the token embedding's gradient and completes them itself from every
    // member's tokens, so that the embedding's bucket needs no reduction. The head's weight gradient
    // (dLogitsᵀ · lnf) of a micro-batch then trades each member the columns of dLogits of the rows it owns
    // and gathers the final norm's output (T·(V/n + h) floats each instead of reducing V·h), and the
    // embedding's backward gathers every member's tokens and input gradients and adds those that fall in the
    // rows it owns. Rows owned by others are left as they were. Call once, before the first backward.
    using RowRange = std::pair<std::int64_t, std::int64_t>;
    void shareEmbeddingGradient(comm::Communicator* group, std::vector<RowRange> rows);
    bool tiedHead() const { return m_lmHead < 0; }
    // The same for the GPT-2 blocks' weight matrices (K × N, gradient Xᵀ·dY over a micro-batch's T tokens):
    // member j of `group` completes rows rows[j] of weight `index`'s gradient from every member's X columns
    // of those rows and dY (T·(K + n·N) floats traded per member instead of reducing K·N). The exchange of
    // a block's matrices runs while the next block's backward computes; their rows are added after it.
    // sharedRowWeights(): the matrices that may be shared (GPT-2 blocks without MoE, tp = cp = 1).
    std::vector<int> sharedRowWeights() const;
    void shareWeightGradient(int index, comm::Communicator* group, std::vector<RowRange> rows);

private:
    struct BlockParams {
        int ln1g, ln1b, wqkv, bqkv, wo, bo, ln2g, ln2b, wfc, bfc, wpr, bpr;
    };
    // The general (Llama-form) block; -1 marks a tensor the model does not have. A GELU MLP uses up/down
    // (named fc, fcproj), SwiGLU gate/up/down.
    struct LlamaParams {
        int ln1g = -1, ln1b = -1, wq = -1, bq = -1, wk = -1, bk = -1, wv = -1, bv = -1, wo = -1, bo = -1;
        int ln2g = -1, ln2b = -1, wgate = -1, bgate = -1, wup = -1, bup = -1, wdown = -1, bdown = -1;
    };
    struct BlockCache {
        std::vector<float> x, ln1, ln1Mean, ln1Rstd, qkv, probs, att, x2, ln2, ln2Mean, ln2Rstd, fc, act;
        std::vector<float> up; // SwiGLU's up projection (fc holds the gate)
        std::vector<float> lse; // ring attention (cp > 1): each row's log-sum-exp instead of probs
        MoeCache moe; // MoE blocks
    };
    struct ChunkCache {
        int B = 0;
        std::vector<std::int32_t> tokens, targets;
        std::vector<BlockCache> blocks;
        // probs: exp(logit − row max) over the local vocab slice; sums: each row's Σ over the whole vocab
        std::vector<float> headIn, lnf, lnfMean, lnfRstd, probs, sums;
    };

    // A block's sizes for a micro-batch of B sequences on this rank: sequence s, tokens T (Tl after
    // sequence parallelism's split), hidden h, head size d, local query and KV heads Hl and KVl (hl, kvl:
    // their widths), local FFN width fl; n and nl are T and Tl as sizes.
    struct BlockDims {
        int s, T, h, Tl, d, Hl, KVl, hl, kvl, fl;
        std::size_t n, nl;
    };
    BlockDims blockDims(int B) const;
    void blockForward(std::int64_t layer, BlockCache& c, int B, const float* in, float* out);
    void blockBackward(std::int64_t layer, BlockCache& c, int B, const float* dOut, float* dIn);
    void allReduce(float* data, std::size_t n, comm::ReduceOp op = comm::ReduceOp::Sum);
    // The tensors of block `layer` in the GPT-2 form; LlamaBlock.cpp the general form.
    void addGpt2Block(std::int64_t layer, float stddev, float projStddev, const Group& expert);
    // LlamaBlock.cpp
    void addLlamaBlock(std::int64_t layer, float stddev, float projStddev, const Group& expert);
    void llamaBlockForward(std::int64_t layer, BlockCache& c, int B, const float* in, float* out);
    void llamaBlockBackward(std::int64_t layer, BlockCache& c, int B, const float* dOut, float* dIn);
    // The block's backward from the second norm down: dX2 holds d/dx2 from the residual, dLn2 [Tl, h] the
    // norm output's gradient (this rank's rows).
    void llamaAttentionBackward(const LlamaParams& p, BlockCache& c, int B, std::vector<float>& dX2,
        const std::vector<float>& dLn2, float* dIn);
    // The model's norm (LayerNorm or RMSNorm) over `rows` rows of h; `beta` may be -1 (no bias).
    void normForward(int gamma, int beta, float* out, float* mean, float* rstd, const float* in, int rows);
    // `out` is the forward's output; with memory-efficient norms `in` is recovered from it (`in` may be freed).
    void normBackward(int gamma, int beta, float* dIn, const float* dOut, const float* in, const float* out,
        const float* mean, const float* rstd, int rows);
    // Global positions (0 .. s-1) of the B·s gathered token rows, for rotary positions.
    std::vector<std::int32_t> tokenPositions(int B) const;
    // SequenceParallel.cpp. gatherTokens: the [B·s, h] input of a column-parallel product from this rank's
    // rows (`local` itself without sequence parallelism; else all-gathered into `full`). reduceTokens: the
    // row-parallel partial sums `full` [B·s, h] reduced over the TP group into `local` (an all-reduce in
    // place, full == local, without sequence parallelism; a reduce-scatter along the sequence with it).
    const float* gatherTokens(const float* local, std::vector<float>& full, int B);
    void reduceTokens(float* full, float* local, int B);
    // The position (0 .. s-1) of activation row `row` of this rank.
    std::int64_t localPosition(std::int64_t row) const;
    // Causal attention of a block's cached qkv into c.att: the one-rank kernel, or ring attention with cp > 1.
    void attentionForward(BlockCache& c, int B, int heads, int headDim);
    void attentionBackward(BlockCache& c, float* dQkv, const float* dAtt, int B, int heads, int headDim);
    // SharedEmbeddingGrad.cpp (shareEmbeddingGradient): this member's rows of the head's weight gradient
    // from every member's dLogits columns and final-norm outputs; its rows of the lookup's gradient.
    void sharedHeadGradient(const float* dLogits, const float* lnf, int T);
    void sharedLookupGradient(const float* dx, const std::int32_t* tokens, int T);
    // dW[first, end) += Σ over members of X[:, first:end]ᵀ · dY: the exchange in flight, then its product.
    struct RowProduct {
        std::vector<float> send, columns, dY, dYAll;
        comm::WorkPtr traded, gathered;
        float* grad = nullptr; // row `first` of the gradient
        int width = 0, N = 0, tokens = 0; // rows of the gradient, its columns, every member's tokens
    };
    RowProduct startRowProduct(
        const std::vector<RowRange>& rowsOf, const float* X, int K, const float* dY, int N, int T, float* grad);
    void finishRowProducts(std::vector<RowProduct>& products);
    // A block's weight gradient: shared rows (shareWeightGradient) started into m_started, else one product.
    void weightGradient(int index, int K, int N, int T, const float* X, const float* dY);

    std::int64_t m_h, m_heads, m_ffn, m_vocab, m_paddedVocab, m_seq;
    std::vector<Chunk> m_chunks;
    int m_tpRank, m_tpSize;
    comm::Communicator* m_tp;
    Kernels& m_k;
    bool m_recompute;
    bool m_efficientNorm = false;
    plan::ModelSpec m_model;
    bool m_gpt2; // GPT-2's block (the original path); else the general block of LlamaBlock.cpp
    bool m_sp; // sequence parallelism (and tp > 1)
    std::int64_t m_kvHeads;
    std::vector<double> m_ropeFreq; // rotary frequencies (Rope.h)
    float m_eps; // the norms' epsilon
    ParamSet m_params;
    std::map<std::int64_t, BlockParams> m_block;
    std::map<std::int64_t, LlamaParams> m_llamaBlock;
    int m_wte = -1, m_wpe = -1, m_lnfg = -1, m_lnfb = -1;
    int m_lmHead = -1; // the untied LM head (tie_embeddings false); else the head reads m_wte
    std::vector<float> m_zeros, m_scratch; // a norm without beta: its zero beta and discarded gradient
    std::map<std::pair<int, int>, ChunkCache> m_cache;
    BlockHooks m_hooks;
    std::function<void(int tensor)> m_weightGradientDone;
    comm::Communicator* m_cp = nullptr; // context parallelism: m_seq is then s/cp, the local tokens
    int m_cpSize = 1;
    std::vector<std::int64_t> m_positions; // empty: position t of a sequence is t
    std::map<std::int64_t, std::unique_ptr<MoeLayer>> m_moe; // MoE blocks by layer
    double m_aux = 0; // the MoE blocks' weighted auxiliary losses of the forwards since takeAuxLoss()
    float m_lossScale = 1; // the current backward's
    comm::Communicator* m_rowGroup = nullptr; // shareEmbeddingGradient, shareWeightGradient
    std::vector<RowRange> m_rowsOf; // the embedding's (empty: not shared)
    std::map<int, std::vector<RowRange>> m_weightRows; // shareWeightGradient
    std::vector<RowProduct> m_started, m_exchanging; // this block's shared weight gradients, the previous block's
    WeightGradQueue m_wgrad; // the weight matrices' products (deferred while splitting B and W)
    std::map<std::pair<int, int>, WeightGradQueue::Work> m_deferred; // (micro-batch, chunk): W not yet run
};

} // namespace loom::train
