#pragma once

#include "engine/comm/Communicator.h"
#include "engine/comm/DType.h"
#include "engine/comm/Transport.h"
#include "engine/trace/TraceEvent.h"

#include <cstdint>
#include <string>
#include <vector>

namespace loom::comm {

// What one member called: every member of a group must make the same collective call.
struct CallSignature {
    trace::EventKind kind = trace::EventKind::AllReduce;
    DType type = DType::F32;
    ReduceOp op = ReduceOp::Sum;
    int algorithm = 0;
    int codec = 0;
    int root = 0;
    std::size_t count = 0;
    std::int64_t options = 0; // optionsFingerprint(): chunk size, codec block, top-k fraction
};

// A number that differs when options that change the bytes on the wire differ.
std::int64_t optionsFingerprint(const CollectiveOptions& options);

// Checks over `host` (a host-memory transport among the group's members) that every member made the same
// call: each member sends its (count, signature, options) to every other and compares what it received.
// Throws CommError naming who called what when they differ; the transport's wait throws, naming the
// member, when one does not arrive within the timeout. `description` names the operation and group in
// messages; `groupRanks` are the members' global ranks. The same check runs for every backend.
void checkAgreement(Transport& host, const CallSignature& call, const std::vector<std::int32_t>& groupRanks,
    const std::string& description);

// "[0, 1, 2]" (long lists shortened).
std::string rankList(const std::vector<std::int32_t>& ranks);

} // namespace loom::comm
