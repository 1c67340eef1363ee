#pragma once

#include <QWidget>

#include <cstdint>
#include <vector>

class QCheckBox;
class QComboBox;
class QHBoxLayout;
class QLabel;
class QLineEdit;
class QToolButton;

namespace loom::views {

class TimelineDetails;
class TimelineLegend;
class TimelineView;

// A timeline with its tools around it: a bar with back / forward, search (with previous / next match), track
// grouping, collapse all and flows; the legend (click a kind to hide it); the view; and the details panel
// (the clicked event, the area's table) beside it. The schedule dock and the measured timeline both use it.
class TimelinePane : public QWidget {
    Q_OBJECT
public:
    // Takes `view` (or makes one).
    explicit TimelinePane(TimelineView* view = nullptr, QWidget* parent = nullptr);
    TimelineView* view() const { return m_view; }
    TimelineLegend* legend() const { return m_legend; }
    TimelineDetails* details() const { return m_details; }
    QLineEdit* searchField() const { return m_search; }
    QLabel* searchStatus() const { return m_found; }
    QComboBox* groupBox() const { return m_group; }
    QCheckBox* flowsBox() const { return m_flows; }
    QToolButton* backButton() const { return m_back; }
    QToolButton* forwardButton() const { return m_forward; }
    // The bar, for the panel's own controls.
    QHBoxLayout* bar() const { return m_bar; }
    // Steps through the search's matches (+1 next, -1 previous), searching again when the text changed.
    void findNext(int direction);
    const std::vector<std::uint32_t>& matches() const { return m_matches; }

private:
    void search();

    TimelineView* m_view;
    TimelineLegend* m_legend;
    TimelineDetails* m_details;
    QHBoxLayout* m_bar;
    QLineEdit* m_search;
    QLabel* m_found;
    QComboBox* m_group;
    QCheckBox *m_flows, *m_collapseAll;
    QToolButton *m_back, *m_forward;
    std::vector<std::uint32_t> m_matches;
    QString m_searched;
    std::size_t m_searchedEvents = 0;
    int m_at = -1;
};

} // namespace loom::views
