#pragma once

#include "engine/comm/ProcessStart.h"

#include <gloo/rendezvous/store.h>

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace loom::comm {

// A key-value store over TCP for Gloo's rendezvous (this Gloo has none): rank 0 serves it, every rank
// (rank 0 too) is a client. get() and wait() block until the key is set or the timeout passes, then throw
// CommError naming the key and the address. Keys and values are at most 1 MiB.
class TcpStore final : public gloo::rendezvous::Store {
public:
    // `serve`: this process runs the server on `port` (all interfaces) before connecting.
    TcpStore(const std::string& host, int port, bool serve, std::chrono::milliseconds timeout);
    ~TcpStore() override;

    void set(const std::string& key, const std::vector<char>& data) override;
    std::vector<char> get(const std::string& key) override;
    void wait(const std::vector<std::string>& keys) override { wait(keys, m_timeout); }
    void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override;

private:
    class Server;
    std::vector<char> request(char op, const std::string& key, const std::vector<char>& value);

    std::string m_address;
    std::chrono::milliseconds m_timeout;
    std::unique_ptr<Server> m_server;
    std::mutex m_mutex; // one request at a time on the connection
    int m_socket = -1;
};

// Keys of `inner` under "<prefix>.": one store serves every group's rendezvous. (Gloo's PrefixStore joins
// with '/', which its FileStore would take for a subfolder.) get() and wait() use `timeout`.
class KeyPrefixStore final : public gloo::rendezvous::Store {
public:
    KeyPrefixStore(
        std::string prefix, std::shared_ptr<gloo::rendezvous::Store> inner, std::chrono::milliseconds timeout);
    void set(const std::string& key, const std::vector<char>& data) override;
    std::vector<char> get(const std::string& key) override;
    void wait(const std::vector<std::string>& keys) override { wait(keys, m_timeout); }
    void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override;

private:
    std::vector<std::string> join(const std::vector<std::string>& keys) const;
    std::string m_prefix;
    std::shared_ptr<gloo::rendezvous::Store> m_inner;
    std::chrono::milliseconds m_timeout;
};

// The rendezvous store for `start`: a TcpStore for "host:port", Gloo's FileStore for a folder (created if
// missing). Without LOOM_RENDEZVOUS, a folder named after the starter's job id under `defaultParent`
// (e.g. beside the layout file); with neither, CommError says what to set.
std::shared_ptr<gloo::rendezvous::Store> makeRendezvousStore(const ProcessStart& start,
    const std::string& defaultParent, std::chrono::milliseconds timeout, std::string* folder);

} // namespace loom::comm
