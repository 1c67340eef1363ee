#pragma once

#include "engine/plan/Layout.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace loom::comm {

// Compression of fp32 gradients for the data-parallel all-reduce. encode() writes at most
// maxEncodedBytes(count) bytes and returns how many; decode() reconstructs `count` floats.
//
// Documented error bounds (per element, one encode/decode):
//   fp16  |x - x'| <= 2^-11 |x| for |x| >= 2^-14 (normal halves), <= 2^-25 below; saturates at ±65504
//   bf16  |x - x'| <= 2^-8 |x|
//   int8  |x - x'| <= max|block| / 254   (block-wise absmax scale, round to nearest)
//   int4  |x - x'| <= max|block| / 14
//   topk  keeps the ceil(fraction·count) largest |x| exactly, zeroes the rest
//   lz4   exact
class GradientCodec {
public:
    virtual ~GradientCodec() = default;
    virtual std::size_t maxEncodedBytes(std::size_t count) const = 0;
    virtual std::size_t encode(const float* in, std::size_t count, std::uint8_t* out) const = 0;
    // Throws CommError when the bytes are not a valid encoding of `count` values.
    virtual void decode(const std::uint8_t* in, std::size_t bytes, float* out, std::size_t count) const = 0;
    virtual bool lossy() const = 0;
    // The bound above for one element of a block whose largest magnitude is `blockAbsMax`.
    virtual double errorBound(float value, float blockAbsMax) const = 0;
};

// The codec for a layout's dp_codec (null for "none"). `block` is the int8/int4 block size in elements.
std::unique_ptr<GradientCodec> makeCodec(const plan::Codec& codec, std::size_t block = 256);

// The largest magnitude in x[0..n).
float absMax(const float* x, std::size_t n);

// int8 block quantisation exposed for the throughput benchmark: quantise then dequantise `count` floats.
void quantizeInt8(const float* in, std::size_t count, std::size_t block, float* scales, std::int8_t* q);
void dequantizeInt8(const float* scales, const std::int8_t* q, std::size_t count, std::size_t block, float* out);

} // namespace loom::comm
