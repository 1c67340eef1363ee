#pragma once

#include "engine/bridges/Export.h"
#include "engine/trace/TraceEvent.h"

#include <QFutureWatcher>
#include <QObject>
#include <QStringList>

class QAction;
class QDockWidget;
class QMainWindow;
class QMenu;

namespace loom::views {
class LayoutDocument;
class TimelineView;
} // namespace loom::views

namespace loom::app {

// The workbench's bridges to other frameworks: File → Export To (Megatron-LM, DeepSpeed, torchtitan) and
// File → Open Trace (PyTorch profiler traces, one per rank, or a Loom trace) into the "Trace" dock.
class Bridges : public QObject {
    Q_OBJECT
public:
    struct OpenedTrace {
        std::vector<trace::TraceEvent> events;
        std::vector<trace::GroupInfo> groups;
        QString summary; // what was read and what the traces lack; or why they could not be read
        bool ok = false;
    };

    Bridges(QMainWindow* window, const views::LayoutDocument* document);
    // Adds the two entries to the File menu, before `before` (may be null).
    void addActions(QMenu* file, QAction* before);

    // Writes the document's layout for `target` to `path` (and its launch script beside it). Returns the
    // message for the user: the files written, or each setting the target cannot express.
    QString exportTo(plan::ExportTarget target, const QString& path, bool* ok = nullptr);
    // Reads the traces in the background; traceOpened follows (on failure with ok = false).
    void openTraces(const QStringList& files);
    // The same, synchronously (also what the background work runs).
    static OpenedTrace readTraces(const QStringList& files, const std::optional<plan::Layout>& layout);

    views::TimelineView* traceView() const { return m_view; }

signals:
    void traceOpened(bool ok, const QString& summary);

private:
    void chooseExport(plan::ExportTarget target);
    void chooseTraces();
    void showTrace();

    QMainWindow* m_window;
    const views::LayoutDocument* m_document;
    QDockWidget* m_dock = nullptr;
    views::TimelineView* m_view = nullptr;
    QFutureWatcher<OpenedTrace> m_watcher;
};

} // namespace loom::app
