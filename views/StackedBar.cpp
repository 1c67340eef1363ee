#include "views/StackedBar.h"

#include <QHelpEvent>
#include <QPainter>
#include <QToolTip>

namespace loom::views {

StackedBar::StackedBar(QWidget* parent)
    : QWidget(parent)
{
    setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Fixed);
}

void StackedBar::setParts(std::vector<Part> parts, double capacity)
{
    m_parts = std::move(parts);
    m_capacity = capacity;
    update();
}

double StackedBar::span() const
{
    double total = 0;
    for (const auto& p : m_parts)
        total += std::max(0.0, p.value);
    return std::max(total, m_capacity);
}

int StackedBar::partAt(int x) const
{
    const double s = span();
    if (s <= 0)
        return -1;
    double at = 0;
    const QRectF r = QRectF(rect()).adjusted(1, 1, -1, -1);
    for (std::size_t i = 0; i < m_parts.size(); ++i) {
        const double w = std::max(0.0, m_parts[i].value) / s * r.width();
        if (x >= r.left() + at && x < r.left() + at + w)
            return int(i);
        at += w;
    }
    return -1;
}

void StackedBar::paintEvent(QPaintEvent*)
{
    QPainter p(this);
    const QRectF r = QRectF(rect()).adjusted(1, 1, -1, -1);
    p.setPen(Qt::NoPen);
    p.setBrush(palette().color(QPalette::Base));
    p.drawRect(r);
    const double s = span();
    if (s > 0) {
        double at = r.left();
        for (const auto& part : m_parts) {
            const double w = std::max(0.0, part.value) / s * r.width();
            p.setBrush(part.color);
            p.drawRect(QRectF(at, r.top(), w, r.height()));
            at += w;
        }
        if (m_capacity > 0) {
            const double x = r.left() + m_capacity / s * r.width();
            p.setPen(QPen(palette().color(QPalette::Text), 2, Qt::DashLine));
            p.drawLine(QPointF(x, r.top() - 1), QPointF(x, r.bottom() + 1));
        }
    }
    p.setPen(QPen(palette().color(QPalette::Mid), 1));
    p.setBrush(Qt::NoBrush);
    p.drawRect(r);
}

bool StackedBar::event(QEvent* e)
{
    if (e->type() == QEvent::ToolTip) {
        auto* help = static_cast<QHelpEvent*>(e);
        const int i = partAt(help->pos().x());
        if (i >= 0)
            QToolTip::showText(help->globalPos(), m_parts[std::size_t(i)].toolTip, this);
        else if (!toolTip().isEmpty())
            QToolTip::showText(help->globalPos(), toolTip(), this);
        else
            QToolTip::hideText();
        return true;
    }
    return QWidget::event(e);
}

} // namespace loom::views
