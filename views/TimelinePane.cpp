#include "views/TimelinePane.h"

#include "engine/trace/TraceSearch.h"
#include "views/TimelineDetails.h"
#include "views/TimelineLegend.h"
#include "views/TimelineView.h"

#include <QCheckBox>
#include <QComboBox>
#include <QHBoxLayout>
#include <QKeyEvent>
#include <QLabel>
#include <QLineEdit>
#include <QSplitter>
#include <QToolButton>
#include <QVBoxLayout>

namespace loom::views {

namespace {
// Shift+Return in the search field goes to the previous match.
class SearchField : public QLineEdit {
public:
    std::function<void(int)> step;

protected:
    void keyPressEvent(QKeyEvent* e) override
    {
        if ((e->key() == Qt::Key_Return || e->key() == Qt::Key_Enter) && step) {
            step(e->modifiers() & Qt::ShiftModifier ? -1 : 1);
            return;
        }
        QLineEdit::keyPressEvent(e);
    }
};
} // namespace

TimelinePane::TimelinePane(TimelineView* view, QWidget* parent)
    : QWidget(parent)
    , m_view(view ? view : new TimelineView)
{
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->setSpacing(1);
    m_bar = new QHBoxLayout;
    m_bar->setContentsMargins(6, 2, 6, 0);
    m_back = new QToolButton;
    m_back->setText(QStringLiteral("◀"));
    m_back->setToolTip(tr("Back to the previous view (Alt+Left)"));
    m_forward = new QToolButton;
    m_forward->setText(QStringLiteral("▶"));
    m_forward->setToolTip(tr("Forward to the next view (Alt+Right)"));
    auto* field = new SearchField;
    field->step = [this](int d) { findNext(d); };
    m_search = field;
    m_search->setPlaceholderText(tr("Search: backward rank:3 stage:1 mb:2 step:5 DP…"));
    m_search->setToolTip(tr("Words joined by and: kind:NAME, rank:N, stage:N, mb:N, step:N, group:TP|PP|DP, peer:N "
                            "(numbers or ranges 8-15), or a bare kind, group or codec name. Return: next match, "
                            "Shift+Return: previous."));
    m_search->setClearButtonEnabled(true);
    m_search->setMinimumWidth(220);
    auto* prev = new QToolButton;
    prev->setText(QStringLiteral("↑"));
    prev->setToolTip(tr("Previous match (Shift+Return)"));
    auto* next = new QToolButton;
    next->setText(QStringLiteral("↓"));
    next->setToolTip(tr("Next match (Return)"));
    m_found = new QLabel;
    m_group = new QComboBox;
    m_group->addItems({ tr("No groups"), tr("Group by stage"), tr("Group by DP replica"), tr("Group by node") });
    m_group->setToolTip(tr("Group the tracks under collapsible headers showing each group's busy, bubble and comm "
                           "share; click a header to fold it, Ctrl+click a track's name to pin it"));
    m_collapseAll = new QCheckBox(tr("Collapse"));
    m_collapseAll->setToolTip(tr("Fold every group to its header"));
    m_flows = new QCheckBox(tr("All flows"));
    m_flows->setToolTip(tr("Arrows from every pipeline send in view to its receive (else the selected event's "
                           "only)"));
    for (QWidget* w : std::initializer_list<QWidget*> {
             m_back, m_forward, m_search, prev, next, m_found, m_group, m_collapseAll, m_flows })
        m_bar->addWidget(w);
    layout->addLayout(m_bar);
    m_legend = new TimelineLegend;
    layout->addWidget(m_legend);
    auto* split = new QSplitter(Qt::Horizontal);
    split->addWidget(m_view);
    m_details = new TimelineDetails(m_view);
    split->addWidget(m_details);
    split->setStretchFactor(0, 4);
    split->setStretchFactor(1, 1);
    split->setSizes({ 1000, 520 }); // the area table's seven columns fit from a 1,400-pixel pane up
    layout->addWidget(split, 1);

    connect(m_back, &QToolButton::clicked, m_view, &TimelineView::goBack);
    connect(m_forward, &QToolButton::clicked, m_view, &TimelineView::goForward);
    connect(prev, &QToolButton::clicked, this, [this] { findNext(-1); });
    connect(next, &QToolButton::clicked, this, [this] { findNext(1); });
    connect(m_group, &QComboBox::currentIndexChanged, this, [this](int i) {
        m_view->setGrouping(TimelineView::Grouping(i));
        m_view->setAllCollapsed(m_collapseAll->isChecked());
    });
    connect(m_collapseAll, &QCheckBox::toggled, m_view, &TimelineView::setAllCollapsed);
    connect(m_flows, &QCheckBox::toggled, this,
        [this](bool all) { m_view->setFlows(all ? TimelineView::Flows::All : TimelineView::Flows::Selected); });
    connect(m_legend, &TimelineLegend::kindToggled, m_view, &TimelineView::setKindHidden);
}

void TimelinePane::search()
{
    const auto q = trace::parseSearch(m_search->text().toStdString());
    m_searched = m_search->text();
    m_searchedEvents = m_view->timeline().events().size();
    m_at = -1;
    m_matches.clear();
    if (!q.error.empty()) {
        m_found->setText(QString::fromStdString(q.error).toHtmlEscaped());
        return;
    }
    m_matches = trace::search(m_view->timeline().events(), q, m_view->timeline().groups());
}

void TimelinePane::findNext(int direction)
{
    if (m_search->text() != m_searched || m_view->timeline().events().size() != m_searchedEvents)
        search();
    if (m_matches.empty()) {
        if (trace::parseSearch(m_search->text().toStdString()).error.empty())
            m_found->setText(m_search->text().trimmed().isEmpty() ? QString() : tr("no match"));
        return;
    }
    const int n = int(m_matches.size());
    m_at = m_at < 0 ? (direction < 0 ? n - 1 : 0) : ((m_at + direction) % n + n) % n;
    m_found->setText(tr("%1 / %2").arg(m_at + 1).arg(n));
    m_view->selectEvent(m_matches[std::size_t(m_at)], true);
}

} // namespace loom::views
