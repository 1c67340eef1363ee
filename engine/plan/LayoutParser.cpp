#include "engine/plan/LayoutParser.h"
#include "engine/json/JsonLimits.h"
#include "engine/trace/BoundedRead.h"

#include "engine/plan/JsonFields.h"
#include "engine/plan/LayoutValidator.h"
#include "engine/plan/TextUtil.h"

#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>

namespace loom::plan {

using nlohmann::json;

namespace {

// Where the first byte that cannot be text is: a NUL, or a byte sequence that is not UTF-8.
std::optional<std::size_t> firstNonTextByte(std::string_view s)
{
    std::size_t i = 0;
    while (i < s.size()) {
        auto c = static_cast<unsigned char>(s[i]);
        if (c == 0)
            return i;
        int extra = c < 0x80 ? 0 : (c >> 5) == 0x6 ? 1 : (c >> 4) == 0xE ? 2 : (c >> 3) == 0x1E ? 3 : -1;
        if (extra < 0 || i + static_cast<std::size_t>(extra) >= s.size() + (extra == 0))
            return i; // not a UTF-8 lead byte, or a sequence cut off by the end of the file
        for (int k = 1; k <= extra; ++k)
            if ((static_cast<unsigned char>(s[i + static_cast<std::size_t>(k)]) >> 6) != 0x2)
                return i;
        i += static_cast<std::size_t>(extra) + 1;
    }
    return std::nullopt;
}

std::pair<std::size_t, std::size_t> lineAndColumn(std::string_view s, std::size_t offset)
{
    std::size_t line = 1, column = 1;
    for (std::size_t i = 0; i < offset && i < s.size(); ++i) {
        if (s[i] == '\n') {
            ++line;
            column = 1;
        } else {
            ++column;
        }
    }
    return { line, column };
}

// Turns nlohmann's parse error text into a plain sentence with a line and column.
std::string syntaxMessage(std::string_view textIn, const json::parse_error& e)
{
    std::string what = e.what();
    // nlohmann: "[json.exception.parse_error.101] parse error at line 3, column 5: syntax error while parsing
    // object - unexpected end of input; expected '}'" -> keep the part after "parse error ...: ".
    auto cut = what.find("syntax error");
    std::string detail = cut == std::string::npos ? what : what.substr(cut);
    std::size_t offset = e.byte > 0 ? e.byte - 1 : 0;
    auto [line, column] = lineAndColumn(textIn, offset);
    std::string message = "the file is not valid JSON at line " + std::to_string(line) + ", column "
        + std::to_string(column) + ": " + detail;
    if (e.byte >= textIn.size())
        message += " (the file looks cut short: check that it was saved completely)";
    return message;
}

void readParallel(const json& j, Layout& layout, Diagnostics& d)
{
    ObjectReader r(j, "parallel", d);
    constexpr std::int64_t kMaxDegree = 1 << 20;
    constexpr std::int64_t kMaxBatch = 1 << 24;
    auto& p = layout.parallel;
    if (auto v = r.integer("tp", Presence::Required, 1, kMaxDegree))
        p.tp = *v;
    if (auto v = r.integer("pp", Presence::Required, 1, kMaxDegree))
        p.pp = *v;
    if (auto v = r.integer("dp", Presence::Required, 1, kMaxDegree))
        p.dp = *v;
    if (auto v = r.integer("vpp", Presence::Optional, 1, 1024))
        p.vpp = *v;
    if (auto v = r.integer("micro_batch", Presence::Required, 1, kMaxBatch))
        p.microBatch = *v;
    if (auto v = r.integer("global_batch", Presence::Required, 1, kMaxBatch))
        p.globalBatch = *v;
    if (auto v = r.choice("schedule", Presence::Optional, wordsOf(kScheduleWords)))
        p.schedule = *valueOf(kScheduleWords, *v);
    // cp always follows tp: the long forms name the same two orders (tp-cp-ep-dp-pp is Megatron-LM's).
    static constexpr WordTable<RankOrder, 3> kLongOrders { { { RankOrder::TpPpDp, "tp-cp-pp-dp" },
        { RankOrder::TpDpPp, "tp-cp-dp-pp" }, { RankOrder::TpDpPp, "tp-cp-ep-dp-pp" } } };
    std::vector<std::string> orders = wordsOf(kRankOrderWords);
    for (const std::string& o : wordsOf(kLongOrders))
        orders.push_back(o);
    if (auto v = r.choice("order", Presence::Optional, orders))
        p.order = valueOf(kRankOrderWords, *v).value_or(valueOf(kLongOrders, *v).value_or(RankOrder::TpPpDp));
    if (auto v = r.boolean("sp", Presence::Optional))
        p.sp = *v;
    if (auto v = r.integer("cp", Presence::Optional, 1, kMaxDegree))
        p.cp = *v;
    if (auto v = r.integer("ep", Presence::Optional, 1, kMaxDegree))
        p.ep = *v;
    if (auto v = r.integer("microbatch_group", Presence::Optional, 1, kMaxBatch))
        p.microbatchGroup = *v;
    if (auto v = r.integer("expert_tp", Presence::Optional, 1, kMaxDegree))
        p.expertTp = *v;
    if (auto v = r.choice("weight_fill", Presence::Optional, wordsOf(kWeightFillWords)))
        p.weightFill = *valueOf(kWeightFillWords, *v);

    if (const json* s = r.find("stages")) {
        const std::string path = "parallel.stages";
        const std::string shape
            = "a list of [first_layer, last_layer] pairs (or [] for a chunk with no layers), e.g. [[0, 5], [6, 11]]";
        if (!s->is_array()) {
            r.reportWrongType("stages", *s, shape);
        } else if (s->size() > (1u << 20)) {
            d.error(path, path + " has " + std::to_string(s->size()) + " entries; at most 1048576 are allowed");
        } else {
            for (std::size_t i = 0; i < s->size(); ++i) {
                const json& e = (*s)[i];
                const std::string ep = path + "[" + std::to_string(i) + "]";
                if (e.is_array() && e.empty()) { // no blocks: the embedding's or the LM head's chunk alone
                    const std::int64_t next = p.stages.empty() ? 0 : p.stages.back().last + 1;
                    p.stages.push_back({ next, next - 1 });
                    continue;
                }
                bool good = e.is_array() && e.size() == 2;
                for (std::size_t k = 0; good && k < 2; ++k) {
                    const json& n = e[k];
                    good = (n.is_number_integer() || n.is_number_unsigned()) && n.get<double>() >= 0
                        && n.get<double>() < 1e9;
                }
                if (!good) {
                    d.error(ep,
                        ep + "=" + jsonSnippet(e)
                            + " is not a [first_layer, last_layer] pair of whole numbers "
                              "from 0 (or [] for a first or last chunk with no layers); write e.g. [0, 5]");
                    continue;
                }
                const StageRange range { e[0].get<std::int64_t>(), e[1].get<std::int64_t>() };
                if (range.first > range.last) { // [] is the one way to write a stage without layers
                    d.error(ep,
                        ep + "=[" + std::to_string(range.first) + ", " + std::to_string(range.last) + "]"
                            + " starts after it ends; write [first_layer, last_layer] with first ≤ last, or [] "
                              "for a first chunk holding only the embedding or a last chunk holding only the LM "
                              "head");
                    continue;
                }
                p.stages.push_back(range);
            }
        }
    }
    r.warnUnknown({ "tp", "pp", "dp", "vpp", "micro_batch", "global_batch", "schedule", "stages", "order", "sp", "cp",
        "ep", "microbatch_group", "expert_tp", "weight_fill" });
}

void readMemory(const json& j, Layout& layout, Diagnostics& d)
{
    ObjectReader r(j, "memory", d);
    if (auto v = r.integer("zero", Presence::Optional, 0, 3))
        layout.memory.zero = static_cast<int>(*v);
    if (auto v = r.choice("recompute", Presence::Optional, wordsOf(kRecomputeWords)))
        layout.memory.recompute = *valueOf(kRecomputeWords, *v);
    if (auto v = r.choice("attention", Presence::Optional, wordsOf(kAttentionWords)))
        layout.memory.attention = *valueOf(kAttentionWords, *v);
    if (auto v = r.boolean("efficient_norm", Presence::Optional))
        layout.memory.efficientNorm = *v;
    r.warnUnknown({ "zero", "recompute", "attention", "efficient_norm" });
}

void readComm(const json& j, Layout& layout, Diagnostics& d)
{
    ObjectReader r(j, "comm", d);
    auto& c = layout.comm;
    if (auto v = r.string("dp_codec", Presence::Optional, 64)) {
        std::string why;
        if (auto codec = Codec::parse(*v, &why))
            c.dpCodec = *codec;
        else
            d.error("comm.dp_codec", "comm.dp_codec=\"" + *v + "\" is not a known codec; " + why);
    }
    if (auto v = r.boolean("error_feedback", Presence::Optional))
        c.errorFeedback = *v;
    if (auto v = r.boolean("overlap", Presence::Optional))
        c.overlap = *v;
    if (auto v = r.number("bucket_mb", Presence::Optional, 0, 1e6, true))
        c.bucketMb = *v;
    if (auto v = r.number("chunk_kb", Presence::Optional, 0, 1e7, true))
        c.chunkKb = *v;
    if (auto v = r.choice("allreduce", Presence::Optional, wordsOf(kAllreduceWords)))
        c.allreduce = *valueOf(kAllreduceWords, *v);
    if (auto v = r.integer("codec_warmup", Presence::Optional, 0, 1000000000))
        c.codecWarmup = *v;
    if (auto v = r.choice("backend", Presence::Optional, wordsOf(kCommBackendWords)))
        c.backend = *valueOf(kCommBackendWords, *v);
    if (auto v = r.integer("staleness", Presence::Optional, 0, 1))
        c.staleness = static_cast<int>(*v);
    if (auto v = r.boolean("tp_comm_overlap", Presence::Optional))
        c.tpCommOverlap = *v;
    if (auto v = r.boolean("overlap_grad_reduce", Presence::Optional))
        c.overlapGradReduce = *v;
    if (auto v = r.boolean("overlap_param_gather", Presence::Optional))
        c.overlapParamGather = *v;
    r.warnUnknown({ "dp_codec", "error_feedback", "overlap", "bucket_mb", "chunk_kb", "allreduce", "codec_warmup",
        "backend", "staleness", "tp_comm_overlap", "overlap_grad_reduce", "overlap_param_gather" });
}

// An object field that must be an object when present; reports otherwise.
const json* optionalObject(ObjectReader& r, std::string_view key, std::string_view shape)
{
    const json* v = r.find(key);
    if (v && !v->is_object()) {
        r.reportWrongType(key, *v, shape);
        return nullptr;
    }
    return v;
}

std::string unknownProfileMessage(
    std::string_view field, std::string_view kind, const std::string& name, const std::vector<std::string>& known)
{
    std::string message = std::string(field) + "=\"" + name + "\" is not a known " + std::string(kind)
        + " profile; known: " + text::join(known);
    if (auto guess = text::closest(name, known); !guess.empty())
        message += " (did you mean \"" + guess + "\"?)";
    message += ", or describe the " + std::string(kind) + " inline as an object";
    return message;
}

} // namespace

LayoutReadResult readLayout(std::string_view text, const ProfileResolver& profiles)
{
    LayoutReadResult result;
    Diagnostics& d = result.diagnostics;

    if (text.size() > kMaxLayoutBytes) {
        d.error("",
            "the file is " + std::to_string(text.size() >> 20) + " MiB; a layout file is at most "
                + std::to_string(kMaxLayoutBytes >> 20) + " MiB, so this is not a layout");
        return result;
    }
    if (text.find_first_not_of(" \t\r\n") == std::string_view::npos) {
        d.error("",
            "the file is empty; a layout is a JSON object that starts with {\"loom_layout\": 1, ...} "
            "(see resources/examples/ and docs/layout-format.md)");
        return result;
    }
    if (auto bad = firstNonTextByte(text)) {
        d.error("",
            "the file is not text (byte " + std::to_string(*bad) + " is binary data); a layout is a UTF-8 JSON file");
        return result;
    }

    if (std::string deep = jsonNestingProblem(text); !deep.empty()) {
        d.error("", "the file is not a layout: its " + deep);
        return result;
    }
    json root;
    try {
        root = parseRejectingDuplicateKeys<json>(text); // a layout is a document people edit
    } catch (const JsonDuplicateKey& e) {
        d.error(e.object.empty() ? e.key : e.object + "." + e.key,
            (e.object.empty() ? e.key : e.object + "." + e.key)
                + " is given twice; JSON keeps only the last value, so write it once");
        return result;
    } catch (const json::parse_error& e) {
        d.error("", syntaxMessage(text, e));
        return result;
    } catch (const std::exception& e) { // depth or allocation limits inside the parser
        d.error("", "the file could not be read as JSON: " + jsonErrorDetail(e));
        return result;
    }

    if (!root.is_object()) {
        d.error("",
            "the layout is " + jsonTypeName(root)
                + "; a layout is a JSON object that starts with {\"loom_layout\": 1, ...}");
        return result;
    }

    ObjectReader r(root, "", d);
    const json* version = r.find("loom_layout");
    if (!version) {
        d.error("loom_layout",
            "loom_layout is missing, so this is not a Loom layout; a layout starts with "
            "{\"loom_layout\": 1, ...}");
        return result;
    }
    if (!version->is_number_integer() && !version->is_number_unsigned()) {
        r.reportWrongType("loom_layout", *version, "the whole number 1");
        return result;
    }
    if (version->get<double>() != Layout::kVersion) {
        d.error("loom_layout",
            "loom_layout=" + jsonSnippet(*version) + " is not supported: this Loom reads layout version "
                + std::to_string(Layout::kVersion) + "; write the layout in version " + std::to_string(Layout::kVersion)
                + " or use a newer Loom");
        return result;
    }

    Layout layout;
    if (auto v = r.string("name", Presence::Required, 256))
        layout.name = *v;
    if (auto v = r.string("description", Presence::Optional, 65536))
        layout.description = *v;

    bool modelKnown = false;
    if (const json* m = r.find("model"); !m) {
        r.reportMissing("model", "a model profile name such as \"gpt2-124m\", or an object with its shape");
    } else if (m->is_string()) {
        const auto& name = m->get_ref<const std::string&>();
        if (auto spec = profiles.findModel(name)) {
            layout.model = *spec;
            layout.modelProfile = name;
            modelKnown = true;
        } else {
            d.error("model", unknownProfileMessage("model", "model", name, profiles.modelNames()));
        }
    } else if (auto spec = parseModelSpec(*m, "model", d)) {
        layout.model = *spec;
        modelKnown = true;
    }

    bool clusterKnown = false;
    if (const json* c = r.find("cluster"); !c) {
        r.reportMissing("cluster", "a cluster profile name such as \"dgx-a100\" or \"local\", or an object");
    } else if (c->is_string()) {
        const auto& name = c->get_ref<const std::string&>();
        if (auto spec = profiles.findCluster(name)) {
            layout.cluster = *spec;
            layout.clusterProfile = name;
            clusterKnown = true;
        } else {
            d.error("cluster", unknownProfileMessage("cluster", "cluster", name, profiles.clusterNames()));
        }
    } else if (auto spec = parseClusterSpec(*c, "cluster", d)) {
        layout.cluster = *spec;
        clusterKnown = true;
    }

    if (auto v = r.integer("nodes", Presence::Optional, 1, 1 << 20))
        layout.nodes = *v;
    else if (!r.find("nodes") && clusterKnown)
        layout.nodes = layout.cluster.nodes;

    if (const json* p = r.find("parallel"); !p)
        r.reportMissing("parallel", "an object with tp, pp, dp, micro_batch and global_batch");
    else if (!p->is_object())
        r.reportWrongType("parallel", *p, "an object with tp, pp, dp, micro_batch and global_batch");
    else
        readParallel(*p, layout, d);

    if (const json* m = optionalObject(r, "memory", "an object such as {\"zero\": 0, \"recompute\": \"none\"}"))
        readMemory(*m, layout, d);
    if (auto v = r.choice("precision", Presence::Optional, wordsOf(kPrecisionWords)))
        layout.precision = *precisionFromString(*v);
    if (auto v = r.choice("fp8", Presence::Optional, wordsOf(kFp8RecipeWords)))
        layout.fp8 = *fp8RecipeFromString(*v);
    if (const json* s = r.find("stack"))
        if (auto stack = parseStack(*s, "stack", d))
            layout.stack = *stack;
    if (const json* c = optionalObject(r, "comm", "an object such as {\"dp_codec\": \"none\", \"overlap\": true}"))
        readComm(*c, layout, d);
    if (const json* o = optionalObject(r, "optimizer", "an object such as {\"adam_beta2\": 0.95, \"clip_grad\": 1.0}"))
        readOptimizerSpec(*o, layout.optimizer, d);
    if (const json* o = optionalObject(r, "init", "an object such as {\"method\": \"normal\", \"std\": 0.02}"))
        readInitSpec(*o, layout.init, d);

    r.warnUnknown({ "loom_layout", "name", "description", "model", "cluster", "nodes", "parallel", "memory",
        "precision", "comm", "fp8", "optimizer", "init", "stack" });

    // Semantic rules run on everything that was read; rules whose fields were already reported are skipped.
    // The layout is handed back even with errors, so an editor can open it and show what to fix.
    if (modelKnown && clusterKnown) {
        d.append(validateLayout(layout, d));
        result.layout = layout;
    }
    return result;
}

LayoutReadResult readLayoutFile(const std::string& path, const ProfileResolver& profiles)
{
    LayoutReadResult result;
    std::string text, why;
    if (!readBoundedFile(path, kMaxLayoutBytes, &text, &why)) {
        result.diagnostics.error(
            "", why + (why.find("larger than") != std::string::npos ? "; this is not a layout" : ""));
        return result;
    }
    return readLayout(text, profiles);
}

std::string writeLayout(const Layout& layout)
{
    using ojson = nlohmann::ordered_json;
    ojson j = ojson::object();
    j["loom_layout"] = Layout::kVersion;
    j["name"] = layout.name;
    if (!layout.description.empty())
        j["description"] = layout.description;
    if (!layout.modelProfile.empty())
        j["model"] = layout.modelProfile;
    else
        j["model"] = toJson(layout.model);
    if (!layout.clusterProfile.empty())
        j["cluster"] = layout.clusterProfile;
    else
        j["cluster"] = toJson(layout.cluster);
    j["nodes"] = layout.nodes;

    const auto& p = layout.parallel;
    ojson par = ojson::object();
    par["tp"] = p.tp;
    par["pp"] = p.pp;
    par["dp"] = p.dp;
    par["vpp"] = p.vpp;
    par["micro_batch"] = p.microBatch;
    par["global_batch"] = p.globalBatch;
    par["schedule"] = toString(p.schedule);
    if (p.order != RankOrder::TpPpDp)
        par["order"] = toString(p.order);
    if (!p.stages.empty()) {
        ojson stages = ojson::array();
        for (const auto& s : p.stages)
            stages.push_back(s.empty() ? ojson::array() : ojson::array({ s.first, s.last }));
        par["stages"] = stages;
    }
    if (p.sp)
        par["sp"] = true;
    if (p.cp != 1)
        par["cp"] = p.cp;
    if (p.ep != 1)
        par["ep"] = p.ep;
    if (p.microbatchGroup > 0)
        par["microbatch_group"] = p.microbatchGroup;
    if (p.expertTp > 0)
        par["expert_tp"] = p.expertTp;
    if (p.weightFill != kDefaultWeightFill)
        par["weight_fill"] = std::string(wordOf(kWeightFillWords, p.weightFill));
    j["parallel"] = par;
    j["memory"] = { { "zero", layout.memory.zero }, { "recompute", toString(layout.memory.recompute) } };
    if (layout.memory.attention != Attention::Flash)
        j["memory"]["attention"] = toString(layout.memory.attention);
    if (layout.memory.efficientNorm)
        j["memory"]["efficient_norm"] = true;
    j["precision"] = toString(layout.precision);
    const auto& c = layout.comm;
    j["comm"] = { { "dp_codec", c.dpCodec.toString() }, { "error_feedback", c.errorFeedback }, { "overlap", c.overlap },
        { "bucket_mb", c.bucketMb }, { "chunk_kb", c.chunkKb }, { "allreduce", wordOf(kAllreduceWords, c.allreduce) } };
    if (c.codecWarmup >= 0)
        j["comm"]["codec_warmup"] = c.codecWarmup;
    if (c.backend)
        j["comm"]["backend"] = toString(*c.backend);
    if (c.staleness != 0)
        j["comm"]["staleness"] = c.staleness;
    if (c.tpCommOverlap)
        j["comm"]["tp_comm_overlap"] = true;
    if (c.overlapGradReduce)
        j["comm"]["overlap_grad_reduce"] = *c.overlapGradReduce;
    if (c.overlapParamGather)
        j["comm"]["overlap_param_gather"] = true;
    if (layout.fp8 != Fp8Recipe::None)
        j["fp8"] = toString(layout.fp8);
    if (auto o = toJson(layout.optimizer); !o.empty())
        j["optimizer"] = o;
    if (layout.stack != StackSpec {})
        j["stack"] = toJson(layout.stack);
    if (auto i = toJson(layout.init); !i.empty())
        j["init"] = i;
    return j.dump(2) + "\n";
}

} // namespace loom::plan
