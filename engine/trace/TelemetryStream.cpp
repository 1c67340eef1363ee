#include "engine/trace/TelemetryStream.h"

#include "engine/trace/JsonLimits.h"

#include <nlohmann/json.hpp>

#include <array>
#include <charconv>
#include <cstdio>
#include <limits>
#include <stdexcept>

namespace loom::trace {

namespace {

constexpr char kStart = '\x1e';
constexpr std::string_view kMagic = "LOOM1 ";

const std::array<std::uint32_t, 256>& crcTable()
{
    static const std::array<std::uint32_t, 256> table = [] {
        std::array<std::uint32_t, 256> t{};
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

}  // namespace

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
    out += type;
    out += ' ';
    out += head;
    out += payload;
    out += '\n';
    return out;
}

std::string encodeEvents(const std::vector<TraceEvent>& events)
{
    nlohmann::json a = nlohmann::json::array();
    for (const auto& e : events)
        a.push_back({e.rank, static_cast<int>(e.lane), static_cast<int>(e.kind), static_cast<int>(e.source), e.step,
                     e.microBatch, e.stage, e.chunk, e.startNs, e.endNs, e.bytes, e.wireBytes, e.group, e.groupSize, e.peer,
                     static_cast<int>(e.algorithm), e.codec});
    return a.dump();
}

std::vector<TraceEvent> decodeEvents(std::string_view payload)
{
    std::string why;
    const nlohmann::json a = parseJsonLimited(payload, &why);
    if (a.is_discarded() || !a.is_array())
        throw std::runtime_error("an events frame is not a JSON array" + (why.empty() ? std::string() : ": " + why));
    std::vector<TraceEvent> out;
    std::size_t index = 0;
    // Field k of event `index` as a whole number in [min, max], else a message naming both.
    const auto whole = [&index](const nlohmann::json& x, std::size_t k, std::int64_t min, std::int64_t max) {
        const auto& v = x[k];
        const bool ok = v.is_number_integer() ? v.get<std::int64_t>() >= min && v.get<std::int64_t>() <= max
                        : v.is_number_unsigned() && v.get<std::uint64_t>() <= static_cast<std::uint64_t>(max);
        if (!ok)
            throw std::runtime_error("event " + std::to_string(index) + " of an events frame: field " + std::to_string(k) + " is "
                                     + v.dump().substr(0, 40) + "; expected a whole number from " + std::to_string(min) + " to "
                                     + std::to_string(max));
        return v.is_number_unsigned() ? static_cast<std::int64_t>(v.get<std::uint64_t>()) : v.get<std::int64_t>();
    };
    constexpr std::int64_t i32 = std::numeric_limits<std::int32_t>::max(), i64 = std::numeric_limits<std::int64_t>::max();
    for (const auto& x : a) {
        if (!x.is_array() || x.size() != 17 || !x[16].is_string())
            throw std::runtime_error("event " + std::to_string(index) + " of an events frame has the wrong shape (17 fields expected)");
        TraceEvent e;
        e.rank = static_cast<std::int32_t>(whole(x, 0, 0, i32));
        e.lane = static_cast<Lane>(whole(x, 1, 0, static_cast<int>(Lane::Comm)));
        e.kind = static_cast<EventKind>(whole(x, 2, 0, static_cast<int>(EventKind::Barrier)));
        e.source = static_cast<EventSource>(whole(x, 3, 0, static_cast<int>(EventSource::Simulated)));
        e.step = static_cast<std::int32_t>(whole(x, 4, -1, i32));
        e.microBatch = static_cast<std::int32_t>(whole(x, 5, -1, i32));
        e.stage = static_cast<std::int32_t>(whole(x, 6, -1, i32));
        e.chunk = static_cast<std::int32_t>(whole(x, 7, -1, i32));
        e.startNs = whole(x, 8, -i64, i64);
        e.endNs = whole(x, 9, e.startNs, i64);
        e.bytes = static_cast<std::uint64_t>(whole(x, 10, 0, i64));
        e.wireBytes = static_cast<std::uint64_t>(whole(x, 11, 0, i64));
        e.group = static_cast<std::int32_t>(whole(x, 12, -1, i32));
        e.groupSize = static_cast<std::int32_t>(whole(x, 13, 0, i32));
        e.peer = static_cast<std::int32_t>(whole(x, 14, -1, i32));
        e.algorithm = static_cast<Algorithm>(whole(x, 15, 0, static_cast<int>(Algorithm::SparseAllGather)));
        e.codec = x[16].get<std::string>();
        out.push_back(std::move(e));
        ++index;
    }
    return out;
}

void StreamReader::feed(std::string_view bytes)
{
    while (!bytes.empty()) {
        const auto newline = bytes.find('\n');
        const std::string_view piece = bytes.substr(0, newline);
        if (m_discarding) {
            m_droppedBytes += piece.size() + (newline != std::string_view::npos);
        } else if (m_partial.size() + piece.size() > kMaxLine) {
            m_droppedBytes += m_partial.size() + piece.size();
            m_partial.clear();
            m_discarding = true;
        } else {
            m_partial.append(piece);
        }
        if (newline == std::string_view::npos)
            return;  // the rest of this line comes with a later chunk
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
    const std::string_view type = word(), length = word(), crc = word();
    std::size_t size = 0;
    std::uint32_t sum = 0;
    const bool lengthOk = std::from_chars(length.data(), length.data() + length.size(), size).ec == std::errc();
    const bool crcOk = std::from_chars(crc.data(), crc.data() + crc.size(), sum, 16).ec == std::errc();
    if (type.empty() || !lengthOk || !crcOk || rest.size() != size || crc32(rest) != sum) {
        ++m_damaged;
        return;
    }
    ++m_frames;
    m_ready.push_back({std::string(type), std::string(rest)});
}

bool StreamReader::next(Frame& frame)
{
    if (m_ready.empty())
        return false;
    frame = std::move(m_ready.front());
    m_ready.pop_front();
    return true;
}

}  // namespace loom::trace
