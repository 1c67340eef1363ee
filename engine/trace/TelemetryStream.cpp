#include "engine/trace/TelemetryStream.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdio>
#include <limits>
#include <optional>
#include <stdexcept>

namespace loom::trace {

namespace {

constexpr char kStart = '\x1e';
constexpr std::string_view kMagic = "LOOM"; // then the version and a space

const std::array<std::uint32_t, 256>& crcTable()
{
    static const std::array<std::uint32_t, 256> table = [] {
        std::array<std::uint32_t, 256> t {};
        for (std::uint32_t i = 0; i < 256; ++i) {
            std::uint32_t c = i;
            for (int k = 0; k < 8; ++k)
                c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
            t[i] = c;
        }
        return t;
    }();
    return table;
}

} // namespace

std::uint32_t crc32(std::string_view data)
{
    std::uint32_t c = 0xFFFFFFFFu;
    for (unsigned char b : data)
        c = crcTable()[(c ^ b) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

std::string encodeFrame(std::string_view type, std::string_view payload)
{
    char head[64];
    std::snprintf(head, sizeof head, "%zu %08x ", payload.size(), crc32(payload));
    std::string out;
    out.reserve(payload.size() + 64);
    out += kStart;
    out += kMagic;
    out += std::to_string(kStreamVersion);
    out += ' ';
    out += type;
    out += ' ';
    out += head;
    out += payload;
    out += '\n';
    return out;
}

namespace {

// The type and declared payload length of the frame whose line starts `text`, once its header has arrived
// ("\x1eLOOM<n> <type> <length> "); nothing while it has not, or when `text` holds no frame header.
std::optional<RefusedFrame> frameHeader(std::string_view text)
{
    const auto at = text.find(kStart);
    if (at == std::string_view::npos || text.substr(at + 1, kMagic.size()) != kMagic)
        return std::nullopt;
    std::string_view rest = text.substr(at + 1 + kMagic.size());
    std::string_view words[3];
    for (auto& w : words) {
        const auto space = rest.find(' ');
        if (space == std::string_view::npos)
            return std::nullopt;
        w = rest.substr(0, space);
        rest.remove_prefix(space + 1);
    }
    RefusedFrame f { std::string(words[1].substr(0, 32)), 0 };
    if (std::from_chars(words[2].data(), words[2].data() + words[2].size(), f.declaredBytes).ec != std::errc())
        f.declaredBytes = 0;
    return f;
}

constexpr std::size_t kHeaderBytes = 128; // more than any frame header: a frame's header is read from this

} // namespace

void StreamReader::startDiscarding()
{
    // A line that is a frame is remembered (its type and declared size) so that the reader's user can say
    // what was refused; other over-long output is only counted.
    if (const auto header = frameHeader(std::string_view(m_partial).substr(0, kHeaderBytes)))
        m_refused.push_back(*header);
    m_droppedBytes += m_partial.size();
    m_partial.clear();
    m_discarding = true;
}

void StreamReader::feed(std::string_view bytes)
{
    while (!bytes.empty()) {
        const auto newline = bytes.find('\n');
        const std::string_view piece = bytes.substr(0, newline);
        if (m_discarding) {
            m_droppedBytes += piece.size() + (newline != std::string_view::npos);
        } else if (m_partial.size() + piece.size() > m_maxLine) {
            m_partial.append(piece.substr(0, kHeaderBytes));
            m_droppedBytes += piece.size() - std::min(piece.size(), kHeaderBytes);
            startDiscarding();
        } else {
            const bool headerPending = m_partial.size() < kHeaderBytes;
            m_partial.append(piece);
            // A header that declares more than the limit: refuse now rather than buffer up to the limit.
            if (headerPending)
                if (const auto header = frameHeader(std::string_view(m_partial).substr(0, kHeaderBytes));
                    header && header->declaredBytes > m_maxLine)
                    startDiscarding();
        }
        if (newline == std::string_view::npos)
            return; // the rest of this line comes with a later chunk
        if (!m_discarding)
            line(m_partial);
        m_partial.clear();
        m_discarding = false;
        bytes.remove_prefix(newline + 1);
    }
}

void StreamReader::line(std::string_view text)
{
    // A frame may follow other output on the same line (a rank's text without its newline): find the start.
    const auto at = text.find(kStart);
    if (at == std::string_view::npos) {
        ++m_otherLines;
        return;
    }
    std::string_view rest = text.substr(at + 1);
    if (rest.substr(0, kMagic.size()) != kMagic) {
        ++m_damaged;
        return;
    }
    rest.remove_prefix(kMagic.size());
    auto word = [&rest]() -> std::string_view {
        const auto space = rest.find(' ');
        if (space == std::string_view::npos)
            return {};
        std::string_view w = rest.substr(0, space);
        rest.remove_prefix(space + 1);
        return w;
    };
    const std::string_view version = word(), type = word(), length = word(), crc = word();
    int versionNumber = 0;
    std::size_t size = 0;
    std::uint32_t sum = 0;
    const auto parsedVersion = std::from_chars(version.data(), version.data() + version.size(), versionNumber);
    const bool versionOk
        = parsedVersion.ec == std::errc() && parsedVersion.ptr == version.data() + version.size() && versionNumber > 0;
    const bool lengthOk = std::from_chars(length.data(), length.data() + length.size(), size).ec == std::errc();
    const bool crcOk = std::from_chars(crc.data(), crc.data() + crc.size(), sum, 16).ec == std::errc();
    if (type.empty() || !versionOk || !lengthOk || !crcOk || rest.size() != size || crc32(rest) != sum) {
        ++m_damaged;
        return;
    }
    ++m_frames;
    m_ready.push_back({ std::string(type), std::string(rest), versionNumber });
}

bool StreamReader::nextRefused(RefusedFrame& refused)
{
    if (m_refused.empty())
        return false;
    refused = std::move(m_refused.front());
    m_refused.pop_front();
    return true;
}

bool StreamReader::next(Frame& frame)
{
    if (m_ready.empty())
        return false;
    frame = std::move(m_ready.front());
    m_ready.pop_front();
    return true;
}

} // namespace loom::trace
