#include "engine/train/Checkpoint.h"

#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <sys/stat.h>

#include <cerrno>
#include <cmath>
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
        out.push_back({ begin, end, nullptr, adam.firstMoment().data() + at, adam.secondMoment().data() + at, nullptr,
            &adam.device() });
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

// One checkpoint file. Never follows a symbolic link (a planted link would send the write elsewhere) and
// reads only regular files (a FIFO would block for ever); short writes are retried, so the error reported
// is the one the system gave (ENOSPC), never "Success".
class File {
public:
    File(const fs::path& path, bool write)
        : m_path(path)
    {
        m_fd = ::open(
            path.c_str(), (write ? (O_WRONLY | O_CREAT) : (O_RDONLY | O_NONBLOCK)) | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (m_fd < 0)
            throw std::runtime_error("cannot " + std::string(write ? "write " : "read ") + path.string() + ": "
                + (errno == ELOOP ? std::string("it is a symbolic link") : std::strerror(errno)));
        struct stat st { };
        if (::fstat(m_fd, &st) != 0 || !S_ISREG(st.st_mode)) {
            ::close(m_fd);
            throw std::runtime_error(path.string() + " is not a regular file; the checkpoint is damaged");
        }
        m_size = static_cast<std::int64_t>(st.st_size);
    }
    ~File() { ::close(m_fd); }
    File(const File&) = delete;
    File& operator=(const File&) = delete;
    std::int64_t size() const { return m_size; }
    void putBytes(const void* data, std::size_t bytes, std::int64_t offset)
    {
        const char* p = static_cast<const char*>(data);
        while (bytes > 0) {
            const ssize_t n = ::pwrite(m_fd, p, bytes, offset);
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0)
                throw std::runtime_error("writing " + m_path.string()
                    + " failed: " + std::strerror(n == 0 ? ENOSPC : errno) + " (is the disk full?)");
            p += n, bytes -= static_cast<std::size_t>(n), offset += n;
        }
    }
    void put(const float* data, std::size_t count, std::int64_t at) { putBytes(data, count * 4, at * 4); }
    void get(float* data, std::size_t count, std::int64_t at)
    {
        const auto bytes = static_cast<ssize_t>(count * 4);
        if (::pread(m_fd, data, static_cast<std::size_t>(bytes), at * 4) != bytes)
            throw std::runtime_error(
                m_path.string() + " is shorter than its tensor; the checkpoint is damaged or from another model");
    }
    void sync()
    {
        if (::fsync(m_fd) != 0)
            throw std::runtime_error("writing " + m_path.string() + " failed: " + std::strerror(errno));
    }

private:
    fs::path m_path;
    int m_fd = -1;
    std::int64_t m_size = 0;
};

// Writes `text` to `file` whole and flushed to disk (a fresh file: any link or file there is removed first).
void writeWhole(const fs::path& file, const std::string& text)
{
    ::unlink(file.c_str()); // a link at this name goes, not its target
    File f(file, true);
    f.putBytes(text.data(), text.size(), 0);
    f.sync();
}

// fs::rename with the checkpoint's words instead of the library's ("filesystem error: cannot rename").
void renameChecked(const fs::path& from, const fs::path& to)
{
    std::error_code ec;
    fs::rename(from, to, ec);
    if (ec)
        throw std::runtime_error("cannot rename " + from.string() + " to " + to.string() + ": " + ec.message());
}

// `data` holds the local elements [from, to) of tensor `index`, starting with element `from`; on `device`
// (copied to the host first) unless that is null.
void writeSlice(const fs::path& file, const ParamSet& params, int index, const float* data, std::size_t from,
    std::size_t to, device::Device* device)
{
    std::vector<float> host;
    if (device) {
        host.resize(to - from);
        device->copyBytes(host.data(), data, host.size() * sizeof(float), device::CopyKind::DeviceToHost);
        device->synchronize();
        data = host.data();
    }
    File f(file, true);
    forEachRun(params, index, from, to,
        [&](std::size_t k, std::int64_t global, std::size_t n) { f.put(data + (k - from), n, global); });
}

// Reads this rank's part of a tensor file, which must hold exactly the layout's global tensor (bytes
// appended, or a file of another shape, mean a damaged or foreign checkpoint) and only finite numbers
// (a second moment must also not be negative: its square root divides the update).
void readSlice(const fs::path& file, const ParamSet& params, int index, float* data, std::size_t from, std::size_t to,
    bool nonNegative, device::Device* device = nullptr)
{
    float* const target = data;
    std::vector<float> host;
    if (device) { // read and checked on the host, then copied to the device
        host.resize(to - from);
        data = host.data();
    }
    std::error_code ec;
    if (!fs::exists(fs::symlink_status(file, ec)))
        throw std::runtime_error(
            "the checkpoint has no " + file.filename().string() + "; it was saved from a different model");
    File f(file, false);
    const auto& s = params.spec(index);
    const std::int64_t expected = s.rows * s.cols * 4;
    if (f.size() != expected)
        throw std::runtime_error(file.string() + " has " + std::to_string(f.size()) + " bytes; the layout's " + s.name
            + " (" + std::to_string(s.rows) + " x " + std::to_string(s.cols) + " fp32) needs "
            + std::to_string(expected) + ": the checkpoint is damaged or from another model");
    forEachRun(params, index, from, to,
        [&](std::size_t k, std::int64_t global, std::size_t n) { f.get(data + (k - from), n, global); });
    for (std::size_t k = 0; k < to - from; ++k)
        if (!std::isfinite(data[k]) || (nonNegative && data[k] < 0))
            throw std::runtime_error(file.string() + " holds " + std::to_string(data[k]) + " at element "
                + std::to_string(from + k) + "; a checkpoint holds finite numbers only (damaged or edited)");
    if (device) {
        device->copyBytes(target, host.data(), host.size() * sizeof(float), device::CopyKind::HostToDevice);
        device->synchronize();
    }
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
        slices.push_back({ 0, params.flatSize(), params.values.data(), nullptr, nullptr, &params.values.device() });
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
            writeWhole(partial / "checkpoint.json", meta.dump(2) + "\n");
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
                    writeSlice(partial / (s.name + ".f32"), params, i, slice.values + at, from, to, slice.device);
                if (slice.m)
                    writeSlice(
                        partial / (s.name + ".adam_m.f32"), params, i, slice.m + at, from, to, slice.momentDevice);
                if (slice.v)
                    writeSlice(
                        partial / (s.name + ".adam_v.f32"), params, i, slice.v + at, from, to, slice.momentDevice);
            }
        }
    } catch (const std::exception& e) {
        ok = 0;
        error = e.what();
    }
    std::int64_t all = ok;
    world.allReduce(&all, 1, comm::DType::I64, comm::ReduceOp::Min)->wait();
    if (!all) {
        // Every rank has stopped writing: the half-written folder goes, so that the space it took (a full
        // disk is the usual cause) is free for a resume from the previous checkpoint.
        if (rank == 0) {
            std::error_code ec;
            fs::remove_all(partial, ec);
        }
        throw std::runtime_error(error.empty() ? "another rank could not write its part of the checkpoint" : error);
    }
    // `latest` changes only once the step folder is complete and renamed, and only by a rename of a file
    // written whole: a full disk leaves the previous `latest` and the error, never an empty one.
    ok = 1;
    if (rank == 0) {
        try {
            std::error_code ec;
            fs::remove_all(final, ec);
            renameChecked(partial, final);
            writeWhole(fs::path(dir) / "latest.tmp", final.filename().string() + "\n");
            renameChecked(fs::path(dir) / "latest.tmp", fs::path(dir) / "latest");
        } catch (const std::exception& e) {
            ok = 0;
            error = e.what();
        }
    }
    world.broadcast(&ok, 1, comm::DType::I64, 0)->wait();
    if (!ok)
        throw std::runtime_error(error.empty() ? "rank 0 could not complete the checkpoint" : error);
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
    const nlohmann::json& adam = meta.contains("adam_steps") ? meta["adam_steps"] : nlohmann::json(0);
    // AdamW takes one step per training step: more than the checkpoint's steps (INT64_MAX) would turn its
    // bias correction into NaN a few steps later.
    if (!adam.is_number_integer() || adam.get<std::int64_t>() < 0
        || adam.get<std::int64_t>() > std::max<std::int64_t>(info.step, 0))
        throw std::runtime_error(folder + "/checkpoint.json has adam_steps=" + adam.dump().substr(0, 40)
            + "; it must be a whole number from 0 to the checkpoint's step (" + std::to_string(info.step) + ")");
    info.adamSteps = adam.get<std::int64_t>();
    info.seed = meta.value("seed", 0ull);
    info.modelJson = meta["model"].dump();
    info.layoutJson = meta["layout"].dump();
    return info;
}

void loadCheckpoint(const std::string& folder, ParamSet& params, AdamW& adam)
{
    std::vector<CheckpointSlice> slices { { 0, params.flatSize(), params.values.data(), nullptr, nullptr,
        &params.values.device() } };
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
                readSlice(dir / (s.name + ".f32"), params, i, slice.values + at, from, to, false, slice.device);
            if (slice.m)
                readSlice(dir / (s.name + ".adam_m.f32"), params, i, slice.m + at, from, to, false, slice.momentDevice);
            if (slice.v)
                readSlice(dir / (s.name + ".adam_v.f32"), params, i, slice.v + at, from, to, true, slice.momentDevice);
        }
    }
}

} // namespace loom::train
