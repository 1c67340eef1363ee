#pragma once

#include "engine/plan/Diagnostics.h"
#include "engine/plan/Layout.h"
#include "engine/plan/ProfileResolver.h"

#include <QObject>
#include <QString>

class QUndoStack;

namespace loom::views {

// The layout being designed, its file, and the undo history of every edit. Views never change the layout
// directly: they compute the edited layout (LayoutEdits.h) and hand it to edit(), which pushes an undoable
// command, so undo and redo restore layouts exactly.
class LayoutDocument : public QObject {
    Q_OBJECT
public:
    explicit LayoutDocument(QObject* parent = nullptr);
    ~LayoutDocument() override;

    const plan::Layout& layout() const { return m_layout; }
    QUndoStack* undoStack() const { return m_undo; }
    // The file the layout came from or was last saved to; empty for a new layout or a built-in example.
    QString filePath() const { return m_path; }
    // What the title bar shows: the file name, or the layout's name for a new layout.
    QString displayName() const;
    bool isModified() const;
    // Problems found when the file was read (syntax and references); validation of the current layout is
    // LayoutAnalysis's job.
    const plan::Diagnostics& readDiagnostics() const { return m_readDiagnostics; }

    // Replaces the layout as one undoable edit called `text` ("Set tp to 4"). Consecutive edits with the
    // same mergeId >= 0 merge into one undo step (a spin box being stepped). No-op when nothing changes.
    void edit(const plan::Layout& next, const QString& text, int mergeId = -1);

    // Starts over with `layout` (no history). `path` empty means unsaved.
    void reset(const plan::Layout& layout, const QString& path = {});
    // Reads a layout file (or a ":/" resource). Opens it when its structure could be read, even with
    // errors, so the user can fix them in the editor; returns false with the reason when nothing could be
    // read (the current layout stays).
    bool open(const QString& path, const plan::ProfileResolver& profiles, QString* error);
    // Keeps the layout and its history but no longer names a file, so that Save asks where (a lesson's layout
    // must never be saved over the file the learner had open).
    void forgetFile();
    // Writes the layout (atomically: a crash leaves the old file intact) and marks the history clean.
    bool save(const QString& path, QString* error);

signals:
    void layoutChanged();
    void filePathChanged(const QString& path);
    void modifiedChanged(bool modified);

private:
    friend class EditLayoutCommand;
    void apply(const plan::Layout& layout);

    plan::Layout m_layout;
    QString m_path;
    plan::Diagnostics m_readDiagnostics;
    QUndoStack* m_undo;
};

} // namespace loom::views
