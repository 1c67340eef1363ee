#pragma once

#include <string>
#include <vector>

namespace loom::plan {

enum class Severity { Warning, Error };

// One problem found in a layout or profile. `field` is the JSON path ("parallel.tp", "model.heads");
// `message` is a whole sentence that names the field, the value and a fix.
struct Problem {
    Severity severity = Severity::Error;
    std::string field;
    std::string message;

    bool operator==(const Problem&) const = default;
};

// Collects every problem instead of stopping at the first, so a user sees them all at once.
class Diagnostics {
public:
    void error(std::string field, std::string message);
    void warning(std::string field, std::string message);
    void append(const Diagnostics& other);

    bool hasErrors() const;
    // True when an error was reported for `field` or for anything inside it ("parallel" covers "parallel.tp").
    bool hasErrorAt(const std::string& field) const;
    const std::vector<Problem>& problems() const { return m_problems; }
    std::vector<Problem> errors() const;
    std::vector<Problem> warnings() const;
    bool empty() const { return m_problems.empty(); }

    // "error: <message>" / "warning: <message>", one per line, errors first.
    std::string format() const;

private:
    std::vector<Problem> m_problems;
};

} // namespace loom::plan
