// "Where the gigabytes come from": the memory estimate of plan::predict taken apart by kind and by
// pipeline stage, for the Explain dock and the Memory figure's tooltip.
#include "views/Explain.h"
#include "views/Units.h"

#include "engine/plan/Formulas.h"

#include <QLocale>

#include <algorithm>

namespace loom::views {

namespace {

QString share(double part, double total)
{
    return QLocale().toString(total > 0 ? 100.0 * part / total : 0.0, 'f', 1) + QStringLiteral(" %");
}

// The kinds of one estimate as table rows: caption, GB, share of the total.
QString kindRows(const plan::MemoryEstimate& m)
{
    QString rows;
    for (const explain::MemoryPart& part : explain::memoryParts(m))
        rows += QStringLiteral("<tr><td>%1</td><td align=right>%2</td><td align=right>%3</td></tr>")
                    .arg(part.caption, gigabytesText(part.gb), share(part.gb, m.total()));
    return rows;
}

// The model states' bytes a parameter under the layout's precision, optimizer state dtypes and ZeRO stage:
// the same function the memory estimate multiplies the device's parameters by.
QString bytesPerParameter(const plan::Layout& l)
{
    const plan::ModelStateBytes b
        = plan::modelStateBytesPerParameter(l.precision, l.optimizer, l.memory.zero, l.parallel.dp);
    const QLocale locale;
    return QObject::tr("Model states: %1 (weight) + %2 (gradient) + %3 (optimizer state) = <b>%4 bytes</b> a "
                       "parameter on each device (%5, ZeRO-%6 over dp = %7).")
        .arg(locale.toString(b.params, 'g', 3), locale.toString(b.grads, 'g', 3), locale.toString(b.optimizer, 'g', 3),
            locale.toString(b.total(), 'g', 3), QString::fromStdString(std::string(plan::toString(l.precision))))
        .arg(l.memory.zero)
        .arg(l.parallel.dp);
}

// The blocks pipeline rank `r` holds over all its chunks: "blocks 0–11", with the embedding and the head.
QString stageBlocks(const plan::Layout& l, std::int64_t r)
{
    const auto ranges = l.stageRanges();
    const auto rankOf = [&](std::size_t vs) {
        return plan::rankOfStage(l.parallel.schedule, l.parallel.pp, static_cast<std::int64_t>(vs));
    };
    QStringList parts;
    for (std::size_t vs = 0; vs < ranges.size(); ++vs) // in the order the model runs them
        if (rankOf(vs) == r && !ranges[vs].empty())
            parts << blocksText(ranges[vs].first, ranges[vs].last);
    if (r == 0)
        parts << QObject::tr("embedding");
    if (!ranges.empty() && rankOf(ranges.size() - 1) == r) // the V's last stage is on rank 0
        parts << QObject::tr("LM head");
    return parts.join(QStringLiteral(", "));
}

QString stageRows(const plan::Layout& l, const plan::Prediction& p)
{
    const auto& stages = p.memoryPerStage;
    const auto most = std::max_element(stages.begin(), stages.end(),
        [](const plan::MemoryEstimate& a, const plan::MemoryEstimate& b) { return a.total() < b.total(); });
    QString rows;
    for (std::size_t r = 0; r < stages.size(); ++r) {
        const plan::MemoryEstimate& m = stages[r];
        const bool top = stages.begin() + std::ptrdiff_t(r) == most;
        rows += QStringLiteral("<tr><td>%1%2</td><td>%3</td><td align=right>%4</td><td align=right>%5</td>"
                               "<td align=right>%6</td></tr>")
                    .arg(r)
                    .arg(top ? QObject::tr(" (most loaded)") : QString(), stageBlocks(l, std::int64_t(r)),
                        gigabytesText(m.modelStates()), gigabytesText(m.activations),
                        top ? QStringLiteral("<b>%1</b>").arg(gigabytesText(m.total())) : gigabytesText(m.total()));
    }
    return rows;
}

} // namespace

namespace explain {

std::vector<MemoryPart> memoryParts(const plan::MemoryEstimate& m)
{
    const std::pair<const char*, QString> keys[]
        = { { "params", QObject::tr("parameters") }, { "grads", QObject::tr("gradients") },
              { "optimizer", QObject::tr("optimizer state") }, { "activations", QObject::tr("activations") },
              { "gathered", QObject::tr("gathered parameters (ZeRO-3)") }, { "fp8", QObject::tr("FP8 scaling state") },
              { "residual", QObject::tr("codec residual (error feedback)") }, { "reserve", QObject::tr("reserve") } };
    const double values[]
        = { m.params, m.grads, m.optimizer, m.activations, m.gathered, m.fp8State, m.residual, m.reserve };
    std::vector<MemoryPart> parts;
    for (std::size_t i = 0; i < std::size(values); ++i) {
        const bool optional = i >= 4 && i <= 6; // zero unless the layout asks for them
        if (!optional || values[i] != 0)
            parts.push_back({ QString::fromLatin1(keys[i].first), keys[i].second, values[i] });
    }
    return parts;
}

QString memoryBreakdown(const plan::Layout& l, const plan::Prediction& p, bool stages)
{
    const auto& m = p.memory;
    QString text = QObject::tr("<b>Memory of the most loaded device</b>: %1 of %2 — %3")
                       .arg(gigabytesText(m.total()), gigabytesText(p.memoryCapacityGB),
                           p.fits ? QObject::tr("fits") : QObject::tr("does <b>not</b> fit"));
    text += QObject::tr("<br><b>By kind</b> (they add up to the total):<table cellspacing=4>%1"
                        "<tr><td><b>total</b></td><td align=right><b>%2</b></td><td></td></tr></table>")
                .arg(kindRows(m), gigabytesText(m.total()));
    text += bytesPerParameter(l);
    if (stages && p.memoryPerStage.size() > 1)
        text += QObject::tr("<br><b>By pipeline stage</b> (each stage's blocks over all its chunks; the same on "
                            "every tp and dp rank):<table cellspacing=4><tr><th>stage</th><th>holds</th>"
                            "<th>model states</th><th>activations</th><th>total</th></tr>%1</table>")
                    .arg(stageRows(l, p));
    return text;
}

} // namespace explain
} // namespace loom::views
