#pragma once

#include <ostream>
#include <streambuf>
#include <string>
#include <string_view>

namespace loom::app {

// Text that is safe to print on a terminal: C0 control characters (ESC, BEL, CR, ...) except newline and
// tab, DEL, and the C1 controls U+0080..U+009F (CSI, OSC in UTF-8) become \u00XX, so a name from a layout,
// profile or run cannot retitle, clear or recolour the terminal. The bidirectional controls (U+061C,
// U+200E/F, U+202A..U+202E, U+2066..U+2069) become \uXXXX too, so a name cannot reorder what is printed after
// it. \uXXXX is also a JSON escape, so --json output stays valid JSON.
std::string terminalSafe(std::string_view text);

// A stream buffer that passes everything written through terminalSafe() into another stream. The CLI
// writes all its output through two of these, so every name reaching a terminal is escaped.
class TerminalSafeBuffer : public std::streambuf {
public:
    explicit TerminalSafeBuffer(std::ostream& target)
        : m_target(target)
    {
    }
    ~TerminalSafeBuffer() override { sync(); }

protected:
    int_type overflow(int_type ch) override;
    std::streamsize xsputn(const char* s, std::streamsize n) override;
    int sync() override;

private:
    void put(unsigned char c);
    void flushPending();
    std::ostream& m_target;
    std::string m_pending; // the first bytes of a UTF-8 sequence that may be a control (0xC2, 0xD8, 0xE2 ...)
};

} // namespace loom::app
