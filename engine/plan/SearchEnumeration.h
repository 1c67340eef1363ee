#pragma once

// plan::search's candidate generator (engine/plan only): every valid layout of the request, estimated, those that
// fit kept. Two memory floors skip candidates before any estimate (SearchCandidates.h), and a floor under the
// step time skips those that cannot reach the best few by estimate: the candidates are estimated in order of
// that floor, and the search stops where the next floor is slower than the K-th best estimate found so far.
#include "engine/plan/Search.h"
#include "engine/plan/SearchCandidates.h"

#include <cstdint>
#include <vector>

namespace loom::plan::searching {

// A candidate that fits, with its place in the enumeration (the tie-breaker of the ranking, so that the order
// in which candidates were estimated never changes the answer).
struct Choice {
    ParallelSpec parallel;
    MemorySpec memory;
    Estimate estimate;
    std::uint32_t order = 0;
};

// The ranking's order: faster by estimate first, then the one that needs less memory, then the one earlier in
// the enumeration.
bool rankedBefore(const Choice& a, const Choice& b);
// Puts the best `keep` choices first (rankedBefore) and after them those that tie with the last of them by
// estimate, at most `keep` more, and returns how many that is: the replay sees every layout of a tie at the
// cut, whatever order the candidates came in (the estimate's closed-form bubble is the same for GPipe, 1F1B and
// ZB-H1/H2 on one chunk, which the replay tells apart).
std::size_t orderForReplay(std::vector<Choice>& choices, std::size_t keep);

// How many candidates the ranking replays for a request: 3·K (K = top, at least 2).
std::size_t replayedCount(const SearchRequest& r);

// The whole model's compute, TP collectives and ring-attention exchange of one micro-batch on one tp·cp rank,
// in seconds: the layout's stage costs as one pipeline stage (cost::computeCosts). Each is linear in a stage's
// layers (the head with the last), so every pipeline split of the layout sums to this; TP overlapped with the
// GEMMs (comm.tp_comm_overlap) is not, and is left out. `work` is changed (pp 1, one chunk, ZeRO 0, ep 1).
double wholeModelSeconds(Layout& work, std::int64_t microBatches);
// A floor under estimate()'s step time for a layout of p stages of v chunks and m micro-batches whose whole
// model takes `wholeModel` seconds a micro-batch (wholeModelSeconds): the busiest rank takes at least the
// mean, W/p a micro-batch, for m micro-batches and the (p − 1)/v of the bubble; every other term (ZeRO's
// collectives, the expert all-to-all, point-to-point, the DP reduction, the optimizer) is not negative.
double stepTimeFloor(double wholeModel, std::int64_t microBatches, std::int64_t pp, std::int64_t chunks);

Layout baseLayout(const SearchRequest& r);

class Enumeration {
public:
    Enumeration(const SearchRequest& r, SearchResult& out);
    // The candidates that fit, in enumeration order (request.exhaustive) or as estimated.
    std::vector<Choice> run();
    bool report(double fraction);

private:
    struct GridInfo {
        GridChoice grid;
        std::vector<ExpertChoice> experts;
        std::vector<MemoryChoice> memories;
    };
    struct Batch { // one grid and micro-batch size: its schedules and each memory choice's whole-model compute
        std::uint32_t grid = 0;
        std::int64_t microBatch = 1;
        std::vector<ScheduleChoice> schedules;
        std::vector<double> wholeModel; // per memory choice
    };
    struct Family { // the memory choices of one grid, micro-batch, schedule, ZeRO stage and expert grid
        std::uint32_t batch = 0;
        std::uint16_t schedule = 0, expert = 0;
        std::int8_t zero = 0;
        std::int8_t lightest = -1; // whether its lightest memory choice fits: -1 not known yet
    };
    struct Pending {
        double floor = 0; // seconds
        std::uint32_t order = 0, family = 0;
        std::uint16_t memory = 0;
    };

    void enumerate();
    void grid(std::uint32_t index);
    void estimateAll();
    void candidate(const Pending& pending);
    void place(const Family& f);
    bool lightestFits(const ExpertChoice& expert);
    void evaluate(const MemoryChoice& memory, const ExpertChoice& expert, std::uint32_t order);
    void keepBest(double tokensPerSecond);
    bool beatsBest(double floorSeconds) const;

    const SearchRequest& m_request;
    SearchResult& m_out;
    Layout m_work;
    std::vector<GridInfo> m_grids;
    std::vector<Batch> m_batches;
    std::vector<Family> m_families;
    std::vector<Pending> m_pending;
    std::vector<Choice> m_choices;
    std::vector<double> m_best; // a min-heap of the best replayable estimates' tokens/s, at most replayedCount
    std::size_t m_keep = 0;
    double m_tokensPerStep = 0;
};

} // namespace loom::plan::searching
