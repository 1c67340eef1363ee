#pragma once

#include <QColor>
#include <QString>
#include <QWidget>

#include <vector>

namespace loom::views {

// A horizontal bar of coloured parts (the step split, memory by kind), optionally against a capacity
// drawn as a line. Each part shows its own tooltip on hover.
class StackedBar : public QWidget {
    Q_OBJECT
public:
    struct Part {
        QString label;
        double value = 0;
        QColor color;
        QString toolTip;
    };
    explicit StackedBar(QWidget* parent = nullptr);

    // `capacity` <= 0: the parts fill the bar; else the bar spans max(capacity, total) with a mark at capacity.
    void setParts(std::vector<Part> parts, double capacity = 0);
    const std::vector<Part>& parts() const { return m_parts; }
    // The part under x (widget coordinates), or -1.
    int partAt(int x) const;

    QSize sizeHint() const override { return { 240, 22 }; }
    QSize minimumSizeHint() const override { return { 60, 18 }; }

protected:
    void paintEvent(QPaintEvent* event) override;
    bool event(QEvent* event) override;

private:
    double span() const;
    std::vector<Part> m_parts;
    double m_capacity = 0;
};

} // namespace loom::views
