// First start and the bundled examples: File ▸ Examples lists the layouts compiled in under :/examples/, and
// the welcome (shown once, while the settings have no "welcome/shown" key) leads to them and to the Lessons.
#include "app/gui/MainWindow.h"

#include <QDialog>
#include <QDialogButtonBox>
#include <QDir>
#include <QDockWidget>
#include <QLabel>
#include <QListWidget>
#include <QMenu>
#include <QPushButton>
#include <QSettings>
#include <QVBoxLayout>

namespace loom::app {

namespace {
const QString kWelcomeKey = QStringLiteral("welcome/shown");
}

void MainWindow::buildExamplesMenu(QMenu* file, QAction* before)
{
    m_examplesMenu = new QMenu(tr("E&xamples"), file);
    m_examplesMenu->setObjectName(QStringLiteral("examplesMenu"));
    file->insertMenu(before, m_examplesMenu);
    const QStringList names = QDir(QStringLiteral(":/examples")).entryList({ QStringLiteral("*.json") }, QDir::Files);
    for (const QString& name : names) {
        const QString path = QStringLiteral(":/examples/") + name;
        QAction* a = m_examplesMenu->addAction(QFileInfo(name).completeBaseName());
        a->setObjectName(QStringLiteral("example.") + QFileInfo(name).completeBaseName());
        a->setData(path);
        connect(a, &QAction::triggered, this, [this, path] {
            if (maybeSave())
                openFile(path); // a resource: Save then asks for a file of the user's own
        });
    }
}

void MainWindow::showLessons()
{
    auto* d = findChild<QDockWidget*>(QStringLiteral("lessonsDock"));
    d->show();
    d->raise();
}

QDialog* MainWindow::welcomeOnFirstStart()
{
    QSettings settings;
    if (settings.contains(kWelcomeKey))
        return nullptr;
    settings.setValue(kWelcomeKey, true);
    auto* dialog = new QDialog(this);
    dialog->setObjectName(QStringLiteral("welcome"));
    dialog->setAttribute(Qt::WA_DeleteOnClose);
    dialog->setWindowTitle(tr("Welcome to Loom"));
    auto* layout = new QVBoxLayout(dialog);
    auto* text = new QLabel(tr("Loom predicts how a model trains on a cluster: pick the degrees of tensor, "
                               "pipeline and data parallelism in Strategy and read the step time and memory in "
                               "Prediction. Open one of the bundled layouts (also under File ▸ Examples), or "
                               "follow the Lessons, from one device's memory to the planner's search."));
    text->setWordWrap(true);
    layout->addWidget(text);
    auto* list = new QListWidget;
    list->setObjectName(QStringLiteral("welcomeExamples"));
    for (QAction* a : m_examplesMenu->actions()) {
        auto* item = new QListWidgetItem(a->text(), list);
        item->setData(Qt::UserRole, a->objectName());
    }
    layout->addWidget(list);
    auto* buttons = new QDialogButtonBox;
    QPushButton* open = buttons->addButton(tr("Open the example"), QDialogButtonBox::AcceptRole);
    open->setObjectName(QStringLiteral("welcomeOpen"));
    QPushButton* lessons = buttons->addButton(tr("Start the lessons"), QDialogButtonBox::ActionRole);
    lessons->setObjectName(QStringLiteral("welcomeLessons"));
    buttons->addButton(QDialogButtonBox::Close);
    layout->addWidget(buttons);
    auto openSelected = [this, list, dialog] {
        const QListWidgetItem* item = list->currentItem();
        if (!item)
            return;
        if (auto* a = m_examplesMenu->findChild<QAction*>(item->data(Qt::UserRole).toString()))
            a->trigger();
        dialog->close();
    };
    connect(open, &QPushButton::clicked, dialog, openSelected);
    connect(list, &QListWidget::itemActivated, dialog, openSelected);
    connect(lessons, &QPushButton::clicked, dialog, [this, dialog] {
        showLessons();
        dialog->close();
    });
    connect(buttons, &QDialogButtonBox::rejected, dialog, &QDialog::close);
    dialog->show();
    return dialog;
}

} // namespace loom::app
