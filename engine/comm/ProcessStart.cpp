#include "engine/comm/ProcessStart.h"

#include <charconv>
#include <cstdlib>
#include <stdexcept>

namespace loom::comm {

namespace {

int number(const std::function<const char*(const char*)>& env, const char* name, int fallback, bool required)
{
    const char* v = env(name);
    if (!v || !*v) {
        if (required)
            throw std::invalid_argument(std::string(name) + " is not set; it is needed with the variables beside it");
        return fallback;
    }
    const std::string text(v);
    int out = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
    if (ec != std::errc() || end != text.data() + text.size() || out < 0)
        throw std::invalid_argument(std::string(name) + "=\"" + text + "\" is not a non-negative whole number");
    return out;
}

} // namespace

Rendezvous parseRendezvous(const std::string& text)
{
    Rendezvous r;
    if (text.empty())
        return r;
    if (text.find('/') != std::string::npos) {
        r.kind = Rendezvous::Kind::Folder;
        r.folder = text;
        return r;
    }
    const auto colon = text.rfind(':');
    int port = 0;
    if (colon == std::string::npos || colon == 0
        || std::from_chars(text.data() + colon + 1, text.data() + text.size(), port).ptr != text.data() + text.size()
        || port <= 0 || port > 65535)
        throw std::invalid_argument("LOOM_RENDEZVOUS=\"" + text
            + "\" is neither host:port (a TCP store served by rank 0, port 1 to 65535) nor a "
              "folder path containing '/' (a file store on a shared file system)");
    r.kind = Rendezvous::Kind::Tcp;
    r.host = text.substr(0, colon);
    r.port = port;
    return r;
}

ProcessStart processStartFrom(const std::function<const char*(const char*)>& env)
{
    ProcessStart s;
    struct Starter {
        const char *rank, *size, *local, *source;
    };
    const Starter starters[] = { { "LOOM_RANK", "LOOM_WORLD_SIZE", "LOOM_LOCAL_RANK", "LOOM_RANK" },
        { "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "mpirun" },
        { "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "slurm" } };
    s.source = "one process";
    for (const Starter& st : starters) {
        if (!env(st.rank))
            continue;
        s.rank = number(env, st.rank, 0, true);
        s.size = number(env, st.size, 1, true);
        s.localRank = number(env, st.local, s.rank, false);
        s.source = st.source;
        if (s.size < 1 || s.rank >= s.size)
            throw std::invalid_argument(std::string(st.rank) + "=" + std::to_string(s.rank)
                + " is outside the world of " + st.size + "=" + std::to_string(s.size));
        break;
    }
    if (const char* v = env("LOOM_RENDEZVOUS"))
        s.rendezvous = parseRendezvous(v);
    if (const char* v = env("LOOM_JOB_ID"); v && *v)
        s.jobId = v;
    else if (const char* v = env("OMPI_MCA_ess_base_jobid"); v && *v)
        s.jobId = std::string("mpirun-") + v;
    else if (const char* v = env("SLURM_JOB_ID"); v && *v) {
        const char* step = env("SLURM_STEP_ID");
        s.jobId = std::string("slurm-") + v + "." + (step ? step : "0");
    }
    return s;
}

ProcessStart processStartFromEnvironment()
{
    return processStartFrom([](const char* name) { return std::getenv(name); });
}

} // namespace loom::comm
