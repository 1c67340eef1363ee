#include "app/cli/CommandLine.h"

#include <QCoreApplication>

#include <iostream>

int main(int argc, char* argv[])
{
    QCoreApplication app(argc, argv);
    QCoreApplication::setApplicationName(QStringLiteral("loom"));
    QCoreApplication::setOrganizationName(QStringLiteral("loom"));
    return loom::app::runCommandLine(QCoreApplication::arguments().mid(1), std::cout, std::cerr);
}
