#include "actors/weight_store.hpp"

#include <vector>

#include "actors/guard.hpp"
#include "messages/weight_chunks.hpp"

namespace rlx {

struct WeightStoreState {
  WeightStoreOptions options;
  std::shared_ptr<WeightShelf> shelf;  // the sets held, and their chunks
  std::vector<weights_listener> subscribers;
  ErrorCounts errors;
};

namespace {

WeightsAvailableData available(const WeightStoreState& st, std::uint64_t version, const WireBuffer& buf) {
  const std::uint64_t chunk_bytes = st.shelf->chunk_bytes();
  return WeightsAvailableData{version, buf.size(), weight_chunk_count(buf.size(), chunk_bytes), chunk_bytes};
}

}  // namespace

weight_store_actor::behavior_type weight_store_impl(weight_store_actor::stateful_pointer<WeightStoreState> self,
                                                    WeightStoreOptions options) {
  self->state.options = std::move(options);
  auto& st = self->state;
  st.shelf = st.options.shelf ? st.options.shelf
                              : std::make_shared<WeightShelf>(st.options.keep_versions, st.options.chunk_bytes,
                                                              st.options.corrupt_chunks, st.options.deltas);
  self->set_down_handler([self](const caf::down_msg& dm) {
    auto& subs = self->state.subscribers;
    subs.erase(std::remove_if(subs.begin(), subs.end(), [&](const weights_listener& a) { return a.address() == dm.source; }),
               subs.end());
  });
  return {
      [self, &st](publish_atom, const WireMsg& msg) {
        // Shapes and the checksum are checked (in place) before anything is served.
        auto w = check_weight_set(msg.buf, st.options.decode);
        if (!w) {
          st.errors.add(w.error().code);
          st.options.log->warn("refused a weight set from {}: {}", caf::to_string(self->current_sender()),
                               w.error().message);
          return;
        }
        if (auto put = st.shelf->put(w->version, msg.buf); !put) {
          st.errors.add(put.error().code);
          st.options.log->warn("refused version {}: {}", w->version, put.error().message);
          return;
        }
        WireMsg note{encode(available(st, w->version, msg.buf), "weight_store")};
        for (auto& s : st.subscribers) self->send(s, weights_atom::value, note);
      },
      [self, &st](fetch_atom, const WireMsg& msg) -> caf::result<WireMsg> {
        auto req = decode_or_count<WeightRequestData>(self, msg, st.errors, st.options.log);
        if (!req) return caf::sec::invalid_argument;
        auto found = req->latest ? st.shelf->newest() : st.shelf->find(req->version);
        if (!found && req->latest) return to_caf(make_error(Errc::not_found, "no version published yet"));
        if (!found) return to_caf(make_error(Errc::not_found, "version " + std::to_string(req->version) + " is not held"));
        if (!req->chunked) return WireMsg{found->set};
        auto chunk = st.shelf->chunk(found->version, req->chunk, req->base);
        if (!chunk) return to_caf(chunk.error());
        return WireMsg{*chunk};
      },
      [self, &st](subscribe_atom, weights_listener who) {
        self->monitor(who);
        st.subscribers.push_back(who);
        // A late subscriber learns the newest version at once.
        if (auto newest = st.shelf->newest())
          self->send(who, weights_atom::value,
                     WireMsg{encode(available(st, newest->version, newest->set), "weight_store")});
      },
      [&st](forget_atom) { st.shelf->clear(); },
      [&st](counts_atom) { return st.errors.total; },
  };
}

weight_store_actor spawn_weight_store(caf::actor_system& system, WeightStoreOptions options) {
  return system.spawn(weight_store_impl, std::move(options));
}

}  // namespace rlx
