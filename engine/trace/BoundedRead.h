#pragma once

// Reading a whole input file with a bound, for every reader of small documents (layouts, profiles,
// checkpoint metadata). Only a regular file, or standard input named "-" or "/dev/stdin", is read: a FIFO
// would block in open() for ever and /dev/zero never ends, so anything else is refused before a byte is
// read. At most `maxBytes` are read from any source, so a pipe cannot make Loom allocate without bound.

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace loom {

// True with the file's bytes in *text; false with one sentence in *why naming the file and what was wrong.
inline bool readBoundedFile(const std::string& path, std::size_t maxBytes, std::string* text, std::string* why)
{
    const bool standardInput = path == "-" || path == "/dev/stdin";
    const std::string shown = standardInput ? std::string("standard input") : "\"" + path + "\"";
    const int fd = standardInput ? 0 : ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        *why = "cannot open " + shown + ": " + std::strerror(errno) + (errno == ENOENT ? "; check the path" : "");
        return false;
    }
    struct stat st { };
    if (::fstat(fd, &st) != 0 || (!standardInput && !S_ISREG(st.st_mode))) {
        *why = shown
            + (S_ISDIR(st.st_mode) ? " is a folder, not a file; name a file in it"
                                   : " is not a regular file (a FIFO, device or socket); name a file, or - for "
                                     "standard input");
        if (!standardInput)
            ::close(fd);
        return false;
    }
    if (!standardInput)
        ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    text->clear();
    char buffer[65536];
    for (;;) {
        const ssize_t n = ::read(fd, buffer, sizeof buffer);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            *why = "cannot read " + shown + ": " + std::strerror(errno);
            break;
        }
        if (n == 0)
            break;
        if (text->size() + static_cast<std::size_t>(n) > maxBytes) {
            *why = shown + " is larger than "
                + (maxBytes >= (1u << 20) ? std::to_string(maxBytes >> 20) + " MiB"
                                          : std::to_string(maxBytes) + " bytes")
                + ", more than this file can be";
            break;
        }
        text->append(buffer, static_cast<std::size_t>(n));
    }
    if (!standardInput)
        ::close(fd);
    return why->empty();
}

} // namespace loom
