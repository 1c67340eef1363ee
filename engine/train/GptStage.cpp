#include "engine/train/GptStage.h"

#include "engine/train/Rope.h"
#include "engine/train/Threads.h"
#include "engine/train/VocabSoftmax.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <utility>

namespace loom::train {

GptStage::GptStage(Config config, Kernels& kernels)
    : m_h(config.model.hidden)
    , m_heads(config.model.heads)
    , m_ffn(config.model.ffnHidden)
    , m_vocab(config.model.vocab)
    , m_paddedVocab(config.model.paddedVocab())
    , m_seq(config.model.seqLen)
    , m_chunks(std::move(config.chunks))
    , m_tpRank(config.tensor.rank)
    , m_tpSize(config.tensor.size)
    , m_tp(config.tensor.comm)
    , m_k(kernels)
    , m_recompute(config.fullRecompute)
    , m_model(config.model)
    , m_gpt2(m_model.mlp == plan::ModelSpec::Mlp::Gelu && m_model.norm == plan::ModelSpec::Norm::LayerNorm
          && m_model.position == plan::ModelSpec::Position::Learned && m_model.bias && m_model.tieEmbeddings
          && m_model.effectiveKvHeads() == m_model.heads)
    , m_sp(config.sequenceParallel && m_tpSize > 1)
    , m_kvHeads(m_model.effectiveKvHeads())
    , m_ropeFreq(ropeFrequencies(m_model))
    , m_eps(static_cast<float>(m_model.normEps))
    , m_params(m_tpRank, m_tpSize, config.device ? *config.device : hostDevice())
{
    const plan::ModelSpec& model = m_model;
    const int tpSize = m_tpSize;
    if (m_heads % tpSize || m_kvHeads % tpSize || m_heads % m_kvHeads)
        throw std::invalid_argument("model " + model.name + ": tp=" + std::to_string(tpSize)
            + " must divide heads=" + std::to_string(m_heads) + " and kv_heads=" + std::to_string(m_kvHeads)
            + " (each rank holds whole query and KV heads), and kv_heads must divide heads");
    if (model.position == plan::ModelSpec::Position::Rope && (m_h / m_heads) % 2)
        throw std::invalid_argument(
            "model " + model.name + ": rotary positions need an even head size, not " + std::to_string(m_h / m_heads));
    if (model.isMoe() && m_sp)
        throw std::invalid_argument("model " + model.name
            + ": parallel.sp with mixture-of-experts blocks is not implemented in loom-train (the load-balancing loss "
              "is a product of means over the whole sequence); set parallel.sp to false");
    if (m_sp && (m_seq % tpSize || !m_tp))
        throw std::invalid_argument("parallel.sp splits seq_len=" + std::to_string(m_seq)
            + " over tp=" + std::to_string(tpSize) + ": tp must divide it");
    m_zeros.assign(static_cast<std::size_t>(m_h), 0.0f);
    m_scratch.assign(static_cast<std::size_t>(m_h), 0.0f);
    // init.method gpt2: GPT-2's residual scaling of the output projections and a position embedding at half
    // the std; normal: every matrix at the std.
    const bool gpt2Init = config.init.method == plan::InitSpec::Method::Gpt2;
    const auto std = static_cast<float>(config.init.std);
    const float projStd = gpt2Init ? std / std::sqrt(2.0f * static_cast<float>(model.layers)) : std;
    // Flat order is the reverse of backward's: the head first, then blocks from the last down, then the
    // embedding, so gradient buckets fill from the front while backward runs.
    bool anyHead = false, anyEmbedding = false;
    for (const auto& c : m_chunks) {
        anyHead = anyHead || c.head;
        anyEmbedding = anyEmbedding || c.embedding;
    }
    if (anyHead) {
        m_lnfg = m_params.add("lnf.g", 1, m_h, Shard::Replicated, Init::Ones, 0, false);
        if (model.norm == plan::ModelSpec::Norm::LayerNorm && model.bias)
            m_lnfb = m_params.add("lnf.b", 1, m_h, Shard::Replicated, Init::Zeros, 0, false);
        if (!model.tieEmbeddings) // vocab-parallel like the embedding
            m_lmHead = m_params.add("lm_head", m_paddedVocab, m_h, Shard::Rows, Init::Normal, std, true);
    }
    std::vector<std::int64_t> layers;
    for (const auto& c : m_chunks)
        for (auto l = c.blocks.first; l <= c.blocks.last; ++l)
            layers.push_back(l);
    std::sort(layers.rbegin(), layers.rend());
    for (auto l : layers) {
        m_params.beginBlock(l);
        if (m_gpt2)
            addGpt2Block(l, std, projStd, config.expert);
        else
            addLlamaBlock(l, std, projStd, config.expert);
        m_params.endBlock();
    }
    if ((anyHead && model.tieEmbeddings) || anyEmbedding)
        m_wte = m_params.add("wte", m_paddedVocab, m_h, Shard::Rows, Init::Normal, std, true);
    if (anyEmbedding && model.position == plan::ModelSpec::Position::Learned)
        m_wpe = m_params.add("wpe", m_seq, m_h, Shard::Replicated, Init::Normal, gpt2Init ? std / 2 : std, true);
    m_params.allocate();
}

void GptStage::addGpt2Block(std::int64_t l, float std, float projStd, const Group& expert)
{
    const std::string p = "h" + std::to_string(l) + ".";
    BlockParams b;
    b.ln1g = m_params.add(p + "ln1.g", 1, m_h, Shard::Replicated, Init::Ones, 0, false);
    b.ln1b = m_params.add(p + "ln1.b", 1, m_h, Shard::Replicated, Init::Zeros, 0, false);
    b.wqkv = m_params.add(p + "qkv.w", m_h, 3 * m_h, Shard::QkvColumns, Init::Normal, std, true);
    b.bqkv = m_params.add(p + "qkv.b", 1, 3 * m_h, Shard::QkvColumns, Init::Zeros, 0, false);
    b.wo = m_params.add(p + "proj.w", m_h, m_h, Shard::Rows, Init::Normal, projStd, true);
    b.bo = m_params.add(p + "proj.b", 1, m_h, Shard::Replicated, Init::Zeros, 0, false);
    b.ln2g = m_params.add(p + "ln2.g", 1, m_h, Shard::Replicated, Init::Ones, 0, false);
    b.ln2b = m_params.add(p + "ln2.b", 1, m_h, Shard::Replicated, Init::Zeros, 0, false);
    b.wfc = b.bfc = b.wpr = b.bpr = -1;
    if (m_model.moeLayer(l)) { // a mixture of experts in place of the MLP
        m_moe[l] = std::make_unique<MoeLayer>(
            m_model, p, m_params, expert.rank, expert.size, expert.comm, m_k, std, projStd);
    } else {
        b.wfc = m_params.add(p + "fc.w", m_h, m_ffn, Shard::Columns, Init::Normal, std, true);
        b.bfc = m_params.add(p + "fc.b", 1, m_ffn, Shard::Columns, Init::Zeros, 0, false);
        b.wpr = m_params.add(p + "fcproj.w", m_ffn, m_h, Shard::Rows, Init::Normal, projStd, true);
        b.bpr = m_params.add(p + "fcproj.b", 1, m_h, Shard::Replicated, Init::Zeros, 0, false);
    }
    m_block[l] = b;
}

void GptStage::setContextParallel(comm::Communicator* cp, int cpRank, int cpSize)
{
    if (cpSize <= 1)
        return;
    if (!m_moe.empty())
        throw std::invalid_argument("parallel.cp with mixture-of-experts blocks is not implemented in loom-train (the "
                                    "load-balancing loss is a product of means over the whole sequence); use cp 1");
    m_positions = RingAttention::localPositions(cpRank, cpSize, m_seq);
    m_seq /= cpSize;
    m_cp = cp;
    m_cpSize = cpSize;
}

std::int64_t GptStage::positionOf(int localToken) const
{
    const std::int64_t t = localToken % m_seq;
    return m_positions.empty() ? t : m_positions[static_cast<std::size_t>(t)];
}

void GptStage::attentionForward(BlockCache& c, int B, int heads, int headDim)
{
    if (m_cpSize == 1) {
        m_k.attentionForward(c.att.data(), c.probs.data(), c.qkv.data(), B, static_cast<int>(m_seq), heads, headDim);
        return;
    }
    const int hl = heads * headDim, width = 3 * hl;
    RingAttention ring(m_cp, { B, static_cast<int>(m_seq) / 2, heads, heads, headDim });
    c.lse.resize(static_cast<std::size_t>(B) * heads * m_seq);
    ring.forward(c.qkv.data(), width, c.qkv.data() + hl, c.qkv.data() + 2 * hl, width, c.att.data(), hl, c.lse.data());
}

void GptStage::attentionBackward(BlockCache& c, float* dQkv, const float* dAtt, int B, int heads, int headDim)
{
    if (m_cpSize == 1) {
        m_k.attentionBackward(dQkv, dAtt, c.qkv.data(), c.probs.data(), B, static_cast<int>(m_seq), heads, headDim);
        return;
    }
    const int hl = heads * headDim, width = 3 * hl;
    RingAttention ring(m_cp, { B, static_cast<int>(m_seq) / 2, heads, heads, headDim });
    ring.backward(c.qkv.data(), width, c.qkv.data() + hl, c.qkv.data() + 2 * hl, width, c.att.data(), hl, dAtt,
        c.lse.data(), dQkv, dQkv + hl, dQkv + 2 * hl);
}

std::vector<int> GptStage::blockParams(std::int64_t layer) const
{
    if (!m_gpt2) {
        const auto& q = m_llamaBlock.at(layer);
        std::vector<int> out;
        for (int i : { q.ln1g, q.ln1b, q.wq, q.bq, q.wk, q.bk, q.wv, q.bv, q.wo, q.bo, q.ln2g, q.ln2b, q.wgate, q.bgate,
                 q.wup, q.bup, q.wdown, q.bdown })
            if (i >= 0)
                out.push_back(i);
        if (auto it = m_moe.find(layer); it != m_moe.end())
            for (int i : it->second->params())
                out.push_back(i);
        return out;
    }
    const auto& b = m_block.at(layer);
    std::vector<int> out { b.ln1g, b.ln1b, b.wqkv, b.bqkv, b.wo, b.bo, b.ln2g, b.ln2b, b.wfc, b.bfc, b.wpr, b.bpr };
    if (auto it = m_moe.find(layer); it != m_moe.end()) {
        std::erase(out, -1);
        for (int i : it->second->params())
            out.push_back(i);
    }
    return out;
}

double GptStage::takeAuxLoss()
{
    return std::exchange(m_aux, 0.0);
}

void GptStage::allReduce(float* data, std::size_t n, comm::ReduceOp op)
{
    if (m_tp && m_tpSize > 1)
        m_tp->allReduce(data, n, comm::DType::F32, op)->wait();
}

GptStage::BlockDims GptStage::blockDims(int B) const
{
    const int s = static_cast<int>(m_seq), h = static_cast<int>(m_h), d = h / static_cast<int>(m_heads);
    const int Hl = static_cast<int>(m_heads) / m_tpSize, KVl = static_cast<int>(m_kvHeads) / m_tpSize;
    const int T = B * s, Tl = localTokens(B);
    return { s, T, h, Tl, d, Hl, KVl, Hl * d, KVl * d, static_cast<int>(m_ffn) / m_tpSize, static_cast<std::size_t>(T),
        static_cast<std::size_t>(Tl) };
}

void GptStage::blockForward(std::int64_t layer, BlockCache& c, int B, const float* in, float* out)
{
    if (!m_gpt2)
        return llamaBlockForward(layer, c, B, in, out);
    const BlockParams& p = m_block.at(layer);
    const auto [s, T, h, Tl, d, Hl, KVl, hl, kvl, fl, n, nl] = blockDims(B); // nl: the norm regions' rows
    std::vector<float> full; // sequence parallelism: a gathered input or the partial sums to reduce-scatter
    c.x.assign(in, in + nl * h);
    c.ln1.resize(nl * h);
    c.ln1Mean.resize(nl);
    c.ln1Rstd.resize(nl);
    c.qkv.resize(n * 3 * hl);
    if (m_cpSize == 1)
        c.probs.resize(static_cast<std::size_t>(B) * Hl * m_seq * m_seq);
    c.att.resize(n * hl);
    c.x2.resize(nl * h);
    c.ln2.resize(nl * h);
    c.ln2Mean.resize(nl);
    c.ln2Rstd.resize(nl);
    c.fc.resize(n * fl);
    c.act.resize(n * fl);
    m_k.layerNormForward(c.ln1.data(), c.ln1Mean.data(), c.ln1Rstd.data(), in, m_params.value(p.ln1g),
        m_params.value(p.ln1b), Tl, h, m_eps);
    const float* ln1 = gatherTokens(c.ln1.data(), full, B);
    m_k.gemm(false, false, T, 3 * hl, h, ln1, m_params.value(p.wqkv), c.qkv.data(), false);
    m_k.addBias(c.qkv.data(), m_params.value(p.bqkv), T, 3 * hl);
    attentionForward(c, B, Hl, d);
    float* proj = m_sp ? full.data() : c.x2.data();
    m_k.gemm(false, false, T, h, hl, c.att.data(), m_params.value(p.wo), proj, false);
    reduceTokens(proj, c.x2.data(), B); // row-parallel: partial sums over the TP group
    m_k.addBias(c.x2.data(), m_params.value(p.bo), Tl, h);
    for (std::size_t i = 0; i < nl * h; ++i)
        c.x2[i] += in[i];
    m_k.layerNormForward(c.ln2.data(), c.ln2Mean.data(), c.ln2Rstd.data(), c.x2.data(), m_params.value(p.ln2g),
        m_params.value(p.ln2b), Tl, h, m_eps);
    if (auto moe = m_moe.find(layer); moe != m_moe.end()) { // MoeLayer.h: whole experts on every TP rank
        m_aux += moe->second->forward(c.moe, c.ln2.data(), Tl, out);
    } else {
        const float* ln2 = gatherTokens(c.ln2.data(), full, B);
        m_k.gemm(false, false, T, fl, h, ln2, m_params.value(p.wfc), c.fc.data(), false);
        m_k.addBias(c.fc.data(), m_params.value(p.bfc), T, fl);
        m_k.geluForward(c.act.data(), c.fc.data(), n * fl);
        float* mlpOut = m_sp ? full.data() : out;
        m_k.gemm(false, false, T, h, fl, c.act.data(), m_params.value(p.wpr), mlpOut, false);
        reduceTokens(mlpOut, out, B);
        m_k.addBias(out, m_params.value(p.bpr), Tl, h);
    }
    for (std::size_t i = 0; i < nl * h; ++i)
        out[i] += c.x2[i];
}

void GptStage::blockBackward(std::int64_t layer, BlockCache& c, int B, const float* dOut, float* dIn)
{
    const auto [s, T, h, Tl, d, Hl, KVl, hl, kvl, fl, n, nl] = blockDims(B);
    if (m_recompute) {
        std::vector<float> scratch(nl * h);
        const std::vector<float> input = c.x;
        const double aux = m_aux; // the recomputed forward's load-balancing loss was counted the first time
        blockForward(layer, c, B, input.data(), scratch.data());
        m_aux = aux;
    }
    if (!m_gpt2)
        return llamaBlockBackward(layer, c, B, dOut, dIn);
    const BlockParams& p = m_block.at(layer);
    // With sequence parallelism the backward of a reduce-scatter is an all-gather (dOut, dX2) and that of an
    // all-gather a reduce-scatter (dLn2, dLn1); the norms' outputs are gathered again for the weight gradients.
    std::vector<float> full, dLocal(m_sp ? nl * h : 0);
    // MLP: out = x2 + gelu(ln2·Wfc + bfc)·Wpr + bpr
    std::vector<float> dAct(n * fl), dFc(n * fl), dLn2(n * h), dX2(dOut, dOut + nl * h);
    float* dLn2Local = m_sp ? dLocal.data() : dLn2.data();
    if (auto moe = m_moe.find(layer); moe != m_moe.end()) {
        moe->second->backward(c.moe, dOut, dLn2Local, m_lossScale);
    } else {
        m_k.biasBackward(m_params.grad(p.bpr), dOut, Tl, h);
        const float* dOutAll = gatherTokens(dOut, full, B);
        weightGradient(p.wpr, fl, h, T, c.act.data(), dOutAll);
        m_k.gemm(false, true, T, fl, h, dOutAll, m_params.value(p.wpr), dAct.data(), false);
        m_k.geluBackward(dFc.data(), dAct.data(), c.fc.data(), n * fl);
        m_k.biasBackward(m_params.grad(p.bfc), dFc.data(), T, fl);
        weightGradient(p.wfc, h, fl, T, gatherTokens(c.ln2.data(), full, B), dFc.data());
        m_k.gemm(false, true, T, h, fl, dFc.data(), m_params.value(p.wfc), dLn2.data(), false);
        reduceTokens(dLn2.data(), dLn2Local, B); // column-parallel: each rank saw part of the columns
    }
    normBackward(
        p.ln2g, p.ln2b, dX2.data(), dLn2Local, c.x2.data(), c.ln2.data(), c.ln2Mean.data(), c.ln2Rstd.data(), Tl);
    // Attention: x2 = x + attn(ln1(x))·Wo + bo
    std::vector<float> dAtt(n * hl), dQkv(n * 3 * hl), dLn1(n * h);
    m_k.biasBackward(m_params.grad(p.bo), dX2.data(), Tl, h);
    const float* dX2All = gatherTokens(dX2.data(), full, B);
    weightGradient(p.wo, hl, h, T, c.att.data(), dX2All);
    m_k.gemm(false, true, T, hl, h, dX2All, m_params.value(p.wo), dAtt.data(), false);
    attentionBackward(c, dQkv.data(), dAtt.data(), B, Hl, d);
    m_k.biasBackward(m_params.grad(p.bqkv), dQkv.data(), T, 3 * hl);
    weightGradient(p.wqkv, h, 3 * hl, T, gatherTokens(c.ln1.data(), full, B), dQkv.data());
    m_k.gemm(false, true, T, h, 3 * hl, dQkv.data(), m_params.value(p.wqkv), dLn1.data(), false);
    float* dLn1Local = m_sp ? dLocal.data() : dLn1.data();
    reduceTokens(dLn1.data(), dLn1Local, B);
    std::copy(dX2.begin(), dX2.end(), dIn);
    normBackward(p.ln1g, p.ln1b, dIn, dLn1Local, c.x.data(), c.ln1.data(), c.ln1Mean.data(), c.ln1Rstd.data(), Tl);
}

double GptStage::forward(int mb, int chunk, int B, const std::int32_t* tokens, const std::int32_t* targets,
    const float* input, float* output)
{
    const Chunk& ch = m_chunks.at(static_cast<std::size_t>(chunk));
    ChunkCache& cache = m_cache[{ mb, chunk }];
    cache = ChunkCache {};
    cache.B = B;
    const int T = B * static_cast<int>(m_seq), h = static_cast<int>(m_h), Tl = localTokens(B);
    const auto n = static_cast<std::size_t>(T), nl = static_cast<std::size_t>(Tl);
    std::vector<float> x(nl * h), next(nl * h), full;
    if (ch.embedding) {
        cache.tokens.assign(tokens, tokens + n);
        const std::int64_t rowsLocal = m_paddedVocab / m_tpSize, first = m_tpRank * rowsLocal;
        const float* wte = m_params.value(m_wte);
        float* rows = x.data();
        if (m_sp) {
            full.assign(n * h, 0.0f);
            rows = full.data();
        }
        for (int t = 0; t < T; ++t) {
            const std::int64_t tok = tokens[t] - first;
            if (tok >= 0 && tok < rowsLocal)
                std::copy(wte + tok * h, wte + (tok + 1) * h, rows + static_cast<std::size_t>(t) * h);
        }
        reduceTokens(rows, x.data(), B); // vocab-parallel: each token's row lives on one TP rank
        if (m_wpe >= 0) {
            const float* wpe = m_params.value(m_wpe);
            for (int t = 0; t < Tl; ++t) {
                const float* pos = wpe + static_cast<std::size_t>(localPosition(t)) * h;
                for (int c = 0; c < h; ++c)
                    x[static_cast<std::size_t>(t) * h + c] += pos[c];
            }
        }
    } else {
        std::copy(input, input + nl * h, x.begin());
    }
    cache.blocks.resize(static_cast<std::size_t>(ch.blocks.size()));
    for (auto l = ch.blocks.first; l <= ch.blocks.last; ++l) {
        if (m_hooks.before)
            m_hooks.before(l, false);
        BlockCache& block = cache.blocks[static_cast<std::size_t>(l - ch.blocks.first)];
        blockForward(l, block, B, x.data(), next.data());
        if (m_recompute) { // keep only the input; blockBackward runs the forward again
            std::vector<float> keep = std::move(block.x);
            block = BlockCache {};
            block.x = std::move(keep);
        } else if (m_efficientNorm) { // the norms' inputs: the backward recovers them from the outputs
            block.x = {};
            block.x2 = {};
        }
        if (m_hooks.after)
            m_hooks.after(l, false);
        x.swap(next);
    }
    if (!ch.head) {
        std::copy(x.begin(), x.end(), output);
        return 0;
    }
    // Final norm, logits against the local vocab slice, vocab-parallel cross-entropy.
    cache.targets.assign(targets, targets + n);
    cache.headIn = x;
    cache.lnf.resize(nl * h);
    cache.lnfMean.resize(nl);
    cache.lnfRstd.resize(nl);
    normForward(m_lnfg, m_lnfb, cache.lnf.data(), cache.lnfMean.data(), cache.lnfRstd.data(), x.data(), Tl);
    if (m_efficientNorm)
        cache.headIn = {};
    const int Vl = static_cast<int>(m_paddedVocab / m_tpSize);
    const std::int64_t first = static_cast<std::int64_t>(m_tpRank) * Vl;
    const int headW = m_lmHead >= 0 ? m_lmHead : m_wte;
    cache.probs.resize(n * Vl);
    m_k.gemm(false, true, T, Vl, h, gatherTokens(cache.lnf.data(), full, B), m_params.value(headW), cache.probs.data(),
        false);
    const int threads = computeThreads();
    std::vector<float> rowMax(n, -INFINITY);
    vocab::rowMax(cache.probs.data(), T, Vl, first, m_vocab, rowMax.data(), threads);
    allReduce(rowMax.data(), n, comm::ReduceOp::Max);
    std::vector<float> sums(2 * n, 0.0f); // [Σ exp(z - max) ; target logit - max]
    vocab::expSums(cache.probs.data(), T, Vl, rowMax.data(), targets, first, sums.data(), sums.data() + n, threads);
    allReduce(sums.data(), 2 * n);
    double loss = 0;
    for (int t = 0; t < T; ++t)
        loss
            += std::log(static_cast<double>(sums[static_cast<std::size_t>(t)])) - sums[n + static_cast<std::size_t>(t)];
    cache.sums.assign(sums.begin(), sums.begin() + static_cast<std::ptrdiff_t>(n)); // the backward normalises
    return loss / T;
}

std::size_t GptStage::cachedFloats() const
{
    std::size_t n = 0;
    for (const auto& [key, cache] : m_cache) {
        for (const BlockCache& b : cache.blocks)
            for (const auto* v : { &b.x, &b.ln1, &b.ln1Mean, &b.ln1Rstd, &b.qkv, &b.probs, &b.att, &b.x2, &b.ln2,
                     &b.ln2Mean, &b.ln2Rstd, &b.fc, &b.act, &b.up, &b.lse })
                n += v->size();
        for (const auto* v : { &cache.headIn, &cache.lnf, &cache.lnfMean, &cache.lnfRstd, &cache.probs, &cache.sums })
            n += v->size();
    }
    return n;
}

void GptStage::backward(int mb, int chunk, const float* dOutput, float* dInput, float lossScale,
    const std::function<void(std::int64_t)>& onBlockDone)
{
    const Chunk& ch = m_chunks.at(static_cast<std::size_t>(chunk));
    auto it = m_cache.find({ mb, chunk });
    if (it == m_cache.end())
        throw std::logic_error("backward of micro-batch " + std::to_string(mb) + " chunk " + std::to_string(chunk)
            + " before its forward");
    ChunkCache& cache = it->second;
    m_lossScale = lossScale;
    const int B = cache.B, T = B * static_cast<int>(m_seq), h = static_cast<int>(m_h), Tl = localTokens(B);
    const auto n = static_cast<std::size_t>(T), nl = static_cast<std::size_t>(Tl);
    std::vector<float> dx(nl * h), dPrev(nl * h), full;
    if (ch.head) {
        const int Vl = static_cast<int>(m_paddedVocab / m_tpSize);
        const std::int64_t first = static_cast<std::int64_t>(m_tpRank) * Vl;
        std::vector<float>& dLogits = cache.probs; // reuse: (softmax - onehot) · scale / T
        vocab::gradient(dLogits.data(), T, Vl, cache.sums.data(), cache.targets.data(), first,
            lossScale / static_cast<float>(T), computeThreads());
        const int headW = m_lmHead >= 0 ? m_lmHead : m_wte;
        std::vector<float> dLnf(n * h), dLnfLocal(m_sp ? nl * h : 0);
        m_k.gemm(false, false, T, h, Vl, dLogits.data(), m_params.value(headW), dLnf.data(), false);
        float* dLnfMine = m_sp ? dLnfLocal.data() : dLnf.data();
        reduceTokens(dLnf.data(), dLnfMine, B);
        if (!m_rowsOf.empty())
            sharedHeadGradient(dLogits.data(), cache.lnf.data(), T);
        else
            m_wgrad.add(m_k, m_params.grad(headW), -1, Vl, h, T, dLogits.data(),
                gatherTokens(cache.lnf.data(), full, B)); // -1: the tied head's gradient is not final here
        normBackward(m_lnfg, m_lnfb, dx.data(), dLnfMine, cache.headIn.data(), cache.lnf.data(), cache.lnfMean.data(),
            cache.lnfRstd.data(), Tl);
    } else {
        std::copy(dOutput, dOutput + nl * h, dx.begin());
    }
    for (auto l = ch.blocks.last; l >= ch.blocks.first; --l) {
        std::fill(dPrev.begin(), dPrev.end(), 0.0f);
        if (m_hooks.before)
            m_hooks.before(l, true);
        blockBackward(l, cache.blocks[static_cast<std::size_t>(l - ch.blocks.first)], B, dx.data(), dPrev.data());
        finishRowProducts(m_exchanging); // the previous block's shared rows, exchanged during this block
        m_exchanging.swap(m_started);
        m_wgrad.endBlock(l);
        if (m_wgrad.deferring()) { // W finishes the block's gradients
            dx.swap(dPrev);
            continue;
        }
        // The trainer's per-block work (sequence parallelism's TP sum of replicated gradients) comes before the
        // hook that may reduce-scatter and release the block's gradients (ZeRO-2/3).
        if (onBlockDone)
            onBlockDone(l);
        if (m_hooks.after)
            m_hooks.after(l, true);
        dx.swap(dPrev);
    }
    finishRowProducts(m_exchanging);
    if (ch.embedding) {
        if (!m_rowsOf.empty()) {
            sharedLookupGradient(dx.data(), cache.tokens.data(), T);
        } else {
            const std::int64_t rowsLocal = m_paddedVocab / m_tpSize, first = m_tpRank * rowsLocal;
            float* dwte = m_params.grad(m_wte);
            const float* dAll = gatherTokens(dx.data(), full, B);
            for (int t = 0; t < T; ++t) {
                const float* g = dAll + static_cast<std::size_t>(t) * h;
                const std::int64_t tok = cache.tokens[static_cast<std::size_t>(t)] - first;
                if (tok >= 0 && tok < rowsLocal)
                    for (int c = 0; c < h; ++c)
                        dwte[tok * h + c] += g[c];
            }
        }
        if (m_wpe >= 0) {
            float* dwpe = m_params.grad(m_wpe);
            for (int t = 0; t < Tl; ++t) {
                const float* g = dx.data() + static_cast<std::size_t>(t) * h;
                float* pos = dwpe + static_cast<std::size_t>(localPosition(t)) * h;
                for (int c = 0; c < h; ++c)
                    pos[c] += g[c];
            }
        }
    } else {
        std::copy(dx.begin(), dx.end(), dInput);
    }
    m_cache.erase(it);
    if (m_wgrad.deferring())
        m_deferred[{ mb, chunk }] = m_wgrad.take();
}

void GptStage::setSplitBackward(bool on)
{
    m_wgrad.setDeferring(on);
    for (auto& [layer, moe] : m_moe)
        moe->setWeightGradQueue(&m_wgrad);
}

void GptStage::weightBackward(int mb, int chunk, const std::function<void(std::int64_t)>& onBlockDone)
{
    auto it = m_deferred.find({ mb, chunk });
    if (it == m_deferred.end())
        throw std::logic_error("weight gradients of micro-batch " + std::to_string(mb) + " chunk "
            + std::to_string(chunk) + " before its input gradients (or twice)");
    WeightGradQueue::run(m_k, it->second, m_weightGradientDone, onBlockDone);
    m_deferred.erase(it);
}

std::size_t GptStage::deferredFloats() const
{
    std::size_t n = 0;
    for (const auto& [key, work] : m_deferred)
        n += work.floats();
    return n;
}

} // namespace loom::train
