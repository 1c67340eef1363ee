#pragma once

namespace loom::comm {

// Tunables of the communication layer, read once from the environment in one place (as nccl-tests does).
//   LOOM_COMM_TIMEOUT_S  seconds an operation may wait for a peer before failing (default 300)
//   LOOM_COMM_CHECK      1 (default): before each collective, check that every member called the same
//                        operation with the same count and type (one tiny all-reduce); 0 turns it off
struct CommConfig {
    double timeoutSeconds = 300;
    bool checkAgreement = true;

    static CommConfig fromEnvironment();
};

} // namespace loom::comm
