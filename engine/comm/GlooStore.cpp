#include "engine/comm/GlooStore.h"

#include "engine/comm/CommError.h"

#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/hash_store.h>

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <cstring>
#include <filesystem>

namespace loom::comm {

namespace {

constexpr std::uint32_t kMaxField = 1u << 20;
using Clock = std::chrono::steady_clock;

// Reads or writes exactly `n` bytes before `deadline`; false on timeout, a closed peer or an error.
bool transfer(int fd, char* data, std::size_t n, bool write, Clock::time_point deadline)
{
    while (n > 0) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
        if (left <= 0)
            return false;
        pollfd p { fd, static_cast<short>(write ? POLLOUT : POLLIN), 0 };
        if (::poll(&p, 1, static_cast<int>(std::min<long long>(left, 1000))) <= 0)
            continue;
        const ssize_t got = write ? ::send(fd, data, n, MSG_NOSIGNAL) : ::recv(fd, data, n, 0);
        if (got <= 0)
            return false;
        data += got;
        n -= static_cast<std::size_t>(got);
    }
    return true;
}

bool sendField(int fd, const char* data, std::uint32_t n, Clock::time_point deadline)
{
    std::uint32_t wire = htonl(n);
    return transfer(fd, reinterpret_cast<char*>(&wire), 4, true, deadline)
        && transfer(fd, const_cast<char*>(data), n, true, deadline);
}

bool readField(int fd, std::vector<char>& out, Clock::time_point deadline)
{
    std::uint32_t wire = 0;
    if (!transfer(fd, reinterpret_cast<char*>(&wire), 4, false, deadline))
        return false;
    const std::uint32_t n = ntohl(wire);
    if (n > kMaxField)
        return false;
    out.resize(n);
    return transfer(fd, out.data(), n, false, deadline);
}

} // namespace

// The server: one thread accepts, one thread per connection answers its requests in order.
class TcpStore::Server {
public:
    explicit Server(int port)
    {
        m_listen = ::socket(AF_INET, SOCK_STREAM, 0);
        int one = 1;
        ::setsockopt(m_listen, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        sockaddr_in a {};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_ANY);
        a.sin_port = htons(static_cast<std::uint16_t>(port));
        if (m_listen < 0 || ::bind(m_listen, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0
            || ::listen(m_listen, 128) != 0) {
            const std::string why = std::strerror(errno);
            if (m_listen >= 0)
                ::close(m_listen);
            throw CommError("rank 0 cannot serve the rendezvous store on port " + std::to_string(port) + ": " + why
                + "; choose a free port in LOOM_RENDEZVOUS=host:port");
        }
        m_accept = std::thread([this] { acceptLoop(); });
    }
    ~Server()
    {
        {
            std::lock_guard lock(m_mutex);
            m_stop = true;
            for (int fd : m_connections)
                ::shutdown(fd, SHUT_RDWR);
        }
        m_cv.notify_all();
        ::shutdown(m_listen, SHUT_RDWR);
        m_accept.join();
        ::close(m_listen);
        for (auto& t : m_threads)
            t.join();
    }

private:
    void acceptLoop()
    {
        for (;;) {
            pollfd p { m_listen, POLLIN, 0 };
            if (::poll(&p, 1, 200) <= 0) {
                std::lock_guard lock(m_mutex);
                if (m_stop)
                    return;
                continue;
            }
            const int fd = ::accept(m_listen, nullptr, nullptr);
            std::lock_guard lock(m_mutex);
            if (m_stop) {
                if (fd >= 0)
                    ::close(fd);
                return;
            }
            if (fd < 0)
                continue;
            m_connections.push_back(fd);
            m_threads.emplace_back([this, fd] { serve(fd); });
        }
    }
    void serve(int fd)
    {
        const auto forever = Clock::now() + std::chrono::hours(24 * 365);
        for (;;) {
            char op = 0;
            std::vector<char> key, value;
            if (!transfer(fd, &op, 1, false, forever) || !readField(fd, key, forever) || !readField(fd, value, forever))
                break;
            const std::string k(key.begin(), key.end());
            std::vector<char> reply;
            {
                std::unique_lock lock(m_mutex);
                if (op == 'S') {
                    m_values[k] = std::move(value);
                    m_cv.notify_all();
                } else { // 'G' (get) and 'W' (wait): block until the key is set
                    m_cv.wait(lock, [&] { return m_stop || m_values.count(k); });
                    if (m_stop)
                        break;
                    if (op == 'G')
                        reply = m_values[k];
                }
            }
            if (!sendField(fd, reply.data(), static_cast<std::uint32_t>(reply.size()), forever))
                break;
        }
        ::close(fd);
    }

    int m_listen = -1;
    std::thread m_accept;
    std::mutex m_mutex;
    std::condition_variable m_cv;
    bool m_stop = false;
    std::map<std::string, std::vector<char>> m_values;
    std::vector<int> m_connections;
    std::vector<std::thread> m_threads;
};

TcpStore::TcpStore(const std::string& host, int port, bool serve, std::chrono::milliseconds timeout)
    : m_address(host + ":" + std::to_string(port))
    , m_timeout(timeout)
{
    if (serve)
        m_server = std::make_unique<Server>(port);
    addrinfo hints {};
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0 || !found)
        throw CommError("the rendezvous host \"" + host + "\" (LOOM_RENDEZVOUS) does not resolve to an IPv4 address");
    const auto deadline = Clock::now() + timeout;
    for (;;) { // rank 0 may not be serving yet: retry until the deadline
        m_socket = ::socket(AF_INET, SOCK_STREAM, 0);
        if (m_socket >= 0 && ::connect(m_socket, found->ai_addr, found->ai_addrlen) == 0)
            break;
        if (m_socket >= 0)
            ::close(m_socket);
        m_socket = -1;
        if (Clock::now() > deadline) {
            ::freeaddrinfo(found);
            throw CommError("cannot reach the rendezvous store at " + m_address + " within "
                + std::to_string(timeout.count() / 1000)
                + " s; check that rank 0 was started and that the port is reachable");
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ::freeaddrinfo(found);
    int one = 1;
    ::setsockopt(m_socket, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

TcpStore::~TcpStore()
{
    if (m_socket >= 0)
        ::close(m_socket);
}

std::vector<char> TcpStore::request(char op, const std::string& key, const std::vector<char>& value)
{
    if (key.size() > kMaxField || value.size() > kMaxField)
        throw CommError("rendezvous key \"" + key.substr(0, 64) + "\" or its value is over "
            + std::to_string(kMaxField >> 20) + " MiB");
    std::lock_guard lock(m_mutex);
    const auto deadline = Clock::now() + m_timeout;
    std::vector<char> reply;
    const bool ok = transfer(m_socket, &op, 1, true, deadline)
        && sendField(m_socket, key.data(), static_cast<std::uint32_t>(key.size()), deadline)
        && sendField(m_socket, value.data(), static_cast<std::uint32_t>(value.size()), deadline)
        && readField(m_socket, reply, deadline);
    if (!ok)
        throw CommError("rendezvous through " + m_address + ": key \"" + key + "\" did not arrive within "
            + std::to_string(m_timeout.count() / 1000)
            + " s; check that every rank started (LOOM_COMM_TIMEOUT_S sets the limit)");
    return reply;
}

void TcpStore::set(const std::string& key, const std::vector<char>& data)
{
    request('S', key, data);
}

std::vector<char> TcpStore::get(const std::string& key)
{
    return request('G', key, {});
}

void TcpStore::wait(const std::vector<std::string>& keys, const std::chrono::milliseconds&)
{
    for (const auto& k : keys)
        request('W', k, {});
}

KeyPrefixStore::KeyPrefixStore(
    std::string prefix, std::shared_ptr<gloo::rendezvous::Store> inner, std::chrono::milliseconds timeout)
    : m_prefix(std::move(prefix))
    , m_inner(std::move(inner))
    , m_timeout(timeout)
{
}

std::vector<std::string> KeyPrefixStore::join(const std::vector<std::string>& keys) const
{
    std::vector<std::string> out;
    for (const auto& k : keys)
        out.push_back(m_prefix + "." + k);
    return out;
}

void KeyPrefixStore::set(const std::string& key, const std::vector<char>& data)
{
    m_inner->set(m_prefix + "." + key, data);
}

std::vector<char> KeyPrefixStore::get(const std::string& key)
{
    m_inner->wait(join({ key }), m_timeout);
    return m_inner->get(m_prefix + "." + key);
}

void KeyPrefixStore::wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout)
{
    m_inner->wait(join(keys), timeout);
}

std::shared_ptr<gloo::rendezvous::Store> makeRendezvousStore(
    const ProcessStart& start, const std::string& defaultParent, std::chrono::milliseconds timeout, std::string* folder)
{
    if (start.rendezvous.kind == Rendezvous::Kind::Tcp)
        return std::make_shared<TcpStore>(start.rendezvous.host, start.rendezvous.port, start.rank == 0, timeout);
    std::string path = start.rendezvous.folder;
    if (path.empty() && start.size == 1)
        return std::make_shared<gloo::rendezvous::HashStore>(); // one process: nothing to meet
    if (path.empty()) {
        std::string job;
        for (char c : start.jobId)
            job += std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' ? c : '_';
        if (job.empty())
            throw CommError(
                "the Gloo backend needs a rendezvous: set LOOM_RENDEZVOUS to host:port (a TCP store that rank 0 "
                "serves) or to a folder every rank can read and write; started by "
                + start.source + ", there is no job id to name a default folder");
        path = (std::filesystem::path(defaultParent.empty() ? "." : defaultParent) / ".loom-rendezvous" / job).string();
    }
    std::error_code ec;
    std::filesystem::create_directories(path, ec);
    if (!std::filesystem::is_directory(path))
        throw CommError("cannot create the rendezvous folder " + path + (ec ? ": " + ec.message() : std::string()));
    if (folder)
        *folder = path;
    return std::make_shared<gloo::rendezvous::FileStore>(path);
}

} // namespace loom::comm
