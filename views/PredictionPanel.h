#pragma once

#include "views/LayoutAnalysis.h"

#include <QWidget>

#include <map>

class QGridLayout;
class QLabel;
class QPushButton;

namespace loom::views {

class StackedBar;

// What the layout will cost: step time, tokens/s, TFLOP/s per GPU, MFU, pipeline bubble, the step split
// (compute / exposed TP / PP / DP communication / bubble / optimizer) and the most loaded device's memory
// by kind against its capacity. Every figure's tooltip gives its formula with the current values.
class PredictionPanel : public QWidget {
    Q_OBJECT
public:
    explicit PredictionPanel(QWidget* parent = nullptr);

    void setAnalysis(const LayoutAnalysis& analysis);
    // The label showing a figure: "step", "tokens", "tflops", "mfu", "bubble", "memory"; the legend entries
    // "split.compute", "split.tp", ..., "memory.params", ...; "status".
    QLabel* label(const QString& key) const;
    StackedBar* splitBar() const { return m_split; }
    StackedBar* memoryBar() const { return m_memory; }
    QPushButton* recommendButton() const { return m_recommend; }

signals:
    void recommendRequested();

private:
    // A figure's caption and value on `row`; the value spans `columns` columns (2: the whole width, 1: beside
    // the Recommend button).
    QLabel* addFigure(QGridLayout* grid, int row, const QString& key, const QString& caption, int columns = 2);

    std::map<QString, QLabel*> m_labels;
    StackedBar* m_split;
    StackedBar* m_memory;
    QPushButton* m_recommend;
};

} // namespace loom::views
