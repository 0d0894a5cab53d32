// The fixed layout of a segment without token rows (segment_layout.hpp).
#include "messages/segment_layout.hpp"

#include <algorithm>
#include <cstring>
#include <iterator>
#include <stdexcept>

#include <capnp/schema.h>

#include "messages/codec_detail.hpp"
#include "messages/rollout.capnp.h"

namespace rlx::codec_detail {
namespace {

using Word = std::uint64_t;
constexpr std::size_t kNone = SIZE_MAX;  // a null pointer's object

// The element sizes (Cap'n Proto's codes) of the lists the layout holds.
enum class Elements : Word { bytes = 2, four_bytes = 4, eight_bytes = 5 };

// A pointer at word `from` to an object at word `to` (> from): the offset
// counts from the word after the pointer.
Word struct_pointer(std::size_t from, std::size_t to, unsigned data_words, unsigned pointers) {
  return Word{static_cast<std::uint32_t>(to - from - 1)} << 2 | Word{data_words} << 32 | Word{pointers} << 48;
}
Word list_pointer(std::size_t from, std::size_t to, Elements size, std::uint32_t count) {
  return 1 | Word{static_cast<std::uint32_t>(to - from - 1)} << 2 | (static_cast<Word>(size) | Word{count} << 3) << 32;
}

template <class S>
constexpr unsigned kData = S::_capnpPrivate::dataWordSize;
template <class S>
constexpr unsigned kPointers = S::_capnpPrivate::pointerCount;
using Env = wire::Envelope;
using Seg = wire::TrajectorySegment;
using Ten = wire::Tensor;
using Work = wire::SegmentWork;

// Where each field the layout touches lies in its struct, from the
// compiled schema (a data field: its byte in the data section; a pointer:
// its index). `usable` is false when a field is missing or has a default
// that is not zero (the layout writes values as they are).
struct Fields {
  unsigned env_version = 0, env_which = 0, env_sender = 0, env_body = 0;
  unsigned explorer_id = 0, sequence = 0, num_steps = 0, num_envs = 0, created = 0, lost = 0, retries = 0,
           sent_index = 0, sent_base = 0;
  unsigned observations = 0, actions = 0, log_probs = 0, rewards = 0, terminated = 0, truncated = 0, versions = 0,
           bootstrap = 0, returns = 0, lengths = 0, tokens = 0, masked = 0, masked_rows = 0, infra = 0,
           truncation_obs = 0, work = 0;
  unsigned dtype = 0, shape = 0, data = 0;
  unsigned decode_s = 0, tool_s = 0, score_s = 0, tool_calls = 0;
  bool usable = false;
};

unsigned value_bytes(capnp::schema::Type::Which t) {
  using W = capnp::schema::Type;
  switch (t) {
    case W::UINT16:
    case W::ENUM: return 2;
    case W::UINT32:
    case W::FLOAT32: return 4;
    case W::UINT64:
    case W::FLOAT64: return 8;
    default: return 0;
  }
}

void data_at(capnp::StructSchema s, const char* name, unsigned& at) {
  auto slot = s.getFieldByName(name).getProto().getSlot();
  const unsigned size = value_bytes(slot.getType().which());
  if (size == 0 || slot.getHadExplicitDefault()) throw std::invalid_argument(name);
  at = slot.getOffset() * size;
}

void pointer_at(capnp::StructSchema s, const char* name, unsigned& at) {
  at = s.getFieldByName(name).getProto().getSlot().getOffset();
}

Fields find_fields() {
  Fields f;
  try {
    auto env = capnp::Schema::from<Env>();
    data_at(env, "schemaVersion", f.env_version);
    pointer_at(env, "sender", f.env_sender);
    auto body = env.getFieldByName("body").getType().asStruct();
    f.env_which = body.getProto().getStruct().getDiscriminantOffset() * 2;
    pointer_at(body, "segment", f.env_body);
    auto seg = capnp::Schema::from<Seg>();
    for (auto [name, at] : {std::pair{"explorerId", &f.explorer_id}, {"sequence", &f.sequence},
                            {"numSteps", &f.num_steps}, {"numEnvs", &f.num_envs}, {"createdUnixNs", &f.created},
                            {"lostEpisodes", &f.lost}, {"rewardRetries", &f.retries}, {"sentIndex", &f.sent_index},
                            {"sentBase", &f.sent_base}})
      data_at(seg, name, *at);
    for (auto [name, at] :
         {std::pair{"observations", &f.observations}, {"actions", &f.actions}, {"behaviourLogProbs", &f.log_probs},
          {"rewards", &f.rewards}, {"terminated", &f.terminated}, {"truncated", &f.truncated},
          {"policyVersions", &f.versions}, {"bootstrapObservations", &f.bootstrap}, {"episodeReturns", &f.returns},
          {"episodeLengths", &f.lengths}, {"tokens", &f.tokens}, {"masked", &f.masked},
          {"maskedRows", &f.masked_rows}, {"infraFailures", &f.infra}, {"truncationObservations", &f.truncation_obs},
          {"work", &f.work}})
      pointer_at(seg, name, *at);
    auto tensor = capnp::Schema::from<Ten>();
    data_at(tensor, "dtype", f.dtype);
    pointer_at(tensor, "shape", f.shape);
    pointer_at(tensor, "data", f.data);
    auto work = capnp::Schema::from<Work>();
    for (auto [name, at] : {std::pair{"decodeSeconds", &f.decode_s}, {"toolSeconds", &f.tool_s},
                            {"scoreSeconds", &f.score_s}, {"toolCalls", &f.tool_calls}})
      data_at(work, name, *at);
    // Every pointer slot of these structs is one the layout follows (a later field: not usable).
    f.usable = kPointers<Env> == 2 && kPointers<Seg> == 16 && kData<Ten> == 1 && kPointers<Ten> == 2 &&
               kPointers<Work> == 0;
  } catch (...) {  // a schema this layout does not know: everything takes the general way
    f.usable = false;
  }
  return f;
}

const Fields& fields() {
  static const Fields f = find_fields();
  return f;
}

// Lays objects out one after another from the segment's first word, and
// writes them when it has memory (without: counts the words).
class Writer {
 public:
  explicit Writer(Word* words) : w_(words) {}
  std::size_t size() const { return next_; }

  std::size_t place(std::size_t n) {
    const std::size_t at = next_;
    next_ += n;
    return at;
  }
  template <class T>
  void put(std::size_t word, unsigned byte, T value) {
    if (w_) std::memcpy(reinterpret_cast<char*>(w_ + word) + byte, &value, sizeof(T));
  }
  // A zeroed struct, pointed at from word `pointer`: its first word.
  std::size_t structure(std::size_t pointer, unsigned data_words, unsigned pointers) {
    const std::size_t at = place(data_words + pointers);
    if (w_) {
      std::memset(w_ + at, 0, (data_words + pointers) * sizeof(Word));
      w_[pointer] = struct_pointer(pointer, at, data_words, pointers);
    }
    return at;
  }
  // A list of `count` elements of `bytes` each copied from `from`, its last word's padding zeroed.
  void list(std::size_t pointer, Elements size, unsigned bytes, const void* from, std::size_t count) {
    blob(pointer, size, count, count * bytes, from, count * bytes);
  }
  void text(std::size_t pointer, std::string_view s) {  // its bytes and a NUL (in the zeroed padding)
    blob(pointer, Elements::bytes, s.size() + 1, s.size() + 1, s.data(), s.size());
  }
  template <class V>
  void tensor(std::size_t pointer, std::initializer_list<std::uint32_t> shape, const V& v) {
    using T = typename V::value_type;
    const Fields& f = fields();
    const std::size_t t = structure(pointer, kData<Ten>, kPointers<Ten>);
    put(t, f.dtype, static_cast<std::uint16_t>(dtype_of<T>()));
    list(t + kData<Ten> + f.shape, Elements::four_bytes, 4, std::data(shape), shape.size());
    list(t + kData<Ten> + f.data, Elements::bytes, 1, v.data(), v.size() * sizeof(T));
  }

 private:
  // A list of `count` elements in `bytes` bytes: the first `copied` from `from`, the rest of its words zero.
  void blob(std::size_t pointer, Elements size, std::size_t count, std::size_t bytes, const void* from,
            std::size_t copied) {
    const std::size_t words = (bytes + 7) / 8;
    const std::size_t at = place(words);
    if (!w_) return;
    w_[pointer] = list_pointer(pointer, at, size, static_cast<std::uint32_t>(count));
    if (words == 0) return;
    w_[at + words - 1] = 0;
    if (copied) std::memcpy(w_ + at, from, copied);
  }

  Word* w_;
  std::size_t next_ = 0;
};

// The one order of the layout: the encoder's, and the reader's below.
void lay_out(Writer& w, const Segment& x, std::string_view sender) {
  const Fields& f = fields();
  const std::uint32_t T = x.num_steps, B = x.num_envs, D = x.obs_dim;
  w.place(1);  // the root pointer
  const std::size_t env = w.structure(0, kData<Env>, kPointers<Env>);
  w.put(env, f.env_version, wire::ENVELOPE_SCHEMA_VERSION);
  w.put(env, f.env_which, static_cast<std::uint16_t>(Which::SEGMENT));
  w.text(env + kData<Env> + f.env_sender, sender);
  const std::size_t s = w.structure(env + kData<Env> + f.env_body, kData<Seg>, kPointers<Seg>);
  w.put(s, f.explorer_id, x.explorer_id);
  w.put(s, f.sequence, x.sequence);
  w.put(s, f.num_steps, T);
  w.put(s, f.num_envs, B);
  w.put(s, f.created, x.created_unix_ns);
  w.put(s, f.lost, x.lost_episodes);
  w.put(s, f.retries, x.reward_retries);
  w.put(s, f.sent_index, x.sent_index);
  w.put(s, f.sent_base, x.sent_base);
  const auto at = [&](unsigned pointer) { return s + kData<Seg> + pointer; };
  w.tensor(at(f.observations), {T, B, D}, x.observations);
  w.tensor(at(f.actions), {T, B}, x.actions);
  w.tensor(at(f.log_probs), {T, B}, x.behaviour_log_probs);
  w.tensor(at(f.rewards), {T, B}, x.rewards);
  w.tensor(at(f.terminated), {T, B}, x.terminated);
  w.tensor(at(f.truncated), {T, B}, x.truncated);
  w.list(at(f.versions), Elements::eight_bytes, 8, x.policy_versions.data(), x.policy_versions.size());
  w.tensor(at(f.bootstrap), {B, D}, x.bootstrap_observations);
  w.list(at(f.returns), Elements::four_bytes, 4, x.episode_returns.data(), x.episode_returns.size());
  w.list(at(f.lengths), Elements::four_bytes, 4, x.episode_lengths.data(), x.episode_lengths.size());
  if (!x.masked.empty()) w.tensor(at(f.masked), {T, B}, x.masked);
  w.list(at(f.masked_rows), Elements::bytes, 1, x.masked_rows.data(), x.masked_rows.size());
  w.list(at(f.infra), Elements::four_bytes, 4, x.infra_failures.data(), x.infra_failures.size());
  if (!x.truncation_observations.empty())
    w.tensor(at(f.truncation_obs), {static_cast<std::uint32_t>(x.truncation_observations.size() / std::max(D, 1u)), D},
             x.truncation_observations);
  const std::size_t work = w.structure(at(f.work), kData<Work>, kPointers<Work>);
  w.put(work, f.decode_s, x.work.decode_s);
  w.put(work, f.tool_s, x.work.tool_s);
  w.put(work, f.score_s, x.work.score_s);
  w.put(work, f.tool_calls, static_cast<std::uint32_t>(std::min<std::uint64_t>(x.work.tool_calls, UINT32_MAX)));
}

// Follows the layout's order over a received segment: each pointer must
// point at the word after the object before (or be null where a field is
// optional), with this build's sizes; `ok()` turns false at the first
// that does not.
class Reader {
 public:
  Reader(const Word* words, std::size_t size) : w_(words), end_(size) {}
  bool ok() const { return ok_; }
  bool ended() const { return ok_ && next_ == end_; }
  Word word(std::size_t i) const { return w_[i]; }
  template <class T>
  T get(std::size_t word, unsigned byte) const {
    T v;
    std::memcpy(&v, reinterpret_cast<const char*>(w_ + word) + byte, sizeof(T));
    return v;
  }
  void place(std::size_t n) { next_ += n; }

  // The struct `pointer` points at: its first word, or kNone when null.
  std::size_t structure(std::size_t pointer, unsigned data_words, unsigned pointers) {
    const Word p = w_[pointer];
    if (p == 0) return kNone;
    if (data_words + pointers > end_ - next_ || p != struct_pointer(pointer, next_, data_words, pointers))
      return fail();
    return take(data_words + pointers);
  }
  // The list `pointer` points at, of elements of `bytes` each: its first
  // word and `count`; kNone (count 0) when null.
  std::size_t list(std::size_t pointer, Elements size, unsigned bytes, std::uint32_t& count) {
    const Word p = w_[pointer];
    count = static_cast<std::uint32_t>(p >> 35);
    if (p == 0) return kNone;
    const std::size_t words = (std::size_t{count} * bytes + 7) / 8;
    if (words > end_ - next_ || p != list_pointer(pointer, next_, size, count)) return fail();
    return take(words);
  }
  template <class T>
  const T* list_of(std::size_t pointer, Elements size, std::uint32_t& count) {
    const std::size_t at = list(pointer, size, sizeof(T), count);
    return at == kNone ? nullptr : reinterpret_cast<const T*>(w_ + at);
  }
  // A tensor of T whose shape is `shape` (a 0 in it: any extent, written
  // back), viewed in place; false (and ok() false unless `optional`) when
  // it is null, and ok() false when its dtype, shape or size disagree.
  template <class T>
  bool tensor(std::size_t pointer, std::initializer_list<std::uint32_t*> shape, Column<T>& out,
              const std::shared_ptr<const void>& keep, bool optional = false) {
    const Fields& f = fields();
    const std::size_t t = structure(pointer, kData<Ten>, kPointers<Ten>);
    if (t == kNone) return optional ? false : fail();
    if (get<std::uint16_t>(t, f.dtype) != static_cast<std::uint16_t>(dtype_of<T>())) return fail();
    std::uint32_t rank = 0, bytes = 0;
    const auto* dims = list_of<std::uint32_t>(t + kData<Ten> + f.shape, Elements::four_bytes, rank);
    const std::size_t data = list(t + kData<Ten> + f.data, Elements::bytes, 1, bytes);
    if (!ok_ || rank != shape.size()) return fail();
    std::uint64_t n = 1;
    for (auto* d : shape) {
      if (*d == 0) *d = *dims;
      if (*dims++ != *d) return fail();
      n *= *d;
      if (n > UINT32_MAX) return fail();  // more than a list holds (and no product wraps)
    }
    if (bytes != n * sizeof(T)) return fail();
    out = Column<T>::view(data == kNone ? nullptr : reinterpret_cast<const T*>(w_ + data), n, keep);
    return true;
  }

 private:
  std::size_t take(std::size_t n) {
    const std::size_t at = next_;
    next_ += n;
    return at;
  }
  std::size_t fail() {
    ok_ = false;
    return kNone;
  }

  const Word* w_;
  std::size_t end_;
  std::size_t next_ = 0;
  bool ok_ = true;
};

template <class T>
std::vector<T> values_of(const T* first, std::uint32_t count) {
  return first ? std::vector<T>(first, first + count) : std::vector<T>{};
}

}  // namespace

std::optional<WireBuffer> encode_fixed_layout(const Segment& x, std::string_view sender) {
  // Cap'n Proto counts a list's elements in 29 bits, and a pointer's offset in 30 signed: a larger segment
  // takes the general way (which refuses it with its own error).
  constexpr std::size_t kMaxCount = (std::size_t{1} << 29) - 1;
  if (x.tokens || !fields().usable || x.observations.size() * sizeof(float) > kMaxCount ||
      x.actions.size() * sizeof(std::int64_t) > kMaxCount ||
      x.truncation_observations.size() * sizeof(float) > kMaxCount)
    return std::nullopt;
  Writer count(nullptr);
  lay_out(count, x, sender);
  const std::size_t words = count.size();
  if (words > kMaxCount) return std::nullopt;
  auto space = recycled_words(words + 1);  // an explorer sends segments of one size again and again
  fill_for_tests(space);
  auto* w = reinterpret_cast<Word*>(space.begin());
  w[0] = Word{words} << 32;  // the segment table: one segment (count - 1 = 0) of `words` words
  Writer write(w + 1);
  lay_out(write, x, sender);
  return WireBuffer(std::move(space));
}

std::optional<Segment> read_fixed_layout(const WireBuffer& buf, const DecodeOptions& options) {
  const Fields& f = fields();
  const auto words = buf.words();
  // Whatever Cap'n Proto's limits or framing would refuse, it refuses itself (with its error).
  if (!f.usable || buf.size() % 8 != 0 || words.size() < 2 || buf.size() > options.max_bytes ||
      words.size() > options.traversal_limit_words || options.nesting_limit < 8)
    return std::nullopt;
  const auto* all = reinterpret_cast<const Word*>(words.begin());
  if (all[0] != Word{words.size() - 1} << 32) return std::nullopt;
  Reader r(all + 1, words.size() - 1);
  r.place(1);
  const std::size_t env = r.structure(0, kData<Env>, kPointers<Env>);
  if (env == kNone || r.get<std::uint16_t>(env, f.env_version) > wire::ENVELOPE_SCHEMA_VERSION ||
      r.get<std::uint16_t>(env, f.env_which) != static_cast<std::uint16_t>(Which::SEGMENT))
    return std::nullopt;
  std::uint32_t count = 0;
  r.list(env + kData<Env> + f.env_sender, Elements::bytes, 1, count);
  const std::size_t s = r.structure(env + kData<Env> + f.env_body, kData<Seg>, kPointers<Seg>);
  if (s == kNone || !r.ok()) return std::nullopt;
  const auto at = [&](unsigned pointer) { return s + kData<Seg> + pointer; };
  if (r.word(at(f.tokens)) != 0) return std::nullopt;
  Segment x;
  x.explorer_id = r.get<std::uint32_t>(s, f.explorer_id);
  x.sequence = r.get<std::uint64_t>(s, f.sequence);
  std::uint32_t T = x.num_steps = r.get<std::uint32_t>(s, f.num_steps);
  std::uint32_t B = x.num_envs = r.get<std::uint32_t>(s, f.num_envs);
  std::uint32_t D = 0;
  if (T == 0 || B == 0) return std::nullopt;
  x.created_unix_ns = r.get<std::uint64_t>(s, f.created);
  x.lost_episodes = r.get<std::uint32_t>(s, f.lost);
  x.reward_retries = r.get<std::uint32_t>(s, f.retries);
  x.sent_index = r.get<std::uint64_t>(s, f.sent_index);
  x.sent_base = r.get<std::uint64_t>(s, f.sent_base);
  const auto keep = buf.keepalive();
  r.tensor(at(f.observations), {&T, &B, &D}, x.observations, keep);
  x.obs_dim = D;
  r.tensor(at(f.actions), {&T, &B}, x.actions, keep);
  r.tensor(at(f.log_probs), {&T, &B}, x.behaviour_log_probs, keep);
  r.tensor(at(f.rewards), {&T, &B}, x.rewards, keep);
  r.tensor(at(f.terminated), {&T, &B}, x.terminated, keep);
  r.tensor(at(f.truncated), {&T, &B}, x.truncated, keep);
  const auto* versions = r.list_of<std::uint64_t>(at(f.versions), Elements::eight_bytes, count);
  if (count != T) return std::nullopt;
  x.policy_versions = values_of(versions, count);
  r.tensor(at(f.bootstrap), {&B, &D}, x.bootstrap_observations, keep);
  const auto* returns = r.list_of<float>(at(f.returns), Elements::four_bytes, count);
  x.episode_returns = values_of(returns, count);
  const auto* lengths = r.list_of<std::uint32_t>(at(f.lengths), Elements::four_bytes, count);
  x.episode_lengths = values_of(lengths, count);
  if (!r.ok() || D == 0 || x.episode_returns.size() != x.episode_lengths.size()) return std::nullopt;
  r.tensor(at(f.masked), {&T, &B}, x.masked, keep, /*optional=*/true);
  const auto* rows = r.list_of<std::uint8_t>(at(f.masked_rows), Elements::bytes, count);
  x.masked_rows = values_of(rows, count);
  const auto* failures = r.list_of<std::uint32_t>(at(f.infra), Elements::four_bytes, count);
  x.infra_failures = values_of(failures, count);
  if (r.word(at(f.truncation_obs)) != 0) {  // [K, D]: K the steps a time limit cut
    std::uint32_t K = 0;
    r.tensor(at(f.truncation_obs), {&K, &D}, x.truncation_observations, keep);
    if (x.truncations() != K) return std::nullopt;
  }
  if (const std::size_t w = r.structure(at(f.work), kData<Work>, kPointers<Work>); w != kNone)
    x.work = SegmentWork{r.get<double>(w, f.decode_s), r.get<double>(w, f.tool_s), r.get<double>(w, f.score_s),
                         r.get<std::uint32_t>(w, f.tool_calls)};
  if (!r.ended()) return std::nullopt;
  return x;
}

}  // namespace rlx::codec_detail
