#pragma once

#include "engine/plan/CostModel.h"
#include "engine/plan/Layout.h"

#include <functional>
#include <string>
#include <vector>

namespace loom::plan {

struct SearchRequest {
    ModelSpec model;
    std::string modelProfile;
    ClusterSpec cluster;
    std::string clusterProfile;
    std::int64_t nodes = 1;
    std::int64_t globalBatch = 1;
    Precision precision = Precision::Bf16;
    int top = 5;
    // Called now and then with the fraction done (0..1); returning false stops the search, which then
    // returns what it has with `cancelled` set. May be empty. Called on the searching thread.
    std::function<bool(double fraction)> progress;
    // Estimate every candidate, in enumeration order, with no step-time floor: the reference the default search
    // is tested against (tst_search), and slower. The ranking is the same either way.
    bool exhaustive = false;
};

struct SearchCandidate {
    Layout layout;
    Estimate estimate;
    Prediction prediction; // the full replay, for the top candidates
};

struct SearchResult {
    std::vector<SearchCandidate> ranked; // best first, all fitting
    std::size_t evaluated = 0; // valid layouts estimated
    // Valid layouts not estimated: a memory floor (their model states alone, or their family's lightest
    // memory choice) exceeds the device, so none of them fits.
    std::size_t pruned = 0;
    std::size_t fitting = 0; // of those estimated
    // Valid layouts not estimated because the floor under their step time (their compute alone, at the mean
    // stage's pace, and their bubble) is already slower than 3·top candidates that fit and replay: none of them
    // could be ranked. Always 0 with `exhaustive`.
    std::size_t bounded = 0;
    std::size_t unsimulatable = 0; // fitting ones left out: too many micro-batches for the planner to replay
    std::string why; // one sentence: why the first beats the second
    bool cancelled = false; // the progress callback stopped the search
};

// Sequences at least this long are also searched with context parallelism (Megatron-LM's guidance: CP pays
// from about 8K tokens, where attention's s² work and activations dominate).
constexpr std::int64_t kLongSequence = 8192;
// The cp degrees search tries for a model: 1, and for long sequences 2, 4, ..., 32 where 2·cp divides s.
std::vector<std::int64_t> contextParallelDegrees(const ModelSpec& model);

// Enumerates every valid (tp, cp, pp, dp, ep for MoE models, vpp, micro-batch, schedule, ZeRO 0-3, sequence
// parallelism, attention, recompute) for the model on `nodes` nodes of the cluster, estimates each (CostModel's
// estimate()), keeps those that fit, replays the best few in full (predict()) and ranks them by tokens per second.
// Throws std::invalid_argument when the request itself is impossible (a cluster without a fixed device count, a batch
// no layout can split).
SearchResult search(const SearchRequest& request);

// A candidate's choices on one line: "tp=8 pp=16 dp=24 interleaved vpp=8 mb=1 zero=1 recompute=none sp".
std::string describeCandidate(const Layout& layout);

} // namespace loom::plan
