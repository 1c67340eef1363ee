#include "views/teaching/Lesson.h"

#include "engine/plan/LayoutParser.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QRegularExpression>

#include <algorithm>
#include <cmath>

namespace loom::views {

namespace {

// A Strategy setting a "set" action may change: the layout file's field path a lesson names it by, the
// Strategy panel's widget that edits it, and the widget name earlier lesson files used (still read). Its
// type is the fact's of the same field path (lessonFacts), so the two tables cannot disagree.
struct Settable {
    const char* field;
    const char* widget;
    QStringList choices; // for Text: the layout's words
};

template <typename E, std::size_t N> QStringList choiceWords(const plan::WordTable<E, N>& table)
{
    QStringList words;
    for (const std::string& w : plan::wordsOf(table))
        words << QString::fromStdString(w);
    return words;
}

const std::vector<Settable>& settables()
{
    static const std::vector<Settable> s = {
        { "nodes", "nodes", {} },
        { "parallel.tp", "tp", {} },
        { "parallel.pp", "pp", {} },
        { "parallel.dp", "dp", {} },
        { "parallel.vpp", "vpp", {} },
        { "parallel.micro_batch", "microBatch", {} },
        { "parallel.global_batch", "globalBatch", {} },
        { "parallel.schedule", "schedule", choiceWords(plan::kScheduleWords) },
        { "memory.zero", "zero", {} },
        { "memory.recompute", "recompute", choiceWords(plan::kRecomputeWords) },
        { "precision", "precision", choiceWords(plan::kPrecisionWords) },
        // comm.dp_codec's kind, and the fraction its "topk:<fraction>" form carries.
        { "comm.dp_codec", "codec", choiceWords(plan::kCodecWords) },
        { "comm.dp_codec.topk", "topk", {} },
        { "comm.error_feedback", "errorFeedback", {} },
        { "comm.overlap", "overlap", {} },
        { "comm.bucket_mb", "bucket", {} },
        { "comm.chunk_kb", "chunk", {} },
        { "comm.allreduce", "allreduce", choiceWords(plan::kAllreduceWords) },
    };
    return s;
}

// Every settable field is a fact (tst_lessonfiles settablesAreFacts checks it).
FactType typeOf(const Settable& s)
{
    const FactInfo* fact = findFact(s.field);
    return fact ? fact->type : FactType::Number;
}

const Settable* findSettable(const QString& name)
{
    for (const Settable& s : settables())
        if (name == QLatin1String(s.field) || name == QLatin1String(s.widget))
            return &s;
    return nullptr;
}

// Collects problems with the file name and field in front.
class Problems {
public:
    Problems(QString file, QStringList* out)
        : m_file(std::move(file))
        , m_out(out)
    {
    }
    void add(const QString& field, const QString& what)
    {
        ++m_count;
        if (m_out)
            *m_out << QStringLiteral("%1: %2: %3").arg(m_file, field, what);
    }
    int count() const { return m_count; }

private:
    QString m_file;
    QStringList* m_out;
    int m_count = 0;
};

QString typeName(FactType t)
{
    return t == FactType::Number ? QStringLiteral("a number")
        : t == FactType::Bool    ? QStringLiteral("true or false")
                                 : QStringLiteral("a string");
}

std::optional<FactValue> valueOf(const QJsonValue& v)
{
    if (v.isDouble())
        return FactValue(v.toDouble());
    if (v.isBool())
        return FactValue(v.toBool());
    if (v.isString())
        return FactValue(v.toString().toStdString());
    return std::nullopt;
}

bool hasType(const FactValue& v, FactType t)
{
    return (t == FactType::Number && v.index() == 0) || (t == FactType::Bool && v.index() == 1)
        || (t == FactType::Text && v.index() == 2);
}

QString text(const QJsonObject& o, const char* key, const QString& field, Problems& p, bool required = true)
{
    const QJsonValue v = o.value(QLatin1String(key));
    if (v.isString() && !v.toString().trimmed().isEmpty())
        return v.toString();
    if (v.isArray()) { // paragraphs
        QStringList parts;
        for (const auto& x : v.toArray())
            parts << x.toString();
        return parts.join(QLatin1Char(' '));
    }
    if (required || !v.isUndefined())
        p.add(field + QLatin1Char('.') + QLatin1String(key), QStringLiteral("expected a non-empty string"));
    return {};
}

LessonCheck readCheck(const QJsonValue& value, const QString& field, Problems& p, int depth = 0)
{
    LessonCheck c;
    if (!value.isObject()) {
        p.add(field,
            QStringLiteral("expected an object {\"check\": FACT, \"op\": OP, \"value\": V} or {\"all\": [...]}"));
        return c;
    }
    const QJsonObject o = value.toObject();
    if (o.contains(QLatin1String("all"))) {
        const QJsonArray all = o.value(QLatin1String("all")).toArray();
        if (depth > 2 || all.isEmpty()) {
            p.add(field + QStringLiteral(".all"), QStringLiteral("expected 1 to 8 checks, nested at most twice"));
            return c;
        }
        for (int i = 0; i < all.size() && i < 8; ++i)
            c.all.push_back(readCheck(all[i], QStringLiteral("%1.all[%2]").arg(field).arg(i), p, depth + 1));
        return c;
    }
    c.fact = o.value(QLatin1String("check")).toString().toStdString();
    c.op = o.value(QLatin1String("op")).toString().toStdString();
    const FactInfo* info = findFact(c.fact);
    if (!info) {
        QStringList known;
        for (const auto& f : lessonFacts())
            known << QString::fromLatin1(f.name);
        p.add(field + QStringLiteral(".check"),
            QStringLiteral("unknown fact \"%1\"; known: %2")
                .arg(QString::fromStdString(c.fact), known.join(QStringLiteral(", "))));
        return c;
    }
    static const QStringList ops { "<", "<=", ">", ">=", "==", "!=" };
    const QString op = QString::fromStdString(c.op);
    if (!ops.contains(op))
        p.add(field + QStringLiteral(".op"),
            QStringLiteral("unknown comparison \"%1\"; use one of %2").arg(op, ops.join(QStringLiteral(" "))));
    else if (info->type != FactType::Number && op != QLatin1String("==") && op != QLatin1String("!="))
        p.add(field + QStringLiteral(".op"),
            QStringLiteral("%1 is %2: compare it with == or !=")
                .arg(QString::fromStdString(c.fact), typeName(info->type)));
    const auto v = valueOf(o.value(QLatin1String("value")));
    if (!v || !hasType(*v, info->type))
        p.add(field + QStringLiteral(".value"),
            QStringLiteral("%1 is %2; expected a value of that type")
                .arg(QString::fromStdString(c.fact), typeName(info->type)));
    else
        c.value = *v;
    c.fact = canonicalFactName(c.fact); // the facts go by the layout file's field paths
    return c;
}

LessonAction readAction(const QJsonValue& value, const QString& field, Problems& p)
{
    LessonAction a;
    const QJsonObject o = value.toObject();
    auto positive = [&](const char* key, int max) {
        const QJsonValue v = o.value(QLatin1String(key));
        const double d = v.toDouble(-1);
        if (!v.isDouble() || d < 1 || d > max || d != std::floor(d)) {
            p.add(field + QLatin1Char('.') + QLatin1String(key),
                QStringLiteral("expected a whole number from 1 to %1").arg(max));
            return 0;
        }
        return int(d);
    };
    if (o.contains(QLatin1String("set"))) {
        a.kind = LessonAction::Kind::Set;
        const QString name = o.value(QLatin1String("set")).toString();
        a.value = o.value(QLatin1String("value"));
        const Settable* it = findSettable(name);
        if (!it) {
            a.target = name;
            p.add(field + QStringLiteral(".set"),
                QStringLiteral("\"%1\" is not a Strategy setting; use one of %2")
                    .arg(name, lessonSettableFields().join(QStringLiteral(", "))));
            return a;
        }
        // The action drives the widget; the file may name it by the field path or the old widget name.
        a.target = QLatin1String(it->widget);
        const auto v = valueOf(a.value);
        const FactType type = typeOf(*it);
        if (!v || !hasType(*v, type))
            p.add(field + QStringLiteral(".value"), QStringLiteral("%1 takes %2").arg(name, typeName(type)));
        else if (type == FactType::Text && !it->choices.contains(a.value.toString()))
            p.add(field + QStringLiteral(".value"),
                QStringLiteral("%1 is one of %2").arg(name, it->choices.join(QStringLiteral(", "))));
    } else if (o.contains(QLatin1String("open"))) {
        a.kind = LessonAction::Kind::Open;
        a.target = o.value(QLatin1String("open")).toString();
        if (!lessonDockNames().contains(a.target))
            p.add(field + QStringLiteral(".open"),
                QStringLiteral("unknown view \"%1\"; use one of %2")
                    .arg(a.target, lessonDockNames().join(QStringLiteral(", "))));
    } else if (o.contains(QLatin1String("run"))) {
        a.kind = LessonAction::Kind::Run;
        a.steps = positive("run", 30); // lessons run on this machine: at most 30 steps
    } else if (o.contains(QLatin1String("drop"))) {
        a.kind = LessonAction::Kind::Drop;
        const QJsonArray r = o.value(QLatin1String("drop")).toArray();
        a.first = r.size() == 2 ? r[0].toInteger(-1) : -1;
        a.last = r.size() == 2 ? r[1].toInteger(-1) : -1;
        a.rank = o.value(QLatin1String("rank")).toInteger(-1);
        if (a.first < 0 || a.last < a.first)
            p.add(field + QStringLiteral(".drop"), QStringLiteral("expected [FIRST, LAST] blocks, FIRST <= LAST"));
        if (a.rank < 0)
            p.add(field + QStringLiteral(".rank"), QStringLiteral("expected the rank of the device to drop on"));
    } else if (o.contains(QLatin1String("stepper"))) {
        a.kind = LessonAction::Kind::Stepper;
        a.target = o.value(QLatin1String("stepper")).toString();
        a.value = o.value(QLatin1String("algorithm"));
        if (a.target != QLatin1String("dp") && a.target != QLatin1String("tp"))
            p.add(field + QStringLiteral(".stepper"), QStringLiteral("expected \"dp\" or \"tp\""));
        if (a.value.toString() != QLatin1String("ring") && a.value.toString() != QLatin1String("hierarchical"))
            p.add(field + QStringLiteral(".algorithm"), QStringLiteral("expected \"ring\" or \"hierarchical\""));
        a.steps = positive("steps", 1000);
    } else if (o.contains(QLatin1String("explain"))) {
        a.kind = LessonAction::Kind::Explain;
        a.target = o.value(QLatin1String("explain")).toString();
        static const QStringList figures { "step", "tokens", "tflops", "mfu", "bubble", "memory", "split.compute",
            "split.tp", "split.pp", "split.dp", "split.bubble", "split.optimizer", "memory.params", "memory.grads",
            "memory.optimizer", "memory.activations", "memory.reserve", "measured.bubble", "measured.busbw",
            "measured.tokens" };
        if (!figures.contains(a.target))
            p.add(field + QStringLiteral(".explain"),
                QStringLiteral("unknown figure \"%1\"; use one of %2")
                    .arg(a.target, figures.join(QStringLiteral(", "))));
    } else if (o.contains(QLatin1String("recommend"))) {
        a.kind = LessonAction::Kind::Recommend;
    } else {
        p.add(field, QStringLiteral("expected one of set, open, run, drop, stepper, explain, recommend"));
    }
    return a;
}

std::optional<LessonQuestion> readQuestion(const QJsonValue& value, const QString& field, Problems& p)
{
    if (value.isUndefined())
        return std::nullopt;
    const QJsonObject o = value.toObject();
    LessonQuestion q;
    q.text = text(o, "text", field, p);
    for (const auto& c : o.value(QLatin1String("choices")).toArray())
        q.choices << c.toString();
    q.answer = o.value(QLatin1String("answer")).toInt(-1);
    q.explanation = text(o, "explain", field, p);
    if (q.choices.size() < 2 || q.choices.size() > 6 || q.choices.contains(QString()))
        p.add(field + QStringLiteral(".choices"), QStringLiteral("expected 2 to 6 non-empty strings"));
    else if (q.answer < 0 || q.answer >= q.choices.size())
        p.add(field + QStringLiteral(".answer"),
            QStringLiteral("expected the index of the right choice, 0 to %1").arg(q.choices.size() - 1));
    return q;
}

} // namespace

const QStringList& lessonSettableNames()
{
    static const QStringList names = [] {
        QStringList n;
        for (const auto& s : settables())
            n << QString::fromLatin1(s.widget);
        return n;
    }();
    return names;
}

const QStringList& lessonSettableFields()
{
    static const QStringList names = [] {
        QStringList n;
        for (const auto& s : settables())
            n << QString::fromLatin1(s.field);
        return n;
    }();
    return names;
}

const QStringList& lessonDockNames()
{
    static const QStringList names { "layers", "run", "schedule", "timeline", "metrics", "runs", "allreduce",
        "explain" };
    return names;
}

const QStringList& lessonWidgetNames()
{
    static const QStringList names = [] {
        QStringList n = lessonSettableNames();
        n << "model"
          << "cluster";
        for (const QString& d : lessonDockNames())
            n << d + QStringLiteral("Dock");
        n << "topologyMap"
          << "layerTable"
          << "runButton"
          << "runSteps"
          << "recommendButton"
          << "allreduceGroup"
          << "allreduceAlgorithm"
          << "allreduceNext";
        for (const char* f : { "step", "tokens", "tflops", "mfu", "bubble", "memory" })
            n << QStringLiteral("figure.") + QLatin1String(f);
        return n;
    }();
    return names;
}

std::optional<Lesson> readLesson(
    const QByteArray& bytes, const QString& fileName, const plan::ProfileResolver& profiles, QStringList* errors)
{
    Problems p(fileName, errors);
    if (bytes.size() > kMaxLessonBytes) {
        p.add(QStringLiteral("(file)"),
            QStringLiteral("%1 bytes; a lesson is at most %2").arg(bytes.size()).arg(kMaxLessonBytes));
        return std::nullopt;
    }
    QJsonParseError parseError;
    const QJsonDocument doc = QJsonDocument::fromJson(bytes, &parseError);
    if (parseError.error != QJsonParseError::NoError || !doc.isObject()) {
        p.add(QStringLiteral("(file)"),
            parseError.error != QJsonParseError::NoError
                ? QStringLiteral("not JSON: %1 at byte %2").arg(parseError.errorString()).arg(parseError.offset)
                : QStringLiteral("expected a JSON object"));
        return std::nullopt;
    }
    const QJsonObject o = doc.object();
    if (o.value(QLatin1String("loom_lesson")).toInt() != 1)
        p.add(QStringLiteral("loom_lesson"), QStringLiteral("expected 1 (the lesson format's version)"));
    Lesson lesson;
    lesson.id = o.value(QLatin1String("id")).toString();
    if (!QRegularExpression(QStringLiteral("^[a-z0-9][a-z0-9-]{0,47}$")).match(lesson.id).hasMatch())
        p.add(QStringLiteral("id"), QStringLiteral("expected lower-case letters, digits and dashes (at most 48)"));
    lesson.order = o.value(QLatin1String("order")).toInt(0);
    lesson.title = text(o, "title", QStringLiteral("lesson"), p);
    lesson.summary = text(o, "summary", QStringLiteral("lesson"), p);
    lesson.text = text(o, "text", QStringLiteral("lesson"), p);
    for (const QString& problem : placeholderProblems(lesson.text, false))
        p.add(QStringLiteral("text"), problem);

    const QJsonValue layout = o.value(QLatin1String("layout"));
    if (!layout.isObject()) {
        p.add(QStringLiteral("layout"),
            QStringLiteral("expected the starting layout as an object (docs/layout-format.md)"));
    } else {
        const QByteArray json = QJsonDocument(layout.toObject()).toJson(QJsonDocument::Compact);
        const plan::LayoutReadResult read = plan::readLayout(json.toStdString(), profiles);
        for (const auto& problem : read.diagnostics.errors())
            p.add(QStringLiteral("layout.") + QString::fromStdString(problem.field),
                QString::fromStdString(problem.message));
        if (read.ok())
            lesson.layout = *read.layout;
    }

    const QJsonArray steps = o.value(QLatin1String("steps")).toArray();
    if (steps.size() < 2 || steps.size() > 5)
        p.add(QStringLiteral("steps"), QStringLiteral("expected 2 to 5 steps, found %1").arg(steps.size()));
    for (int i = 0; i < steps.size() && i < 5; ++i) {
        const QString field = QStringLiteral("steps[%1]").arg(i);
        const QJsonObject s = steps[i].toObject();
        LessonStep step;
        step.instruction = text(s, "do", field, p);
        step.widget = s.value(QLatin1String("widget")).toString();
        if (!lessonWidgetNames().contains(step.widget))
            p.add(field + QStringLiteral(".widget"),
                QStringLiteral("unknown widget \"%1\"; use one of %2")
                    .arg(step.widget, lessonWidgetNames().join(QStringLiteral(", "))));
        step.action = readAction(s.value(QLatin1String("action")), field + QStringLiteral(".action"), p);
        step.check = readCheck(s.value(QLatin1String("check")), field + QStringLiteral(".check"), p);
        step.pass = text(s, "pass", field, p);
        step.fail = text(s, "fail", field, p);
        const std::pair<const char*, const QString*> texts[]
            = { { "do", &step.instruction }, { "pass", &step.pass }, { "fail", &step.fail } };
        for (const auto& [key, value] : texts)
            for (const QString& problem : placeholderProblems(*value, true))
                p.add(field + QLatin1Char('.') + QLatin1String(key), problem);
        step.question = readQuestion(s.value(QLatin1String("question")), field + QStringLiteral(".question"), p);
        lesson.steps.push_back(std::move(step));
    }
    if (p.count() > 0)
        return std::nullopt;
    return lesson;
}

std::vector<Lesson> loadLessons(const plan::ProfileResolver& profiles, QStringList* errors, const QString& dir)
{
    std::vector<Lesson> out;
    const QFileInfoList files = QDir(dir).entryInfoList({ QStringLiteral("*.json") }, QDir::Files, QDir::Name);
    for (const QFileInfo& info : files) {
        QFile f(info.filePath());
        if (info.size() > kMaxLessonBytes || !f.open(QIODevice::ReadOnly)) {
            if (errors)
                *errors << QStringLiteral("%1: cannot be read (or larger than %2 bytes)")
                               .arg(info.fileName())
                               .arg(kMaxLessonBytes);
            continue;
        }
        if (auto lesson = readLesson(f.read(kMaxLessonBytes + 1), info.fileName(), profiles, errors)) {
            if (std::any_of(out.begin(), out.end(), [&](const Lesson& l) { return l.id == lesson->id; })) {
                if (errors)
                    *errors
                        << QStringLiteral("%1: id: \"%2\" is used by another lesson").arg(info.fileName(), lesson->id);
                continue;
            }
            out.push_back(std::move(*lesson));
        }
    }
    std::stable_sort(out.begin(), out.end(), [](const Lesson& a, const Lesson& b) { return a.order < b.order; });
    return out;
}

} // namespace loom::views
