#include "engine/plan/Diagnostics.h"

namespace loom::plan {

void Diagnostics::error(std::string field, std::string message)
{
    m_problems.push_back({ Severity::Error, std::move(field), std::move(message) });
}

void Diagnostics::warning(std::string field, std::string message)
{
    m_problems.push_back({ Severity::Warning, std::move(field), std::move(message) });
}

void Diagnostics::append(const Diagnostics& other)
{
    m_problems.insert(m_problems.end(), other.m_problems.begin(), other.m_problems.end());
}

bool Diagnostics::hasErrors() const
{
    for (const auto& p : m_problems)
        if (p.severity == Severity::Error)
            return true;
    return false;
}

bool Diagnostics::hasErrorAt(const std::string& field) const
{
    for (const auto& p : m_problems) {
        if (p.severity != Severity::Error)
            continue;
        if (p.field == field || field.empty())
            return true;
        if (p.field.size() > field.size() && p.field.compare(0, field.size(), field) == 0
            && (p.field[field.size()] == '.' || p.field[field.size()] == '['))
            return true;
    }
    return false;
}

std::vector<Problem> Diagnostics::errors() const
{
    std::vector<Problem> out;
    for (const auto& p : m_problems)
        if (p.severity == Severity::Error)
            out.push_back(p);
    return out;
}

std::vector<Problem> Diagnostics::warnings() const
{
    std::vector<Problem> out;
    for (const auto& p : m_problems)
        if (p.severity == Severity::Warning)
            out.push_back(p);
    return out;
}

std::string Diagnostics::format() const
{
    std::string out;
    for (const auto& p : errors())
        out += "error: " + p.message + "\n";
    for (const auto& p : warnings())
        out += "warning: " + p.message + "\n";
    return out;
}

} // namespace loom::plan
