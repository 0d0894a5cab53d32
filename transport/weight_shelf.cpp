#include "transport/weight_shelf.hpp"

#include <algorithm>

#include "messages/codec.hpp"
#include "messages/weight_chunks.hpp"

namespace rlx {

WeightShelf::WeightShelf(std::size_t keep, std::uint64_t chunk_bytes, std::uint32_t corrupt_chunks, bool deltas)
    : keep_(std::max<std::size_t>(keep, 1)), chunk_bytes_(chunk_bytes), deltas_(deltas), corrupt_left_(corrupt_chunks) {}

WeightShelf::~WeightShelf() {
  {
    std::lock_guard<std::mutex> lock(job_mu_);
    quit_ = true;
    if (job_) job_->stop = true;
  }
  job_cv_.notify_all();
  for (auto& t : cutters_) t.join();
}

void WeightShelf::cut_ahead(std::shared_ptr<CutJob> job) {
  {
    std::lock_guard<std::mutex> lock(job_mu_);
    if (job_) job_->stop = true;
    job_ = std::move(job);
    ++job_generation_;
    if (job_ && cutters_.empty()) {
      const unsigned threads = std::clamp(std::thread::hardware_concurrency() / 2, 1u, 4u);
      for (unsigned t = 0; t < threads; ++t) cutters_.emplace_back([this] { cut_loop(); });
    }
  }
  job_cv_.notify_all();
}

std::optional<std::uint64_t> WeightShelf::cutting_ahead() const {
  std::lock_guard<std::mutex> lock(job_mu_);
  if (!job_ || job_->stop) return std::nullopt;
  return job_->version;
}

void WeightShelf::cut_loop() {
  std::uint64_t seen = 0;
  for (;;) {
    std::shared_ptr<CutJob> job;
    {
      std::unique_lock<std::mutex> lock(job_mu_);
      job_cv_.wait(lock, [&] { return quit_ || job_generation_ != seen; });
      if (quit_) return;
      seen = job_generation_;
      job = job_;
    }
    if (!job) continue;
    for (std::uint32_t i; !job->stop && (i = job->next.fetch_add(1)) < job->count;)
      std::call_once(job->cut->once[i], [&] {
        auto framed = frame_weight_chunk(job->set, job->version, i, chunk_bytes_, "weight_store",
                                         job->base ? &*job->base : nullptr);
        if (framed) job->cut->chunks[i] = std::move(*framed);
      });
  }
}

Result<void> WeightShelf::put(std::uint64_t version, WireBuffer set) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!entries_.empty() && version <= entries_.back().version)
    return make_error(Errc::invalid_field, "version " + std::to_string(version) + " is not newer than " +
                                               std::to_string(entries_.back().version));
  entries_.push_back(Entry{version, set});
  while (entries_.size() > keep_) entries_.pop_front();
  const bool against_last = deltas_ && entries_.size() >= 2;
  if (corrupt_left_ > 0 || !(against_last || chunks_asked_)) return {};
  // Nodes ask for this version next: its chunks are cut now, against the
  // version before it (what nodes hold) with deltas, raw otherwise.
  auto job = std::make_shared<CutJob>();
  job->version = version;
  job->set = set;
  if (against_last)
    job->base = DeltaBase{entries_[entries_.size() - 2].version, entries_[entries_.size() - 2].set};
  job->count = weight_chunk_count(set.size(), chunk_bytes_);
  cut_version_ = version;
  cuts_.clear();
  const std::optional<std::uint64_t> key = job->base ? std::optional(job->base->version) : std::nullopt;
  job->cut = cuts_[key] = std::make_shared<Cut>(job->count);
  cut_ahead(std::move(job));
  return {};
}

void WeightShelf::clear() {
  std::lock_guard<std::mutex> lock(mu_);
  cut_ahead(nullptr);
  entries_.clear();
  cut_version_ = ~std::uint64_t{0};
  cuts_.clear();
}

std::optional<WeightShelf::Entry> WeightShelf::newest() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (entries_.empty()) return std::nullopt;
  return entries_.back();
}

std::optional<WeightShelf::Entry> WeightShelf::find(std::uint64_t version) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& e : entries_)
    if (e.version == version) return e;
  return std::nullopt;
}

Result<WireBuffer> WeightShelf::chunk(std::uint64_t version, std::uint32_t index, std::optional<std::uint64_t> base) {
  auto frame = chunk_frame(version, index, base);
  if (!frame) return frame.error();
  return frame->flat();
}

Result<ChunkFrame> WeightShelf::chunk_frame(std::uint64_t version, std::uint32_t index,
                                            std::optional<std::uint64_t> base) {
  std::optional<Entry> found;
  std::optional<DeltaBase> against;
  std::shared_ptr<Cut> cut;
  bool corrupt = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& e : entries_) {
      if (e.version == version) found = e;
      if (deltas_ && base && *base < version && e.version == *base) against = DeltaBase{e.version, e.set};
    }
    if (!found) return make_error(Errc::not_found, "version " + std::to_string(version) + " is not held");
    chunks_asked_ = true;
    const std::uint32_t count = weight_chunk_count(found->set.size(), chunk_bytes_);
    if (index >= count)
      return make_error(Errc::invalid_field, "chunk " + std::to_string(index) + " of version " + std::to_string(version) +
                                                " does not exist (" + std::to_string(count) + " chunks)");
    if (corrupt_left_ > 0) {
      --corrupt_left_;
      corrupt = true;
    } else if (version == entries_.back().version) {  // nodes fetch the newest: its chunks are kept
      if (cut_version_ != version) {
        cut_version_ = version;
        cuts_.clear();
      }
      const std::optional<std::uint64_t> key = against ? std::optional(against->version) : std::nullopt;
      auto& slot = cuts_[key];
      if (!slot) slot = std::make_shared<Cut>(count);
      cut = slot;
    }
  }
  const DeltaBase* delta_base = against ? &*against : nullptr;
  if (corrupt) {
    auto encoded = encode_weight_chunk(found->set, version, index, chunk_bytes_, "weight_store", delta_base);
    if (!encoded) return encoded.error();
    auto c = decode<WeightChunkData>(*encoded);
    if (!c) return c.error();
    c->data[c->data.size() / 2] ^= 0x5a;
    return ChunkFrame{encode(*c, "weight_store"), {}, {}, nullptr};
  }
  if (!cut) return frame_weight_chunk(found->set, version, index, chunk_bytes_, "weight_store", delta_base);
  // Cut outside the lock (other chunks are served meanwhile), once.
  Error failed;
  std::call_once(cut->once[index], [&] {
    auto framed = frame_weight_chunk(found->set, version, index, chunk_bytes_, "weight_store", delta_base);
    if (framed) cut->chunks[index] = std::move(*framed);
    else failed = framed.error();
  });
  if (cut->chunks[index].empty())
    return failed.code != Errc::ok ? failed : make_error(Errc::invalid_field, "chunk could not be cut");
  return cut->chunks[index];
}

}  // namespace rlx
