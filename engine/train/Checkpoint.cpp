#include "engine/train/Checkpoint.h"

#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>

namespace loom::train {

namespace fs = std::filesystem;

namespace {

// The moments of each of the optimizer's ranges (one, or this rank's bucket pieces under ZeRO-1).
std::vector<CheckpointSlice> momentSlices(AdamW& adam)
{
    std::vector<CheckpointSlice> out;
    std::size_t at = 0;
    for (const auto& [begin, end] : adam.ranges()) {
        out.push_back({ begin, end, nullptr, adam.firstMoment().data() + at, adam.secondMoment().data() + at });
        at += end - begin;
    }
    return out;
}

constexpr int kVersion = 1;

// Calls `run(localIndex, globalIndex, length)` for each run of consecutive global positions of the local
// elements [from, to) of tensor `index` (local row-major order).
template <typename Run> void forEachRun(const ParamSet& params, int index, std::size_t from, std::size_t to, Run&& run)
{
    const auto& s = params.spec(index);
    std::size_t k = from;
    while (k < to) {
        const auto r = static_cast<std::int64_t>(k) / s.localCols, c = static_cast<std::int64_t>(k) % s.localCols;
        const auto [gr, gc] = params.globalPosition(index, r, c);
        const std::int64_t global = gr * s.cols + gc;
        std::size_t length = 1;
        while (k + length < to) {
            const auto r2 = static_cast<std::int64_t>(k + length) / s.localCols,
                       c2 = static_cast<std::int64_t>(k + length) % s.localCols;
            const auto [gr2, gc2] = params.globalPosition(index, r2, c2);
            if (gr2 * s.cols + gc2 != global + static_cast<std::int64_t>(length))
                break;
            ++length;
        }
        run(k, global, length);
        k += length;
    }
}

class File {
public:
    File(const fs::path& path, bool write)
        : m_path(path)
    {
        m_fd = ::open(path.c_str(), write ? (O_WRONLY | O_CREAT) : O_RDONLY, 0644);
        if (m_fd < 0)
            throw std::runtime_error(
                "cannot " + std::string(write ? "write " : "read ") + path.string() + ": " + std::strerror(errno));
    }
    ~File() { ::close(m_fd); }
    void put(const float* data, std::size_t count, std::int64_t at)
    {
        const auto bytes = static_cast<ssize_t>(count * 4);
        if (::pwrite(m_fd, data, static_cast<std::size_t>(bytes), at * 4) != bytes)
            throw std::runtime_error(
                "writing " + m_path.string() + " failed: " + std::strerror(errno) + " (is the disk full?)");
    }
    void get(float* data, std::size_t count, std::int64_t at)
    {
        const auto bytes = static_cast<ssize_t>(count * 4);
        if (::pread(m_fd, data, static_cast<std::size_t>(bytes), at * 4) != bytes)
            throw std::runtime_error(
                m_path.string() + " is shorter than its tensor; the checkpoint is damaged or from another model");
    }

private:
    fs::path m_path;
    int m_fd = -1;
};

// `data` holds the local elements [from, to) of tensor `index`, starting with element `from`.
void writeSlice(
    const fs::path& file, const ParamSet& params, int index, const float* data, std::size_t from, std::size_t to)
{
    File f(file, true);
    forEachRun(params, index, from, to,
        [&](std::size_t k, std::int64_t global, std::size_t n) { f.put(data + (k - from), n, global); });
}

void readSlice(const fs::path& file, const ParamSet& params, int index, float* data, std::size_t from, std::size_t to)
{
    if (!fs::exists(file))
        throw std::runtime_error(
            "the checkpoint has no " + file.filename().string() + "; it was saved from a different model");
    File f(file, false);
    forEachRun(params, index, from, to,
        [&](std::size_t k, std::int64_t global, std::size_t n) { f.get(data + (k - from), n, global); });
}

// The part of tensor `index` (local element range) that falls in the flat range [begin, end).
std::pair<std::size_t, std::size_t> overlap(const ParamSpec& s, std::size_t begin, std::size_t end)
{
    const std::size_t a = std::max(begin, s.offset), b = std::min(end, s.offset + s.size());
    return a < b ? std::pair { a - s.offset, b - s.offset } : std::pair { std::size_t(0), std::size_t(0) };
}

} // namespace

void saveCheckpoint(const std::string& dir, const CheckpointInfo& info, ParamSet& params, const AdamW& adam,
    const CheckpointRole& role, comm::Communicator& world)
{
    // Parameters whole from DP rank 0; moments over the optimizer's range (each DP rank's under ZeRO-1).
    std::vector<CheckpointSlice> slices;
    if (role.writesParams)
        slices.push_back({ 0, params.flatSize(), params.values.data(), nullptr, nullptr });
    if (role.writesMoments)
        for (CheckpointSlice s : momentSlices(const_cast<AdamW&>(adam)))
            slices.push_back(s);
    saveCheckpoint(dir, info, params, slices, role.ownsTensor, world);
}

void saveCheckpoint(const std::string& dir, const CheckpointInfo& info, ParamSet& params,
    const std::vector<CheckpointSlice>& slices, const std::vector<bool>& ownsTensor, comm::Communicator& world)
{
    const int rank = world.rank();
    const fs::path final = fs::path(dir) / ("step-" + std::to_string(info.step));
    const fs::path partial = fs::path(dir) / ("step-" + std::to_string(info.step) + ".partial");
    std::int64_t ok = 1;
    std::string error;
    if (rank == 0) {
        try {
            fs::remove_all(partial);
            fs::create_directories(partial);
            nlohmann::ordered_json meta
                = { { "loom_checkpoint", kVersion }, { "step", info.step }, { "adam_steps", info.adamSteps },
                      { "seed", info.seed }, { "model", nlohmann::json::parse(info.modelJson) },
                      { "layout", nlohmann::json::parse(info.layoutJson) } };
            std::ofstream(partial / "checkpoint.json") << meta.dump(2) << "\n";
        } catch (const std::exception& e) {
            ok = 0;
            error = e.what();
        }
    }
    world.broadcast(&ok, 1, comm::DType::I64, 0)->wait();
    if (!ok)
        throw std::runtime_error(
            "cannot create the checkpoint folder " + partial.string() + (error.empty() ? "" : ": " + error));
    try {
        for (int i = 0; i < static_cast<int>(params.specs().size()); ++i) {
            if (!ownsTensor[static_cast<std::size_t>(i)])
                continue;
            const auto& s = params.spec(i);
            for (const auto& slice : slices) {
                const auto [from, to] = overlap(s, slice.begin, slice.end);
                if (from >= to)
                    continue;
                const std::size_t at = s.offset + from - slice.begin; // the slice's element for `from`
                if (slice.values)
                    writeSlice(partial / (s.name + ".f32"), params, i, slice.values + at, from, to);
                if (slice.m)
                    writeSlice(partial / (s.name + ".adam_m.f32"), params, i, slice.m + at, from, to);
                if (slice.v)
                    writeSlice(partial / (s.name + ".adam_v.f32"), params, i, slice.v + at, from, to);
            }
        }
    } catch (const std::exception& e) {
        ok = 0;
        error = e.what();
    }
    std::int64_t all = ok;
    world.allReduce(&all, 1, comm::DType::I64, comm::ReduceOp::Min)->wait();
    if (!all)
        throw std::runtime_error(error.empty() ? "another rank could not write its part of the checkpoint" : error);
    if (rank == 0) {
        fs::remove_all(final);
        fs::rename(partial, final);
        std::ofstream(fs::path(dir) / "latest.tmp") << final.filename().string() << "\n";
        fs::rename(fs::path(dir) / "latest.tmp", fs::path(dir) / "latest");
    }
    world.barrier()->wait();
}

std::optional<std::string> latestCheckpoint(const std::string& dir)
{
    std::ifstream in(fs::path(dir) / "latest");
    std::string name;
    if (!(in >> name))
        return std::nullopt;
    const fs::path folder = fs::path(dir) / name;
    if (!fs::exists(folder / "checkpoint.json"))
        return std::nullopt;
    return folder.string();
}

CheckpointInfo readCheckpointInfo(const std::string& folder)
{
    std::ifstream in(fs::path(folder) / "checkpoint.json");
    const nlohmann::json meta = nlohmann::json::parse(in, nullptr, false);
    if (meta.is_discarded() || !meta.is_object() || !meta.contains("loom_checkpoint"))
        throw std::runtime_error(folder + "/checkpoint.json is missing or not a Loom checkpoint");
    if (meta["loom_checkpoint"] != kVersion)
        throw std::runtime_error(
            folder + " is a checkpoint of version " + meta["loom_checkpoint"].dump() + "; this Loom reads version 1");
    CheckpointInfo info;
    info.step = meta.value("step", 0);
    info.adamSteps = meta.value("adam_steps", 0);
    info.seed = meta.value("seed", 0ull);
    info.modelJson = meta["model"].dump();
    info.layoutJson = meta["layout"].dump();
    return info;
}

void loadCheckpoint(const std::string& folder, ParamSet& params, AdamW& adam)
{
    std::vector<CheckpointSlice> slices { { 0, params.flatSize(), params.values.data(), nullptr, nullptr } };
    for (CheckpointSlice s : momentSlices(adam))
        slices.push_back(s);
    loadCheckpoint(folder, params, slices);
}

void loadCheckpoint(const std::string& folder, const ParamSet& params, const std::vector<CheckpointSlice>& slices)
{
    const fs::path dir(folder);
    for (int i = 0; i < static_cast<int>(params.specs().size()); ++i) {
        const auto& s = params.spec(i);
        for (const auto& slice : slices) {
            const auto [from, to] = overlap(s, slice.begin, slice.end);
            if (from >= to)
                continue;
            const std::size_t at = s.offset + from - slice.begin;
            if (slice.values)
                readSlice(dir / (s.name + ".f32"), params, i, slice.values + at, from, to);
            if (slice.m)
                readSlice(dir / (s.name + ".adam_m.f32"), params, i, slice.m + at, from, to);
            if (slice.v)
                readSlice(dir / (s.name + ".adam_v.f32"), params, i, slice.v + at, from, to);
        }
    }
}

} // namespace loom::train
