#pragma once

#include "engine/json/JsonLimits.h"

#include <exception>
#include <filesystem>
#include <new>
#include <string>

namespace loom {

// An exception's message in Loom's words where the library's would reach a person raw: "std::bad_alloc"
// becomes "out of memory (...)", a filesystem error names its operation, paths and reason ("cannot rename
// /a to /b: No space left on device", not "filesystem error: cannot rename: ..."), a JSON library error loses
// its "[json.exception...]" prefix. `outOfMemory` is what to say when memory ran out.
inline std::string plainWhat(const std::exception& e,
    const std::string& outOfMemory = "out of memory: the system refused an allocation; free memory or use a "
                                     "smaller input")
{
    if (dynamic_cast<const std::bad_alloc*>(&e))
        return outOfMemory;
    if (const auto* f = dynamic_cast<const std::filesystem::filesystem_error*>(&e)) {
        // what() is "filesystem error: cannot rename: reason [path1] [path2]": keep its verb only.
        std::string what = f->what();
        const auto verb = what.find("cannot ");
        const auto colon = verb == std::string::npos ? std::string::npos : what.find(':', verb);
        const std::string doing = colon == std::string::npos ? "cannot use" : what.substr(verb, colon - verb);
        const std::string paths = f->path1().empty()
            ? std::string()
            : " " + f->path1().string() + (f->path2().empty() ? "" : " and " + f->path2().string());
        return doing + paths + ": " + f->code().message();
    }
    return jsonErrorDetail(e);
}

} // namespace loom
