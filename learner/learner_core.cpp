#include "learner/learner_core.hpp"

namespace rlx {

LearnerCore::LearnerCore(const LearnerCoreOptions& options)
    : options_(options), trainer_(std::make_unique<Trainer>(options.trainer)), admission_(options.max_staleness) {}

Arrival LearnerCore::admit(std::optional<Segment> segment, const std::string& reject_reason) {
  Arrival a;
  a.version = trainer_->version();
  a.index = received_++;
  if (!segment) {
    admission_.count_rejected();
    a.verdict = Verdict::rejected;
    a.reason = reject_reason;
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
  const std::uint64_t steps = segment ? segment->env_steps() : 0;
  if (segment) stats_.add(*segment);
  admission_.count(record.verdict, record.lag, steps);
  if (record.verdict == Verdict::trained && segment) batch_.push_back(std::move(*segment));
  return a;
}

Result<UpdateStats> LearnerCore::train() {
  std::vector<const Segment*> ptrs;
  for (const auto& s : batch_) ptrs.push_back(&s);
  auto r = trainer_->update(ptrs);
  batch_.clear();
  if (r) ++updates_;
  return r;
}

WeightSetData LearnerCore::weights() const { return trainer_->weights(); }

}  // namespace rlx
