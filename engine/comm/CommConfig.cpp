#include "engine/comm/CommConfig.h"

#include <cstdlib>
#include <string>

namespace loom::comm {

CommConfig CommConfig::fromEnvironment()
{
    CommConfig c;
    if (const char* t = std::getenv("LOOM_COMM_TIMEOUT_S")) {
        char* end = nullptr;
        const double v = std::strtod(t, &end);
        if (end != t && v > 0)
            c.timeoutSeconds = v;
    }
    if (const char* check = std::getenv("LOOM_COMM_CHECK"))
        c.checkAgreement = std::string(check) != "0";
    return c;
}

} // namespace loom::comm
