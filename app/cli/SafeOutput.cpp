#include "app/cli/SafeOutput.h"

#include <cstdio>
#include <sstream>

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

bool isBidiControl(unsigned code)
{
    return code == 0x061C || code == 0x200E || code == 0x200F || (code >= 0x202A && code <= 0x202E)
        || (code >= 0x2066 && code <= 0x2069);
}

} // namespace

std::string terminalSafe(std::string_view text)
{
    std::ostringstream out;
    {
        TerminalSafeBuffer safe(out);
        safe.sputn(text.data(), static_cast<std::streamsize>(text.size()));
    }
    return out.str();
}

void TerminalSafeBuffer::flushPending()
{
    m_target << m_pending;
    m_pending.clear();
}

void TerminalSafeBuffer::put(unsigned char c)
{
    if (m_pending.empty()) {
        if (isC0(c)) {
            std::string e;
            escape(e, c);
            m_target << e;
        } else if (c == 0xC2 || c == 0xD8 || c == 0xE2) {
            m_pending = static_cast<char>(c);
        } else {
            m_target.put(static_cast<char>(c));
        }
        return;
    }
    const auto lead = static_cast<unsigned char>(m_pending[0]);
    unsigned code = 0;
    bool complete = false, possible = false;
    if (lead == 0xC2 && c >= 0x80 && c <= 0x9F) { // C1 controls
        code = c, complete = possible = true;
    } else if (lead == 0xD8 && c == 0x9C) { // U+061C
        code = 0x061C, complete = possible = true;
    } else if (lead == 0xE2 && m_pending.size() == 1 && (c == 0x80 || c == 0x81)) {
        possible = true;
    } else if (lead == 0xE2 && m_pending.size() == 2 && c >= 0x80 && c <= 0xBF) {
        code = 0x2000 | ((static_cast<unsigned char>(m_pending[1]) & 0x3Fu) << 6) | (c & 0x3Fu);
        complete = true;
        possible = isBidiControl(code);
    }
    if (complete && possible) {
        m_pending.clear();
        std::string e;
        escape(e, code);
        m_target << e;
    } else if (complete) {
        m_pending += static_cast<char>(c);
        flushPending();
    } else if (possible) {
        m_pending += static_cast<char>(c);
    } else { // not a control after all: the bytes so far as they were, then this one afresh
        flushPending();
        put(c);
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
    flushPending(); // a sequence cut at the very end: not a control
    m_target.flush();
    return 0;
}

} // namespace loom::app
