#include "app/cli/SafeOutput.h"

#include <cstdio>

namespace loom::app {

namespace {

void escape(std::string& out, unsigned code)
{
    char buf[8];
    std::snprintf(buf, sizeof buf, "\\u%04x", code);
    out += buf;
}

bool isC0(unsigned char c)
{
    return (c < 0x20 && c != '\n' && c != '\t') || c == 0x7f;
}

} // namespace

std::string terminalSafe(std::string_view text)
{
    std::string out;
    out.reserve(text.size());
    for (std::size_t i = 0; i < text.size(); ++i) {
        const auto c = static_cast<unsigned char>(text[i]);
        if (isC0(c)) {
            escape(out, c);
        } else if (c == 0xC2 && i + 1 < text.size() && static_cast<unsigned char>(text[i + 1]) >= 0x80
            && static_cast<unsigned char>(text[i + 1]) <= 0x9F) {
            escape(out, static_cast<unsigned char>(text[++i]));
        } else {
            out += static_cast<char>(c);
        }
    }
    return out;
}

void TerminalSafeBuffer::put(unsigned char c)
{
    if (m_pendingC2) {
        m_pendingC2 = false;
        if (c >= 0x80 && c <= 0x9F) {
            std::string e;
            escape(e, c);
            m_target << e;
            return;
        }
        m_target.put(static_cast<char>(0xC2));
    }
    if (c == 0xC2) {
        m_pendingC2 = true;
    } else if (isC0(c)) {
        std::string e;
        escape(e, c);
        m_target << e;
    } else {
        m_target.put(static_cast<char>(c));
    }
}

TerminalSafeBuffer::int_type TerminalSafeBuffer::overflow(int_type ch)
{
    if (traits_type::eq_int_type(ch, traits_type::eof()))
        return traits_type::not_eof(ch);
    put(static_cast<unsigned char>(traits_type::to_char_type(ch)));
    return ch;
}

std::streamsize TerminalSafeBuffer::xsputn(const char* s, std::streamsize n)
{
    for (std::streamsize i = 0; i < n; ++i)
        put(static_cast<unsigned char>(s[i]));
    return n;
}

int TerminalSafeBuffer::sync()
{
    if (m_pendingC2) { // a lone 0xC2 at the very end: not a C1 control
        m_pendingC2 = false;
        m_target.put(static_cast<char>(0xC2));
    }
    m_target.flush();
    return 0;
}

} // namespace loom::app
