#pragma once

#include "engine/trace/StepRanges.h"
#include "engine/trace/TraceAggregates.h"
#include "engine/trace/TraceFlows.h"
#include "views/TimelineLegend.h"
#include "views/TimelineModel.h"

#include <QAbstractScrollArea>
#include <QElapsedTimer>

#include <set>
#include <unordered_map>

namespace loom::views {

// Per-rank timeline, ranks grouped by pipeline stage: one row per rank's compute lane (forward, backward, optimizer,
// with idle time hatched as bubble) and one for its communication lane; micro-batches numbered in the boxes; the
// ruler's lower band is the step row (boundaries and step numbers). Navigation as in Perfetto: wheel or W/S zoom at
// the mouse (held keys accelerate, Ctrl+wheel zooms by 2× a notch), A/D or dragging pans, F fits the selection,
// Alt+Left / Alt+Right go back and forward through the views. Clicking an event selects it (and highlights every
// member's part of its collective); Shift+dragging over tracks selects an area (time × lanes), dragging on the ruler
// a time range. Tracks can be grouped by pipeline stage, DP replica or node, each group under a header with its busy,
// bubble and comm shares that collapses when clicked; Ctrl+clicking a track's name pins it above the others. Events
// narrower than 2 pixels are merged into one box per pixel run, so drawing cost follows the pixels, not the events;
// a merged box shows the mix it hides (bands of forward, backward, optimizer or TP, PP, DP colours in proportion to
// their busy time, as tall as the run is busy), never one event's colour for all of them. The numbers (aggregates,
// flows, steps, group summaries) come from engine/trace; the view only draws them.
class TimelineView : public QAbstractScrollArea {
    Q_OBJECT
public:
    enum class Grouping { None, Stage, Replica, Node };
    enum class Flows { Selected, All };

    explicit TimelineView(QWidget* parent = nullptr);

    // Shows `data` (in the view's own model).
    void setTimeline(TimelineData data);
    const TimelineData& timeline() const { return m_model->timeline(); }
    // Draws another model's timeline (a live run's); it must outlive the view or be replaced first.
    void setModel(TimelineModel* model);
    TimelineModel* model() const { return m_model; }
    // Follow the newest events as they arrive (the window slides to the end), until the user navigates.
    void setFollowing(bool follow) { m_following = follow; }
    bool following() const { return m_following; }
    // The steps in the window (those Follow keeps while it follows).
    std::vector<trace::StepRange> stepsInView() const;
    const std::vector<trace::StepRange>& steps() const;
    // A second timeline (the simulated step of the same layout) drawn as outlines over the measured events
    // of the same rank: its time t is drawn at offsetNs + (t - its begin) × scale; empty data removes it.
    void setOverlay(TimelineData overlay, std::int64_t offsetNs, double scale = 1.0);
    const TimelineData& overlay() const { return m_overlay; }
    double overlayScale() const { return m_overlayScale; }
    // The selected time range (drag on the ruler) and what it holds; t0 == t1 when none.
    void setSelection(std::int64_t t0, std::int64_t t1);
    RangeStats selection() const { return m_selection; }
    // The selected area (time × lanes; every lane for a ruler range) aggregated by kind and by rank.
    void setArea(std::int64_t t0, std::int64_t t1, std::vector<std::pair<std::int32_t, trace::Lane>> lanes);
    const trace::AreaAggregates& area() const { return m_area; }
    // The visible time window, ns.
    void setWindow(std::int64_t t0, std::int64_t t1);
    std::pair<std::int64_t, std::int64_t> window() const { return { m_t0, m_t1 }; }
    void fit();
    void zoomAt(double factor, int x);
    void panBy(double fractionOfWindow);
    // Back and forward through the windows navigated to (F, fits, searches, zooms and pans).
    bool goBack();
    bool goForward();
    // The event under a viewport position, or -1.
    std::int64_t eventAt(const QPoint& pos) const;
    std::int64_t selectedEvent() const { return m_selected; }
    // Selects an event (-1: none) as a click does, and with `reveal` brings it into view.
    void selectEvent(std::int64_t index, bool reveal = false);
    // The selected event's collective on every member (itself alone for other events).
    const std::vector<std::uint32_t>& highlighted() const { return m_members; }
    QString eventDescription(std::int64_t index) const;
    // Boxes drawn by the last paint (after merging), for the benchmark and tests.
    std::size_t lastPaintBoxes() const { return m_lastBoxes; }
    // Flow arrows drawn by the last paint.
    std::size_t lastPaintFlows() const { return m_lastFlows; }

    // Track groups, collapsing and pinning.
    void setGrouping(Grouping g);
    Grouping grouping() const { return m_grouping; }
    // For grouping by node: how many consecutive ranks share a node.
    void setRanksPerNode(int n);
    // The hosts the run's ranks ran on (a cluster with named hosts), `ranksPerHost` consecutive ranks each as
    // mpirun's hostfile and Slurm place them; the lanes then read "rank 3 · hostb". Empty: no host names.
    void setHosts(const QStringList& hosts, int ranksPerHost);
    // A rank's lane name: "rank 3", or "rank 3 · hostb" when its host is known.
    QString rankName(std::int64_t rank) const;
    int groupCount() const;
    QString groupName(int group) const;
    trace::TrackSummary groupSummary(int group) const;
    void setCollapsed(int group, bool collapsed);
    bool collapsed(int group) const { return m_collapsed.count(group) > 0; }
    void setAllCollapsed(bool collapsed);
    void setPinned(int row, bool pinned);
    bool pinned(int row) const { return m_pins.count(row) > 0; }
    // The viewport rectangle of a row's track (empty when collapsed away), and of a group's header.
    QRect rowRect(int row) const;
    QRect headerRect(int group) const;

    void setFlows(Flows f);
    Flows flows() const { return m_flowMode; }
    // The legend's kinds hidden from the drawing (their events are neither drawn nor hit).
    void setKindHidden(LegendKind kind, bool hidden);
    bool kindHidden(LegendKind kind) const { return (m_hidden >> int(kind)) & 1u; }

    static constexpr int kLabelWidth = 150, kRulerHeight = 36, kComputeRow = 22, kCommRow = 14;
    // Group headers: one line of figures (and, collapsed, the group's first lane beside it); with groups
    // the names column is wider, to hold the figures.
    static constexpr int kHeaderRow = 16, kCollapsedRow = 12, kGroupLabelWidth = 270;
    int labelWidth() const { return m_grouping == Grouping::None ? kLabelWidth : kGroupLabelWidth; }
    static constexpr int kTickBand = 20; // the ruler's ticks above, the step row below

signals:
    void eventSelected(std::int64_t index);
    void rangeSelected(const loom::views::RangeStats& stats);
    void areaSelected();
    void windowChanged();

protected:
    void paintEvent(QPaintEvent* event) override;
    void wheelEvent(QWheelEvent* event) override;
    void mousePressEvent(QMouseEvent* event) override;
    void mouseMoveEvent(QMouseEvent* event) override;
    void mouseReleaseEvent(QMouseEvent* event) override;
    void keyPressEvent(QKeyEvent* event) override;
    void resizeEvent(QResizeEvent* event) override;
    bool viewportEvent(QEvent* event) override;

private:
    struct Track {
        bool header = false;
        int row = -1; // a lane's row, or a collapsed header's representative row (-1 when none)
        int group = -1;
        bool pin = false; // drawn in the pinned band under the ruler, not scrolled
        int top = 0, height = 0; // from the top of its band (pinned, or the scrolled content)
    };
    int trackY(const Track& t) const;
    // The tracks as drawn now: pinned ones first (fixed under the ruler), then the scrolled ones.
    const std::vector<Track>& tracks() const;
    void invalidateLayout();
    int groupOfRow(int row) const;
    int pinnedHeight() const;
    int contentHeight() const;
    const Track* trackAtY(int y) const;
    std::vector<std::size_t> displayOrder() const;
    double xOf(std::int64_t t) const;
    std::int64_t timeAt(double x) const;
    void updateScrollBars();
    void paintRuler(class QPainter& p);
    void paintLane(QPainter& p, const TimelineData::Row& row, int top, int h, std::size_t& boxes);
    void paintMix(QPainter& p, const TimelineData::Row& row, const TimelineData::Box& b, int top, int h, double scale);
    void paintPassLabel(QPainter& p, const trace::TraceEvent& e, const QRectF& box, const class QFontMetrics& fm,
        std::unordered_map<std::uint64_t, std::pair<QString, int>>& labels);
    void paintOverlay(QPainter& p, const TimelineData::Row& row, int top, int h);
    void paintHeader(QPainter& p, const Track& t);
    void paintLabel(QPainter& p, const Track& t);
    void paintFlows(QPainter& p);
    void paintSelectionInfo(QPainter& p);
    // The flows of the events (engine/trace's allFlows), computed once per change of the events.
    const std::vector<trace::Flow>& flowList() const;
    // An imported launch's or device event's link to its partner (HTML lines for eventDescription), or "".
    QString launchDescription(std::int64_t index) const;
    void pushHistory();
    void navigated();
    void selectAreaBetween(int y0, int y1, std::int64_t t0, std::int64_t t1);

    void modelChanged();
    void modelReset();
    const TimelineData& data() const { return m_model->timeline(); }

    TimelineModel* m_ownModel;
    TimelineModel* m_model;
    TimelineData m_overlay;
    std::int64_t m_overlayOffset = 0;
    double m_overlayScale = 1;
    RangeStats m_selection;
    trace::AreaAggregates m_area;
    std::vector<std::pair<std::int32_t, trace::Lane>> m_areaLanes; // empty: every lane
    bool m_selectingRange = false, m_selectingArea = false;
    bool m_following = false;
    std::int64_t m_t0 = 0, m_t1 = 1;
    std::int64_t m_selected = -1;
    std::vector<std::uint32_t> m_members;
    QPoint m_dragFrom, m_dragTo;
    std::int64_t m_dragT0 = 0;
    bool m_dragging = false;
    std::size_t m_lastBoxes = 0, m_lastFlows = 0;
    std::vector<TimelineData::Box> m_boxes; // what paintLane draws, reused from row to row
    int m_keyRepeat = 0;
    QElapsedTimer m_lastWheel;
    std::vector<std::pair<std::int64_t, std::int64_t>> m_back, m_forward; // windows to go back and forward to

    Grouping m_grouping = Grouping::None;
    int m_ranksPerNode = 8;
    QStringList m_hosts;
    int m_ranksPerHost = 1;
    std::set<int> m_collapsed, m_pins;
    Flows m_flowMode = Flows::Selected;
    std::uint32_t m_hidden = 0;

    // Caches of what engine/trace computes from the events; rebuilt when the events change.
    mutable std::vector<Track> m_tracks;
    mutable std::vector<int> m_rowTrack; // row -> index in m_tracks of the track that draws it (-1 none)
    mutable bool m_layoutDirty = true;
    mutable int m_pinnedHeight = 0;
    mutable std::vector<trace::StepRange> m_steps;
    mutable std::size_t m_stepsCounted = 0;
    mutable std::vector<trace::Flow> m_flows;
    mutable bool m_flowsDirty = true;
    mutable std::int64_t m_maxFlowSpan = 0;
    mutable std::vector<trace::TrackSummary> m_summaries;
    mutable bool m_summariesDirty = true;
};

} // namespace loom::views
