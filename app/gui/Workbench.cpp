#include "app/gui/Workbench.h"

#include "app/cli/CommandLine.h"
#include "app/gui/MainWindow.h"
#include "profiles/ProfileCatalog.h"
#include "profiles/Store.h"

#include <QApplication>
#include <QTimer>

#include <iostream>
#include <memory>

namespace loom::app {

namespace {

struct WorkbenchArgs {
    QString layout;
    QString screenshot;
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
    return first == QLatin1String("--screenshot") || first.endsWith(QLatin1String(".json"))
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
        std::cerr << "loom: no display to open the workbench on (DISPLAY and WAYLAND_DISPLAY are unset); describing the "
                     "layout here instead. Use loom --headless to ask for this directly.\n";
        QStringList headless{QStringLiteral("--headless")};
        if (!parsed.layout.isEmpty())
            headless << parsed.layout;
        QCoreApplication core(argc, argv);
        return runCommandLine(headless, std::cout, std::cerr);
    }
    QApplication app(argc, argv);
    QApplication::setApplicationName(QStringLiteral("loom"));
    QApplication::setOrganizationName(QStringLiteral("loom"));
    QApplication::setApplicationDisplayName(QStringLiteral("Loom"));

    std::unique_ptr<profiles::Store> store;
    QString storeProblem;
    try {
        store = std::make_unique<profiles::Store>(profiles::Store::defaultPath());
    } catch (const std::exception& e) {
        storeProblem = QString::fromStdString(e.what());
    }
    profiles::ProfileCatalog catalog(store.get());
    MainWindow window(catalog);
    QString error;
    const bool opened = parsed.layout.isEmpty() ? window.openFile(QString::fromLatin1(MainWindow::kExample), &error)
                                                : window.openFile(parsed.layout, &error);
    if (!opened) {
        std::cerr << "loom: " << error.toStdString() << "\n";
        if (!parsed.screenshot.isEmpty())
            return 2;
        window.newLayout();
    }
    window.show();
    if (!storeProblem.isEmpty())
        std::cerr << "loom: the store could not be opened (" << storeProblem.toStdString()
                  << "); only built-in profiles are available\n";
    if (!parsed.screenshot.isEmpty()) {
        // Save the window once the first prediction is drawn (and give the map one more frame to fit).
        QObject::connect(&window, &MainWindow::analysisShown, &window, [&window, &parsed] {
            QTimer::singleShot(300, &window, [&window, &parsed] {
                const bool ok = window.grab().save(parsed.screenshot);
                if (!ok)
                    std::cerr << "loom: cannot write " << parsed.screenshot.toStdString() << "\n";
                QApplication::exit(ok ? 0 : 1);
            });
        }, Qt::SingleShotConnection);
        QTimer::singleShot(30000, &app, [] {
            std::cerr << "loom: no prediction within 30 s; no screenshot taken\n";
            QApplication::exit(1);
        });
    }
    return app.exec();
}

} // namespace loom::app
