#include "app/cli/CommandLine.h"
#include "app/gui/Workbench.h"

#include <QCoreApplication>

#include <iostream>

int main(int argc, char* argv[])
{
    QStringList args;
    for (int i = 1; i < argc; ++i)
        args << QString::fromLocal8Bit(argv[i]);
    if (loom::app::wantsWorkbench(args))
        return loom::app::runWorkbench(argc, argv, args);
    QCoreApplication app(argc, argv);
    QCoreApplication::setApplicationName(QStringLiteral("loom"));
    QCoreApplication::setOrganizationName(QStringLiteral("loom"));
    return loom::app::runCommandLine(args, std::cout, std::cerr);
}
