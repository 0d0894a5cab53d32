#include "actors/weight_store.hpp"

#include <deque>
#include <vector>

#include "actors/guard.hpp"
#include "messages/weight_chunks.hpp"

namespace rlx {

struct WeightStoreState {
  WeightStoreOptions options;
  std::deque<std::pair<std::uint64_t, WireBuffer>> versions;  // oldest first
  std::vector<weights_listener> subscribers;
  std::uint32_t corrupted = 0;  // chunks damaged on purpose (tests)
  std::uint64_t cached_version = ~std::uint64_t{0};  // the version whose encoded chunks are kept
  std::vector<WireBuffer> cached;
  ErrorCounts errors;
};

namespace {

WeightsAvailableData available(const WeightStoreState& st, std::uint64_t version, const WireBuffer& buf) {
  return WeightsAvailableData{version, buf.size(), weight_chunk_count(buf.size(), st.options.chunk_bytes),
                              st.options.chunk_bytes};
}

}  // namespace

weight_store_actor::behavior_type weight_store_impl(weight_store_actor::stateful_pointer<WeightStoreState> self,
                                                    WeightStoreOptions options) {
  self->state.options = std::move(options);
  auto& st = self->state;
  self->set_down_handler([self](const caf::down_msg& dm) {
    auto& subs = self->state.subscribers;
    subs.erase(std::remove_if(subs.begin(), subs.end(), [&](const weights_listener& a) { return a.address() == dm.source; }),
               subs.end());
  });
  return {
      [self, &st](publish_atom, const WireMsg& msg) {
        // Shapes and the checksum are checked (in place) before anything is served.
        auto w = check_weight_set(msg.buf);
        if (!w) {
          st.errors.add(w.error().code);
          st.options.log->warn("refused a weight set from {}: {}", caf::to_string(self->current_sender()),
                               w.error().message);
          return;
        }
        if (!st.versions.empty() && w->version <= st.versions.back().first) {
          st.errors.add(Errc::invalid_field);
          st.options.log->warn("refused version {}: not newer than {}", w->version, st.versions.back().first);
          return;
        }
        st.versions.emplace_back(w->version, msg.buf);
        while (st.versions.size() > st.options.keep_versions) st.versions.pop_front();
        WireMsg note{encode(available(st, w->version, msg.buf), "weight_store")};
        for (auto& s : st.subscribers) self->send(s, weights_atom::value, note);
      },
      [self, &st](fetch_atom, const WireMsg& msg) -> caf::result<WireMsg> {
        auto req = decode_or_count<WeightRequestData>(self, msg, st.errors, st.options.log);
        if (!req) return caf::sec::invalid_argument;
        if (st.versions.empty()) return caf::make_error(caf::sec::runtime_error, "no version published yet");
        const std::pair<std::uint64_t, WireBuffer>* found = req->latest ? &st.versions.back() : nullptr;
        for (const auto& entry : st.versions)
          if (!found && entry.first == req->version) found = &entry;
        if (found && !req->chunked) return WireMsg{found->second};
        if (found) {
          if (st.corrupted < st.options.corrupt_chunks) {
            auto chunk = make_weight_chunk(found->second, found->first, req->chunk, st.options.chunk_bytes);
            if (!chunk) return caf::make_error(caf::sec::invalid_argument, chunk.error().message);
            ++st.corrupted;
            chunk->data[chunk->data.size() / 2] ^= 0x5a;  // after the checksum: the receiver must notice
            return WireMsg{encode(*chunk, "weight_store")};
          }
          // Chunks of the newest version are encoded once, whatever the number of nodes fetching them.
          if (st.cached_version != found->first) {
            st.cached_version = found->first;
            st.cached.assign(weight_chunk_count(found->second.size(), st.options.chunk_bytes), WireBuffer{});
          }
          if (req->chunk < st.cached.size() && !st.cached[req->chunk].empty()) return WireMsg{st.cached[req->chunk]};
          auto chunk = encode_weight_chunk(found->second, found->first, req->chunk, st.options.chunk_bytes, "weight_store");
          if (!chunk) return caf::make_error(caf::sec::invalid_argument, chunk.error().message);
          st.cached[req->chunk] = *chunk;
          return WireMsg{*chunk};
        }
        return caf::make_error(caf::sec::runtime_error, "version " + std::to_string(req->version) + " is not held");
      },
      [self, &st](subscribe_atom, weights_listener who) {
        self->monitor(who);
        st.subscribers.push_back(who);
        // A late subscriber learns the newest version at once.
        if (!st.versions.empty()) {
          const auto& [v, buf] = st.versions.back();
          self->send(who, weights_atom::value, WireMsg{encode(available(st, v, buf), "weight_store")});
        }
      },
      [&st](counts_atom) { return st.errors.total; },
  };
}

weight_store_actor spawn_weight_store(caf::actor_system& system, WeightStoreOptions options) {
  return system.spawn(weight_store_impl, std::move(options));
}

}  // namespace rlx
