#include "engine/train/Safetensors.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>

namespace loom::train {

namespace {

constexpr std::uint64_t kMaxHeader = 100u << 20; // the format's own limit
constexpr int kMaxDepth = 8;

std::size_t dtypeSize(const std::string& dtype)
{
    return dtype == "F32" ? 4 : dtype == "BF16" ? 2 : 0;
}

std::string shapeText(const std::vector<std::int64_t>& shape)
{
    std::string s = "[";
    for (std::size_t i = 0; i < shape.size(); ++i)
        s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + "]";
}

int depthOf(const nlohmann::json& j, int depth = 0)
{
    int most = depth;
    if (j.is_structured())
        for (const auto& v : j)
            most = std::max(most, depthOf(v, depth + 1));
    return most;
}

SafeTensor readEntry(const std::string& file, const std::string& name, const nlohmann::json& e)
{
    auto bad = [&](const std::string& what) {
        return std::runtime_error(file + ": tensor \"" + name.substr(0, 200) + "\": " + what);
    };
    if (!e.is_object())
        throw bad("is " + std::string(e.type_name()) + "; expected an object with dtype, shape and data_offsets");
    SafeTensor t;
    const auto dtype = e.find("dtype");
    if (dtype == e.end() || !dtype->is_string())
        throw bad("has no dtype string");
    t.dtype = dtype->get<std::string>();
    if (!dtypeSize(t.dtype))
        throw bad("dtype is \"" + t.dtype.substr(0, 20) + "\"; Loom reads \"F32\" and \"BF16\"");
    const auto shape = e.find("shape");
    if (shape == e.end() || !shape->is_array() || shape->size() > 8)
        throw bad("has no shape (an array of at most 8 sizes)");
    for (const auto& d : *shape) {
        if (!d.is_number_integer() || d.get<std::int64_t>() < 0 || d.get<std::int64_t>() > (std::int64_t(1) << 40))
            throw bad("shape holds " + d.dump().substr(0, 40) + "; expected sizes from 0 to 2^40");
        t.shape.push_back(d.get<std::int64_t>());
    }
    const auto offsets = e.find("data_offsets");
    if (offsets == e.end() || !offsets->is_array() || offsets->size() != 2 || !(*offsets)[0].is_number_unsigned()
        || !(*offsets)[1].is_number_unsigned())
        throw bad("has no data_offsets [begin, end] of two whole numbers");
    t.begin = (*offsets)[0].get<std::uint64_t>();
    t.end = (*offsets)[1].get<std::uint64_t>();
    if (t.end < t.begin)
        throw bad("data_offsets end before they begin");
    const auto expected = static_cast<std::uint64_t>(t.elements()) * dtypeSize(t.dtype);
    if (t.end - t.begin != expected)
        throw bad("holds " + std::to_string(t.end - t.begin) + " bytes; its shape " + shapeText(t.shape) + " of "
            + t.dtype + " needs " + std::to_string(expected));
    return t;
}

} // namespace

std::int64_t SafeTensor::elements() const
{
    std::int64_t n = 1;
    for (auto d : shape)
        n *= d;
    return n;
}

SafetensorsFile SafetensorsFile::read(const std::string& path)
{
    std::error_code ec;
    const auto size = std::filesystem::file_size(path, ec);
    if (ec)
        throw std::runtime_error(path + ": cannot read (" + ec.message() + ")");
    std::ifstream in(path, std::ios::binary);
    std::uint8_t lengthBytes[8] = {};
    if (size < 8 || !in.read(reinterpret_cast<char*>(lengthBytes), 8))
        throw std::runtime_error(path + ": shorter than the 8-byte header length; not a safetensors file");
    std::uint64_t n = 0;
    for (int i = 7; i >= 0; --i)
        n = (n << 8) | lengthBytes[i];
    if (n > kMaxHeader || n > size - 8)
        throw std::runtime_error(path + ": the header length is " + std::to_string(n) + " bytes but the file has "
            + std::to_string(size) + " (and the format allows at most 100 MB of header); not a safetensors file");
    std::string header(n, '\0');
    in.read(header.data(), static_cast<std::streamsize>(n));
    nlohmann::json j = nlohmann::json::parse(header, nullptr, false);
    if (j.is_discarded() || !j.is_object())
        throw std::runtime_error(path + ": the header is not a JSON object");
    if (depthOf(j) > kMaxDepth)
        throw std::runtime_error(path + ": the header nests deeper than " + std::to_string(kMaxDepth) + " levels");
    SafetensorsFile f;
    f.m_path = path;
    const std::uint64_t dataSize = size - 8 - n;
    for (const auto& [name, e] : j.items()) {
        if (name == "__metadata__") {
            if (!e.is_object())
                throw std::runtime_error(path + ": __metadata__ is not an object of strings");
            for (const auto& [k, v] : e.items())
                if (v.is_string())
                    f.m_metadata[k] = v.get<std::string>();
            continue;
        }
        SafeTensor t = readEntry(path, name, e);
        if (t.end > dataSize)
            throw std::runtime_error(path + ": tensor \"" + name + "\" ends at byte " + std::to_string(t.end)
                + " of a data section of " + std::to_string(dataSize) + " bytes; the file is cut short");
        f.m_tensors[name] = t;
    }
    // No overlaps and no holes: sorted by begin, each tensor starts where the previous one ended.
    std::vector<std::pair<std::uint64_t, std::string>> order;
    for (const auto& [name, t] : f.m_tensors)
        order.emplace_back(t.begin, name);
    std::sort(order.begin(), order.end());
    std::uint64_t at = 0;
    for (const auto& [begin, name] : order) {
        const SafeTensor& t = f.m_tensors[name];
        if (t.begin != at)
            throw std::runtime_error(path + ": tensor \"" + name + "\" starts at byte " + std::to_string(t.begin)
                + " where " + std::to_string(at) + " was expected (tensors overlap or leave a hole)");
        at = t.end;
    }
    if (at != dataSize)
        throw std::runtime_error(path + ": the tensors account for " + std::to_string(at)
            + " bytes of a data section of " + std::to_string(dataSize));
    f.m_data.resize(dataSize);
    if (!in.read(f.m_data.data(), static_cast<std::streamsize>(dataSize)))
        throw std::runtime_error(path + ": cannot read its " + std::to_string(dataSize) + " bytes of tensors");
    return f;
}

std::vector<float> SafetensorsFile::floats(const std::string& name, const std::vector<std::int64_t>& shape) const
{
    const auto it = m_tensors.find(name);
    if (it == m_tensors.end())
        throw std::runtime_error(
            m_path + ": has no tensor \"" + name + "\" of shape " + shapeText(shape) + " that the model needs");
    const SafeTensor& t = it->second;
    if (t.shape != shape)
        throw std::runtime_error(m_path + ": tensor \"" + name + "\" has shape " + shapeText(t.shape)
            + "; the model needs " + shapeText(shape));
    std::vector<float> out(static_cast<std::size_t>(t.elements()));
    const char* p = m_data.data() + t.begin;
    if (t.dtype == "F32") {
        std::memcpy(out.data(), p, out.size() * 4);
    } else {
        for (std::size_t i = 0; i < out.size(); ++i) {
            std::uint16_t b;
            std::memcpy(&b, p + 2 * i, 2);
            out[i] = fromBf16(b);
        }
    }
    for (std::size_t i = 0; i < out.size(); ++i)
        if (!std::isfinite(out[i]))
            throw std::runtime_error(m_path + ": tensor \"" + name + "\" holds "
                + (std::isnan(out[i]) ? "NaN" : "an infinite value") + " at element " + std::to_string(i)
                + "; Loom does not train from it");
    return out;
}

std::uint16_t toBf16(float f)
{
    std::uint32_t u;
    std::memcpy(&u, &f, 4);
    if (std::isnan(f))
        return static_cast<std::uint16_t>((u >> 16) | 0x40);
    u += 0x7fff + ((u >> 16) & 1);
    return static_cast<std::uint16_t>(u >> 16);
}

float fromBf16(std::uint16_t b)
{
    const std::uint32_t u = std::uint32_t(b) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

void writeSafetensors(const std::string& path, const std::vector<SafeTensorOut>& tensors, bool bf16,
    const std::map<std::string, std::string>& metadata)
{
    nlohmann::ordered_json header = nlohmann::ordered_json::object();
    if (!metadata.empty())
        header["__metadata__"] = metadata;
    const std::uint64_t width = bf16 ? 2 : 4;
    std::uint64_t at = 0;
    for (const auto& t : tensors) {
        const std::uint64_t bytes = t.values.size() * width;
        header[t.name]
            = { { "dtype", bf16 ? "BF16" : "F32" }, { "shape", t.shape }, { "data_offsets", { at, at + bytes } } };
        at += bytes;
    }
    std::string text = header.dump();
    text.append((8 - text.size() % 8) % 8, ' '); // the data starts 8-aligned, as Hugging Face's writer pads
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    std::uint8_t lengthBytes[8];
    for (int i = 0; i < 8; ++i)
        lengthBytes[i] = static_cast<std::uint8_t>(std::uint64_t(text.size()) >> (8 * i));
    out.write(reinterpret_cast<const char*>(lengthBytes), 8);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    for (const auto& t : tensors) {
        if (!bf16) {
            out.write(
                reinterpret_cast<const char*>(t.values.data()), static_cast<std::streamsize>(t.values.size() * 4));
            continue;
        }
        std::vector<std::uint16_t> half(t.values.size());
        for (std::size_t i = 0; i < half.size(); ++i)
            half[i] = toBf16(t.values[i]);
        out.write(reinterpret_cast<const char*>(half.data()), static_cast<std::streamsize>(half.size() * 2));
    }
    if (!out)
        throw std::runtime_error("cannot write " + path + " (is the disk full?)");
}

} // namespace loom::train
