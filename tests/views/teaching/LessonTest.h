#pragma once

// Shared by the lesson tests: facts that pass a step's check.

#include "views/teaching/Lesson.h"

namespace loom::views::test {

// Facts that satisfy `check` (each leaf's value moved to the passing side).
inline void satisfy(const LessonCheck& check, Facts& facts)
{
    for (const auto& c : check.all)
        satisfy(c, facts);
    if (check.fact.empty())
        return;
    FactValue v = check.value;
    if (auto* x = std::get_if<double>(&v))
        *x += check.op == "<" ? -1.0 : check.op == ">" ? 1.0 : check.op == "!=" ? 1.0 : 0.0;
    else if (auto* b = std::get_if<bool>(&v))
        *b = check.op == "!=" ? !*b : *b;
    else if (check.op == "!=")
        v = std::get<std::string>(v) + "-other";
    facts[check.fact] = v;
}

} // namespace loom::views::test
