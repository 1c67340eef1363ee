#pragma once

class QWidget;

namespace loom::views {

// Makes the spin boxes and combo boxes under `root` (those that exist now) behave as a form in a workbench
// should: the mouse wheel changes a value only when the box has keyboard focus (otherwise it scrolls what
// holds the form, instead of silently stepping "bucket 25 MB" to 24 and clearing the redo history), and
// Ctrl+Z / Ctrl+Shift+Z in a box's text reach the window's undo stack unless the text has its own typing to
// undo or redo.
void guardInputs(QWidget* root);

} // namespace loom::views
