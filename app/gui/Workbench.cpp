#include "app/gui/Workbench.h"

#include "app/cli/CommandLine.h"
#include "app/gui/MainWindow.h"
#include "profiles/ProfileCatalog.h"
#include "profiles/Store.h"
#include "views/RunMonitor.h"
#include "views/RunPanel.h"
#include "views/teaching/LessonDock.h"

#include <QApplication>
#include <QDockWidget>
#include <QSpinBox>
#include <QTimer>

#include <iostream>
#include <memory>

namespace loom::app {

namespace {

struct WorkbenchArgs {
    QString layout;
    QString screenshot;
    qint64 runSteps = 0;
    QString show;
    QString lesson;
    int lessonStep = 1;
    QString error;
};

WorkbenchArgs parse(const QStringList& args)
{
    WorkbenchArgs out;
    for (int i = 0; i < args.size(); ++i) {
        const QString& a = args[i];
        if (a == QLatin1String("--screenshot")) {
            if (i + 1 >= args.size()) {
                out.error = QStringLiteral("--screenshot needs a file name, e.g. --screenshot window.png");
                return out;
            }
            out.screenshot = args[++i];
        } else if (a == QLatin1String("--show")) {
            static const QStringList docks { QStringLiteral("schedule"), QStringLiteral("timeline"),
                QStringLiteral("metrics"), QStringLiteral("runs") };
            if (i + 1 >= args.size() || !docks.contains(args[i + 1])) {
                out.error = QStringLiteral("--show takes one of: ") + docks.join(QStringLiteral(", "));
                return out;
            }
            out.show = args[++i];
        } else if (a == QLatin1String("--lesson")) {
            if (i + 1 >= args.size()) {
                out.error = QStringLiteral("--lesson needs a lesson id; loom lessons list shows them");
                return out;
            }
            out.lesson = args[++i];
        } else if (a == QLatin1String("--lesson-step")) {
            bool ok = false;
            out.lessonStep = i + 1 < args.size() ? args[i + 1].toInt(&ok) : 0;
            if (!ok || out.lessonStep < 1) {
                out.error = QStringLiteral("--lesson-step needs a step number of 1 or more, e.g. --lesson-step 2");
                return out;
            }
            ++i;
        } else if (a == QLatin1String("--run")) {
            bool ok = false;
            out.runSteps = i + 1 < args.size() ? args[i + 1].toLongLong(&ok) : 0;
            if (!ok || out.runSteps < 1) {
                out.error = QStringLiteral("--run needs a step count of 1 or more, e.g. --run 30");
                return out;
            }
            ++i;
        } else if (a.startsWith(QLatin1Char('-'))) {
            out.error = QStringLiteral("unknown option %1; see loom --help").arg(a);
            return out;
        } else if (!out.layout.isEmpty()) {
            out.error = QStringLiteral("one layout at a time; see loom --help");
            return out;
        } else {
            out.layout = a;
        }
    }
    return out;
}

bool haveDisplay()
{
    return !qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM") || !qEnvironmentVariableIsEmpty("DISPLAY")
        || !qEnvironmentVariableIsEmpty("WAYLAND_DISPLAY");
}

} // namespace

bool wantsWorkbench(const QStringList& args)
{
    if (args.contains(QStringLiteral("--headless")))
        return false;
    if (args.isEmpty())
        return true;
    const QString& first = args.front();
    return first == QLatin1String("--screenshot") || first == QLatin1String("--run") || first == QLatin1String("--show")
        || first == QLatin1String("--lesson") || first.endsWith(QLatin1String(".json"))
        || first.contains(QLatin1Char('/'));
}

int runWorkbench(int& argc, char** argv, const QStringList& args)
{
    const WorkbenchArgs parsed = parse(args);
    if (!parsed.error.isEmpty()) {
        std::cerr << "loom: " << parsed.error.toStdString() << "\n";
        return 64;
    }
    if (!haveDisplay()) {
        std::cerr
            << "loom: no display to open the workbench on (DISPLAY and WAYLAND_DISPLAY are unset); describing the "
               "layout here instead. Use loom --headless to ask for this directly.\n";
        QStringList headless { QStringLiteral("--headless") };
        if (!parsed.layout.isEmpty())
            headless << parsed.layout;
        QCoreApplication core(argc, argv);
        return runCommandLine(headless, std::cout, std::cerr);
    }
    QApplication app(argc, argv);
    QApplication::setApplicationName(QStringLiteral("loom"));
    QApplication::setOrganizationName(QStringLiteral("loom"));
    QApplication::setApplicationDisplayName(QStringLiteral("Loom"));
    QGuiApplication::setDesktopFileName(QStringLiteral("loom")); // installer/loom.desktop

    std::unique_ptr<profiles::Store> store;
    QString storeProblem;
    try {
        store = std::make_unique<profiles::Store>(profiles::Store::defaultPath());
    } catch (const std::exception& e) {
        storeProblem = QString::fromStdString(e.what());
    }
    profiles::ProfileCatalog catalog(store.get());
    MainWindow window(catalog, store.get());
    QString error;
    const bool opened = parsed.layout.isEmpty() ? window.openFile(QString::fromLatin1(MainWindow::kExample), &error)
                                                : window.openFile(parsed.layout, &error);
    if (!opened) {
        std::cerr << "loom: " << error.toStdString() << "\n";
        if (!parsed.screenshot.isEmpty())
            return 2;
        window.newLayout();
    }
    if (!parsed.lesson.isEmpty() && !window.startLesson(parsed.lesson, &error)) {
        std::cerr << "loom: " << error.toStdString() << "\n";
        return 64;
    }
    window.show();
    if (parsed.screenshot.isEmpty() && parsed.lesson.isEmpty() && parsed.layout.isEmpty())
        window.welcomeOnFirstStart(); // once: leads to File ▸ Examples and the Lessons
    if (!storeProblem.isEmpty())
        std::cerr << "loom: the store could not be opened (" << storeProblem.toStdString()
                  << "); only built-in profiles are available\n";
    auto raise = [&window, &parsed] {
        if (!parsed.show.isEmpty())
            if (auto* dock = window.findChild<QDockWidget*>(parsed.show + QStringLiteral("Dock")))
                dock->raise();
    };
    raise();
    auto screenshot = [&window, &parsed, raise] {
        raise();
        QTimer::singleShot(500, &window, [&window, &parsed] {
            const bool ok = window.grab().save(parsed.screenshot);
            if (!ok)
                std::cerr << "loom: cannot write " << parsed.screenshot.toStdString() << "\n";
            QApplication::exit(ok ? 0 : 1);
        });
    };
    if (parsed.runSteps > 0) {
        // --run N: launch the layout once its first analysis says it is valid; with --screenshot, save the
        // window when the run has ended.
        QObject::connect(
            &window, &MainWindow::analysisShown, &window,
            [&window, &parsed] {
                window.runPanel()->stepsBox()->setValue(int(parsed.runSteps));
                if (!window.runPanel()->run()) {
                    std::cerr << "loom: " << window.runPanel()->status().toStdString() << "\n";
                    if (!parsed.screenshot.isEmpty())
                        QApplication::exit(2); // no run will end to take the screenshot after
                }
            },
            Qt::SingleShotConnection);
        if (!parsed.screenshot.isEmpty())
            QObject::connect(window.runMonitor(), &views::RunMonitor::finished, &window, screenshot);
    } else if (!parsed.lesson.isEmpty() && parsed.lessonStep > 1) {
        // --lesson ID --lesson-step N: play the lesson's first N−1 steps (their actions, through the widgets),
        // then show step N (and save the window).
        QObject::connect(
            &window, &MainWindow::analysisShown, &window,
            [&window, &parsed] { window.lessonDock()->playTo(parsed.lessonStep - 1); }, Qt::SingleShotConnection);
        if (!parsed.screenshot.isEmpty())
            QObject::connect(
                window.lessonDock(), &views::LessonDock::playedTo, &window, screenshot, Qt::SingleShotConnection);
    } else if (!parsed.screenshot.isEmpty()) {
        // Save the window once the first prediction is drawn (and give the map a moment to fit).
        QObject::connect(&window, &MainWindow::analysisShown, &window, screenshot, Qt::SingleShotConnection);
    }
    if (!parsed.screenshot.isEmpty())
        QTimer::singleShot(parsed.runSteps > 0 ? 600000 : 30000, &app, [] {
            std::cerr << "loom: the window did not get ready in time; no screenshot taken\n";
            QApplication::exit(1);
        });
    return app.exec();
}

} // namespace loom::app
