// loom lessons list [--json] | validate FILE.json...: the course of the workbench's Lessons dock (the lesson
// files compiled in as :/lessons), and a check of lesson files being written.

#include "app/cli/CommandLine.h"
#include "app/cli/Commands.h"

#include "views/teaching/Lesson.h"

#include <QFile>
#include <QFileInfo>

#include <nlohmann/json.hpp>

namespace loom::app {

namespace {

int list(CliContext& context, bool json)
{
    QStringList problems;
    const auto lessons = views::loadLessons(context.catalog(), &problems);
    for (const QString& p : problems)
        context.err << "loom: lesson refused: " << p.toStdString() << "\n";
    if (json) {
        auto array = nlohmann::ordered_json::array();
        for (const auto& l : lessons) {
            nlohmann::ordered_json j;
            j["id"] = l.id.toStdString();
            j["order"] = l.order;
            j["title"] = l.title.toStdString();
            j["summary"] = l.summary.toStdString();
            j["steps"] = l.steps.size();
            j["layout"] = l.layout.name;
            array.push_back(std::move(j));
        }
        context.out << array.dump(2) << "\n";
    } else {
        for (const auto& l : lessons)
            context.out << (l.order < 10 ? " " : "") << l.order << ". " << l.id.toStdString()
                        << std::string(l.id.size() < 24 ? 24 - l.id.size() : 1, ' ') << l.title.toStdString() << " ("
                        << l.steps.size() << " steps)\n";
        context.out << "Open one in the workbench with loom --lesson ID.\n";
    }
    return problems.isEmpty() ? ExitOk : ExitInvalid;
}

int validate(CliContext& context, const QStringList& files)
{
    int bad = 0;
    for (const QString& path : files) {
        QFile f(path);
        if (QFileInfo(path).size() > views::kMaxLessonBytes || !f.open(QIODevice::ReadOnly)) {
            context.err << path.toStdString() << ": cannot be read (or larger than " << views::kMaxLessonBytes
                        << " bytes)\n";
            ++bad;
            continue;
        }
        QStringList errors;
        if (views::readLesson(f.read(views::kMaxLessonBytes + 1), path, context.catalog(), &errors)) {
            context.out << path.toStdString() << ": valid\n";
            continue;
        }
        ++bad;
        for (const QString& e : errors)
            context.err << e.toStdString() << "\n";
    }
    return bad == 0 ? ExitOk : ExitInvalid;
}

} // namespace

int lessonsCommand(CliContext& context, const QStringList& args)
{
    const QString sub = args.value(0);
    if (sub == QLatin1String("list") && args.size() <= 2 && (args.size() == 1 || args[1] == QLatin1String("--json")))
        return list(context, args.size() == 2);
    if (sub == QLatin1String("validate") && args.size() >= 2)
        return validate(context, args.mid(1));
    context.err << "usage: loom lessons list [--json] | loom lessons validate LESSON.json...\n";
    return ExitUsage;
}

} // namespace loom::app
