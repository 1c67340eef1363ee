#pragma once

#include "engine/plan/Layout.h"

#include <QColor>
#include <QPen>
#include <QWidget>

namespace loom::views {

// What the topology map's lines and colours mean, as a strip under the map (so it never covers a node):
// the cluster's link classes with their bandwidth, the pipeline stage colours, the TP group outline and
// the memory bars. Entries flow left to right and wrap.
class MapLegend : public QWidget {
    Q_OBJECT
public:
    explicit MapLegend(QWidget* parent = nullptr);

    void setLayout(const plan::Layout& layout, std::int64_t nodes);
    QStringList texts() const;

    QSize sizeHint() const override;
    bool hasHeightForWidth() const override { return true; }
    int heightForWidth(int width) const override;

protected:
    void paintEvent(QPaintEvent* event) override;

private:
    struct Entry {
        enum Kind { Link, Swatch, Outline, Bar } kind;
        QPen pen;
        QColor color;
        QString text;
    };
    // Lays the entries out in `width`; returns the height used and, when `rects` is given, each entry's box.
    int flow(int width, std::vector<QRect>* rects) const;
    int entryWidth(const Entry& e) const;

    std::vector<Entry> m_entries;
};

} // namespace loom::views
