// Reading one PyTorch profiler trace as a stream (TorchTraceSource.cpp), parsed event by event (nlohmann's SAX
// interface) so that memory holds the compact events only, never the document.
#include "engine/bridges/TorchTraceDetail.h"

#include "engine/json/JsonLimits.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <string_view>
#include <unordered_map>

namespace loom::trace::torch {

CommArgs commArgsOf(const nlohmann::json& args, const std::string& name); // TorchTraceRead.cpp

namespace {

using nlohmann::json;

[[noreturn]] void fail(const std::string& file, const std::string& field, const std::string& expected)
{
    throw TorchTraceError(file + ": " + field + ": " + expected);
}

// "1711964.123" (microseconds as Kineto writes them) -> 1711964123 ns, exactly; other forms through double.
bool microsToNs(const std::string& text, double value, std::int64_t& ns)
{
    if (!std::isfinite(value) || std::fabs(value) > 9.0e15)
        return false;
    std::size_t i = 0;
    const bool negative = !text.empty() && text[0] == '-';
    i += negative ? 1 : 0;
    std::int64_t whole = 0, frac = 0;
    int digits = 0;
    for (; i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])); ++i)
        whole = whole * 10 + (text[i] - '0');
    if (i < text.size() && text[i] == '.') {
        for (++i; i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])); ++i, ++digits)
            if (digits < 3)
                frac = frac * 10 + (text[i] - '0');
            else if (digits == 3 && text[i] >= '5')
                frac += 1; // round the fourth decimal
        for (int d = std::min(digits, 3); d < 3; ++d)
            frac *= 10;
    }
    if (i != text.size() || text.empty()) {
        ns = std::llround(value * 1000.0);
        return true;
    }
    ns = (negative ? -1 : 1) * (whole * 1000 + frac);
    return true;
}

// The SAX handler: builds each event's few fields of interest (a small JSON of whitelisted keys) and turns it
// into a RawEvent when the event closes; other top-level values (distributedInfo, baseTimeNanoseconds,
// otherData's keys) are kept small too.
class Handler : public nlohmann::json_sax<json> {
public:
    explicit Handler(RankTrace& t)
        : m_t(t)
    {
    }
    std::int64_t baseNs = 0;
    bool sawEvents = false, pytorch = false, documentIsArray = false, documentIsObject = false;
    bool loomTrace = false;
    json distributedInfo;
    std::size_t index = 0;

    // Values nobody keeps are dropped before anything is built (most of a trace: kernels' launch details).
    bool null() override { return !wanted() || value(json()); }
    bool boolean(bool v) override { return !wanted() || value(json(v)); }
    bool number_integer(number_integer_t v) override
    {
        return timeKey() ? time(std::to_string(v), double(v)) : !wanted() || number(json(v), double(v));
    }
    bool number_unsigned(number_unsigned_t v) override
    {
        return timeKey() ? time(std::to_string(v), double(v)) : !wanted() || number(json(v), double(v));
    }
    bool number_float(number_float_t v, const string_t& s) override
    {
        return timeKey() ? time(s, v) : !wanted() || number(json(v), v);
    }
    bool string(string_t& v) override { return !wanted() || value(json(std::move(v))); }
    bool binary(binary_t&) override { return value(json()); }
    bool start_object(std::size_t) override { return open(true); }
    bool start_array(std::size_t) override { return open(false); }
    bool end_object() override { return close(); }
    bool end_array() override { return close(); }
    bool key(string_t& k) override
    {
        if (m_skipDepth)
            return true;
        m_key = k;
        if (m_inOther && m_depth == 2 && k == "loom_trace")
            loomTrace = true;
        return true;
    }
    bool parse_error(std::size_t byte, const std::string&, const nlohmann::detail::exception&) override
    {
        (void)byte;
        fail(m_t.file, "the text",
            "not JSON; expected a PyTorch profiler trace (a list of events, or an object with \"traceEvents\")");
    }

private:
    RankTrace& m_t;
    int m_depth = 0;
    int m_skipDepth = 0; // inside a value not kept: the depth it opened at
    std::string m_key;
    // The event being read and where in it we are.
    int m_eventDepth = 0;
    json m_event;
    std::vector<json*> m_stack; // containers of the kept value being built
    std::int64_t m_tsNs = 0, m_durNs = -1;
    bool m_hasTs = false;
    std::unordered_map<std::string, std::uint32_t> m_nameIds, m_threadIds;

    std::string where() const { return (m_t.kineto ? "traceEvents[" : "[") + std::to_string(index) + "]"; }
    bool inEvent() const { return m_eventDepth > 0 && m_depth >= m_eventDepth; }
    // Keys kept in a container at depth `d`: the event's own, its args' that say what it is (sizes only for
    // communication ops); everything else is skipped unbuilt.
    bool keep(int d) const
    {
        // string_view: a key of another length is rejected without reading it (this runs for every key).
        static constexpr std::string_view eventKeys[] = { "ph", "name", "cat", "pid", "tid", "args" };
        static constexpr std::string_view argKeys[]
            = { "stream", "correlation", "Collective name", "In msg nelems", "Out msg nelems", "dtype", "Group size",
                  "Process Group Name", "Process Group Description", "Process Group Ranks", "Src Rank", "Dst Rank" };
        const std::string_view k0 = m_key;
        const auto in = [&](const auto& list) {
            return std::any_of(std::begin(list), std::end(list), [&](std::string_view k) { return k0 == k; });
        };
        if (d == m_eventDepth)
            return in(eventKeys);
        if (d == m_eventDepth + 1 && m_stack.size() == 1) { // directly in args
            if (k0 == "Input Dims" || k0 == "Input type") {
                const auto n = m_event.find("name");
                if (n == m_event.end() || !n->is_string())
                    return true;
                const std::string& name = n->get_ref<const std::string&>();
                return name.rfind("c10d::", 0) == 0 || name.rfind("nccl:", 0) == 0 || name.rfind("gloo:", 0) == 0
                    || name == "record_param_comms";
            }
            return in(argKeys);
        }
        return true; // inside a kept value
    }
    // Whether a scalar here is kept (or checked); the rest is dropped before anything is built.
    bool wanted() const
    {
        if (m_skipDepth)
            return false;
        if (inEvent() && m_stack.size() <= 1)
            return m_stack.empty() && m_depth != m_eventDepth ? true : keep(m_depth);
        return true;
    }
    bool timeKey() const
    {
        return !m_skipDepth && inEvent() && m_depth == m_eventDepth && m_stack.empty() && m_key.size() <= 3
            && (m_key == std::string_view("ts") || m_key == std::string_view("dur"));
    }
    bool time(const std::string& raw, double d)
    {
        {
            std::int64_t ns = 0;
            if (!microsToNs(raw, d, ns))
                fail(m_t.file, where() + "." + m_key, "expected microseconds between -9e15 and 9e15");
            (m_key == "ts" ? m_tsNs : m_durNs) = ns;
            if (m_key == "ts")
                m_hasTs = true;
            else if (ns < 0)
                fail(m_t.file, where() + ".dur", "expected a non-negative number (microseconds)");
            return true;
        }
    }
    bool number(json v, double d)
    {
        if (m_depth == 1 && documentIsObject && m_key == "baseTimeNanoseconds") {
            baseNs = v.is_number_integer() && v.get<std::int64_t>() >= 0 ? v.get<std::int64_t>() : std::llround(d);
            return true;
        }
        return value(std::move(v));
    }
    void put(json v)
    {
        json& c = *m_stack.back();
        if (c.is_object())
            c[m_key] = std::move(v);
        else
            c.push_back(std::move(v));
    }
    bool value(json v)
    {
        if (m_skipDepth)
            return true;
        if (m_depth == 0)
            fail(m_t.file, "the document", "expected a list of events or an object with \"traceEvents\"");
        if (!m_stack.empty()) {
            if (++m_kept > kMaxKept)
                fail(m_t.file, m_eventDepth ? where() : std::string("distributedInfo"),
                    "more than " + std::to_string(kMaxKept) + " values; expected a profiler event's few fields");
            put(std::move(v));
            return true;
        }
        if (m_eventDepth && m_depth == m_eventDepth - 1)
            fail(m_t.file, where(), "expected an event object");
        if (inEvent() && m_depth == m_eventDepth && m_key == "ph" && !v.is_string())
            fail(m_t.file, where() + ".ph", "expected the event's phase (a string such as \"X\")");
        if (inEvent() && m_depth == m_eventDepth && keep(m_depth))
            m_event[m_key] = std::move(v);
        return true;
    }
    void skip() { m_skipDepth = m_depth; }
    bool open(bool object)
    {
        ++m_depth;
        if (m_depth > kMaxTorchTraceDepth)
            fail(m_t.file, "nesting",
                "deeper than " + std::to_string(kMaxTorchTraceDepth)
                    + " levels; a profiler trace is a list of flat events");
        if (m_skipDepth)
            return true;
        if (m_depth == 1) {
            (object ? documentIsObject : documentIsArray) = true;
            if (!object)
                m_eventDepth = 2;
            return true;
        }
        if (!m_stack.empty() || (inEvent() && m_depth > m_eventDepth)) { // inside an event, or a kept value
            if (m_stack.size() > 8 || (m_stack.empty() && !keep(m_depth - 1))
                || (m_stack.size() == 1 && inEvent() && !keep(m_depth - 1))) {
                skip();
                return true;
            }
            json fresh = object ? json::object() : json::array();
            if (m_stack.empty()) {
                m_event[m_key] = std::move(fresh);
                m_stack.push_back(&m_event[m_key]);
            } else {
                put(std::move(fresh));
                json& c = *m_stack.back();
                m_stack.push_back(c.is_object() ? &c[m_key] : &c.back());
            }
            return true;
        }
        if (m_depth == 2 && documentIsObject && m_key == "traceEvents") {
            if (object)
                fail(m_t.file, "traceEvents", "missing; expected the list of events of a PyTorch profiler trace");
            m_t.kineto = sawEvents = true;
            m_eventDepth = 3;
            return true;
        }
        if (m_depth == 2 && documentIsObject && m_key == "distributedInfo") {
            if (!object)
                fail(m_t.file, "distributedInfo", "expected an object with \"rank\"");
            distributedInfo = json::object();
            m_kept = 0;
            m_stack.push_back(&distributedInfo);
            return true;
        }
        if (m_depth == 2 && documentIsObject && m_key == "otherData" && object) {
            m_inOther = true; // only its keys are looked at
            return true;
        }
        if (m_eventDepth && m_depth == m_eventDepth) {
            if (!object)
                fail(m_t.file, where(), "expected an event object");
            m_event = json::object();
            m_kept = 0;
            m_hasTs = false;
            m_durNs = -1;
            return true;
        }
        skip();
        return true;
    }
    bool close()
    {
        if (m_skipDepth) {
            if (m_depth == m_skipDepth)
                m_skipDepth = 0;
            --m_depth;
            return true;
        }
        if (!m_stack.empty()) {
            m_stack.pop_back();
        } else if (m_eventDepth && m_depth == m_eventDepth) {
            finishEvent();
            ++index;
        } else if (m_eventDepth && m_depth == m_eventDepth - 1) {
            m_eventDepth = 0; // the list of events is over
        } else if (m_depth == 2) {
            m_inOther = false;
        }
        --m_depth;
        return true;
    }
    static constexpr std::size_t kMaxKept = 1 << 16;
    std::size_t m_kept = 0;
    bool m_inOther = false;

    std::uint32_t intern(
        std::unordered_map<std::string, std::uint32_t>& ids, std::vector<std::string>& list, const std::string& s)
    {
        const auto [it, fresh] = ids.emplace(s, static_cast<std::uint32_t>(list.size()));
        if (fresh)
            list.push_back(s);
        return it->second;
    }
    static std::string text(const json& j, const char* key)
    {
        const auto it = j.find(key);
        if (it == j.end())
            return {};
        return it->is_string() ? it->get<std::string>() : it->is_number() ? it->dump() : std::string();
    }
    static std::int64_t integer(const json& j, const char* key)
    {
        const auto it = j.find(key);
        if (it != j.end() && it->is_number_integer())
            return it->get<std::int64_t>();
        if (it != j.end() && it->is_string()) {
            const std::string s = it->get<std::string>();
            if (!s.empty() && s.size() < 18 && s.find_first_not_of("0123456789") == std::string::npos)
                return std::stoll(s);
        }
        return -1;
    }
    static Category category(std::string cat)
    {
        for (auto& c : cat)
            c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        if (cat == "cpu_op" || cat == "operator")
            return Category::CpuOp;
        if (cat == "user_annotation")
            return Category::UserAnnotation;
        if (cat == "cuda_runtime" || cat == "runtime" || cat == "cuda_driver" || cat == "mtia_runtime")
            return Category::Runtime;
        if (cat == "kernel")
            return Category::Kernel;
        if (cat == "gpu_memcpy" || cat == "memcpy")
            return Category::Memcpy;
        if (cat == "gpu_memset" || cat == "memset")
            return Category::Memset;
        if (cat == "gpu_user_annotation")
            return Category::GpuAnnotation;
        if (cat == "cuda_sync")
            return Category::Sync;
        return Category::Other;
    }

    void finishEvent()
    {
        const json& j = m_event;
        const auto ph = j.find("ph");
        if (ph == j.end())
            fail(m_t.file, where() + ".ph", "expected the event's phase (a string such as \"X\")");
        if (*ph != "X")
            return;
        if (!m_hasTs)
            fail(m_t.file, where() + ".ts", "expected a number (microseconds)");
        if (m_durNs < 0)
            fail(m_t.file, where() + ".dur", "expected a non-negative number (microseconds)");
        RawEvent e;
        const std::string name = text(j, "name"), cat = text(j, "cat");
        e.name = intern(m_nameIds, m_t.names, name);
        e.thread = intern(m_threadIds, m_t.threads, text(j, "pid") + "/" + text(j, "tid"));
        e.startNs = m_tsNs;
        e.endNs = m_tsNs + m_durNs;
        e.cat = category(cat);
        const auto a = j.find("args");
        if (a != j.end() && a->is_object()) {
            e.correlation = integer(*a, "correlation");
            const std::int64_t stream = integer(*a, "stream");
            e.stream = stream >= 0 && stream < (1 << 30) ? static_cast<std::int32_t>(stream) : -1;
        }
        e.kernel = e.cat == Category::Kernel;
        e.gpu = e.kernel || e.cat == Category::Memcpy || e.cat == Category::Memset || e.cat == Category::GpuAnnotation
            || e.cat == Category::Sync || cat.rfind("gpu_", 0) == 0;
        if (!e.gpu) {
            static const json none = json::object();
            CommArgs c = commArgsOf(a != j.end() && a->is_object() ? *a : none, name);
            if (c.present || !c.collective.empty() || c.bytes > 0) {
                e.comm = static_cast<std::int32_t>(m_t.comms.size());
                m_t.comms.push_back(std::move(c));
            }
        }
        pytorch = pytorch || name.rfind("aten::", 0) == 0 || name.rfind("ProfilerStep#", 0) == 0
            || e.cat == Category::CpuOp || e.cat == Category::UserAnnotation || e.kernel || e.comm >= 0
            || e.cat == Category::Runtime;
        m_t.events.push_back(e);
    }
};

std::int32_t smallInt(const json& j, const std::string& file, const char* field)
{
    if (!j.is_number_integer() || j.get<std::int64_t>() < 0 || j.get<std::int64_t>() > 1 << 24)
        fail(file, field, "expected a non-negative integer");
    return static_cast<std::int32_t>(j.get<std::int64_t>());
}

void readDistributedInfo(const json& d, RankTrace& t)
{
    if (!d.is_object())
        return;
    if (const auto r = d.find("rank"); r != d.end())
        t.rank = smallInt(*r, t.file, "distributedInfo.rank");
    if (const auto w = d.find("world_size"); w != d.end())
        t.worldSize = smallInt(*w, t.file, "distributedInfo.world_size");
    const auto pgs = d.find("pg_config");
    if (pgs == d.end() || !pgs->is_array())
        return;
    for (const auto& p : *pgs) {
        if (!p.is_object())
            continue;
        ProcessGroup g;
        g.name = p.contains("pg_name") && p["pg_name"].is_string() ? p["pg_name"].get<std::string>() : "";
        g.desc = p.contains("pg_desc") && p["pg_desc"].is_string() ? p["pg_desc"].get<std::string>() : "";
        if (p.contains("pg_size") && p["pg_size"].is_number_integer())
            g.size = static_cast<std::int32_t>(std::clamp<std::int64_t>(p["pg_size"].get<std::int64_t>(), 0, 1 << 24));
        if (p.contains("ranks") && p["ranks"].is_array())
            for (const auto& r : p["ranks"])
                if (r.is_number_integer() && r.get<std::int64_t>() >= 0 && r.get<std::int64_t>() < 1 << 24)
                    g.ranks.push_back(static_cast<std::int32_t>(r.get<std::int64_t>()));
        t.groups.push_back(std::move(g));
    }
}

} // namespace

RankTrace readRankTrace(const TorchTraceFile& file, std::uint64_t maxBytes)
{
    RankTrace t;
    t.file = file.name;
    Handler h(t);
    if (!file.text.empty() || file.path.empty()) {
        if (file.text.size() > kMaxTorchTraceBytes)
            fail(file.name, std::to_string(file.text.size()) + " bytes",
                "larger than the " + std::to_string(kMaxTorchTraceBytes >> 30) + " GiB that Loom reads");
        if (!jsonNestingProblem(file.text, kMaxTorchTraceDepth).empty())
            fail(file.name, "nesting",
                "deeper than " + std::to_string(kMaxTorchTraceDepth)
                    + " levels; a profiler trace is a list of flat events");
        json::sax_parse(file.text, &h);
    } else {
        const auto buffer = openTraceStream(file.path, file.name, maxBytes);
        // Buffer iterators, not an istream: the parser reads a character at a time, without a sentry each.
        json::sax_parse(std::istreambuf_iterator<char>(buffer.get()), std::istreambuf_iterator<char>(), &h);
    }
    if (h.loomTrace)
        fail(file.name, "otherData.loom_trace", "this is already a Loom trace; open it with loom trace stats");
    if (h.documentIsObject && !h.sawEvents)
        fail(file.name, "traceEvents", "missing; expected the list of events of a PyTorch profiler trace");
    if (!h.documentIsObject && !h.documentIsArray)
        fail(file.name, "the document", "expected a list of events or an object with \"traceEvents\"");
    readDistributedInfo(h.distributedInfo, t);
    for (auto& e : t.events) {
        e.startNs += h.baseNs;
        e.endNs += h.baseNs;
    }
    if (!h.pytorch)
        fail(file.name, t.kineto ? "traceEvents" : "the event list",
            "no PyTorch profiler events (aten:: ops, ProfilerStep#N ranges, cpu_op or kernel events); expected a "
            "trace written by torch.profiler");
    return t;
}

} // namespace loom::trace::torch
