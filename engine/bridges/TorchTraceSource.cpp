// The bytes of one trace file: gzip or plain alike through zlib, only from a regular file or standard input,
// with a limit on what is read after decompression.
#include "engine/bridges/TorchTraceDetail.h"
#include "engine/trace/BoundedRead.h"

#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <unistd.h>

namespace loom::trace::torch {

namespace {

[[noreturn]] void fail(const std::string& file, const std::string& field, const std::string& expected)
{
    throw TorchTraceError(file + ": " + field + ": " + expected);
}

// zlib's reader as a stream buffer: gzip-compressed or plain bytes alike, with a limit on what is read.
class GzBuffer : public std::streambuf {
public:
    GzBuffer(gzFile gz, std::string file, std::uint64_t limit)
        : m_gz(gz)
        , m_file(std::move(file))
        , m_limit(limit)
    {
        gzbuffer(m_gz, 1 << 18);
    }
    ~GzBuffer() override { gzclose(m_gz); }
    GzBuffer(const GzBuffer&) = delete;
    GzBuffer& operator=(const GzBuffer&) = delete;

protected:
    int_type underflow() override
    {
        const int n = gzread(m_gz, m_buf, sizeof m_buf);
        if (n < 0) {
            int code = 0;
            const char* why = gzerror(m_gz, &code);
            fail(m_file, "the data", std::string("not readable (") + (why ? why : "read error") + ")");
        }
        if (n == 0)
            return traits_type::eof();
        m_total += static_cast<std::uint64_t>(n);
        if (m_total > m_limit)
            fail(m_file, "more than " + std::to_string(m_limit >> 20) + " MiB",
                "larger than Loom reads of one trace (after decompression)");
        setg(m_buf, m_buf, m_buf + n);
        return traits_type::to_int_type(*gptr());
    }

private:
    gzFile m_gz;
    std::string m_file;
    std::uint64_t m_limit, m_total = 0;
    char m_buf[1 << 18];
};

// Opens `path` for reading without blocking on a FIFO, and only when it is a regular file; "-" is standard
// input (a pipe is fine there, as the user asked for it by name).
gzFile openTrace(const std::string& path)
{
    const OpenedInput in = openInput(path, path == "-");
    if (in.problem == OpenedInput::Problem::CannotOpen)
        fail(path, "the file",
            std::string(in.error == ENOENT ? "does not exist" : std::strerror(in.error)) + "; check the path");
    if (in.problem != OpenedInput::Problem::None)
        fail(path, "the file",
            "not a regular file (a device, FIFO or folder); expected a trace file, or \"-\" for standard input");
    const int fd = in.fd;
    gzFile gz = fd >= 0 ? gzdopen(fd, "rb") : nullptr;
    if (!gz) {
        if (fd >= 0)
            close(fd);
        fail(path, "the file", "cannot be opened");
    }
    return gz;
}

} // namespace

std::unique_ptr<std::streambuf> openTraceStream(const std::string& path, const std::string& name, std::uint64_t limit)
{
    return std::make_unique<GzBuffer>(openTrace(path), name, limit);
}

} // namespace loom::trace::torch
