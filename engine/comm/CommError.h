#pragma once

#include <stdexcept>
#include <string>

namespace loom::comm {

// A communication failure a user can act on: the message names the operation, the group, the ranks
// involved and, where known, what to do ("... timed out after 30 s waiting for rank 5; is it alive?").
class CommError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

} // namespace loom::comm
