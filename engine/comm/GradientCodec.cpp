#include "engine/comm/GradientCodec.h"

#include "engine/comm/CommError.h"
#include "engine/comm/DType.h"

#include <lz4.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

namespace loom::comm {

namespace {

std::size_t blocks(std::size_t count, std::size_t block)
{
    return (count + block - 1) / block;
}

void checkSize(std::size_t got, std::size_t want, const char* codec)
{
    if (got != want)
        throw CommError(std::string(codec) + " decode: got " + std::to_string(got) + " bytes, expected "
            + std::to_string(want) + "; the ranks disagree about the tensor size or codec");
}

class CastCodec final : public GradientCodec {
public:
    explicit CastCodec(bool bf16)
        : m_bf16(bf16)
    {
    }
    std::size_t maxEncodedBytes(std::size_t count) const override { return 2 * count; }
    std::size_t encode(const float* in, std::size_t count, std::uint8_t* out) const override
    {
        auto* o = reinterpret_cast<std::uint16_t*>(out);
        for (std::size_t i = 0; i < count; ++i)
            o[i] = m_bf16 ? floatToBf16(in[i]) : floatToHalf(in[i]);
        return 2 * count;
    }
    void decode(const std::uint8_t* in, std::size_t bytes, float* out, std::size_t count) const override
    {
        checkSize(bytes, 2 * count, m_bf16 ? "bf16" : "fp16");
        const auto* h = reinterpret_cast<const std::uint16_t*>(in);
        for (std::size_t i = 0; i < count; ++i)
            out[i] = m_bf16 ? bf16ToFloat(h[i]) : halfToFloat(h[i]);
    }
    bool lossy() const override { return true; }
    double errorBound(float value, float) const override
    {
        const double a = std::fabs(value);
        if (m_bf16)
            return std::ldexp(a, -8);
        return a >= std::ldexp(1.0, -14) ? std::ldexp(a, -11) : std::ldexp(1.0, -25);
    }

private:
    bool m_bf16;
};

// Block-wise absmax quantisation to `bits` (8 or 4): q = round(x / scale), scale = max|block| / qmax.
// Layout: [float scales[nblocks]][codes], int4 codes packed two per byte (low nibble first).
class BlockQuantCodec final : public GradientCodec {
public:
    BlockQuantCodec(int bits, std::size_t block)
        : m_bits(bits)
        , m_block(std::max<std::size_t>(block, 1))
    {
    }
    std::size_t codeBytes(std::size_t count) const { return m_bits == 8 ? count : (count + 1) / 2; }
    std::size_t maxEncodedBytes(std::size_t count) const override
    {
        return blocks(count, m_block) * sizeof(float) + codeBytes(count);
    }
    std::size_t encode(const float* in, std::size_t count, std::uint8_t* out) const override
    {
        auto* scales = reinterpret_cast<float*>(out);
        std::uint8_t* codes = out + blocks(count, m_block) * sizeof(float);
        if (m_bits == 8) {
            quantizeInt8(in, count, m_block, scales, reinterpret_cast<std::int8_t*>(codes));
        } else {
            if (count > 0) // an empty tensor may come with a null buffer
                std::memset(codes, 0, codeBytes(count));
            for (std::size_t b = 0; b * m_block < count; ++b) {
                const std::size_t begin = b * m_block, end = std::min(count, begin + m_block);
                const float scale = absMax(in + begin, end - begin) / 7.0f;
                scales[b] = scale;
                const float inv = scale > FLT_MIN ? 1.0f / scale : 0.0f; // 1/scale must stay finite
                for (std::size_t i = begin; i < end; ++i) {
                    const float r = in[i] * inv;
                    int q = static_cast<int>(r + (r >= 0 ? 0.5f : -0.5f));
                    q = std::clamp(q, -7, 7);
                    codes[i / 2] |= static_cast<std::uint8_t>((q & 0xf) << ((i & 1) * 4));
                }
            }
        }
        return maxEncodedBytes(count);
    }
    void decode(const std::uint8_t* in, std::size_t bytes, float* out, std::size_t count) const override
    {
        checkSize(bytes, maxEncodedBytes(count), m_bits == 8 ? "int8" : "int4");
        const auto* scales = reinterpret_cast<const float*>(in);
        const std::uint8_t* codes = in + blocks(count, m_block) * sizeof(float);
        if (m_bits == 8) {
            dequantizeInt8(scales, reinterpret_cast<const std::int8_t*>(codes), count, m_block, out);
            return;
        }
        for (std::size_t i = 0; i < count; ++i) {
            int q = (codes[i / 2] >> ((i & 1) * 4)) & 0xf;
            q = q >= 8 ? q - 16 : q; // sign-extend the nibble
            out[i] = static_cast<float>(q) * scales[i / m_block];
        }
    }
    bool lossy() const override { return true; }
    double errorBound(float, float blockAbsMax) const override
    {
        // Half a quantisation step, plus fp32 rounding of the scale and the product.
        return blockAbsMax / (m_bits == 8 ? 254.0 : 14.0) * (1 + 1e-6) + 1e-30;
    }

private:
    int m_bits;
    std::size_t m_block;
};

// Top-k sparsification: [uint32 k][uint32 indices[k]][float values[k]], indices increasing.
class TopKCodec final : public GradientCodec {
public:
    explicit TopKCodec(double fraction)
        : m_fraction(fraction)
    {
    }
    std::size_t kept(std::size_t count) const
    {
        return count == 0 ? 0 : std::min(count, static_cast<std::size_t>(std::ceil(m_fraction * double(count))));
    }
    std::size_t maxEncodedBytes(std::size_t count) const override { return 4 + 8 * kept(count); }
    std::size_t encode(const float* in, std::size_t count, std::uint8_t* out) const override
    {
        const std::size_t k = kept(count);
        std::vector<std::uint32_t> order(count);
        std::iota(order.begin(), order.end(), 0u);
        // The k largest magnitudes; ties broken by index so every rank selects the same way.
        std::nth_element(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k), order.end(),
            [in](std::uint32_t a, std::uint32_t b) {
                const float fa = std::fabs(in[a]), fb = std::fabs(in[b]);
                return fa > fb || (fa == fb && a < b);
            });
        order.resize(k);
        std::sort(order.begin(), order.end());
        const auto k32 = static_cast<std::uint32_t>(k);
        std::memcpy(out, &k32, 4);
        std::memcpy(out + 4, order.data(), 4 * k);
        auto* values = reinterpret_cast<float*>(out + 4 + 4 * k);
        for (std::size_t i = 0; i < k; ++i)
            values[i] = in[order[i]];
        return 4 + 8 * k;
    }
    void decode(const std::uint8_t* in, std::size_t bytes, float* out, std::size_t count) const override
    {
        if (bytes < 4)
            throw CommError("topk decode: " + std::to_string(bytes) + " bytes is too short for a header");
        std::uint32_t k;
        std::memcpy(&k, in, 4);
        checkSize(bytes, 4 + 8 * std::size_t(k), "topk");
        std::fill(out, out + count, 0.0f);
        const auto* idx = reinterpret_cast<const std::uint32_t*>(in + 4);
        const auto* values = reinterpret_cast<const float*>(in + 4 + 4 * std::size_t(k));
        for (std::uint32_t i = 0; i < k; ++i) {
            if (idx[i] >= count)
                throw CommError("topk decode: index " + std::to_string(idx[i]) + " is outside the tensor of "
                    + std::to_string(count) + " values");
            out[idx[i]] = values[i];
        }
    }
    bool lossy() const override { return true; }
    double errorBound(float value, float) const override { return std::fabs(value); }

private:
    double m_fraction;
};

// LZ4 of the raw fp32 bytes: [uint64 compressed size][LZ4 block]. Exact.
class Lz4Codec final : public GradientCodec {
public:
    std::size_t maxEncodedBytes(std::size_t count) const override
    {
        return 8 + static_cast<std::size_t>(LZ4_compressBound(static_cast<int>(count * 4)));
    }
    std::size_t encode(const float* in, std::size_t count, std::uint8_t* out) const override
    {
        if (count * 4 > static_cast<std::size_t>(LZ4_MAX_INPUT_SIZE))
            throw CommError("lz4: a chunk of " + std::to_string(count * 4) + " bytes is over LZ4's limit of "
                + std::to_string(LZ4_MAX_INPUT_SIZE) + "; use smaller buckets");
        const int n = LZ4_compress_default(reinterpret_cast<const char*>(in), reinterpret_cast<char*>(out + 8),
            static_cast<int>(count * 4), LZ4_compressBound(static_cast<int>(count * 4)));
        if (n <= 0 && count > 0)
            throw CommError("lz4: compression failed");
        const std::uint64_t size = static_cast<std::uint64_t>(n);
        std::memcpy(out, &size, 8);
        return 8 + static_cast<std::size_t>(n);
    }
    void decode(const std::uint8_t* in, std::size_t bytes, float* out, std::size_t count) const override
    {
        std::uint64_t size = 0;
        if (bytes < 8 || (std::memcpy(&size, in, 8), size != bytes - 8))
            throw CommError("lz4 decode: the frame of " + std::to_string(bytes) + " bytes is damaged");
        const int n = LZ4_decompress_safe(reinterpret_cast<const char*>(in + 8), reinterpret_cast<char*>(out),
            static_cast<int>(size), static_cast<int>(count * 4));
        if (n != static_cast<int>(count * 4))
            throw CommError("lz4 decode: got " + std::to_string(n) + " bytes, expected " + std::to_string(count * 4));
    }
    bool lossy() const override { return false; }
    double errorBound(float, float) const override { return 0; }
};

} // namespace

float absMax(const float* x, std::size_t n)
{
    // The largest |x| as the largest magnitude bit pattern: an integer max the compiler vectorises (a float
    // max does not vectorise without -ffast-math, because of NaN ordering). NaN inputs give a NaN scale.
    std::int32_t best = 0;
    for (std::size_t i = 0; i < n; ++i) {
        std::int32_t bits;
        std::memcpy(&bits, x + i, 4);
        bits &= 0x7fffffff;
        best = bits > best ? bits : best;
    }
    float out;
    std::memcpy(&out, &best, 4);
    return out;
}

void quantizeInt8(const float* in, std::size_t count, std::size_t block, float* scales, std::int8_t* q)
{
    for (std::size_t b = 0; b * block < count; ++b) {
        const std::size_t begin = b * block, n = std::min(block, count - begin);
        const float* x = in + begin;
        const float amax = absMax(x, n);
        const float scale = amax / 127.0f;
        scales[b] = scale;
        const float inv = scale > FLT_MIN ? 1.0f / scale : 0.0f; // 1/scale must stay finite
        std::int8_t* out = q + begin;
        for (std::size_t i = 0; i < n; ++i) {
            const float r = x[i] * inv; // |r| <= 127 (up to rounding), so no clamp is needed
            out[i] = static_cast<std::int8_t>(static_cast<int>(r + (r >= 0 ? 0.5f : -0.5f)));
        }
    }
}

void dequantizeInt8(const float* scales, const std::int8_t* q, std::size_t count, std::size_t block, float* out)
{
    for (std::size_t b = 0; b * block < count; ++b) {
        const std::size_t begin = b * block, n = std::min(block, count - begin);
        const float scale = scales[b];
        for (std::size_t i = 0; i < n; ++i)
            out[begin + i] = static_cast<float>(q[begin + i]) * scale;
    }
}

std::unique_ptr<GradientCodec> makeCodec(const plan::Codec& codec, std::size_t block)
{
    using K = plan::Codec::Kind;
    switch (codec.kind) {
    case K::None:
        return nullptr;
    case K::Fp16:
        return std::make_unique<CastCodec>(false);
    case K::Bf16:
        return std::make_unique<CastCodec>(true);
    case K::Int8:
        return std::make_unique<BlockQuantCodec>(8, block);
    case K::Int4:
        return std::make_unique<BlockQuantCodec>(4, block);
    case K::TopK:
        return std::make_unique<TopKCodec>(codec.topkFraction);
    case K::Lz4:
        return std::make_unique<Lz4Codec>();
    }
    return nullptr;
}

} // namespace loom::comm
