#include "engine/train/InputChecks.h"

#include "engine/json/JsonLimits.h"
#include "engine/trace/BoundedRead.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <unistd.h>

namespace loom::train {

namespace fs = std::filesystem;

void checkCheckpointDir(const std::string& dir)
{
    std::error_code ec;
    if (fs::exists(dir, ec) && !fs::is_directory(dir, ec))
        throw std::runtime_error(
            "--checkpoint-dir \"" + dir + "\" is a file, not a folder; name a folder for the checkpoints");
    fs::create_directories(dir, ec);
    if (ec)
        throw std::runtime_error("cannot create the checkpoint folder \"" + dir + "\": " + ec.message()
            + "; name a folder you can write to");
    const fs::path probe = fs::path(dir) / (".loom-write-test-" + std::to_string(::getpid()));
    {
        std::ofstream out(probe, std::ios::trunc);
        out << "loom\n";
        out.flush();
        if (!out) {
            fs::remove(probe, ec);
            throw std::runtime_error("cannot write in the checkpoint folder \"" + dir
                + "\" (no permission, read-only or full); name a folder you can write to");
        }
    }
    fs::remove(probe, ec);
}

std::optional<std::string> latestCheckpointChecked(const std::string& dir)
{
    const fs::path latest = fs::path(dir) / "latest";
    std::error_code ec;
    if (!fs::exists(latest, ec))
        return std::nullopt;
    std::string text, unread, name;
    if (!readBoundedFile(latest.string(), 4096, &text, &unread))
        throw std::runtime_error(unread + " (" + latest.string() + " names the checkpoint to resume)");
    std::istringstream(text) >> name;
    std::string complete; // the complete checkpoints found, for the message
    for (const auto& entry : fs::directory_iterator(dir, ec))
        if (std::regex_match(entry.path().filename().string(), std::regex("step-[0-9]+"))
            && fs::exists(entry.path() / "checkpoint.json", ec))
            complete += (complete.empty() ? "" : ", ") + entry.path().filename().string();
    const std::string found = complete.empty()
        ? "no complete checkpoint is there"
        : "complete ones there: " + complete + "; write one of them into " + latest.string();
    if (!std::regex_match(name, std::regex("step-[0-9]{1,18}")))
        throw std::runtime_error(latest.string() + " names \"" + name.substr(0, 80)
            + "\", not a checkpoint folder step-N of " + dir + " (" + found + ")");
    const fs::path folder = fs::path(dir) / name;
    if (!fs::exists(folder / "checkpoint.json", ec))
        throw std::runtime_error(
            latest.string() + " names " + name + ", which is missing or incomplete (" + found + ")");
    return folder.string();
}

void checkResumable(const std::string& folder, std::int64_t steps)
{
    const fs::path file = fs::path(folder) / "checkpoint.json";
    std::string text, unread;
    if (!readBoundedFile(file.string(), 64u << 20, &text, &unread)) // a FIFO here used to block --resume
        throw std::runtime_error(unread);
    std::string why;
    const nlohmann::json meta = parseJsonLimited(text, &why);
    if (meta.is_discarded())
        throw std::runtime_error(file.string() + " is " + why);
    const auto field = [&](const char* key) -> const nlohmann::json& {
        if (!meta.is_object() || !meta.contains(key))
            throw std::runtime_error(file.string() + " has no \"" + key + "\"; it is not a complete Loom checkpoint");
        return meta[key];
    };
    if (field("loom_checkpoint") != 1)
        throw std::runtime_error(file.string() + ": loom_checkpoint is " + field("loom_checkpoint").dump().substr(0, 40)
            + "; this Loom reads version 1");
    const auto& step = field("step");
    if (!step.is_number_integer() || step.get<std::int64_t>() < 0)
        throw std::runtime_error(file.string() + ": step is " + step.dump().substr(0, 40)
            + "; expected the whole number of steps completed, 0 or more");
    if (step.get<std::int64_t>() > steps)
        throw std::runtime_error(file.string() + " is at step " + std::to_string(step.get<std::int64_t>())
            + ", beyond this run's --steps " + std::to_string(steps)
            + "; ask for more steps to continue it, or use another --checkpoint-dir");
    const auto& adam = field("adam_steps");
    if (!adam.is_number_integer() || adam.get<std::int64_t>() < 0)
        throw std::runtime_error(
            file.string() + ": adam_steps is " + adam.dump().substr(0, 40) + "; expected a whole number, 0 or more");
    if (const auto& seed = field("seed");
        !seed.is_number_unsigned() && !(seed.is_number_integer() && seed.get<std::int64_t>() >= 0))
        throw std::runtime_error(
            file.string() + ": seed is " + seed.dump().substr(0, 40) + "; expected a whole number, 0 or more");
    for (const char* key : { "model", "layout" })
        if (!field(key).is_object())
            throw std::runtime_error(file.string() + ": " + key + " is not an object; the checkpoint is damaged");
}

void checkFiniteStep(double loss, double gradNorm, std::int64_t step, int rank)
{
    if (std::isfinite(loss) && std::isfinite(gradNorm))
        return;
    const auto word = [](double v) { return std::isnan(v) ? std::string("NaN") : v > 0 ? "+infinity" : "-infinity"; };
    const std::string what
        = !std::isfinite(loss) ? "the loss is " + word(loss) : "the gradient norm is " + word(gradNorm);
    throw DivergedError("step " + std::to_string(step) + " on rank " + std::to_string(rank) + ": " + what
        + "; training stopped (lower --lr, or check the data, the initial weights and the checkpoint)");
}

} // namespace loom::train
