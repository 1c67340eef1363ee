#pragma once

#include "engine/device/Device.h"

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace loom::train {

// How a parameter is split across the tensor-parallel group (Megatron-LM's layout).
enum class Shard : std::uint8_t {
    Replicated, // every TP rank holds all of it (norms, biases added after an all-reduce, positions)
    Rows, // rank j holds rows [j·R/t, (j+1)·R/t): row-parallel weights, the vocab-parallel embedding
    Columns, // rank j holds columns [j·C/t, (j+1)·C/t): column-parallel weights and their biases
    QkvColumns, // columns of [Q | K | V], each h wide: rank j holds its heads' slice of each
};

enum class Init : std::uint8_t { Normal, Zeros, Ones };

// Where a tensor belongs in the model, set when it is added (ParamSet::beginBlock, ParamSet::add's caller):
// what the trainer reads to reduce, bucket and count it, instead of its name.
enum class TensorRole : std::uint8_t {
    Outer, // outside the blocks: embeddings, final norm, LM head (reduced after the backward)
    Block, // a transformer block's own tensor (reduced when the block's backward is done)
    Expert, // a block's expert of a mixture of experts (reduced over the expert-data-parallel group)
};

// One parameter tensor: its global shape, its shard on this rank and where it sits in the flat buffers.
struct ParamSpec {
    std::string name;
    std::int64_t rows = 0, cols = 0; // global shape
    Shard shard = Shard::Replicated;
    Init init = Init::Zeros;
    float stddev = 0;
    bool decay = false; // AdamW weight decay applies (matrices, not biases or norms)
    std::int64_t localRows = 0, localCols = 0;
    std::size_t offset = 0; // in ParamSet::values / grads
    TensorRole role = TensorRole::Outer;
    std::int64_t layer = -1; // the block it belongs to (-1: Outer)
    std::size_t size() const { return static_cast<std::size_t>(localRows * localCols); }
};

// The host as a Device (one CpuDevice for the process): where ParamSet allocates unless told otherwise.
device::Device& hostDevice();

// A flat float buffer on a Device: this rank's own allocation, or (share, host memory only) memory that other
// processes map too. Reads like a std::vector<float>; only assign() and release() change its length.
class FlatValues {
public:
    explicit FlatValues(device::Device& device = hostDevice())
        : m_device(&device)
    {
    }
    FlatValues(const FlatValues&) = delete; // m_data would point into the other's buffer
    FlatValues& operator=(const FlatValues&) = delete;
    // Moving hands the allocation over (its memory stays where it is); the moved-from one is empty.
    FlatValues(FlatValues&& other) noexcept;
    FlatValues& operator=(FlatValues&& other) noexcept;
    float* data() { return m_data; }
    const float* data() const { return m_data; }
    std::size_t size() const { return m_size; }
    bool empty() const { return m_size == 0; }
    float& operator[](std::size_t i) { return m_data[i]; }
    const float& operator[](std::size_t i) const { return m_data[i]; }
    float* begin() { return m_data; }
    float* end() { return m_data + m_size; }
    const float* begin() const { return m_data; }
    const float* end() const { return m_data + m_size; }
    // `n` copies of `v` in an allocation of its own on the device (the memory shared before, if any, is let go).
    void assign(std::size_t n, float v);
    void release() { assign(0, 0.0f); }
    // Every element set to `v` in place (a device fill), keeping the allocation.
    void fill(float v);
    // Copies [from, from + n) of `src` (on the same device) to element `at`, in the device's stream order, and
    // waits: the device's copy, so the same call moves host memory on a CpuDevice and GPU memory on CUDA.
    void copyFrom(std::size_t at, const float* src, std::size_t n);
    // The same for a host array (host -> device).
    void uploadFrom(std::size_t at, const float* host, std::size_t n);
    // The values copied to the host (device -> host), for checks and reports.
    std::vector<float> toHost() const;
    // From now on the values live in `memory` (host memory of at least size() floats, kept alive here),
    // which receives the current values when `copy` is set; this rank's own allocation is freed.
    void share(std::shared_ptr<void> memory, bool copy);
    bool shared() const { return m_shared != nullptr; }
    device::Device& device() const { return *m_device; }

private:
    device::Device* m_device;
    device::Buffer<float> m_own;
    std::shared_ptr<void> m_shared;
    float* m_data = nullptr;
    std::size_t m_size = 0;
};

// Every parameter of one rank in one flat buffer (and a gradient buffer of the same layout), so data
// parallelism can reduce contiguous buckets and the optimizer can shard one range.
//
// Initial values depend only on the seed and each element's global position in its named tensor (a
// counter-based generator), never on the layout: every layout starts from the same model.
class ParamSet {
public:
    // The flat values and gradients are allocated on `device`.
    ParamSet(int tpRank, int tpSize, device::Device& device = hostDevice())
        : values(device)
        , grads(device)
        , m_tpRank(tpRank)
        , m_tpSize(tpSize)
    {
    }

    // Adds a tensor; returns its index. Call allocate() after the last add(). Between beginBlock(layer) and
    // endBlock() the tensors added belong to block `layer` (TensorRole::Block); others are Outer.
    int add(std::string name, std::int64_t rows, std::int64_t cols, Shard shard, Init init, float stddev, bool decay);
    void beginBlock(std::int64_t layer) { m_block = layer; }
    void endBlock() { m_block = -1; }
    // A block's tensor `index` is an expert's (MoeLayer).
    void setExpert(int index) { m_specs.at(static_cast<std::size_t>(index)).role = TensorRole::Expert; }
    void allocate();
    void initialise(std::uint64_t seed);

    float* value(int index)
    {
        return m_valueAt.empty() ? values.data() + m_specs[static_cast<std::size_t>(index)].offset
                                 : m_valueAt[static_cast<std::size_t>(index)];
    }
    float* grad(int index)
    {
        return m_gradAt.empty() ? grads.data() + m_specs[static_cast<std::size_t>(index)].offset
                                : m_gradAt[static_cast<std::size_t>(index)];
    }
    const ParamSpec& spec(int index) const { return m_specs[static_cast<std::size_t>(index)]; }
    const std::vector<ParamSpec>& specs() const { return m_specs; }
    int find(const std::string& name) const;
    // Whether AdamW's weight decay applies to tensor `index` (the layout's optimizer.weight_decay_on); call
    // before the optimizer reads the specs.
    void setDecay(int index, bool decay) { m_specs[static_cast<std::size_t>(index)].decay = decay; }
    void zeroGrads();
    // Ranges [from, to) of the flat gradient buffer that nothing writes during a step (they stay zero), which
    // zeroGrads() then skips: the rows of the token embedding another data-parallel rank completes.
    void setUnwrittenGrads(std::vector<std::pair<std::size_t, std::size_t>> ranges) { m_unwritten = std::move(ranges); }

    // The global (row, column) of local element (r, c) of tensor `index`.
    std::pair<std::int64_t, std::int64_t> globalPosition(int index, std::int64_t r, std::int64_t c) const;

    FlatValues values; // shared by the data-parallel ranks of one machine under ZeRO-1 (Trainer)
    FlatValues grads;

    // ZeRO-2/3 (ShardedParams) keep tensors outside the flat buffers. releaseFlat() frees the flat value
    // and/or gradient buffer; from then on value(i) / grad(i) return what bindValue / bindGrad last set
    // (nullptr while the tensor is not held on this rank). flatSize() stays the flat layout's length.
    void releaseFlat(bool releaseValues, bool releaseGrads);
    void bindValue(int index, float* data) { m_valueAt.at(static_cast<std::size_t>(index)) = data; }
    void bindGrad(int index, float* data) { m_gradAt.at(static_cast<std::size_t>(index)) = data; }
    std::size_t flatSize() const { return m_flatSize; }

private:
    int m_tpRank, m_tpSize;
    std::vector<ParamSpec> m_specs;
    std::size_t m_flatSize = 0;
    std::int64_t m_block = -1; // beginBlock
    std::vector<float*> m_valueAt, m_gradAt; // empty: the flat buffers
    std::vector<std::pair<std::size_t, std::size_t>> m_unwritten; // setUnwrittenGrads, in flat order
};

// A standard normal value from (seed, tensor name, element index): the same on every rank and layout.
float initialValue(std::uint64_t seed, const std::string& tensor, std::uint64_t element);

} // namespace loom::train
