#include "app/gui/Bridges.h"
#include "views/FileDialogs.h"

#include "app/cli/TraceImport.h"
#include "engine/trace/TraceStats.h"
#include "views/LayoutDocument.h"
#include "views/TimelineData.h"
#include "views/TimelineView.h"

#include <QAction>
#include <QDockWidget>
#include <QFile>
#include <QMainWindow>
#include <QMenu>
#include <QMessageBox>
#include <QStatusBar>
#include <QtConcurrent/QtConcurrentRun>

#include <fstream>

namespace loom::app {

namespace {

QString targetTitle(plan::ExportTarget t)
{
    switch (t) {
    case plan::ExportTarget::Megatron:
        return QStringLiteral("Megatron-LM");
    case plan::ExportTarget::DeepSpeed:
        return QStringLiteral("DeepSpeed");
    case plan::ExportTarget::TorchTitan:
        return QStringLiteral("torchtitan");
    }
    return {};
}

} // namespace

Bridges::Bridges(QMainWindow* window, const views::LayoutDocument* document)
    : QObject(window)
    , m_window(window)
    , m_document(document)
{
    connect(&m_watcher, &QFutureWatcher<OpenedTrace>::finished, this, &Bridges::showTrace);
}

void Bridges::addActions(QMenu* file, QAction* before)
{
    auto* exportMenu = new QMenu(tr("&Export To"), file);
    for (auto t : { plan::ExportTarget::Megatron, plan::ExportTarget::DeepSpeed, plan::ExportTarget::TorchTitan })
        exportMenu->addAction(targetTitle(t) + QStringLiteral("…"), this, [this, t] { chooseExport(t); });
    auto* openTrace = new QAction(tr("Open &Trace…"), file);
    openTrace->setShortcut(QKeySequence(QStringLiteral("Ctrl+Shift+O")));
    connect(openTrace, &QAction::triggered, this, &Bridges::chooseTraces);
    file->insertAction(before, openTrace);
    file->insertMenu(before, exportMenu);
    file->insertSeparator(before);
}

QString Bridges::exportTo(plan::ExportTarget target, const QString& path, bool* ok)
{
    const auto result = plan::exportLayout(m_document->layout(), target, path.toStdString());
    if (ok)
        *ok = result.ok();
    if (!result.ok()) {
        QString why = tr("%1 cannot express this layout:").arg(targetTitle(target));
        for (const auto& r : result.refusals)
            why += QStringLiteral("\n• ") + QString::fromStdString(r);
        return why;
    }
    QString message = tr("Wrote");
    for (const auto& f : result.files) {
        std::ofstream out(f.name, std::ios::trunc | std::ios::binary);
        if (!out || !(out << f.text) || !out.flush()) {
            if (ok)
                *ok = false;
            return tr("Cannot write %1").arg(QString::fromStdString(f.name));
        }
        out.close();
        if (f.executable) {
            QFile file(QString::fromStdString(f.name));
            file.setPermissions(
                file.permissions() | QFileDevice::ExeOwner | QFileDevice::ExeGroup | QFileDevice::ExeOther);
        }
        message += QStringLiteral(" ") + QString::fromStdString(f.name);
    }
    for (const auto& n : result.notes)
        message += QStringLiteral("\nNote: ") + QString::fromStdString(n);
    return message;
}

void Bridges::chooseExport(plan::ExportTarget target)
{
    const auto& name = m_document->layout().name;
    const QString suggested = QString::fromStdString(name)
        + (target == plan::ExportTarget::Megatron         ? QStringLiteral(".megatron.sh")
                : target == plan::ExportTarget::DeepSpeed ? QStringLiteral(".ds_config.json")
                                                          : QStringLiteral(".torchtitan.toml"));
    // Refusals first: no file dialog for a layout the target cannot take.
    const auto probe = plan::exportLayout(m_document->layout(), target);
    if (!probe.ok()) {
        bool ok = false;
        QMessageBox::warning(m_window, tr("Export to %1").arg(targetTitle(target)), exportTo(target, {}, &ok));
        return;
    }
    const QString path = views::saveFileName(m_window, tr("Export to %1").arg(targetTitle(target)), suggested);
    if (path.isEmpty())
        return;
    bool ok = false;
    const QString message = exportTo(target, path, &ok);
    if (ok)
        QMessageBox::information(m_window, tr("Export to %1").arg(targetTitle(target)), message);
    else
        QMessageBox::warning(m_window, tr("Export to %1").arg(targetTitle(target)), message);
}

Bridges::OpenedTrace Bridges::readTraces(const QStringList& files, const std::optional<plan::Layout>& layout)
{
    OpenedTrace out;
    try {
        if (files.size() == 1) { // a Loom trace (loom-train --trace-out, loom simulate, loom trace import)?
            QFile f(files[0]);
            if (f.open(QIODevice::ReadOnly) && f.peek(4096).contains("\"loom_trace\"")) {
                const QByteArray text = f.readAll();
                out.events = trace::readChromeTrace(text.toStdString(), nullptr, &out.groups);
                out.summary = QObject::tr("%1: a Loom trace, %2 events").arg(files[0]).arg(out.events.size());
                out.ok = true;
                return out;
            }
        }
        // The document's layout tells each rank's stage when it has as many ranks as there are traces.
        std::optional<plan::Layout> stages;
        if (layout && layout->parallel.worldSize() == files.size())
            stages = layout;
        const auto imported = importTraceFiles(files, stages);
        out.events = imported.import.events;
        out.groups = imported.import.groups;
        out.summary = QString::fromStdString(describeImport(imported, files)).trimmed();
        out.ok = true;
    } catch (const std::exception& e) {
        out.summary = QString::fromUtf8(e.what());
    }
    return out;
}

void Bridges::openTraces(const QStringList& files)
{
    if (files.isEmpty() || m_watcher.isRunning())
        return;
    const std::optional<plan::Layout> layout = m_document->layout();
    m_window->statusBar()->showMessage(tr("Reading %n trace(s)…", nullptr, int(files.size())));
    m_watcher.setFuture(QtConcurrent::run([files, layout] { return readTraces(files, layout); }));
}

void Bridges::chooseTraces()
{
    const QStringList files
        = views::openFileNames(m_window, tr("Open trace (one PyTorch profiler trace per rank, or a Loom trace)"),
            QString(), tr("Traces (*.json);;All files (*)"));
    openTraces(files);
}

void Bridges::showTrace()
{
    const OpenedTrace t = m_watcher.result();
    if (!t.ok) {
        m_window->statusBar()->clearMessage();
        QMessageBox::warning(m_window, tr("Open trace"), t.summary);
        emit traceOpened(false, t.summary);
        return;
    }
    if (!m_dock) {
        m_view = new views::TimelineView;
        m_dock = new QDockWidget(tr("Trace"), m_window);
        m_dock->setObjectName(QStringLiteral("traceDock"));
        m_dock->setWidget(m_view);
        m_window->addDockWidget(Qt::BottomDockWidgetArea, m_dock);
    }
    views::TimelineData data;
    data.setEvents(t.events, t.groups);
    m_view->setTimeline(std::move(data));
    m_dock->setToolTip(t.summary);
    m_dock->show();
    m_dock->raise();
    m_window->statusBar()->showMessage(t.summary.section(QLatin1Char('\n'), 0, 0), 15000);
    emit traceOpened(true, t.summary);
}

} // namespace loom::app
