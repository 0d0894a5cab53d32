#include "transport/weight_bulk.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <deque>
#include <list>
#include <mutex>
#include <thread>

#include "core/auth.hpp"
#include "messages/codec.hpp"
#include "transport/sockets.hpp"

namespace rlx {
namespace {

constexpr std::size_t kControlFrameBytes = 4096;  // handshakes and requests
constexpr std::size_t kFrameOverhead = 4096;      // a chunk's envelope around its data

Error sys_error(const std::string& what) { return socket_error(what); }

Result<void> write_all(int fd, const void* data, std::size_t n) {
  const auto* p = static_cast<const char*>(data);
  while (n > 0) {
    const auto w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return make_error(Errc::timeout, "send timed out");
    if (w <= 0) return sys_error("send");
    p += w;
    n -= static_cast<std::size_t>(w);
  }
  return {};
}

Result<void> send_frame(int fd, const WireBuffer& frame) {
  return write_all(fd, frame.bytes().data(), frame.size());
}

// A chunk's head and its bytes where they lie in the set, in one writev.
Result<void> send_frame(int fd, const ChunkFrame& frame) {
  iovec parts[2] = {{const_cast<std::byte*>(frame.head.bytes().data()), frame.head.size()},
                    {const_cast<std::byte*>(frame.data.data()), frame.data.size()}};
  msghdr msg{};
  msg.msg_iov = parts;
  msg.msg_iovlen = frame.data.empty() ? 1 : 2;
  std::size_t left = frame.size();
  while (left > 0) {
    const auto w = ::sendmsg(fd, &msg, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return make_error(Errc::timeout, "send timed out");
    if (w <= 0) return sys_error("sendmsg");
    left -= static_cast<std::size_t>(w);
    for (auto done = static_cast<std::size_t>(w); done > 0;) {  // skip what was written
      const std::size_t step = std::min(done, msg.msg_iov->iov_len);
      msg.msg_iov->iov_base = static_cast<char*>(msg.msg_iov->iov_base) + step;
      msg.msg_iov->iov_len -= step;
      done -= step;
      if (msg.msg_iov->iov_len == 0 && msg.msg_iovlen > 1) {
        ++msg.msg_iov;
        --msg.msg_iovlen;
      }
    }
  }
  return {};
}

Result<void> read_all(int fd, void* data, std::size_t n) {
  auto* p = static_cast<char*>(data);
  while (n > 0) {
    const auto r = ::recv(fd, p, n, MSG_WAITALL);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return make_error(Errc::timeout, "no data in time");
    if (r < 0) return sys_error("recv");
    if (r == 0) return make_error(Errc::io, "the peer closed the connection");
    p += r;
    n -= static_cast<std::size_t>(r);
  }
  return {};
}

Result<WireBuffer> read_frame(int fd, std::size_t max_bytes, kj::Array<capnp::word>* reuse = nullptr) {
  return read_stream_frame([fd](void* into, std::size_t n) { return read_all(fd, into, n); }, max_bytes, reuse);
}

WireBuffer leave(const std::string& reason, const std::string& sender) {
  return encode(LeaveData{Role::weight_store, 0, reason, 0}, sender);
}

}  // namespace

// ---- server ----

struct BulkServer::Impl {
  BulkServerOptions options;
  std::shared_ptr<WeightShelf> shelf;
  int listener = -1;
  int wake = -1;  // eventfd: the accept loop stops when it is written
  std::uint16_t port = 0;
  std::thread acceptor;
  mutable std::mutex mu;
  struct Conn {
    int fd;
    std::thread thread;
    bool done = false;
  };
  std::list<Conn> conns;
  bool stopping = false;
  Counts counts;
  std::mutex pace_mu;
  std::chrono::steady_clock::time_point pace_free{};  // when the paced link is free again

  // With max_bytes_per_s, waits for this frame's turn on the shared link.
  void pace(std::size_t bytes) {
    if (options.max_bytes_per_s <= 0) return;
    std::chrono::steady_clock::time_point sent;  // when the frame would be through the link
    {
      std::lock_guard<std::mutex> lock(pace_mu);
      sent = std::max(pace_free, std::chrono::steady_clock::now()) +
             std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                 std::chrono::duration<double>(static_cast<double>(bytes) / options.max_bytes_per_s));
      pace_free = sent;
    }
    std::this_thread::sleep_until(sent);
  }

  void add(std::uint64_t Counts::*field, std::uint64_t n = 1) {
    std::lock_guard<std::mutex> lock(mu);
    counts.*field += n;
  }

  // A connection that did not log in: counted, reported to the watch (or
  // logged), told why, closed by the caller.
  void refuse(int fd, const std::string& peer, Stranger kind, const std::string& why, const std::string& node = "") {
    add(&Counts::refused);
    const std::string detail = node.empty() ? why : "node '" + node + "': " + why;
    if (options.watch)
      options.watch->saw("bulk", kind, peer, detail);
    else
      options.log->warn("bulk channel: refused {}: {} ({})", peer, detail, stranger_name(kind));
    (void)send_frame(fd, leave("refused: " + why, options.name));
  }

  // Handshake, then chunks until the peer closes, errs or goes idle.
  void serve(int fd, const std::string& peer) {
    set_io_timeout(fd, options.handshake_timeout);
    const std::string nonce = random_nonce();
    if (!send_frame(fd, encode(JoinData{Role::weight_store, options.name, 0, nonce}, options.name))) return;
    // What the client sends first says what it is: nothing, garbage, half a login.
    std::uint8_t first = 0;
    const auto peeked = ::recv(fd, &first, 1, MSG_PEEK);
    if (peeked <= 0)
      return refuse(fd, peer, Stranger::silent, peeked == 0 ? "closed without a byte" : "nothing sent in time");
    auto frame = read_frame(fd, kControlFrameBytes);
    if (!frame) {
      const bool cut = frame.error().code == Errc::timeout || frame.error().code == Errc::io;
      return refuse(fd, peer, cut ? Stranger::half_open : Stranger::garbage, frame.error().message);
    }
    auto join = decode<JoinData>(*frame);
    if (!join) return refuse(fd, peer, Stranger::garbage, "not a login: " + join.error().message);
    if (!proofs_equal(join->auth_token, secret_proof(options.secret, nonce, join->node)))
      return refuse(fd, peer, Stranger::unproven, "wrong proof of the cluster secret", join->node);
    add(&Counts::admitted);
    options.log->info("bulk channel: node '{}' connected from {}", join->node, peer);
    if (!send_frame(fd, encode(JoinData{Role::weight_store, options.name, 0, ""}, options.name))) return;
    set_io_timeout(fd, options.idle_timeout);
    for (;;) {
      auto req_frame = read_frame(fd, kControlFrameBytes);
      if (!req_frame) {
        if (req_frame.error().code == Errc::timeout)
          options.log->info("bulk channel: closing idle connection of '{}'", join->node);
        else if (req_frame.error().code != Errc::io)
          options.log->warn("bulk channel: bad frame from '{}': {}", join->node, req_frame.error().message);
        return;
      }
      auto req = decode<WeightRequestData>(*req_frame);
      if (!req || !req->chunked) {
        options.log->warn("bulk channel: bad request from '{}': {}", join->node,
                          req ? "only chunks are served here" : req.error().message);
        (void)send_frame(fd, leave(req ? "only chunks are served here" : "malformed request", options.name));
        return;
      }
      auto chunk = shelf->chunk_frame(req->version, req->chunk, req->base);
      if (!chunk) {
        if (!send_frame(fd, leave(chunk.error().message, options.name))) return;
        continue;
      }
      {
        // Counted before it is sent: once the client holds every chunk, the counts say so.
        std::lock_guard<std::mutex> lock(mu);
        ++counts.chunks;
        counts.bytes += chunk->size();
      }
      pace(chunk->size());
      if (!send_frame(fd, *chunk)) return;
    }
  }

  void reap_done() {  // with mu held
    for (auto it = conns.begin(); it != conns.end();) {
      if (!it->done) {
        ++it;
        continue;
      }
      it->thread.join();
      it = conns.erase(it);
    }
  }

  void accept_loop() {
    for (;;) {
      pollfd fds[2] = {{listener, POLLIN, 0}, {wake, POLLIN, 0}};
      if (::poll(fds, 2, -1) < 0) {
        if (errno == EINTR) continue;
        options.log->error("bulk channel: poll failed: {}", std::strerror(errno));
        return;
      }
      if (fds[1].revents) return;
      sockaddr_storage addr{};
      socklen_t len = sizeof addr;
      const int fd = ::accept4(listener, reinterpret_cast<sockaddr*>(&addr), &len, SOCK_CLOEXEC);
      if (fd < 0) continue;
      tune_connection(fd);
      const std::string peer = peer_name(addr);
      std::lock_guard<std::mutex> lock(mu);
      reap_done();
      if (stopping || conns.size() >= options.max_connections) {
        ++counts.refused;
        const std::string why = std::to_string(conns.size()) + " connections open";
        if (options.watch)
          options.watch->saw("bulk", Stranger::over_limit, peer, why);
        else
          options.log->warn("bulk channel: refused a connection from {}: {}", peer, why);
        ::close(fd);
        continue;
      }
      auto& conn = conns.emplace_back(Conn{fd, std::thread{}, false});
      conn.thread = std::thread([this, &conn, fd, peer] {
        serve(fd, peer);
        std::lock_guard<std::mutex> l(mu);
        ::close(fd);
        conn.fd = -1;
        conn.done = true;
      });
    }
  }
};

BulkServer::BulkServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Result<std::unique_ptr<BulkServer>> BulkServer::start(BulkServerOptions options, std::shared_ptr<WeightShelf> shelf) {
  auto impl = std::make_unique<Impl>();
  impl->options = std::move(options);
  impl->shelf = std::move(shelf);
  if (!impl->options.log) impl->options.log = null_logger();
  auto l = listen_tcp(impl->options.host, impl->options.port, "bulk channel");
  if (!l) return l.error();
  impl->listener = l->fd;
  impl->port = l->port;
  impl->wake = ::eventfd(0, EFD_CLOEXEC);
  if (impl->wake < 0) {
    ::close(impl->listener);
    return sys_error("bulk channel: eventfd");
  }
  Impl* raw = impl.get();
  impl->acceptor = std::thread([raw] { raw->accept_loop(); });
  return std::unique_ptr<BulkServer>(new BulkServer(std::move(impl)));
}

BulkServer::~BulkServer() {
  const std::uint64_t one = 1;
  [[maybe_unused]] auto w = ::write(impl_->wake, &one, sizeof one);
  impl_->acceptor.join();
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->stopping = true;
    for (auto& c : impl_->conns)
      if (c.fd >= 0) ::shutdown(c.fd, SHUT_RDWR);  // blocked reads and writes return
  }
  for (auto& c : impl_->conns) c.thread.join();
  ::close(impl_->listener);
  ::close(impl_->wake);
}

std::uint16_t BulkServer::port() const { return impl_->port; }

BulkServer::Counts BulkServer::counts() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->counts;
}

// ---- client ----

BulkClient::BulkClient(BulkClientOptions options) : options_(std::move(options)) {}

BulkClient::~BulkClient() { disconnect(); }

void BulkClient::cancel() {
  cancelled_ = true;
  const int fd = fd_.load();
  if (fd >= 0) ::shutdown(fd, SHUT_RDWR);
}

void BulkClient::disconnect() {
  const int fd = fd_.exchange(-1);
  if (fd >= 0) ::close(fd);
}

Result<void> BulkClient::connect_and_login() {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const std::string where = options_.host + ":" + std::to_string(options_.port);
  if (const int rc = ::getaddrinfo(options_.host.c_str(), std::to_string(options_.port).c_str(), &hints, &found); rc != 0)
    return make_error(Errc::io, "cannot resolve " + options_.host + ": " + ::gai_strerror(rc));
  int fd = -1;
  std::string last = "no address";
  for (addrinfo* a = found; a && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    set_io_timeout(fd, options_.timeout);  // SO_SNDTIMEO bounds connect() too
    if (::connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
      last = std::strerror(errno);
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(found);
  if (fd < 0) return make_error(Errc::io, "cannot connect to " + where + ": " + last);
  tune_connection(fd);
  fd_ = fd;
  if (cancelled_) return make_error(Errc::io, "cancelled");
  auto challenge = read_frame(fd, kControlFrameBytes);
  if (!challenge) return challenge.error();
  auto nonce = decode<JoinData>(*challenge);
  if (!nonce) return make_error(nonce.error().code, "no challenge from " + where + ": " + nonce.error().message);
  const std::string proof = secret_proof(options_.secret, nonce->auth_token, options_.node);
  if (auto s = send_frame(fd, encode(JoinData{Role::weight_store, options_.node, 0, proof}, options_.node)); !s)
    return s.error();
  auto answer = read_frame(fd, kControlFrameBytes);
  if (!answer) return answer.error();
  if (auto refused = decode<LeaveData>(*answer)) return make_error(Errc::io, where + " " + refused->reason);
  if (auto welcome = decode<JoinData>(*answer); !welcome) return welcome.error();
  return {};
}

Result<std::uint32_t> BulkClient::fetch(ChunkAssembler& into) {
  if (cancelled_) return make_error(Errc::io, "cancelled");
  auto fail = [this](Error e) -> Result<std::uint32_t> {
    disconnect();
    return e;
  };
  if (fd_ < 0)
    if (auto c = connect_and_login(); !c) return fail(c.error());
  const int fd = fd_;
  const std::size_t max_frame = into.chunk_bytes() + kFrameOverhead;
  std::deque<std::uint32_t> queue;
  for (auto i : into.missing()) queue.push_back(i);
  std::deque<std::uint32_t> asked;
  std::vector<std::uint32_t> tries(into.count(), 0);
  std::uint32_t refetched = 0;
  while (!queue.empty() || !asked.empty()) {
    while (asked.size() < options_.window && !queue.empty()) {
      const std::uint32_t index = queue.front();
      queue.pop_front();
      const WeightRequestData req{into.version(), false, true, index, into.base_for(index)};
      if (auto s = send_frame(fd, encode(req, options_.node)); !s)
        return fail(s.error());
      asked.push_back(index);
    }
    // Replies come in the order asked: a raw chunk's data segment is read
    // straight into its place in the set; the rest of a frame (or a whole
    // delta, refusal or misfit) into one buffer kept across chunks.
    const std::uint32_t index = asked.front();
    asked.pop_front();
    std::byte* placed = nullptr;
    auto frame = read_stream_frame([fd](void* p, std::size_t n) { return read_all(fd, p, n); }, max_frame, &rx_,
                                   [&](std::uint32_t segments, std::uint64_t bytes) {
                                     return segments == 2 ? into.place(index, bytes) : nullptr;
                                   },
                                   &placed);
    if (!frame) return fail(frame.error());
    std::uint32_t got = index;
    auto added = placed ? into.add_placed(*frame, index, &got) : into.add_encoded(*frame, &got);
    if (added && got == index) continue;
    if (!added)
      if (auto gone = decode<LeaveData>(*frame))
        return fail(make_error(Errc::not_found, "version " + std::to_string(into.version()) + ": " + gone->reason));
    ++refetched;
    if (++tries[index] >= options_.max_tries)
      return fail(make_error(added ? Errc::invalid_field : added.error().code,
                             "chunk " + std::to_string(index) + " failed " + std::to_string(tries[index]) + " times" +
                                 (added ? "" : ": " + added.error().message)));
    queue.push_back(index);
  }
  return refetched;
}

}  // namespace rlx
