#pragma once

#include <QFileDialog>
#include <QFileIconProvider>

namespace loom::views {

// Every file dialog of the workbench goes through these. Qt's own dialog asks its icon provider for each
// listed file's icon and type, and the default provider finds them by reading the file's first bytes (the
// MIME "magic"). Opening and closing any descriptor of the run store's files (loom.db, -wal, -shm) drops
// every POSIX lock this process holds on them (SQLite's "How to corrupt" §2.2): the next `loom` command
// beside the window would then take the WAL away from under it. This provider names icons and types from the
// file name alone, and the dialogs are Qt's (a platform's native dialog would read files with its own code).
class NameOnlyIconProvider : public QFileIconProvider {
public:
    using QFileIconProvider::icon;
    QIcon icon(const QFileInfo& info) const override;
    QString type(const QFileInfo& info) const override;
};

// Qt's dialog (not the platform's) with a NameOnlyIconProvider that lives as long as the dialog.
void configureFileDialog(QFileDialog& dialog);

// QFileDialog::getOpenFileName, getOpenFileNames and getSaveFileName through configureFileDialog.
QString openFileName(QWidget* parent, const QString& caption, const QString& dir = {}, const QString& filter = {});
QStringList openFileNames(QWidget* parent, const QString& caption, const QString& dir = {}, const QString& filter = {});
QString saveFileName(QWidget* parent, const QString& caption, const QString& dir = {}, const QString& filter = {});

} // namespace loom::views
