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

// A file opened for reading by openInput: its descriptor (the caller closes it), or why there is none.
struct OpenedInput {
    enum class Problem { None, CannotOpen, Folder, NotRegular };
    int fd = -1;
    Problem problem = Problem::None;
    int error = 0; // errno of a failed open
};

// Opens `path` for reading, or a duplicate of standard input when `standardInput`. Anything but a regular file
// is refused without blocking: the file is opened non-blocking (so a FIFO with no writer does not hang in
// open()), checked, then set back to blocking reads.
inline OpenedInput openInput(const std::string& path, bool standardInput)
{
    OpenedInput in;
    in.fd = standardInput ? ::dup(STDIN_FILENO) : ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (in.fd < 0) {
        in.error = errno;
        in.problem = OpenedInput::Problem::CannotOpen;
        return in;
    }
    if (standardInput)
        return in;
    struct stat st { };
    if (::fstat(in.fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        in.problem = S_ISDIR(st.st_mode) ? OpenedInput::Problem::Folder : OpenedInput::Problem::NotRegular;
        ::close(in.fd);
        in.fd = -1;
        return in;
    }
    ::fcntl(in.fd, F_SETFL, ::fcntl(in.fd, F_GETFL) & ~O_NONBLOCK);
    return in;
}

// True with the file's bytes in *text; false with one sentence in *why naming the file and what was wrong.
inline bool readBoundedFile(const std::string& path, std::size_t maxBytes, std::string* text, std::string* why)
{
    const bool standardInput = path == "-" || path == "/dev/stdin";
    const std::string shown = standardInput ? std::string("standard input") : "\"" + path + "\"";
    const OpenedInput in = openInput(path, standardInput);
    using Problem = OpenedInput::Problem;
    if (in.problem == Problem::CannotOpen) {
        *why = "cannot open " + shown + ": " + std::strerror(in.error) + (in.error == ENOENT ? "; check the path" : "");
        return false;
    }
    if (in.problem != Problem::None) {
        *why = shown
            + (in.problem == Problem::Folder ? " is a folder, not a file; name a file in it"
                                             : " is not a regular file (a FIFO, device or socket); name a file, or - "
                                               "for standard input");
        return false;
    }
    const int fd = in.fd;
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
    ::close(fd);
    return why->empty();
}

} // namespace loom
