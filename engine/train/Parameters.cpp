#include "engine/train/Parameters.h"

#include "engine/device/CpuDevice.h"
#include "engine/train/Mix.h"
#include "engine/train/Threads.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <utility>

namespace loom::train {

namespace {

std::uint64_t nameHash(const std::string& s)
{
    std::uint64_t h = 1469598103934665603ull; // FNV-1a
    for (unsigned char c : s)
        h = (h ^ c) * 1099511628211ull;
    return h;
}

} // namespace

float initialValue(std::uint64_t seed, const std::string& tensor, std::uint64_t element)
{
    const std::uint64_t base = mix64(seed ^ mix64(nameHash(tensor)) ^ mix64(element * 2 + 1));
    const std::uint64_t a = mix64(base), b = mix64(base ^ 0xD1B54A32D192ED03ull);
    const double u1 = (static_cast<double>(a >> 11) + 1.0) / 9007199254740993.0; // (0, 1]
    const double u2 = static_cast<double>(b >> 11) / 9007199254740992.0; // [0, 1)
    return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
}

int ParamSet::add(
    std::string name, std::int64_t rows, std::int64_t cols, Shard shard, Init init, float stddev, bool decay)
{
    ParamSpec p { std::move(name), rows, cols, shard, init, stddev, decay, rows, cols, 0,
        m_block >= 0 ? TensorRole::Block : TensorRole::Outer, m_block };
    const std::int64_t t = m_tpSize;
    switch (shard) {
    case Shard::Replicated:
        break;
    case Shard::Rows:
        if (rows % t)
            throw std::invalid_argument(
                p.name + ": " + std::to_string(rows) + " rows do not split over tp=" + std::to_string(t));
        p.localRows = rows / t;
        break;
    case Shard::Columns:
    case Shard::QkvColumns:
        if (cols % (shard == Shard::QkvColumns ? 3 * t : t))
            throw std::invalid_argument(
                p.name + ": " + std::to_string(cols) + " columns do not split over tp=" + std::to_string(t));
        p.localCols = cols / t;
        break;
    }
    m_specs.push_back(std::move(p));
    return static_cast<int>(m_specs.size()) - 1;
}

device::Device& hostDevice()
{
    static device::CpuDevice host;
    return host;
}

void FlatValues::assign(std::size_t n, float v)
{
    m_shared.reset();
    m_own = device::Buffer<float>(); // the old allocation goes before the new one comes
    if (n > 0) {
        m_own = device::Buffer<float>(*m_device, n);
        m_device->fillFloats(m_own.data(), v, n);
        m_device->synchronize();
    }
    m_data = m_own.data();
    m_size = n;
}

FlatValues::FlatValues(FlatValues&& other) noexcept
    : m_device(other.m_device)
    , m_own(std::move(other.m_own))
    , m_shared(std::move(other.m_shared))
    , m_data(std::exchange(other.m_data, nullptr))
    , m_size(std::exchange(other.m_size, 0))
{
}

FlatValues& FlatValues::operator=(FlatValues&& other) noexcept
{
    if (this != &other) {
        m_device = other.m_device;
        m_own = std::move(other.m_own);
        m_shared = std::move(other.m_shared);
        m_data = std::exchange(other.m_data, nullptr);
        m_size = std::exchange(other.m_size, 0);
    }
    return *this;
}

std::vector<float> FlatValues::toHost() const
{
    std::vector<float> host(m_size);
    if (m_size > 0) {
        m_device->copyBytes(host.data(), m_data, m_size * sizeof(float), device::CopyKind::DeviceToHost);
        m_device->synchronize();
    }
    return host;
}

void FlatValues::fill(float v)
{
    if (m_size == 0)
        return;
    m_device->fillFloats(m_data, v, m_size);
    m_device->synchronize();
}

void FlatValues::copyFrom(std::size_t at, const float* src, std::size_t n)
{
    if (n == 0)
        return;
    m_device->copyBytes(m_data + at, src, n * sizeof(float), device::CopyKind::DeviceToDevice);
    m_device->synchronize();
}

void FlatValues::uploadFrom(std::size_t at, const float* host, std::size_t n)
{
    if (n == 0)
        return;
    m_device->copyBytes(m_data + at, host, n * sizeof(float), device::CopyKind::HostToDevice);
    m_device->synchronize();
}

void FlatValues::share(std::shared_ptr<void> memory, bool copy)
{
    auto* into = static_cast<float*>(memory.get());
    if (copy && m_size > 0) {
        m_device->copyBytes(into, m_data, m_size * sizeof(float), device::CopyKind::DeviceToHost);
        m_device->synchronize();
    }
    m_shared = std::move(memory);
    m_own = device::Buffer<float>();
    m_data = into;
}

void ParamSet::allocate()
{
    std::size_t offset = 0;
    for (auto& s : m_specs) {
        s.offset = offset;
        offset += s.size();
    }
    values.assign(offset, 0.0f);
    grads.assign(offset, 0.0f);
    m_flatSize = offset;
}

void ParamSet::releaseFlat(bool releaseValues, bool releaseGrads)
{
    if (releaseValues) {
        values.release();
        m_valueAt.assign(m_specs.size(), nullptr);
    }
    if (releaseGrads) {
        grads.release();
        m_gradAt.assign(m_specs.size(), nullptr);
    }
}

std::pair<std::int64_t, std::int64_t> ParamSet::globalPosition(int index, std::int64_t r, std::int64_t c) const
{
    const auto& s = m_specs[static_cast<std::size_t>(index)];
    switch (s.shard) {
    case Shard::Replicated:
        return { r, c };
    case Shard::Rows:
        return { m_tpRank * s.localRows + r, c };
    case Shard::Columns:
        return { r, m_tpRank * s.localCols + c };
    case Shard::QkvColumns: {
        const std::int64_t width = s.localCols / 3, part = c / width, within = c % width;
        return { r, part * (s.cols / 3) + m_tpRank * width + within };
    }
    }
    return { r, c };
}

void ParamSet::initialise(std::uint64_t seed)
{
    // Computed on the host, a tensor at a time, and copied to where the values live.
    std::vector<float> v;
    for (int i = 0; i < static_cast<int>(m_specs.size()); ++i) {
        const auto& s = m_specs[static_cast<std::size_t>(i)];
        v.assign(s.size(), 0.0f);
        for (std::int64_t r = 0; r < s.localRows; ++r)
            for (std::int64_t c = 0; c < s.localCols; ++c) {
                float x = 0;
                if (s.init == Init::Ones) {
                    x = 1;
                } else if (s.init == Init::Normal) {
                    const auto [gr, gc] = globalPosition(i, r, c);
                    x = s.stddev * initialValue(seed, s.name, static_cast<std::uint64_t>(gr * s.cols + gc));
                }
                v[static_cast<std::size_t>(r * s.localCols + c)] = x;
            }
        if (!v.empty())
            values.device().copyBytes(value(i), v.data(), v.size() * sizeof(float), device::CopyKind::HostToDevice);
    }
    values.device().synchronize();
}

int ParamSet::find(const std::string& name) const
{
    for (std::size_t i = 0; i < m_specs.size(); ++i)
        if (m_specs[i].name == name)
            return static_cast<int>(i);
    return -1;
}

void ParamSet::zeroGrads()
{
    // Half a gigabyte for GPT-2 124M: memory bound, but one core does not reach the memory's bandwidth.
    std::size_t from = 0;
    auto zero = [this](std::size_t begin, std::size_t end) {
        if (grads.device().kind() != device::DeviceKind::Cpu) {
            grads.device().fillFloats(grads.data() + begin, 0.0f, end - begin);
            return;
        }
        parallelFor(end - begin, computeThreads(), [this, begin](std::size_t, std::size_t b, std::size_t e) {
            std::fill(grads.data() + begin + b, grads.data() + begin + e, 0.0f);
        });
    };
    for (const auto& [skipFrom, skipTo] : m_unwritten) {
        if (skipFrom > from)
            zero(from, skipFrom);
        from = std::max(from, skipTo);
    }
    if (grads.size() > from)
        zero(from, grads.size());
}

} // namespace loom::train
