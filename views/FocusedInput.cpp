#include "views/FocusedInput.h"

#include <QAbstractSpinBox>
#include <QComboBox>
#include <QCoreApplication>
#include <QKeyEvent>
#include <QLineEdit>
#include <QWheelEvent>

namespace loom::views {

namespace {

class InputGuard : public QObject {
public:
    using QObject::QObject;

protected:
    bool eventFilter(QObject* watched, QEvent* event) override
    {
        auto* widget = qobject_cast<QWidget*>(watched);
        if (!widget)
            return false;
        if (event->type() == QEvent::Wheel)
            return wheel(widget, static_cast<QWheelEvent*>(event));
        if (event->type() == QEvent::ShortcutOverride)
            return shortcutOverride(widget, static_cast<QKeyEvent*>(event));
        return false;
    }

private:
    // Not focused: the box leaves the value alone and what holds it (a scroll area) gets the wheel.
    static bool wheel(QWidget* box, QWheelEvent* event)
    {
        if (box->hasFocus())
            return false;
        if (QWidget* parent = box->parentWidget())
            QCoreApplication::sendEvent(parent, event);
        return true;
    }

    // A line edit claims Ctrl+Z for its own typing; with nothing of its own to undo, the window's undo runs.
    static bool shortcutOverride(QWidget* widget, QKeyEvent* event)
    {
        auto* edit = qobject_cast<QLineEdit*>(widget);
        if (!edit)
            edit = widget->findChild<QLineEdit*>();
        if (!edit)
            return false;
        const bool undo = event->matches(QKeySequence::Undo), redo = event->matches(QKeySequence::Redo);
        if ((undo && !edit->isUndoAvailable()) || (redo && !edit->isRedoAvailable())) {
            event->ignore();
            return true;
        }
        return false;
    }
};

void guard(QWidget* box, InputGuard* filter)
{
    box->setFocusPolicy(Qt::StrongFocus); // no focus from the wheel itself
    box->installEventFilter(filter);
    if (auto* edit = box->findChild<QLineEdit*>())
        edit->installEventFilter(filter);
}

} // namespace

void guardInputs(QWidget* root)
{
    auto* filter = new InputGuard(root);
    for (auto* spin : root->findChildren<QAbstractSpinBox*>())
        guard(spin, filter);
    for (auto* combo : root->findChildren<QComboBox*>())
        guard(combo, filter);
}

} // namespace loom::views
