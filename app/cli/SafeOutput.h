#pragma once

#include <ostream>
#include <streambuf>
#include <string>
#include <string_view>

namespace loom::app {

// Text that is safe to print on a terminal: C0 control characters (ESC, BEL, CR, ...) except newline and
// tab, DEL, and the C1 controls U+0080..U+009F (CSI, OSC in UTF-8) become \u00XX, so a name from a layout,
// profile or run cannot retitle, clear or recolour the terminal. \u00XX is also a JSON escape, so --json
// output stays valid JSON.
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
    std::ostream& m_target;
    bool m_pendingC2 = false; // the last byte was 0xC2, the first byte of U+0080..U+00BF
};

} // namespace loom::app
