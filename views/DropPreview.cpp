#include "views/DropPreview.h"

#include "views/LayoutEdits.h"
#include "views/Units.h"

#include <QObject>
#include <QStringList>

namespace loom::views {

namespace {

QString rangeText(const plan::StageRange& r)
{
    return r.empty() ? QObject::tr("no blocks") : blocksText(r.first, r.last);
}

// "10–25" or "42": the old range in the brackets, without repeating the word.
QString bareRange(const plan::StageRange& r)
{
    if (r.empty())
        return QObject::tr("no blocks");
    return r.first == r.last ? QString::number(r.first) : QStringLiteral("%1–%2").arg(r.first).arg(r.last);
}

// Past this many changed stages the note names the count of the rest: a 64-stage layout stays readable.
constexpr int kListedStages = 6;

} // namespace

DropPreview previewDrop(const plan::Layout& layout, std::int64_t rank, std::int64_t first, std::int64_t last)
{
    DropPreview out;
    const QString what = blocksText(first, last);
    const EditResult r = dropBlocksOnRank(layout, rank, first, last);
    if (!r.ok()) {
        out.text
            = QObject::tr("Cannot move %1 to rank %2: %3").arg(what).arg(rank).arg(QString::fromStdString(r.refusal));
        return out;
    }
    out.accepted = true;
    const auto before = layout.stageRanges();
    const auto after = r.layout->stageRanges();
    for (std::size_t s = 0; s < after.size(); ++s)
        if (!after[s].empty() && after[s].first <= first && first <= after[s].last)
            out.stage = std::int64_t(s);
    QStringList changed;
    int more = 0;
    for (std::size_t s = 0; s < after.size() && s < before.size(); ++s) {
        if (after[s] == before[s])
            continue;
        if (changed.size() < kListedStages)
            changed << QObject::tr("stage %1: %2 (was %3)").arg(s).arg(rangeText(after[s]), bareRange(before[s]));
        else
            ++more;
    }
    if (changed.isEmpty()) {
        out.text = QObject::tr("%1 %2 already on stage %3 (rank %4): the drop changes nothing")
                       .arg(what, first == last ? QObject::tr("is") : QObject::tr("are"))
                       .arg(out.stage)
                       .arg(rank);
        return out;
    }
    if (more > 0)
        changed << (more == 1 ? QObject::tr("and 1 more stage") : QObject::tr("and %1 more stages").arg(more));
    out.text = QObject::tr("Drop %1 on rank %2 (stage %3):").arg(what).arg(rank).arg(out.stage) + QLatin1Char('\n')
        + changed.join(QLatin1Char('\n'));
    return out;
}

} // namespace loom::views
