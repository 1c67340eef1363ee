// What the timeline draws, computed in engine/trace: area aggregates by kind and by rank (checked against
// `loom trace stats`' computeStats on the same trace, read back from a Chrome trace), track group
// summaries, send -> receive flows, the members of one collective, step ranges, search, and the
// predicted-against-measured comparison.
#include "engine/trace/ChromeTrace.h"
#include "engine/trace/PredictedMeasured.h"
#include "engine/trace/StepRanges.h"
#include "engine/trace/TraceAggregates.h"
#include "engine/trace/TraceFlows.h"
#include "engine/trace/TraceSearch.h"
#include "engine/trace/TraceStats.h"

#include <QTest>

#include <map>
#include <random>
#include <sstream>

using namespace loom::trace;

namespace {

TraceEvent ev(std::int32_t rank, EventKind kind, std::int64_t start, std::int64_t end, std::int32_t step = 0)
{
    TraceEvent e;
    e.rank = rank;
    e.kind = kind;
    e.lane = laneOf(kind);
    e.startNs = start;
    e.endNs = end;
    e.step = step;
    return e;
}

// Two stages of two ranks (rank 0, 1 stage 0; 2, 3 stage 1), three steps: forward, send to the next stage,
// recv, backward, a DP all-reduce in group 0 (ranks 0, 2) or 1 (ranks 1, 3), optimizer.
std::vector<TraceEvent> pipelineRun(std::vector<GroupInfo>& groups)
{
    groups = { { 0, GroupKind::Data, { 0, 2 }, "DP group of pp=0" }, { 1, GroupKind::Data, { 1, 3 }, "DP group b" } };
    std::vector<TraceEvent> out;
    std::mt19937 rng(7);
    for (int step = 0; step < 3; ++step) {
        const std::int64_t base = step * 100000;
        for (int r = 0; r < 4; ++r) {
            const int stage = r / 2;
            std::int64_t t = base + stage * 10000;
            auto f = ev(r, EventKind::Forward, t, t + 8000 + std::int64_t(rng() % 500), step);
            f.stage = stage;
            f.microBatch = 0;
            out.push_back(f);
            t = f.endNs;
            if (stage == 0) {
                auto s = ev(r, EventKind::Send, t, t + 1000, step);
                s.peer = r + 2;
                s.bytes = 1 << 20;
                s.microBatch = 0;
                out.push_back(s);
            } else {
                auto v = ev(r, EventKind::Recv, t - 1500, t - 500, step);
                v.peer = r - 2;
                v.bytes = 1 << 20;
                out.push_back(v);
            }
            auto b = ev(r, EventKind::Backward, t + 20000, t + 36000, step);
            b.stage = stage;
            b.microBatch = 0;
            out.push_back(b);
            auto ar = ev(r, EventKind::AllReduce, t + 36000, t + 40000 + std::int64_t(rng() % 900), step);
            ar.group = r % 2; // ids are positions in the groups (as a Chrome trace writes them)
            ar.groupSize = 2;
            ar.bytes = 4 << 20;
            out.push_back(ar);
            out.push_back(ev(r, EventKind::Optimizer, ar.endNs, ar.endNs + 2000, step));
        }
    }
    return out;
}

} // namespace

class TestTimelineAnalysis : public QObject {
    Q_OBJECT
private slots:
    void wholeTraceAggregatesMatchTraceStats()
    {
        std::vector<GroupInfo> groups;
        const auto written = pipelineRun(groups);
        std::ostringstream text;
        writeChromeTrace(text, written, groups);
        std::vector<GroupInfo> readGroups;
        const auto events = readChromeTrace(text.str(), nullptr, &readGroups);
        QCOMPARE(events.size(), written.size());
        std::int64_t lo = INT64_MAX, hi = INT64_MIN;
        for (const auto& e : events) {
            lo = std::min(lo, e.startNs);
            hi = std::max(hi, e.endNs);
        }
        const AreaAggregates a = aggregateArea(events, readGroups, { lo, hi, {} });
        const TraceStats stats = computeStats(events, StatsContext {});
        QVERIFY(!stats.collectives.empty());
        // Every collective kind of trace stats: the same count, bytes, seconds and algbw.
        for (const auto& c : stats.collectives) {
            std::int64_t count = 0, ns = 0;
            double bytes = 0;
            for (const auto& r : a.byKind)
                if (toString(r.kind) == c.kind) {
                    count += r.count;
                    ns += r.totalNs;
                    bytes += r.bytes;
                }
            QCOMPARE(count, c.count);
            QCOMPARE(bytes, double(c.bytes));
            QVERIFY(std::abs(double(ns) * 1e-9 - c.seconds) < 1e-12);
            QVERIFY(std::abs(bytes / double(ns) - c.algbwGBs) < 1e-9 * c.algbwGBs);
        }
        const auto dp = std::find_if(
            a.byKind.begin(), a.byKind.end(), [](const AreaRow& r) { return r.kind == EventKind::AllReduce; });
        QVERIFY(dp != a.byKind.end());
        QCOMPARE(int(dp->group), int(GroupKind::Data));
        QCOMPARE(kindLabel(dp->kind, dp->group), std::string("all-reduce (DP)"));
        QCOMPARE(a.lanes, 8);
        QCOMPARE(a.byRank.size(), std::size_t(4));
        QCOMPARE(a.byRank[0].count, 3 * 5);
    }

    void areaCutsEventsProRata()
    {
        const std::vector<TraceEvent> events
            = { ev(0, EventKind::Forward, 0, 1000), ev(1, EventKind::Forward, 0, 1000), [] {
                   auto c = ev(0, EventKind::AllReduce, 500, 1500);
                   c.bytes = 1000;
                   return c;
               }() };
        // Rank 0's two lanes from 750 to 1250: a quarter of the forward, half of the all-reduce.
        const AreaAggregates a = aggregateArea(events, {}, { 750, 1250, { { 0, Lane::Compute }, { 0, Lane::Comm } } });
        QCOMPARE(a.lanes, 2);
        QCOMPARE(a.byKind.size(), std::size_t(2));
        QVERIFY(a.byKind[0].kind == EventKind::Forward);
        QCOMPARE(a.byKind[0].totalNs, std::int64_t(250));
        QCOMPARE(a.byKind[0].share, 0.5); // of the one compute lane selected
        QCOMPARE(a.byKind[1].bytes, 500.0);
        QCOMPARE(a.byKind[1].gbPerSecond, 1.0); // 500 bytes in 500 ns
        QCOMPARE(a.byRank.size(), std::size_t(1));
        QCOMPARE(a.byRank[0].totalNs, std::int64_t(750));
        QCOMPARE(a.byRank[0].share, 0.75);
    }

    void trackGroupHeaders()
    {
        std::vector<TraceEvent> events = { ev(0, EventKind::Forward, 0, 600), ev(0, EventKind::Wait, 600, 800),
            ev(1, EventKind::Backward, 0, 200), ev(1, EventKind::Send, 100, 500), ev(1, EventKind::Recv, 300, 700) };
        const TrackSummary s = summarizeTracks(events, { 0, 1 }, 0, 1000);
        QCOMPARE(s.members, 2);
        QCOMPARE(s.busy, 0.4); // (600 + 200) / 2000: the wait is not busy
        QCOMPARE(s.bubble, 0.6);
        QCOMPARE(s.comm, 0.3); // the union 100..700 over two ranks' range
        const auto both = summarizeTrackGroups(events, { 0, 1 }, 2, 0, 1000);
        QCOMPARE(both[0].busy, 0.6);
        QCOMPARE(both[1].comm, 0.6);
    }

    void sendsFlowToTheirReceives()
    {
        std::vector<GroupInfo> groups;
        const auto events = pipelineRun(groups);
        const auto flows = pipelineFlows(events);
        QCOMPARE(flows.size(), std::size_t(6)); // two sends a step
        for (const Flow& f : flows) {
            QVERIFY(events[f.from].kind == EventKind::Send);
            QVERIFY(events[f.to].kind == EventKind::Recv);
            QCOMPARE(events[f.to].rank, events[f.from].peer);
            QCOMPARE(events[f.to].peer, events[f.from].rank);
            QCOMPARE(events[f.to].step, events[f.from].step); // the n-th send meets the n-th recv
        }
        // Without receives (the simulated schedule), a send points at the work it feeds on the peer.
        std::vector<TraceEvent> simulated;
        for (const auto& e : events)
            if (e.kind != EventKind::Recv)
                simulated.push_back(e);
        const auto fed = pipelineFlows(simulated);
        QCOMPARE(fed.size(), std::size_t(6));
        for (const Flow& f : fed) {
            QVERIFY(simulated[f.to].kind == EventKind::Forward);
            QCOMPARE(simulated[f.to].rank, simulated[f.from].peer);
            QVERIFY(simulated[f.to].startNs >= simulated[f.from].startNs);
        }
    }

    void membersOfOneCollective()
    {
        std::vector<GroupInfo> groups;
        const auto events = pipelineRun(groups);
        // Rank 2's all-reduce of step 1 is one collective with rank 0's of step 1, not rank 1's or 3's.
        std::uint32_t index = 0;
        for (std::uint32_t i = 0; i < events.size(); ++i)
            if (events[i].rank == 2 && events[i].step == 1 && events[i].kind == EventKind::AllReduce)
                index = i;
        const auto members = collectiveMembers(events, index);
        QCOMPARE(members.size(), std::size_t(2));
        QCOMPARE(events[members[0]].rank, 0);
        QCOMPARE(events[members[1]].rank, 2);
        QCOMPARE(members[1], index);
        QCOMPARE(events[members[0]].step, 1);
        QCOMPARE(collectiveMembers(events, 0), std::vector<std::uint32_t> { 0 }); // a forward is alone
    }

    void stepRangesAndSearch()
    {
        std::vector<GroupInfo> groups;
        const auto events = pipelineRun(groups);
        const auto steps = stepRanges(events);
        QCOMPARE(steps.size(), std::size_t(3));
        QCOMPARE(steps[1].step, 1);
        QCOMPARE(steps[1].startNs, std::int64_t(100000));
        QVERIFY(steps[1].endNs > steps[1].startNs && steps[1].endNs < steps[2].startNs);
        QCOMPARE(stepsIn(steps, 150000, 250000).size(), std::size_t(2));

        auto q = parseSearch("kind:backward and stage:1 step:1-2");
        QVERIFY(q.error.empty());
        auto hits = search(events, q, groups);
        QCOMPARE(hits.size(), std::size_t(4)); // ranks 2 and 3, steps 1 and 2
        for (auto i : hits)
            QVERIFY(events[i].kind == EventKind::Backward && events[i].stage == 1 && events[i].step >= 1);
        QVERIFY(std::is_sorted(hits.begin(), hits.end(),
            [&](std::uint32_t a, std::uint32_t b) { return events[a].startNs < events[b].startNs; }));
        QCOMPARE(search(events, parseSearch("DP"), groups).size(), std::size_t(12));
        QCOMPARE(search(events, parseSearch("all-reduce rank:1"), groups).size(), std::size_t(3));
        QCOMPARE(search(events, parseSearch("mb:0 rank:0"), groups).size(), std::size_t(9));
        QVERIFY(!parseSearch("colour:red").error.empty());
        QVERIFY(!parseSearch("rank:x").error.empty());
        QVERIFY(search(events, parseSearch("rank:x"), groups).empty());
    }

    void predictedAgainstMeasured()
    {
        // Predicted: one rank, forward 100, backward 200, a DP all-reduce of 50 (ns). Measured step 1 of two
        // ranks: forward 300 each, backward 400 and 600, the all-reduce 100 and 300.
        std::vector<TraceEvent> predicted = { ev(0, EventKind::Forward, 0, 100), ev(0, EventKind::Backward, 100, 300),
            ev(0, EventKind::AllReduce, 300, 350) };
        std::vector<TraceEvent> measured
            = { ev(0, EventKind::Forward, 0, 50, 0), ev(0, EventKind::Forward, 1000, 1300, 1),
                  ev(1, EventKind::Forward, 1000, 1300, 1), ev(0, EventKind::Backward, 1300, 1700, 1),
                  ev(1, EventKind::Backward, 1300, 1900, 1), ev(0, EventKind::AllReduce, 1900, 2000, 1),
                  ev(1, EventKind::AllReduce, 1900, 2200, 1), ev(0, EventKind::Optimizer, 2200, 2250, 1) };
        QCOMPARE(lastCompleteStep(measured), 1);
        const StepComparison c = compareStep(predicted, {}, measured, {}, 1);
        QCOMPARE(c.measuredStartNs, std::int64_t(1000));
        QCOMPARE(c.measuredEndNs, std::int64_t(2250));
        QCOMPARE(c.scale, 1250.0 / 350.0);
        const auto row = [&c](const std::string& k) {
            return *std::find_if(c.kinds.begin(), c.kinds.end(), [&k](const KindComparison& r) { return r.kind == k; });
        };
        QCOMPARE(row("forward").measured, 300e-9);
        QCOMPARE(row("forward").ratio, 3.0);
        QCOMPARE(row("backward").measured, 500e-9);
        QCOMPARE(row("DP").measured, 200e-9);
        QCOMPARE(row("DP").ratio, 4.0);
        QCOMPARE(row("bubble").measured, 100e-9); // rank 0 idles 200 of the 900 ns phase, rank 1 none
        QCOMPARE(row("bubble").ratio, 0.0); // nothing predicted
        QCOMPARE(row("step").ratio, 1250.0 / 350.0);
        QCOMPARE(c.kinds.back().kind, std::string("step"));
    }
};

QTEST_APPLESS_MAIN(TestTimelineAnalysis)
#include "tst_timelineanalysis.moc"
