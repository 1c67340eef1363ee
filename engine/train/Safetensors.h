#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace loom::train {

// The safetensors container (Hugging Face): an 8-byte little-endian header length N, N bytes of JSON
// {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ..., "__metadata__": {..}}, then
// the tensors' bytes, offsets relative to the end of the header. Loom reads and writes F32 and BF16.
struct SafeTensor {
    std::string dtype; // "F32" or "BF16"
    std::vector<std::int64_t> shape;
    std::uint64_t begin = 0, end = 0; // in the data section
    std::int64_t elements() const;
};

class SafetensorsFile {
public:
    // Reads and checks `path`: the header length against the file size (and at most 100 MB), the JSON
    // (nesting at most 8 levels), every entry's dtype, shape and offsets (end - begin equals the elements
    // times the dtype's size, inside the data section, no two tensors overlapping, no bytes unaccounted
    // for). Throws std::runtime_error naming the file, the tensor and what was expected.
    static SafetensorsFile read(const std::string& path);

    const std::map<std::string, SafeTensor>& tensors() const { return m_tensors; }
    const std::map<std::string, std::string>& metadata() const { return m_metadata; }
    // Tensor `name` as fp32 (BF16 widened), checked to have `shape`; throws naming the tensor otherwise.
    std::vector<float> floats(const std::string& name, const std::vector<std::int64_t>& shape) const;
    const std::string& path() const { return m_path; }

private:
    std::string m_path;
    std::map<std::string, SafeTensor> m_tensors;
    std::map<std::string, std::string> m_metadata;
    std::vector<char> m_data;
};

// One tensor to write: fp32 values in row-major order of `shape`.
struct SafeTensorOut {
    std::string name;
    std::vector<std::int64_t> shape;
    std::vector<float> values;
};

// Writes `tensors` to `path` as F32 or (bf16 true) BF16, rounded to nearest even, in the order given.
void writeSafetensors(const std::string& path, const std::vector<SafeTensorOut>& tensors, bool bf16,
    const std::map<std::string, std::string>& metadata = {});

// bf16 <-> fp32 (round to nearest even; NaN stays NaN).
std::uint16_t toBf16(float f);
float fromBf16(std::uint16_t b);

} // namespace loom::train
