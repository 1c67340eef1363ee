#include "engine/train/LlmcModel.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <vector>

namespace loom::train {

namespace fs = std::filesystem;

namespace {

constexpr std::int32_t kMagic = 20240326;
constexpr std::int32_t kVersion = 3;

using Tensor = std::vector<float>;

Tensor readTensor(const fs::path& folder, const std::string& name, std::size_t count)
{
    std::ifstream in(folder / (name + ".f32"), std::ios::binary);
    Tensor t(count);
    if (!in.read(reinterpret_cast<char*>(t.data()), static_cast<std::streamsize>(count * 4)))
        throw std::runtime_error("the checkpoint " + folder.string() + " lacks a complete " + name);
    return t;
}

void writeTensor(const fs::path& folder, const std::string& name, const Tensor& t)
{
    std::ofstream out(folder / (name + ".f32"), std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(t.data()), static_cast<std::streamsize>(t.size() * 4));
    std::ofstream m(folder / (name + ".adam_m.f32"), std::ios::binary | std::ios::trunc);
    std::ofstream v(folder / (name + ".adam_v.f32"), std::ios::binary | std::ios::trunc);
    const Tensor zeros(t.size(), 0.0f);
    m.write(reinterpret_cast<const char*>(zeros.data()), static_cast<std::streamsize>(zeros.size() * 4));
    v.write(reinterpret_cast<const char*>(zeros.data()), static_cast<std::streamsize>(zeros.size() * 4));
    if (!out || !m || !v)
        throw std::runtime_error("cannot write " + (folder / name).string() + " (is the disk full?)");
}

// (rows, cols) -> (cols, rows)
Tensor transpose(const Tensor& t, std::size_t rows, std::size_t cols)
{
    Tensor o(t.size());
    for (std::size_t r = 0; r < rows; ++r)
        for (std::size_t c = 0; c < cols; ++c)
            o[c * rows + r] = t[r * cols + c];
    return o;
}

// One llm.c tensor: Loom's name per layer, its Loom shape (rows, cols), and whether llm.c stores it transposed.
struct Entry {
    const char* loom; // "%" is the layer index
    std::size_t rows, cols;
    bool perLayer, transposed;
};

std::vector<Entry> entries(const plan::ModelSpec& m, std::size_t seq, std::size_t paddedVocab)
{
    const std::size_t C = static_cast<std::size_t>(m.hidden);
    return { { "wte", paddedVocab, C, false, false }, { "wpe", seq, C, false, false },
        { "h%.ln1.g", 1, C, true, false }, { "h%.ln1.b", 1, C, true, false }, { "h%.qkv.w", C, 3 * C, true, true },
        { "h%.qkv.b", 1, 3 * C, true, false }, { "h%.proj.w", C, C, true, true }, { "h%.proj.b", 1, C, true, false },
        { "h%.ln2.g", 1, C, true, false }, { "h%.ln2.b", 1, C, true, false }, { "h%.fc.w", C, 4 * C, true, true },
        { "h%.fc.b", 1, 4 * C, true, false }, { "h%.fcproj.w", 4 * C, C, true, true },
        { "h%.fcproj.b", 1, C, true, false }, { "lnf.g", 1, C, false, false }, { "lnf.b", 1, C, false, false } };
}

std::string nameOf(const char* pattern, std::int64_t layer)
{
    std::string s = pattern;
    const auto at = s.find('%');
    if (at != std::string::npos)
        s.replace(at, 1, std::to_string(layer));
    return s;
}

} // namespace

void checkLlmcCompatible(const plan::ModelSpec& m)
{
    if (m.mlp != plan::ModelSpec::Mlp::Gelu || m.norm != plan::ModelSpec::Norm::LayerNorm
        || m.position != plan::ModelSpec::Position::Learned || !m.bias || !m.tieEmbeddings
        || m.ffnHidden != 4 * m.hidden || (m.kvHeads != 0 && m.kvHeads != m.heads))
        throw std::runtime_error("model " + m.name
            + " is not llm.c's GPT-2 (GELU MLP of 4·hidden, LayerNorm, learned "
              "positions, biases, tied LM head); llm.c's file format cannot hold it");
}

void exportLlmc(const std::string& folderText, const plan::ModelSpec& m, const std::string& file)
{
    checkLlmcCompatible(m);
    const fs::path folder(folderText);
    const auto seq = static_cast<std::size_t>(m.seqLen), Vp = static_cast<std::size_t>(m.paddedVocab());
    std::int32_t header[256] = {};
    header[0] = kMagic;
    header[1] = kVersion;
    header[2] = static_cast<std::int32_t>(m.seqLen);
    header[3] = static_cast<std::int32_t>(m.vocab);
    header[4] = static_cast<std::int32_t>(m.layers);
    header[5] = static_cast<std::int32_t>(m.heads);
    header[6] = static_cast<std::int32_t>(m.hidden);
    header[7] = static_cast<std::int32_t>(Vp);
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    if (!out)
        throw std::runtime_error("cannot write the llm.c model file \"" + file + "\"");
    out.write(reinterpret_cast<const char*>(header), sizeof header);
    for (const Entry& e : entries(m, seq, Vp)) {
        for (std::int64_t l = 0; l < (e.perLayer ? m.layers : 1); ++l) {
            Tensor t = readTensor(folder, nameOf(e.loom, l), e.rows * e.cols);
            if (e.transposed)
                t = transpose(t, e.rows, e.cols); // Loom (in, out) -> llm.c (out, in)
            out.write(reinterpret_cast<const char*>(t.data()), static_cast<std::streamsize>(t.size() * 4));
        }
    }
    if (!out)
        throw std::runtime_error("writing \"" + file + "\" failed (is the disk full?)");
}

void importLlmc(
    const std::string& file, const plan::ModelSpec& m, const std::string& layoutJson, const std::string& folderText)
{
    checkLlmcCompatible(m);
    std::ifstream in(file, std::ios::binary);
    if (!in)
        throw std::runtime_error("cannot open the llm.c model file \"" + file + "\"");
    std::int32_t header[256] = {};
    if (!in.read(reinterpret_cast<char*>(header), sizeof header) || header[0] != kMagic)
        throw std::runtime_error("\"" + file + "\" is not an llm.c model file (no magic 20240326)");
    if (header[1] != kVersion)
        throw std::runtime_error("\"" + file + "\" is an llm.c model file of version " + std::to_string(header[1])
            + "; Loom reads version " + std::to_string(kVersion) + " (fp32, padded vocabulary)");
    const std::int64_t maxT = header[2], V = header[3], L = header[4], NH = header[5], C = header[6], Vp = header[7];
    if (V != m.vocab || L != m.layers || NH != m.heads || C != m.hidden)
        throw std::runtime_error("\"" + file + "\" holds a GPT-2 with vocab " + std::to_string(V) + ", "
            + std::to_string(L) + " layers, " + std::to_string(NH) + " heads, hidden " + std::to_string(C)
            + "; the layout's model " + m.name + " has vocab " + std::to_string(m.vocab) + ", "
            + std::to_string(m.layers) + " layers, " + std::to_string(m.heads) + " heads, hidden "
            + std::to_string(m.hidden));
    if (maxT > (1 << 20) || Vp < V || Vp > V + (1 << 16))
        throw std::runtime_error("\"" + file + "\" has a damaged header: max_seq_len " + std::to_string(maxT)
            + ", padded vocab " + std::to_string(Vp)
            + " (expected up to 1048576 positions and a padded vocab of at least " + std::to_string(V) + ")");
    std::uint64_t floats = 0; // the whole file's weights, checked against its size before anything is allocated
    for (const Entry& e : entries(m, static_cast<std::size_t>(maxT), static_cast<std::size_t>(Vp)))
        floats += std::uint64_t(e.rows) * e.cols * std::uint64_t(e.perLayer ? L : 1);
    std::error_code sizeError;
    const auto bytes = fs::file_size(file, sizeError);
    if (!sizeError && bytes < sizeof header + 4 * floats)
        throw std::runtime_error("\"" + file + "\" is cut short: its header promises " + std::to_string(floats)
            + " weights (" + std::to_string(sizeof header + 4 * floats) + " bytes) but the file has "
            + std::to_string(bytes) + " bytes");
    if (maxT < m.seqLen)
        throw std::runtime_error("\"" + file + "\" has positions for " + std::to_string(maxT)
            + " tokens; the model trains on seq_len=" + std::to_string(m.seqLen));
    const fs::path folder(folderText);
    fs::remove_all(folder);
    fs::create_directories(folder);
    const auto ours = static_cast<std::size_t>(m.paddedVocab());
    for (const Entry& e : entries(m, static_cast<std::size_t>(maxT), static_cast<std::size_t>(Vp))) {
        for (std::int64_t l = 0; l < (e.perLayer ? L : 1); ++l) {
            const std::size_t fileRows = e.rows, count = e.rows * e.cols;
            Tensor t(count);
            if (!in.read(reinterpret_cast<char*>(t.data()), static_cast<std::streamsize>(count * 4)))
                throw std::runtime_error("\"" + file + "\" is cut short in " + nameOf(e.loom, l));
            const std::string name = nameOf(e.loom, l);
            for (std::size_t k = 0; k < t.size(); ++k)
                if (!std::isfinite(t[k]))
                    throw std::runtime_error("\"" + file + "\" holds "
                        + (std::isnan(t[k]) ? "NaN" : "an infinite value") + " in " + name + " (element "
                        + std::to_string(k)
                        + "); the model file is damaged, "
                          "so Loom does not train from it");
            if (e.transposed)
                t = transpose(t, e.cols, e.rows); // llm.c (out, in) -> Loom (in, out)
            if (name == "wte") {
                Tensor rows(ours * e.cols, 0.0f); // Loom's padding may differ; padding rows are zero
                std::memcpy(rows.data(), t.data(), std::min(ours, fileRows) * e.cols * 4);
                t = std::move(rows);
            } else if (name == "wpe") {
                t.resize(static_cast<std::size_t>(m.seqLen) * e.cols); // the first seq_len positions
            }
            writeTensor(folder, name, t);
        }
    }
    nlohmann::ordered_json meta = { { "loom_checkpoint", 1 }, { "step", 0 }, { "adam_steps", 0 }, { "seed", 0 },
        { "model", plan::toJson(m) }, { "layout", nlohmann::json::parse(layoutJson) }, { "imported_from", file } };
    std::ofstream(folder / "checkpoint.json") << meta.dump(2) << "\n";
}

} // namespace loom::train
