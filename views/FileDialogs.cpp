#include "views/FileDialogs.h"

#include <QMimeDatabase>

#include <memory>

namespace loom::views {

namespace {

// By extension only: MatchExtension never opens the file (MatchDefault reads it when the name is ambiguous).
QMimeType mimeByName(const QFileInfo& info)
{
    return QMimeDatabase().mimeTypeForFile(info.fileName(), QMimeDatabase::MatchExtension);
}

// The dialog owns its provider: QFileDialog::setIconProvider does not take ownership.
class ProviderHolder : public QObject {
public:
    explicit ProviderHolder(QObject* parent)
        : QObject(parent)
    {
    }
    NameOnlyIconProvider provider;
};

QStringList run(QFileDialog& dialog)
{
    return dialog.exec() == QDialog::Accepted ? dialog.selectedFiles() : QStringList();
}

} // namespace

QIcon NameOnlyIconProvider::icon(const QFileInfo& info) const
{
    if (info.isDir())
        return QFileIconProvider::icon(QAbstractFileIconProvider::Folder);
    const QMimeType mime = mimeByName(info);
    QIcon themed = QIcon::fromTheme(mime.iconName());
    if (themed.isNull())
        themed = QIcon::fromTheme(mime.genericIconName());
    return themed.isNull() ? QFileIconProvider::icon(QAbstractFileIconProvider::File) : themed;
}

QString NameOnlyIconProvider::type(const QFileInfo& info) const
{
    if (info.isDir())
        return QObject::tr("Folder");
    const QMimeType mime = mimeByName(info);
    return mime.comment().isEmpty() ? mime.name() : mime.comment();
}

void configureFileDialog(QFileDialog& dialog)
{
    dialog.setOption(QFileDialog::DontUseNativeDialog);
    auto* holder = new ProviderHolder(&dialog);
    dialog.setIconProvider(&holder->provider);
}

QString openFileName(QWidget* parent, const QString& caption, const QString& dir, const QString& filter)
{
    QFileDialog dialog(parent, caption, dir, filter);
    configureFileDialog(dialog);
    dialog.setFileMode(QFileDialog::ExistingFile);
    dialog.setAcceptMode(QFileDialog::AcceptOpen);
    const QStringList files = run(dialog);
    return files.isEmpty() ? QString() : files.front();
}

QStringList openFileNames(QWidget* parent, const QString& caption, const QString& dir, const QString& filter)
{
    QFileDialog dialog(parent, caption, dir, filter);
    configureFileDialog(dialog);
    dialog.setFileMode(QFileDialog::ExistingFiles);
    dialog.setAcceptMode(QFileDialog::AcceptOpen);
    return run(dialog);
}

QString saveFileName(QWidget* parent, const QString& caption, const QString& dir, const QString& filter)
{
    QFileDialog dialog(parent, caption, dir, filter);
    configureFileDialog(dialog);
    dialog.setFileMode(QFileDialog::AnyFile);
    dialog.setAcceptMode(QFileDialog::AcceptSave);
    const QStringList files = run(dialog);
    return files.isEmpty() ? QString() : files.front();
}

} // namespace loom::views
