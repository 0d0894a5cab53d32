#include "actors/weight_relay.hpp"

#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>

#include "actors/guard.hpp"
#include "explorers/weight_follower.hpp"
#include "messages/weight_chunks.hpp"

namespace rlx {

// Runs bulk fetches on a thread of its own (they block on a socket) and
// tells the relay, by message, when one ended.
class BulkWorker {
 public:
  struct Outcome {
    ChunkAssembler set;
    Result<std::uint32_t> result;  // chunks fetched again, or why it stopped
  };

  BulkWorker(BulkClientOptions options, caf::actor_addr relay)
      : client_(std::move(options)), relay_(std::move(relay)), thread_([this] { run(); }) {}
  ~BulkWorker() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    client_.cancel();
    cv_.notify_all();
    thread_.join();
  }

  void begin(ChunkAssembler set) {
    std::lock_guard<std::mutex> lock(mu_);
    job_.emplace(std::move(set));
    cv_.notify_all();
  }
  std::optional<Outcome> take() {
    std::lock_guard<std::mutex> lock(mu_);
    return std::exchange(outcome_, std::nullopt);
  }

 private:
  void run() {
    for (;;) {
      std::optional<ChunkAssembler> job;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stop_ || job_; });
        if (stop_) return;
        job = std::exchange(job_, std::nullopt);
      }
      auto result = client_.fetch(*job);
      const std::uint64_t version = job->version();
      {
        std::lock_guard<std::mutex> lock(mu_);
        outcome_.emplace(Outcome{std::move(*job), std::move(result)});
      }
      if (auto relay = caf::actor_cast<weight_relay_actor>(relay_))  // gone: nobody to tell
        caf::anon_send(relay, bulk_atom::value, version);
    }
  }

  BulkClient client_;
  caf::actor_addr relay_;  // weak: the relay owns this worker
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::optional<ChunkAssembler> job_;
  std::optional<Outcome> outcome_;
  std::thread thread_;  // last: starts once the rest is built
};

struct WeightRelayState {
  WeightRelayOptions options;
  WeightsAvailableData newest;              // newest version announced upstream (its sizes)
  WeightFollower follower;                  // held: the newest version passed to the local store
  std::optional<ChunkAssembler> current;    // the version being fetched
  std::deque<std::uint32_t> queue;          // its chunks still to request
  std::vector<std::uint32_t> tries;         // failed attempts per chunk
  std::uint32_t in_flight = 0;              // requests outstanding (of any version)
  std::optional<std::uint64_t> failed;      // a version given up: not tried again
  std::uint64_t refetched = 0;              // chunks fetched again (bad or missing)
  ErrorCounts errors;
  std::unique_ptr<BulkWorker> bulk;         // null: middleman only
  bool bulk_busy = false;                   // a version is being fetched over the bulk channel
  std::uint32_t bulk_failures = 0;          // consecutive failed connections
  std::optional<DeltaBase> base;            // the last version relayed: chunks may come as deltas against it
};

namespace {

using Self = weight_relay_actor::stateful_pointer<WeightRelayState>;

void pump(Self self);

void start(Self self, const WeightsAvailableData& note) {
  auto& st = self->state;
  ChunkAssembler set(note.version, note.total_bytes, note.chunk_bytes);
  if (st.base && st.base->version < note.version) set.set_base(*st.base);
  if (st.bulk) {
    st.bulk_busy = true;
    st.bulk->begin(std::move(set));
    return;
  }
  st.current.emplace(std::move(set));
  for (std::uint32_t i = 0; i < st.current->count(); ++i) st.queue.push_back(i);
  st.tries.assign(st.current->count(), 0);
  pump(self);
}

void finish(Self self);

// A bulk fetch ended: done, or the middleman fetches what it missed.
void bulk_ended(Self self, std::uint64_t version) {
  auto& st = self->state;
  auto outcome = st.bulk ? st.bulk->take() : std::nullopt;
  if (!outcome || outcome->set.version() != version) return;
  st.bulk_busy = false;
  st.current.emplace(std::move(outcome->set));
  if (outcome->result) {
    st.bulk_failures = 0;
    st.refetched += *outcome->result;
    if (st.current->complete()) return finish(self);
  }
  const Error& e = outcome->result ? Error{Errc::io, "incomplete"} : outcome->result.error();
  const bool connected = st.current->missing().size() < st.current->count() || e.code == Errc::not_found;
  st.bulk_failures = connected ? 0 : st.bulk_failures + 1;
  st.options.log->warn("{}: bulk channel: {}; fetching the {} chunks left of version {} through the middleman",
                       st.options.name, e.message, st.current->missing().size(), version);
  if (st.bulk_failures >= st.options.bulk_max_failures) {
    st.options.log->warn("{}: bulk channel failed {} times in a row; using the middleman only", st.options.name,
                         st.bulk_failures);
    st.bulk.reset();
  }
  st.queue.clear();
  for (auto i : st.current->missing()) st.queue.push_back(i);
  st.tries.assign(st.current->count(), 0);
  pump(self);
}

// Moves on to the newest announced version, if it is newer than what we hold.
void next(Self self) {
  auto& st = self->state;
  if (st.bulk_busy) return;  // bulk_ended comes back here
  st.current.reset();
  st.queue.clear();
  const bool newer = st.follower.behind() && st.newest.total_bytes > 0;
  if (newer && st.failed != st.newest.version) start(self, st.newest);
}

void give_up(Self self, const std::string& why) {
  auto& st = self->state;
  st.options.log->error("{}: giving up version {}: {}", st.options.name, st.current->version(), why);
  st.failed = st.current->version();
  next(self);  // replies still in flight for it are ignored
}

void retry(Self self, std::uint32_t index, const std::string& why) {
  auto& st = self->state;
  ++st.refetched;
  st.options.log->warn("{}: chunk {} of version {} fetched again: {}", st.options.name, index, st.current->version(),
                       why);
  if (++st.tries[index] >= st.options.max_tries)
    return give_up(self, "chunk " + std::to_string(index) + " failed " + std::to_string(st.tries[index]) + " times");
  st.queue.push_front(index);
  pump(self);
}

void finish(Self self) {
  auto& st = self->state;
  const auto v = st.current->version();
  // The local store checks the set's structure before any explorer can
  // fetch it; its bytes were checked chunk by chunk as they came.
  const std::uint64_t wire_bytes = st.current->wire_bytes();
  const std::uint32_t deltas = st.current->delta_chunks(), count = st.current->count();
  WireBuffer set = st.current->take();
  st.base = DeltaBase{v, set};
  self->send(st.options.local, publish_atom::value, WireMsg{std::move(set)});
  st.follower.hold(v);
  st.options.log->debug("{}: version {} relayed: {} bytes of chunk data on the wire, {} of {} chunks as deltas",
                        st.options.name, v, wire_bytes, deltas, count);
  next(self);
}

void pump(Self self) {
  auto& st = self->state;
  while (st.current && st.in_flight < st.options.window && !st.queue.empty()) {
    const std::uint32_t index = st.queue.front();
    st.queue.pop_front();
    const std::uint64_t version = st.current->version();
    ++st.in_flight;
    WireMsg req{encode(WeightRequestData{version, false, true, index, st.current->base_for(index)}, st.options.name)};
    self->request(st.options.upstream, st.options.request_timeout, fetch_atom::value, req)
        .then(
            [self, version, index, epoch = st.follower.epoch()](const WireMsg& msg) {
              auto& st = self->state;
              --st.in_flight;
              if (!st.current || st.current->version() != version || st.follower.epoch() != epoch) return;  // given up meanwhile
              std::uint32_t got = index;
              auto added = st.current->add_encoded(msg.buf, &got);  // checked and placed, no copy between
              if (added && got != index) return retry(self, index, "the store answered with another chunk");
              if (!added) {
                st.errors.add(added.error().code);
                return retry(self, index, added.error().message);
              }
              if (st.current->complete()) return finish(self);
              pump(self);
            },
            [self, version, index, epoch = st.follower.epoch()](const caf::error& err) {
              auto& st = self->state;
              --st.in_flight;
              if (!st.current || st.current->version() != version || st.follower.epoch() != epoch) return;
              // A newer version makes this one moot (the store may have evicted it).
              if (st.newest.version > version) return give_up(self, "newer version " + std::to_string(st.newest.version));
              retry(self, index, self->system().render(err));
            });
  }
}

}  // namespace

weight_relay_actor::behavior_type weight_relay_impl(Self self, WeightRelayOptions options) {
  auto& st = self->state;
  st.options = std::move(options);
  if (st.options.bulk && st.options.bulk->port != 0)
    st.bulk = std::make_unique<BulkWorker>(*st.options.bulk, self->address());
  self->send(st.options.upstream, subscribe_atom::value, caf::actor_cast<weights_listener>(self));
  return {
      [self](weights_atom, const WireMsg& msg) {
        auto& st = self->state;
        auto note = decode_or_count<WeightsAvailableData>(self, msg, st.errors, st.options.log);
        if (!note || note->version < st.newest.version) return;
        st.newest = *note;
        st.follower.announced(note->version);
        if (!st.current) next(self);
      },
      [self](bulk_atom, std::uint64_t version) { bulk_ended(self, version); },
      [self](rebind_atom, weight_store_actor upstream, std::uint16_t bulk_port) {
        // A restarted head: its versions are not the dead one's (a resumed
        // learner goes on from its last logged version), so everything held
        // or half-fetched is forgotten and its newest set fetched afresh.
        auto& st = self->state;
        st.follower.restart_all();  // replies from the old upstream are ignored
        st.bulk.reset();  // stops the old channel's thread (a fetch in progress is cancelled)
        st.bulk_busy = false;
        st.bulk_failures = 0;
        st.current.reset();
        st.queue.clear();
        st.failed.reset();
        st.base.reset();
        st.newest = WeightsAvailableData{};
        st.options.upstream = upstream;
        if (st.options.bulk && bulk_port != 0) {
          st.options.bulk->port = bulk_port;
          st.bulk = std::make_unique<BulkWorker>(*st.options.bulk, self->address());
        }
        self->send(st.options.upstream, subscribe_atom::value, caf::actor_cast<weights_listener>(self));
        st.options.log->info("{}: following the restarted head's store", st.options.name);
      },
      [self](counts_atom) { return self->state.refetched; },
  };
}

weight_relay_actor spawn_weight_relay(caf::actor_system& system, WeightRelayOptions options) {
  return system.spawn(weight_relay_impl, std::move(options));
}

}  // namespace rlx
