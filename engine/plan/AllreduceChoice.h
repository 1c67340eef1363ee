#pragma once

#include "engine/plan/Layout.h"
#include "engine/trace/TraceEvent.h"

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace loom::plan {

// `comm.allreduce: "auto"`: the all-reduce algorithm chosen per backend, message size and group, the way
// NCCL's tuner chooses, from a small table measured with loom-commbench (the table, the runs behind it and
// how to re-measure it: docs/communication.md). Pure plan code: the trainer and loom-commbench (through
// comm::CollectiveTuning), the cost model, the simulator and calibration all resolve "auto" here, so the
// algorithm a timeline names is the one loom-train runs for the same layout.

// What the choice depends on.
struct AllreduceQuery {
    std::string_view backend = "mpi"; // "mpi", "gloo" (CPU buffers) or "nccl" (GPU buffers)
    std::size_t bytes = 0; // one call's message
    int ranks = 1; // members of the group
    int nodes = 1; // nodes the group spans
};

// One row: for `backend`, groups inside one node (multiNode false) or across nodes, messages of at least
// `minBytes` use `algorithm` (until a later row of the same backend and locality takes over).
struct TuningRule {
    std::string_view backend;
    bool multiNode = false;
    std::size_t minBytes = 0;
    trace::Algorithm algorithm = trace::Algorithm::Library;
};

// The measured table, rows of one backend and locality in increasing minBytes.
const std::vector<TuningRule>& allreduceTuningTable();

// A concrete algorithm for the query (never fails): the last matching row of the table. A backend
// without rows (or a group of one rank) uses the library's own all-reduce; Hierarchical is chosen only
// when the group spans several nodes with more than one rank on some node.
trace::Algorithm chooseAllreduce(
    const AllreduceQuery& query, const std::vector<TuningRule>& table = allreduceTuningTable());

// `requested` (a layout's comm.allreduce) made concrete: the table's choice for Auto, else itself.
trace::Algorithm resolveAllreduce(trace::Algorithm requested, const AllreduceQuery& query);

// The algorithm of a reduce-scatter or an all-gather whose all-reduce of the same bytes would run
// `allReduce`: each is half of an all-reduce (of the ring's or of the shared-memory segment's) and so
// crosses over at the same size; the two-level algorithm is all-reduce only, so it gives the ring; any
// other choice is the library's.
trace::Algorithm shardAlgorithm(trace::Algorithm allReduce);

// The nodes that the global ranks `members` span when node n holds ranks [n·ranksPerNode, (n+1)·ranksPerNode).
int nodesSpanned(const std::vector<std::int32_t>& members, std::int64_t ranksPerNode);

// The bytes loom-train reads the table at for a stage of `stageParameters` parameters: its largest
// gradient bucket, comm.bucket_mb MiB or the stage's whole fp32 gradient when that is smaller.
std::size_t dpAllreduceBytes(const Layout& layout, double stageParameters);

// The data-parallel all-reduce of a stage of `stageParameters` parameters, over `ranks` replicas spanning
// `nodes` nodes, as loom-train runs it for this layout: comm.allreduce resolved on the layout's backend.
trace::Algorithm dpAllreduceAlgorithm(const Layout& layout, double stageParameters, int ranks, int nodes);

// The slot the shared-memory all-reduce moves a piece through per member (engine/comm/SharedMemory.cpp):
// two banks of one slot per member, 32 MiB of /dev/shm in all: 16 MiB / members, between 1 and 8 MiB.
std::size_t sharedMemorySlotBytes(std::int64_t ranks);

// Seconds of an all-reduce of `bytes` run by `algorithm` over `ranks` members spanning `nodes` nodes, whose
// slowest link is `link` (docs/formulas.md): the library's, the ring and the chunked ring as an α-β ring;
// the two-level algorithm as an in-node ring of ranks/nodes members and an across-node ring of 1/k of the
// bytes; the shared-memory segment as two barriers (α of the node's link) per slot-sized piece and each
// member's copies in and out of (n-1)/n of the buffer, each a read and a write at the device's memory
// bandwidth: 2·⌈S/slot⌉·α + 4·(n-1)/n·S/B_mem. The cost model and calibration price every all-reduce here.
double allreduceSeconds(const Layout& layout, trace::Algorithm algorithm, double bytes, std::int64_t ranks,
    std::int64_t nodes, const LinkSpec& link);

} // namespace loom::plan
