#include "views/MapLegend.h"

#include "views/Colors.h"

#include <QLocale>
#include <QPainter>

namespace loom::views {

namespace {
constexpr int kMark = 28, kGap = 6, kSpacing = 18, kMargin = 6;
}

MapLegend::MapLegend(QWidget* parent)
    : QWidget(parent)
{
    setSizePolicy(QSizePolicy::Preferred, QSizePolicy::Fixed);
}

void MapLegend::setLayout(const plan::Layout& layout, std::int64_t nodes)
{
    m_entries.clear();
    const auto gbs = [](double x) { return QLocale().toString(x, 'g', 4); };
    const auto& intra = layout.cluster.intraNode;
    m_entries.push_back({ Entry::Link, linkPen(intra.kind), {},
        tr("%1 in a node, %2 GB/s").arg(linkName(intra.kind), gbs(intra.bandwidthGBs)) });
    if (layout.cluster.interNode && nodes > 1) {
        const auto& inter = *layout.cluster.interNode;
        m_entries.push_back({ Entry::Link, linkPen(inter.kind), {},
            tr("%1 between nodes, %2 GB/s").arg(linkName(inter.kind), gbs(inter.bandwidthGBs)) });
    }
    const std::int64_t pp = layout.parallel.pp;
    for (std::int64_t s = 0; s < std::min<std::int64_t>(pp, 4); ++s)
        m_entries.push_back({ Entry::Swatch, {}, stageColor(s), tr("stage %1").arg(s) });
    if (pp > 4)
        m_entries.push_back({ Entry::Swatch, {}, stageColor(4), tr("… %1 stages (colours repeat)").arg(pp) });
    if (layout.parallel.tp > 1)
        m_entries.push_back({ Entry::Outline, {}, {}, tr("TP group of %1").arg(layout.parallel.tp) });
    if (layout.parallel.cp > 1) // its colour marks the CP outline (dashed, colors::contextComm)
        m_entries.push_back({ Entry::Outline, {}, colors::contextComm,
            tr("CP group of %1 (with its TP groups)").arg(layout.parallel.cp) });
    if (layout.model.isMoe() && layout.parallel.ep > 1)
        m_entries.push_back({ Entry::Bar, {}, colors::expertComm,
            tr("expert group member e0 … e%1 (label and mark): which experts a device holds")
                .arg(layout.parallel.ep - 1) });
    m_entries.push_back({ Entry::Bar, {}, QColor(0x33, 0x66, 0x33), tr("memory / capacity") });
    m_entries.push_back({ Entry::Bar, {}, colors::overBudget, tr("does not fit") });
    updateGeometry();
    update();
}

QStringList MapLegend::texts() const
{
    QStringList out;
    for (const auto& e : m_entries)
        out << e.text;
    return out;
}

int MapLegend::entryWidth(const Entry& e) const
{
    return kMark + kGap + fontMetrics().horizontalAdvance(e.text);
}

int MapLegend::flow(int width, std::vector<QRect>* rects) const
{
    const int line = fontMetrics().height() + 6;
    int x = kMargin, y = kMargin;
    for (const auto& e : m_entries) {
        const int w = entryWidth(e);
        if (x > kMargin && x + w > width - kMargin) {
            x = kMargin;
            y += line;
        }
        if (rects)
            rects->emplace_back(x, y, w, line);
        x += w + kSpacing;
    }
    return y + line + kMargin;
}

QSize MapLegend::sizeHint() const
{
    return { 600, heightForWidth(600) };
}

int MapLegend::heightForWidth(int width) const
{
    return flow(width, nullptr);
}

void MapLegend::paintEvent(QPaintEvent*)
{
    QPainter p(this);
    p.setRenderHint(QPainter::Antialiasing);
    std::vector<QRect> rects;
    flow(width(), &rects);
    for (std::size_t i = 0; i < m_entries.size(); ++i) {
        const Entry& e = m_entries[i];
        const QRect r = rects[i];
        const QRect mark(r.left(), r.top() + 4, kMark, r.height() - 8);
        switch (e.kind) {
        case Entry::Link: {
            QPen pen = e.pen;
            pen.setCosmetic(true);
            p.setPen(pen);
            p.drawLine(mark.left(), mark.center().y(), mark.right(), mark.center().y());
            break;
        }
        case Entry::Swatch:
            p.setPen(QPen(QColor(0x55, 0x55, 0x55), 1));
            p.setBrush(e.color);
            p.drawRect(mark);
            break;
        case Entry::Outline:
            p.setPen(e.color.isValid() ? contextGroupPen() : QPen(QColor(0x22, 0x22, 0x22), 2));
            p.setBrush(Qt::NoBrush);
            p.drawRoundedRect(mark, 3, 3);
            break;
        case Entry::Bar:
            p.setPen(QPen(QColor(0x33, 0x33, 0x33), 1));
            p.setBrush(Qt::white);
            p.drawRect(mark.adjusted(0, 2, 0, -2));
            p.setBrush(e.color);
            p.drawRect(QRect(mark.left(), mark.top() + 2, mark.width() * 2 / 3, mark.height() - 4));
            break;
        }
        p.setPen(palette().color(QPalette::WindowText));
        p.drawText(QRect(mark.right() + kGap, r.top(), r.width() - kMark - kGap, r.height()),
            Qt::AlignVCenter | Qt::AlignLeft, e.text);
    }
}

} // namespace loom::views
