#pragma once
// Checks an export as the frameworks would at start-up: every flag, key and value against the facts read
// from their sources (tests/bridges/frameworks/*), the cross-field rules of Megatron-LM's validate_args and
// TransformerConfig that Loom's layouts can reach, DeepSpeed's batch identity and torchtitan's pipeline
// split. The launch script really runs (bash, with fake torchrun, srun and scontrol first on PATH that
// record what they were given), so what is checked is what torchrun would have started.
#include "engine/bridges/Export.h"

#include <map>
#include <string>
#include <vector>

namespace loom::test {

// One launch of an export's script: the training program's arguments and the environment it saw.
struct Launch {
    bool ran = false;
    std::vector<std::string> torchrun; // torchrun's own options, before the program
    std::vector<std::string> args; // the program's arguments
    std::string maxConnections; // CUDA_DEVICE_MAX_CONNECTIONS, "<unset>" when unset
    std::string error;
};

class ExportChecker {
public:
    // Reads the facts under `frameworksDir`; a missing or malformed file is a fatal test error.
    explicit ExportChecker(const std::string& frameworksDir);

    // Every problem with the export, one sentence each; empty when the framework would accept it.
    // `version` is the framework version the export was written for ("" for the default).
    std::vector<std::string> check(plan::ExportTarget target, const std::vector<plan::ExportFile>& files,
        const std::vector<std::string>& notes, const std::string& version) const;

    // Writes the files to a fresh folder and runs the launch script with `extraArgs` appended.
    static Launch launch(const std::vector<plan::ExportFile>& files, const std::vector<std::string>& extraArgs);

private:
    struct Flag {
        bool takesValue = false;
        std::string nargs; // "", "+", "*", "?", or a count
        std::string type; // "int", "float", "str", "" (anything)
        std::vector<std::string> choices;
        std::string dest;
    };
    using Flags = std::map<std::string, Flag>;
    // dest -> value ("" for a switch); the last occurrence wins, as with argparse.
    using Parsed = std::map<std::string, std::string>;

    Parsed parseArgs(const Flags& flags, const std::vector<std::string>& args, std::vector<std::string>& problems,
        const std::string& framework) const;
    void megatronRules(const Parsed& a, const Launch& launch, int minor, std::vector<std::string>& problems) const;
    void deepSpeedConfig(
        const std::string& text, const Parsed& a, const Launch& launch, std::vector<std::string>& problems) const;
    void torchTitanConfig(const std::string& text, const Launch& launch, const std::vector<std::string>& notes,
        std::vector<std::string>& problems) const;

    std::map<std::string, Flags> m_megatron; // by version: core_v0.12 .. core_v0.19, main
    Flags m_megatronDeepSpeed;
    std::map<std::string, std::vector<std::string>> m_deepSpeed; // fact lists by name
    std::vector<std::string> m_torchTitan; // the JSON texts of torchtitan's config facts: v0.2.0, v0.2.2
};

// The processes the launch starts: torchrun's --nproc-per-node x --nnodes (1 when absent).
long long launchWorld(const Launch& launch);

} // namespace loom::test
