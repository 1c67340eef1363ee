// A lesson's texts take their figures from the live facts: "{{predicted.optimizerGB}}" is filled in with the
// value the checks read, so that a text never states a figure the window does not show.
#include "views/teaching/Lesson.h"

#include <QLocale>
#include <QRegularExpression>

namespace loom::views {

namespace {

const QRegularExpression& placeholder()
{
    static const QRegularExpression re(QStringLiteral("\\{\\{([^{}]{0,80})\\}\\}"));
    return re;
}

const QStringList& actionFields()
{
    static const QStringList fields { "action.value", "action.steps", "action.first", "action.last", "action.rank" };
    return fields;
}

// "before:predicted.bubble" -> ("before", "predicted.bubble").
std::pair<QString, QString> splitName(const QString& inside)
{
    const int colon = inside.indexOf(QLatin1Char(':'));
    if (colon < 0)
        return { QString(), inside.trimmed() };
    return { inside.left(colon).trimmed(), inside.mid(colon + 1).trimmed() };
}

QString actionText(const LessonAction& a, const QString& field)
{
    const QLocale locale;
    if (field == QLatin1String("action.steps"))
        return locale.toString(a.steps);
    if (field == QLatin1String("action.first"))
        return locale.toString(qlonglong(a.first));
    if (field == QLatin1String("action.last"))
        return locale.toString(qlonglong(a.last));
    if (field == QLatin1String("action.rank"))
        return locale.toString(qlonglong(a.rank));
    if (a.value.isDouble())
        return locale.toString(a.value.toDouble(), 'g', 6);
    if (a.value.isBool())
        return a.value.toBool() ? QObject::tr("on") : QObject::tr("off");
    return a.value.toString().toHtmlEscaped();
}

} // namespace

QStringList placeholderProblems(const QString& text, bool inStep)
{
    QStringList problems;
    for (auto it = placeholder().globalMatch(text); it.hasNext();) {
        const QString inside = it.next().captured(1);
        const auto [when, name] = splitName(inside);
        if (actionFields().contains(name) && when.isEmpty()) {
            if (!inStep)
                problems << QStringLiteral("{{%1}}: the lesson's text has no action; use a fact").arg(inside);
            continue;
        }
        if (!when.isEmpty() && when != QLatin1String("before") && when != QLatin1String("start"))
            problems << QStringLiteral("{{%1}}: expected {{FACT}}, {{before:FACT}} or {{start:FACT}}").arg(inside);
        else if (!findFact(name.toStdString()))
            problems << QStringLiteral("{{%1}}: unknown fact \"%2\"").arg(inside, name);
    }
    // A brace pair that is not a placeholder is a typo the learner would read as it is.
    QString rest = text;
    rest.remove(placeholder());
    if (rest.contains(QLatin1String("{{")) || rest.contains(QLatin1String("}}")))
        problems << QStringLiteral("an unclosed {{ or a stray }}: placeholders are {{FACT}}");
    return problems;
}

QString fillLessonText(const QString& text, const TextFacts& facts)
{
    QString out;
    qsizetype from = 0;
    for (auto it = placeholder().globalMatch(text); it.hasNext();) {
        const QRegularExpressionMatch m = it.next();
        out += text.mid(from, m.capturedStart() - from);
        from = m.capturedEnd();
        const auto [when, name] = splitName(m.captured(1));
        if (actionFields().contains(name) && when.isEmpty()) {
            out += facts.action ? actionText(*facts.action, name) : QStringLiteral("…");
            continue;
        }
        const Facts* source = when == QLatin1String("before") ? facts.before
            : when == QLatin1String("start")                  ? facts.start
                                                              : facts.now;
        const std::string fact = canonicalFactName(name.toStdString());
        const auto found = source ? source->find(fact) : Facts::const_iterator {};
        out += source && found != source->end() ? factText(fact, found->second).toHtmlEscaped() : QStringLiteral("…");
    }
    return out + text.mid(from);
}

} // namespace loom::views
