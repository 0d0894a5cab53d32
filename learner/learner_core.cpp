#include "learner/learner_core.hpp"

#include <cstring>

#include "learner/learner_group.hpp"
#include "messages/codec.hpp"

namespace rlx {

namespace {

// What rank 0 broadcasts to the other ranks: a tag byte, then the body.
// An empty message releases them (release_learner_ranks).
constexpr std::uint8_t kBatchMessage = 1;  // pack_segments of the whole batch
constexpr std::uint8_t kStateMessage = 2;  // Trainer::save_state: take it as yours

std::vector<std::uint8_t> tagged(std::uint8_t tag, const std::vector<std::uint8_t>& body) {
  std::vector<std::uint8_t> out;
  out.reserve(body.size() + 1);
  out.push_back(tag);
  out.insert(out.end(), body.begin(), body.end());
  return out;
}

}  // namespace

LearnerCore::LearnerCore(const LearnerCoreOptions& options)
    : options_(options), trainer_(make_trainer(options.trainer)), admission_(options.max_staleness) {}

Arrival LearnerCore::admit(std::optional<Segment> segment, const std::string& reject_reason) {
  Arrival a;
  a.version = trainer_->version();
  a.index = received_++;
  const std::string refused = segment ? trainer_->refuses(*segment) : reject_reason;
  if (!segment || !refused.empty()) {
    admission_.count_rejected();
    a.verdict = Verdict::rejected;
    a.reason = refused;
    return a;
  }
  stats_.add(*segment);
  auto d = admission_.admit(*segment, a.version);
  a.verdict = d.verdict;
  a.lag = d.lag;
  if (d.verdict == Verdict::dropped_stale) {
    a.reason = "lag " + std::to_string(d.lag);
    return a;
  }
  batch_.push_back(std::move(*segment));
  return a;
}

Arrival LearnerCore::admit_recorded(const RolloutRecordData& record, std::optional<Segment> segment) {
  Arrival a{record.verdict, record.lag, record.reason, trainer_->version(), received_++};
  count_from(segment ? segment->explorer_id : kUnattributed);
  const std::uint64_t steps = segment ? segment->env_steps() : 0;
  if (segment) stats_.add(*segment);
  admission_.count(record.verdict, record.lag, steps);
  if (record.verdict == Verdict::trained && segment) batch_.push_back(std::move(*segment));
  return a;
}

void LearnerCore::drop_batch() {
  // Admitted at this version: it grows only with an update, which clears the batch.
  for (const auto& s : batch_) admission_.take_back(s, trainer_->version());
  batch_.clear();
}

bool LearnerCore::restore(std::uint64_t received, std::uint64_t updates, const Admission::State& admission,
                          const RunStats::State& stats) {
  if (!admission_.restore(admission)) return false;
  stats_.restore(stats);
  received_ = received;
  updates_ = updates;
  return true;
}

std::size_t LearnerCore::world() const {
  return options_.trainer.group ? static_cast<std::size_t>(options_.trainer.group->world()) : 1;
}

Result<UpdateStats> LearnerCore::train() {
  std::vector<const Segment*> ptrs;
  try {
    if (world() > 1) {
      // The ranks first take this core's state if they hold another (a
      // fresh run, a checkpoint loaded, a replay that started over), so
      // the ranks' updates are this trainer's whatever came before.
      LearnerGroup& group = *options_.trainer.group;
      if (group.synced_state() != trainer_->state_id()) {
        auto state = tagged(kStateMessage, trainer_->save_state());
        group.broadcast_bytes(state);
        group.set_synced_state(trainer_->state_id());
      }
      auto bytes = tagged(kBatchMessage, pack_segments(batch_));
      group.broadcast_bytes(bytes);
      for (std::size_t i = 0; i < options_.batch_segments; ++i) ptrs.push_back(&batch_[i]);  // rank 0's slice
    } else {
      for (const auto& s : batch_) ptrs.push_back(&s);
    }
    std::uint64_t steps = 0;  // the whole batch's, not rank 0's slice
    for (const auto& seg : batch_) steps += seg.env_steps();
    auto r = trainer_->update(ptrs);
    if (!r) drop_batch();
    batch_.clear();
    if (!r && world() > 1)
      // The other ranks may have made this update's collectives, or be
      // waiting in one: the group is out of step and must stop.
      return make_error(Errc::group_broken, "rank 0's update failed, so the learner group is out of step: " +
                                           r.error().message);
    if (r) r->steps = steps;
    if (r) ++updates_;
    return r;
  } catch (const GroupError& e) {
    drop_batch();
    return make_error(Errc::group_broken, e.what());
  }
}

void release_learner_ranks(LearnerGroup& group) {
  if (group.world() == 1) return;
  std::vector<std::uint8_t> none;
  try {
    group.broadcast_bytes(none);
  } catch (const GroupError&) {
    // A rank already gone has nothing to release.
  }
}

std::vector<std::uint8_t> pack_segments(const std::vector<Segment>& segments) {
  std::vector<std::uint8_t> out;
  for (const auto& s : segments) {
    const WireBuffer b = encode(s, "learner");
    const std::uint64_t n = b.size();
    const auto at = out.size();
    out.resize(at + 8 + n);
    std::memcpy(out.data() + at, &n, 8);
    std::memcpy(out.data() + at + 8, b.bytes().data(), n);
  }
  return out;
}

Result<std::vector<Segment>> unpack_segments(const std::vector<std::uint8_t>& bytes) {
  std::vector<Segment> out;
  std::size_t at = 0;
  while (at < bytes.size()) {
    std::uint64_t n = 0;
    if (bytes.size() - at < 8) return make_error(Errc::truncated_message, "batch: a length is cut off");
    std::memcpy(&n, bytes.data() + at, 8);
    at += 8;
    if (n > bytes.size() - at) return make_error(Errc::truncated_message, "batch: a segment is cut off");
    auto s = decode<Segment>(WireBuffer::copy_of(bytes.data() + at, n));
    if (!s) return s.error();
    out.push_back(std::move(*s));
    at += n;
  }
  return out;
}

Result<std::uint64_t> run_learner_rank(const TrainerOptions& options, std::size_t batch_segments) {
  RLX_REQUIRE(options.group && options.group->rank() > 0);
  const auto rank = static_cast<std::size_t>(options.group->rank());
  std::uint64_t updates = 0;
  try {
    auto trainer_ptr = make_trainer(options);
    Trainer& trainer = *trainer_ptr;
    for (;;) {
      std::vector<std::uint8_t> bytes;
      options.group->broadcast_bytes(bytes);
      if (bytes.empty()) return updates;  // released by rank 0
      const std::uint8_t tag = bytes[0];
      bytes.erase(bytes.begin());
      if (tag == kStateMessage) {
        auto loaded = trainer.load_state(bytes);
        if (!loaded) return make_error(Errc::invalid_field, "rank " + std::to_string(rank) +
                                                                " cannot take rank 0's state: " + loaded.error().message);
        continue;
      }
      if (tag != kBatchMessage)
        return make_error(Errc::invalid_field, "rank " + std::to_string(rank) + ": unknown message " + std::to_string(tag));
      auto batch = unpack_segments(bytes);
      if (!batch) return batch.error();
      if (batch->size() < batch_segments * (rank + 1))
        return make_error(Errc::invalid_field, "batch of " + std::to_string(batch->size()) + " segments for rank " +
                                                   std::to_string(rank));
      std::vector<const Segment*> slice;
      for (std::size_t i = 0; i < batch_segments; ++i) slice.push_back(&(*batch)[rank * batch_segments + i]);
      auto r = trainer.update(slice);
      // A failed update leaves this rank out of step with the others: it
      // leaves the group (rank 0's next collective fails) instead.
      if (!r) return make_error(Errc::group_broken, "rank " + std::to_string(rank) + "'s update failed: " + r.error().message);
      ++updates;
    }
  } catch (const GroupError& e) {
    return make_error(Errc::group_broken, e.what());
  }
}

WeightSetData LearnerCore::weights() const { return trainer_->weights(); }
EncodedWeightSet LearnerCore::encoded_weights(std::uint64_t created_unix_ns) const {
  return trainer_->encoded_weights(created_unix_ns);
}

}  // namespace rlx
