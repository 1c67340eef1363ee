#include "views/Explain.h"
#include "views/Units.h"

#include "engine/plan/CostModel.h"
#include "engine/plan/Formulas.h"

#include <QLocale>

namespace loom::views {

namespace {

// The schedule's name, with the interleaved micro-batch group when the layout sets one.
QString scheduleText(const plan::Layout& l)
{
    const QString name = QString::fromStdString(std::string(plan::toString(l.parallel.schedule)));
    return l.parallel.microbatchGroup > 0 && l.parallel.schedule == plan::ScheduleKind::Interleaved
        ? QObject::tr("%1 (micro-batch groups of %2)").arg(name).arg(l.parallel.microbatchGroup)
        : name;
}

QString num(double x, int precision = 3)
{
    return QLocale().toString(x, 'g', precision);
}
QString big(double x)
{
    return QLocale().toString(qlonglong(x));
}

struct Symbols {
    double B, b, m, s, h, a, l, V, t, p, d, v;
};

Symbols symbols(const plan::Layout& l)
{
    const auto& par = l.parallel;
    const bool interleaved = par.schedule == plan::ScheduleKind::Interleaved;
    return { double(par.globalBatch), double(par.microBatch), double(par.microBatches()), double(l.model.seqLen),
        double(l.model.hidden), double(l.model.heads), double(l.model.layers), double(l.model.vocab), double(par.tp),
        double(par.pp), double(par.dp), interleaved ? double(par.vpp) : 1.0 };
}

QString percent(double x)
{
    return QLocale().toString(100.0 * x, 'f', 1) + QStringLiteral(" %");
}

// The activations of the most loaded device: the per-layer formula and bytes of plan's layerActivationBytes
// (what the memory estimate adds up), times the layers and micro-batches in flight.
QString activationsText(const plan::Layout& l, const plan::Prediction& p)
{
    const Symbols x = symbols(l);
    const bool mixed = l.precision != plan::Precision::Fp32;
    const bool flash = l.memory.attention == plan::Attention::Flash;
    const QString formula = QString::fromStdString(plan::layerActivationFormula(
        l.model, l.parallel.sp, l.memory.attention, l.memory.recompute, l.memory.efficientNorm));
    const double perLayer = plan::layerActivationBytes(l.model, l.parallel.microBatch, l.parallel.tp, l.parallel.sp,
        l.memory.attention, l.memory.recompute, l.memory.efficientNorm);
    return QObject::tr("<b>Activations</b> per layer and micro-batch (Korthikanti et al. 2022, 16-bit%1; %2%3): %4 "
                       "with s = %5, b = %6, h = %7, a = %8, t = %9 → %10 MB; times the layers of the stage and the "
                       "micro-batches in flight under %11 (1F1B holds at most p, GPipe m) = <b>%12 GB</b> "
                       "(docs/formulas.md)")
        .arg(mixed ? QString() : QObject::tr(", doubled for fp32"),
            l.parallel.sp ? QObject::tr("sequence parallel: norms and dropout split over t")
                          : QObject::tr("no sequence parallelism"),
            (flash ? QObject::tr("; flash attention keeps no s×s scores, the backward recomputes Q·Kᵀ") : QString())
                + (l.memory.efficientNorm ? QObject::tr("; the norms keep their outputs, not their inputs")
                                          : QString()),
            formula, big(x.s), big(x.b), big(x.h), big(x.a), big(x.t))
        .arg(num(perLayer / 1e6 * (mixed ? 1 : 2)), scheduleText(l), num(p.memory.activations));
}

} // namespace

QString formatSeconds(double seconds)
{
    if (seconds >= 1)
        return QLocale().toString(seconds, 'f', seconds >= 100 ? 0 : 2) + QStringLiteral(" s");
    if (seconds >= 1e-3)
        return QLocale().toString(seconds * 1e3, 'f', seconds >= 0.1 ? 0 : 1) + QStringLiteral(" ms");
    return QLocale().toString(seconds * 1e6, 'f', 0) + QStringLiteral(" µs");
}

namespace explain {

QString stepTime(const plan::Layout& l, const plan::Prediction& p)
{
    return QObject::tr("<b>Step time</b> = the slowest pipeline stage's timeline from the replay of the %1 "
                       "schedule: compute %2 + exposed TP %3 + exposed PP %4 + bubble %5 + exposed DP %6 + optimizer "
                       "%7 = <b>%8</b>. Compute uses the device's peak (%9 TFLOP/s at %10) × a GEMM efficiency curve; "
                       "communication uses the α-β model of the links each group crosses.")
               .arg(QString::fromStdString(std::string(plan::toString(l.parallel.schedule))), formatSeconds(p.compute),
                   formatSeconds(p.tpExposed), formatSeconds(p.ppExposed), formatSeconds(p.bubble),
                   formatSeconds(p.dpExposed), formatSeconds(p.optimizer), formatSeconds(p.stepTime),
                   num(l.cluster.device.peakTflops(l.precision)),
                   QString::fromStdString(std::string(plan::toString(l.precision))))
        + (l.parallel.cp > 1 ? QObject::tr(" With context parallelism the sum also holds the ring attention's "
                                           "exposed exchange, %1 (cp = %2).")
                                   .arg(formatSeconds(p.cpExposed))
                                   .arg(l.parallel.cp)
                             : QString());
}

QString tokensPerSecond(const plan::Layout& l, const plan::Prediction& p)
{
    const Symbols x = symbols(l);
    return QObject::tr("<b>Tokens/s</b> = B·s / step time = %1 · %2 / %3 = <b>%4</b>")
        .arg(big(x.B), big(x.s), formatSeconds(p.stepTime), big(p.tokensPerSecond));
}

QString tflopsPerGpu(const plan::Layout& l, const plan::Prediction& p)
{
    const Symbols x = symbols(l);
    // Model FLOPs count no recomputation (plan::stepFlops): the 72 form whatever memory.recompute says.
    const QString formula = QStringLiteral("72·B·s·l·h²·(1 + s/6h + V/12lh)");
    // Built in pieces: QString::arg() would read "%5²" as placeholder 52.
    const QString values = QStringLiteral("%1·%2·%3·%4·%5").arg(72).arg(big(x.B), big(x.s), big(x.l), big(x.h))
        + QChar(0x00B2)
        + QStringLiteral("·(1 + %1/(6·%2) + %3/(%4·%5·%6))")
              .arg(big(x.s), big(x.h), big(x.V))
              .arg(12)
              .arg(big(x.l), big(x.h));
    return QObject::tr("<b>TFLOP/s per GPU</b> = model FLOPs F / (step time × GPUs) (Narayanan et al., SC21, eq. 3, "
                       "%1).<br>F = %2<br>&nbsp;&nbsp;= %3 = %4 FLOPs<br>F / (%5 × %6) = <b>%7 TFLOP/s</b>")
               .arg(QObject::tr("recomputation not counted"), formula, values, num(p.modelFlops, 4),
                   formatSeconds(p.stepTime), big(double(l.parallel.worldSize())), num(p.tflopsPerGpu, 4))
        + (p.hardwareFlops > p.modelFlops
                ? QObject::tr("<br>With the recomputation (memory.recompute %1) the devices compute %2 hardware "
                              "FLOPs: <b>%3 TFLOP/s</b> of hardware FLOPs per GPU.")
                      .arg(QString::fromStdString(std::string(plan::toString(l.memory.recompute))),
                          num(p.hardwareFlops, 4), num(p.hardwareTflopsPerGpu, 4))
                : QString());
}

QString mfu(const plan::Layout& l, const plan::Prediction& p)
{
    return QObject::tr(
               "<b>MFU</b> (model FLOPs utilisation) = TFLOP/s per GPU ÷ the device's peak = %1 ÷ %2 (%3 at %4) "
               "= <b>%5</b>. Recomputed forwards are not counted (that would be HFU).")
               .arg(num(p.tflopsPerGpu, 4), num(l.cluster.device.peakTflops(l.precision), 4),
                   QString::fromStdString(l.cluster.device.name),
                   QString::fromStdString(std::string(plan::toString(l.precision))), percent(p.mfu))
        + (p.hfu > p.mfu ? QObject::tr("<br><b>HFU</b> (hardware FLOPs utilisation, recomputation counted) = %1 ÷ %2 "
                                       "= <b>%3</b>.")
                               .arg(num(p.hardwareTflopsPerGpu, 4), num(l.cluster.device.peakTflops(l.precision), 4),
                                   percent(p.hfu))
                         : QString());
}

QString bubble(const plan::Layout& l, const plan::Prediction& p)
{
    const Symbols x = symbols(l);
    QString closed;
    if (l.parallel.schedule == plan::ScheduleKind::Interleaved)
        closed = QObject::tr("interleaved 1F1B: bubble / ideal time = (p−1)/(v·m) = (%1−1)/(%2·%3); as a fraction of "
                             "the step (p−1)/(v·m + p−1) = <b>%4</b>")
                     .arg(big(x.p), big(x.v), big(x.m), percent(p.bubbleTheory));
    else
        closed = QObject::tr("%1: bubble / ideal time = (p−1)/m = (%2−1)/%3; as a fraction of the step (p−1)/(m+p−1) = "
                             "(%2−1)/(%3+%2−1) = <b>%4</b>")
                     .arg(QString::fromStdString(std::string(plan::toString(l.parallel.schedule))), big(x.p), big(x.m),
                         percent(p.bubbleTheory));
    return QObject::tr("<b>Pipeline bubble</b>: idle time of stage %10, the bottleneck (the busiest stage), ÷ step "
                       "time in the simulated schedule = %1 ÷ %2 = <b>%3</b>.<br>Closed form (Narayanan et al., "
                       "SC21; Huang et al., GPipe) for p = %4 stages and m = B/(b·dp) = %5/(%6·%7) = %8 "
                       "micro-batches, %9.<br>Stages with less work idle longer: that is load imbalance (%11), "
                       "not bubble.")
        .arg(formatSeconds(p.bottleneckBubble), formatSeconds(p.stepTime), percent(p.bottleneckBubbleFraction),
            big(x.p), big(x.B), big(x.b), big(x.d), big(x.m), closed)
        .arg(p.bottleneckStage)
        .arg(percent(p.loadImbalance));
}

QString imbalance(const plan::Layout& l, const plan::Prediction& p)
{
    return QObject::tr("<b>Load imbalance</b> = 1 − mean busy time of the %1 stages ÷ the busy time of the bottleneck "
                       "(stage %2, the busiest) = <b>%3</b>: the share of the bottleneck's work the other stages lack "
                       "on average, and idle for beside the pipeline bubble. 0 when every stage carries the same "
                       "work; move blocks off stage %2 (Layers) to lower it.")
        .arg(big(double(l.parallel.pp)))
        .arg(p.bottleneckStage)
        .arg(percent(p.loadImbalance));
}

QString stepPart(const plan::Layout& l, const plan::Prediction& p, const QString& part)
{
    const Symbols x = symbols(l);
    const double share = [&] {
        if (part == QLatin1String("compute"))
            return p.compute;
        if (part == QLatin1String("tp"))
            return p.tpExposed;
        if (part == QLatin1String("cp"))
            return p.cpExposed;
        if (part == QLatin1String("pp"))
            return p.ppExposed;
        if (part == QLatin1String("dp"))
            return p.dpExposed;
        if (part == QLatin1String("bubble"))
            return p.bubble;
        return p.optimizer;
    }() / std::max(1e-12, p.stepTime);
    QString what;
    if (part == QLatin1String("compute"))
        what = QObject::tr("forward and backward passes of the critical stage's layers (backward ≈ 2× forward%1)")
                   .arg(l.memory.recompute == plan::Recompute::Full ? QObject::tr(", plus the recomputed forward")
                                                                    : QString());
    else if (part == QLatin1String("tp"))
        what = QObject::tr("tensor-parallel all-reduces: 2 per layer forward and %1 backward of b·s·h = %2·%3·%4 "
                           "activations over tp = %5 devices, 2(t−1)/t of the data over the link")
                   .arg(l.memory.recompute == plan::Recompute::Full ? 4 : 2)
                   .arg(big(x.b), big(x.s), big(x.h), big(x.t));
    else if (part == QLatin1String("cp"))
        what = l.parallel.cp > 1
            ? QObject::tr("ring attention's exchange over cp = %1 devices not hidden behind the attention: per layer "
                          "cp−1 = %2 K/V blocks of 2·b·(s/cp)·kv·d/t values forward and 2·cp−1 = %3 (K/V and their "
                          "gradients) backward, each sent while a cp-th of the attention computes")
                  .arg(l.parallel.cp)
                  .arg(l.parallel.cp - 1)
                  .arg(2 * l.parallel.cp - 1)
            : QObject::tr("none: context parallelism is off (cp = 1)");
    else if (part == QLatin1String("pp"))
        what = QObject::tr("pipeline sends of b·s·h activations forward and gradients back at each of the %1 stage "
                           "boundaries, as far as they delay the critical stage")
                   .arg(big(x.p * x.v - 1));
    else if (part == QLatin1String("dp"))
        what = QObject::tr("the data-parallel gradient all-reduce over dp = %1 replicas not hidden behind backward%2")
                   .arg(big(x.d))
                   .arg(l.comm.overlap ? QObject::tr(" (overlap on)") : QObject::tr(" (overlap off: all of it)"));
    else if (part == QLatin1String("bubble"))
        what = QObject::tr("pipeline idle time while the stage waits for micro-batches (see the bubble figure)");
    else
        what = QObject::tr("the clipping norm and AdamW read and write about 32 bytes per parameter at the device's "
                           "memory bandwidth");
    return QObject::tr("<b>%1</b> (%2 of the step): %3").arg(formatSeconds(share * p.stepTime), percent(share), what);
}

QString memory(const plan::Layout& l, const plan::Prediction& p, const QString& kind)
{
    const Symbols x = symbols(l);
    const bool mixed = l.precision != plan::Precision::Fp32;
    const auto& m = p.memory;
    if (kind == QLatin1String("gathered"))
        return QObject::tr(
            "<b>Gathered parameters</b> (ZeRO-3): two layers' parameters all-gathered from the %1 DP ranks "
            "(the one in use and the next, prefetched) and one layer's full gradients before their "
            "reduce-scatter = <b>%2 GB</b>")
            .arg(big(x.d), num(m.gathered));
    if (l.memory.zero >= 2
        && (kind == QLatin1String("params") || kind == QLatin1String("grads") || kind == QLatin1String("optimizer"))) {
        const bool sharded = kind != QLatin1String("params") || l.memory.zero >= 3;
        const double bytes = kind == QLatin1String("optimizer") ? (mixed ? 12 : 8) : (mixed ? 2 : 4);
        return QObject::tr("<b>%1</b>: %2 bytes per parameter of the stage (its layers / t)%3 = <b>%4 GB</b> "
                           "(ZeRO-%5, Rajbhandari et al. 2020: stage 2 shards gradients, stage 3 parameters too)")
            .arg(kind == QLatin1String("params")     ? QObject::tr("Parameters")
                    : kind == QLatin1String("grads") ? QObject::tr("Gradients")
                                                     : QObject::tr("Optimizer state"))
            .arg(bytes)
            .arg(sharded ? QObject::tr(", divided by dp = %1").arg(big(x.d)) : QString())
            .arg(num(kind == QLatin1String("params") ? m.params
                    : kind == QLatin1String("grads") ? m.grads
                                                     : m.optimizer))
            .arg(l.memory.zero);
    }
    if (kind == QLatin1String("fp8"))
        return QObject::tr("<b>FP8 scaling state</b> (delayed scaling, as Transformer Engine keeps it): for each of "
                           "the 4 linear layers of a block and each of their 5 FP8 tensors, an amax history of %1 "
                           "fp32 values and a scale and its inverse: %2 bytes a block, times the blocks the device "
                           "holds = <b>%3</b>")
            .arg(plan::kFp8AmaxHistory)
            .arg(QLocale().toString(plan::fp8ScalingStateBytesPerLayer(), 'f', 0), gigabytesText(m.fp8State));
    if (kind == QLatin1String("residual"))
        return QObject::tr("<b>Codec residual</b> (error feedback): what the lossy DP codec lost, kept per rank and "
                           "added to the next step's gradients: one value for each of the rank's gradients, %1 bytes "
                           "each%2 = <b>%3</b>")
            .arg(plan::gradientBytesPerValue(l.precision, l.optimizer))
            .arg(l.comm.dpCodec.kind == plan::Codec::Kind::TopK
                    ? QString()
                    : QObject::tr(", and one more for the 1/dp = 1/%1 segment it reduces in the second phase")
                          .arg(big(x.d)),
                gigabytesText(m.residual));
    if (kind == QLatin1String("activations"))
        return activationsText(l, p);
    if (kind == QLatin1String("params"))
        return QObject::tr("<b>Parameters</b>: the stage's parameters / t × %1 bytes (%2) = <b>%3 GB</b>")
            .arg(mixed ? 2 : 4)
            .arg(QString::fromStdString(std::string(plan::toString(l.precision))), num(m.params));
    if (kind == QLatin1String("grads"))
        return QObject::tr("<b>Gradients</b>: one per parameter, %1 bytes each = <b>%2 GB</b>")
            .arg(mixed ? 2 : 4)
            .arg(num(m.grads));
    if (kind == QLatin1String("optimizer"))
        return QObject::tr("<b>Optimizer state</b>: Adam's %1 bytes per parameter (%2)%3 = <b>%4 GB</b> (ZeRO paper, "
                           "Rajbhandari et al.)")
            .arg(mixed ? 12 : 8)
            .arg(mixed ? QObject::tr("fp32 master weight, m and v") : QObject::tr("m and v"))
            .arg(l.memory.zero >= 1 ? QObject::tr(", divided by dp = %1 under ZeRO-1").arg(big(x.d)) : QString())
            .arg(num(m.optimizer));
    if (kind == QLatin1String("reserve"))
        return QObject::tr("<b>Reserve</b>: 5 % of the device's %1 GB for the framework, allocator fragmentation and "
                           "workspaces = <b>%2 GB</b>")
            .arg(num(p.memoryCapacityGB), num(m.reserve));
    return memoryBreakdown(l, p, false);
}

QString measuredBubble(const plan::Layout& l, const trace::TraceStats& stats)
{
    if (stats.stages.empty())
        return {};
    QStringList rows;
    for (const auto& st : stats.stages)
        rows << QObject::tr("stage %1: measured <b>%2</b>, closed form %3 (difference %4 points)")
                    .arg(st.stage)
                    .arg(percent(st.bubbleFraction), percent(st.bubbleTheory),
                        QLocale().toString(100.0 * (st.bubbleFraction - st.bubbleTheory), 'f', 1));
    const Symbols x = symbols(l);
    return QObject::tr(
        "<b>Measured bubble</b> of a stage = the time its ranks' compute lanes are idle ÷ the pipeline "
        "phase of the step (from the first forward to the last backward), averaged over the stage's ranks "
        "and the steps (engine/trace's statistics, as <tt>loom trace stats</tt>). Beside it the closed "
        "form (p−1)/(m+p−1) with p = %1 and m = %2:<br>%3")
        .arg(big(x.p), big(x.m), rows.join(QStringLiteral("<br>")));
}

QString busBandwidth(const trace::TraceStats& stats)
{
    if (stats.collectives.empty())
        return {};
    QStringList rows;
    for (const auto& c : stats.collectives)
        rows << QObject::tr("%1 (%2): %3 calls, %4 MB in %5 → algbw %6 GB/s, busbw <b>%7 GB/s</b>")
                    .arg(QString::fromStdString(c.kind), QString::fromStdString(c.algorithm))
                    .arg(c.count)
                    .arg(num(double(c.bytes) / 1e6, 4), formatSeconds(c.seconds), num(c.algbwGBs), num(c.busbwGBs));
    return QObject::tr("<b>Bus bandwidth</b> (nccl-tests' definitions): algbw = bytes ÷ time; busbw = algbw × 2(n−1)/n "
                       "for an all-reduce (each member sends and receives that share of the buffer in a ring), × "
                       "(n−1)/n for gathers and scatters, × 1 for sends. busbw can be compared with the link's "
                       "bandwidth whatever n is.<br>%1")
        .arg(rows.join(QStringLiteral("<br>")));
}

QString measuredTokens(const plan::Layout& l, const trace::TraceStats& stats)
{
    if (stats.steps <= 0)
        return {};
    const Symbols x = symbols(l);
    return QObject::tr("<b>Measured tokens/s</b> = B·s ÷ the mean step time (the first step left out when there are "
                       "several) = %1 · %2 / %3 = <b>%4</b> over %5 step(s) of %6 rank(s).")
        .arg(big(x.B), big(x.s), formatSeconds(stats.stepSeconds), big(stats.tokensPerSecond))
        .arg(stats.steps)
        .arg(stats.ranks);
}

} // namespace explain
} // namespace loom::views
