#pragma once

#include "engine/plan/Layout.h"
#include "engine/trace/TraceEvent.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace loom::plan {

// A measured run as calibration reads it: the events, the kind of each communication group (from the
// trace's group names: "TP group …", "PP group …", "DP group …", "world") and the layout that ran.
struct CalibrationTrace {
    std::vector<trace::TraceEvent> events;
    std::map<std::int32_t, trace::GroupKind> groupKinds;
    std::string layoutJson; // otherData.layout; empty when the trace has none
};

// Reads a Chrome trace written by `loom-train --trace-out`. Throws std::runtime_error naming the problem.
CalibrationTrace readCalibrationTrace(const std::string& text);

// One parameter of the cluster profile, before and after the fit.
struct FittedParameter {
    std::string name; // the profile key: "device.gemm_efficiency.max", "intra_node.latency_us", ...
    double before = 0, after = 0;
    bool fitted = false;
    std::string note; // what it was fitted from, or why it was kept
};

// How well the model matches the measured events of one kind, before and after the fit: the root mean
// square of (predicted - measured) / measured over the means the fit used, weighted by their counts.
struct FitResidual {
    std::string what; // "compute (forward, backward, optimizer)", "shm all-reduce", ...
    std::int64_t events = 0;
    double rmsBefore = 0, rmsAfter = 0;
};

struct Calibration {
    ClusterSpec cluster; // the calibrated profile (same name as the input; the caller renames it)
    std::vector<FittedParameter> parameters;
    std::vector<FitResidual> residuals;
    std::int32_t steps = 0; // steps used (the first of several is left out: it warms caches)
    double measuredStepSeconds = 0; // mean over those steps
    double predictedBefore = 0, predictedAfter = 0; // predict(layout).stepTime with the old and new cluster
};

// Fits the cluster profile of `layout` (layout.cluster) to measured events of that layout's run:
//  - compute: every forward and backward (minus the tensor-parallel all-reduces inside it) is
//    flops / (peak · max) + bytes / memory bandwidth (stageWork), every optimizer step optimizerBytes /
//    memory bandwidth: a weighted linear least-squares fit of 1/(peak · max) and 1/bandwidth to the mean
//    duration of each (rank, kind, virtual stage), weighted by count / mean (so the fitted durations add up
//    to about the measured ones, as the step adds them up). `peak` stays the datasheet figure and `max`
//    (device.gemm_efficiency.max) moves; a fit that puts max above 1 holds it at 1 and fits the bandwidth
//    alone (no device runs above its peak: the fit had put memory-bound time on the FLOPs). half_width and half_rows
//    stay: one layout has one GEMM width and one row count.
//  - links: uncompressed all-reduces (library or ring) of each link class (the inter-node link when the
//    group spans nodes) are 2(n-1)·α + 2(n-1)/n · bytes/β. Every member of an all-reduce waits for the last
//    to arrive, so each instance (the k-th all-reduce of a group in a step) counts with its members' shortest
//    duration, the last arrival's: the transfer without the waiting. α and 1/β are fitted to the mean of
//    those per (group size, bytes), weighted by count / mean. With one message size only, the term that
//    dominates is fitted and the other kept. Shared-memory all-reduces (shm) cross no link: they fit
//    nothing, and their residual against plan::allreduceSeconds is reported before and after the fit.
//    Point-to-point events are not used: a send or receive lasts
//    until the other stage reaches it, which is pipeline waiting, not the link.
// Parameters without events to fit them are kept, with the reason in their note. Throws
// std::invalid_argument when the events hold no forward or backward of the layout.
Calibration calibrate(const Layout& layout, const std::vector<trace::TraceEvent>& events,
    const std::map<std::int32_t, trace::GroupKind>& groupKinds);

} // namespace loom::plan
