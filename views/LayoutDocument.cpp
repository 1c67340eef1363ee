#include "views/LayoutDocument.h"

#include "engine/plan/LayoutParser.h"

#include <QFile>
#include <QFileInfo>
#include <QSaveFile>
#include <QUndoCommand>
#include <QUndoStack>

namespace loom::views {

// One edit: the whole layout before and after, so undo restores it exactly whatever the edit touched.
class EditLayoutCommand : public QUndoCommand {
public:
    EditLayoutCommand(LayoutDocument* doc, plan::Layout before, plan::Layout after, const QString& text, int mergeId)
        : QUndoCommand(text)
        , m_doc(doc)
        , m_before(std::move(before))
        , m_after(std::move(after))
        , m_mergeId(mergeId)
    {
    }
    void undo() override { m_doc->apply(m_before); }
    void redo() override { m_doc->apply(m_after); }
    int id() const override { return m_mergeId; }
    bool mergeWith(const QUndoCommand* other) override
    {
        const auto* o = static_cast<const EditLayoutCommand*>(other);
        m_after = o->m_after;
        setText(o->text());
        return true;
    }

private:
    LayoutDocument* m_doc;
    plan::Layout m_before, m_after;
    int m_mergeId;
};

LayoutDocument::LayoutDocument(QObject* parent)
    : QObject(parent)
    , m_undo(new QUndoStack(this))
{
    connect(m_undo, &QUndoStack::cleanChanged, this, [this](bool clean) { emit modifiedChanged(!clean); });
}

LayoutDocument::~LayoutDocument() = default;

QString LayoutDocument::displayName() const
{
    if (!m_path.isEmpty() && !m_path.startsWith(QLatin1Char(':')))
        return QFileInfo(m_path).fileName();
    return QString::fromStdString(m_layout.name.empty() ? std::string("untitled") : m_layout.name);
}

bool LayoutDocument::isModified() const
{
    return !m_undo->isClean();
}

void LayoutDocument::edit(const plan::Layout& next, const QString& text, int mergeId)
{
    if (next == m_layout)
        return;
    m_undo->push(new EditLayoutCommand(this, m_layout, next, text, mergeId));
}

void LayoutDocument::apply(const plan::Layout& layout)
{
    m_layout = layout;
    emit layoutChanged();
}

void LayoutDocument::reset(const plan::Layout& layout, const QString& path)
{
    m_undo->clear();
    m_readDiagnostics = {};
    m_path = path;
    apply(layout);
    emit filePathChanged(m_path);
    emit modifiedChanged(false);
}

void LayoutDocument::forgetFile()
{
    if (m_path.isEmpty())
        return;
    m_path.clear();
    emit filePathChanged(m_path);
}

bool LayoutDocument::open(const QString& path, const plan::ProfileResolver& profiles, QString* error)
{
    QFile file(path);
    if (!file.open(QIODevice::ReadOnly)) {
        if (error)
            *error = tr("Cannot open %1: %2. Check the path and that you may read it.").arg(path, file.errorString());
        return false;
    }
    if (file.size() > qint64(plan::kMaxLayoutBytes)) {
        if (error)
            *error = tr("%1 is %2 MB, larger than any layout file (at most 16 MB); choose a layout JSON file.")
                         .arg(path)
                         .arg(file.size() >> 20);
        return false;
    }
    const QByteArray bytes = file.readAll();
    auto result = plan::readLayout(std::string_view(bytes.constData(), std::size_t(bytes.size())), profiles);
    if (!result.layout) {
        if (error)
            *error = tr("%1 is not a layout Loom can read:\n%2")
                         .arg(path, QString::fromStdString(result.diagnostics.format()));
        return false;
    }
    reset(*result.layout, path.startsWith(QLatin1Char(':')) ? QString() : path);
    m_readDiagnostics = result.diagnostics;
    return true;
}

bool LayoutDocument::save(const QString& path, QString* error)
{
    QSaveFile file(path);
    const std::string text = plan::writeLayout(m_layout);
    if (!file.open(QIODevice::WriteOnly) || file.write(text.data(), qint64(text.size())) != qint64(text.size())
        || !file.commit()) {
        if (error)
            *error = tr("Cannot save %1: %2. Choose a folder you may write to.").arg(path, file.errorString());
        return false;
    }
    m_undo->setClean();
    if (m_path != path) {
        m_path = path;
        emit filePathChanged(m_path);
    }
    return true;
}

} // namespace loom::views
