#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <future>
#include <random>
#include <thread>

#include "tests/torch_catch.hpp"
#include <torch/torch.h>

#include "learner/learner_core.hpp"
#include "learner/learner_group.hpp"
#include "learner/mlp_trainer.hpp"
#include "tests/helpers.hpp"

using namespace rlx;
using namespace std::chrono_literals;

namespace {

// A segment with varied observations, actions and rewards.
Segment random_segment(std::uint32_t seed, std::uint64_t version = 0) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-0.5f, 0.5f);
  auto s = test::make_segment(16, 4, version, seed % 3);
  for (auto& o : s.observations) o = u(rng);
  for (auto& a : s.actions) a = static_cast<std::int64_t>(rng() % 2);
  for (auto& r : s.rewards) r = u(rng) + 1.0f;
  for (auto& b : s.behaviour_log_probs) b = -0.69f + 0.2f * u(rng);
  for (auto& t : s.terminated) t = rng() % 20 == 0;
  for (auto& b : s.bootstrap_observations) b = u(rng);
  return s;
}

TrainerOptions trainer_options(const std::string& algorithm) {
  auto cfg = test::default_config();
  cfg.learner.algorithm = *choice_of<Algorithm>(algorithm);
  cfg.learner.epochs = 1;       // one full-batch step per update: the data-parallel
  cfg.learner.minibatches = 1;  // gradient is then the same sum as one rank's
  cfg.policy.load_balance_coef = 0.0;  // a per-rank statistic (docs/data-parallel.md)
  return TrainerOptions{cfg.learner, cfg.policy, 4, 2, 11};
}

std::unique_ptr<RendezvousStore> store() {
  auto s = RendezvousStore::serve("127.0.0.1", 0, 10s);
  REQUIRE(s.ok());
  return std::move(*s);
}

// Rank 1 of 2 in a thread: the learner loop of a rank process, until released.
std::future<Result<std::uint64_t>> loop_rank1(std::uint16_t port, TrainerOptions o) {
  return std::async(std::launch::async, [port, o]() mutable {
    auto group = LearnerGroup::join(GroupOptions{1, 2, "127.0.0.1", port, 20s});
    if (!group) return Result<std::uint64_t>(group.error());
    o.group = group->get();
    return run_learner_rank(o, 2);
  });
}

// Rank 0's core options (2 segments per rank) and one rank's with the whole batch (4).
std::pair<LearnerCoreOptions, LearnerCoreOptions> dp_core_options(const TrainerOptions& trainer, LearnerGroup* group) {
  LearnerCoreOptions co;
  co.trainer = trainer;
  co.trainer.group = group;
  co.batch_segments = 2;
  LearnerCoreOptions single = co;
  single.trainer.group = nullptr;
  single.batch_segments = 4;
  return {co, single};
}

// Rank 0 joined in this thread, rank 1's learner loop (with `rank1`'s
// options) in another, through a store of their own.
struct TwoRanks {
  std::unique_ptr<RendezvousStore> store;
  std::future<Result<std::uint64_t>> rank1;
  std::unique_ptr<LearnerGroup> group;
};

TwoRanks start_two_ranks(const TrainerOptions& rank1) {
  TwoRanks t;
  t.store = store();
  t.rank1 = loop_rank1(t.store->port(), rank1);
  auto group = LearnerGroup::join(GroupOptions{0, 2, "127.0.0.1", t.store->port(), 20s});
  REQUIRE(group.ok());
  t.group = std::move(*group);
  return t;
}

// A valid segment of observations 5 wide, which the 4-wide policy refuses.
Segment wide_segment() {
  auto s = test::make_segment(16, 4, 0);
  s.obs_dim = 5;
  s.observations.resize(16 * 4 * 5);
  s.bootstrap_observations.resize(4 * 5);
  return s;
}

}  // namespace

TEST_CASE("two ranks with B segments each train the same weights as one rank with 2B", "[learner][dp][gloo]") {
  for (const char* algorithm : {"ppo", "vtrace"}) {
    INFO(algorithm);
    constexpr int kUpdates = 3, kB = 2;
    std::vector<Segment> segments;
    for (std::uint32_t i = 0; i < kUpdates * 2 * kB; ++i) segments.push_back(random_segment(100 + i));

    MlpTrainer alone(trainer_options(algorithm));
    const WeightSetData initial = alone.weights();
    for (int k = 0; k < kUpdates; ++k) {
      std::vector<const Segment*> batch;
      for (int i = 0; i < 2 * kB; ++i) batch.push_back(&segments[k * 2 * kB + i]);
      REQUIRE(alone.update(batch).ok());
    }

    auto s = store();
    auto rank = [&](int r) {
      auto group = LearnerGroup::join(GroupOptions{r, 2, "127.0.0.1", s->port(), 20s});
      if (!group) throw std::runtime_error(group.error().message);
      auto o = trainer_options(algorithm);
      o.seed += static_cast<std::uint64_t>(r);  // rank 1 starts elsewhere: taking rank 0's state must fix it
      o.group = group->get();
      MlpTrainer t(o);
      std::vector<std::uint8_t> state = r == 0 ? t.save_state() : std::vector<std::uint8_t>{};
      (*group)->broadcast_bytes(state);  // what LearnerCore sends before the ranks' first update
      if (r != 0 && !t.load_state(state)) throw std::runtime_error("rank 1 cannot take rank 0's state");
      for (int k = 0; k < kUpdates; ++k) {
        std::vector<const Segment*> slice;
        for (int i = 0; i < kB; ++i) slice.push_back(&segments[k * 2 * kB + r * kB + i]);
        if (!t.update(slice)) throw std::runtime_error("update failed");
      }
      return t.weights();
    };
    auto r1 = std::async(std::launch::async, rank, 1);
    WeightSetData w0 = rank(0);
    WeightSetData w1 = r1.get();
    CHECK(test::max_diff(w0, w1) == 0.0);            // the ranks never drift apart
    CHECK(test::max_diff(w0, alone.weights()) < 2e-5);  // and match one rank with the whole batch
    CHECK(w0.version == alone.weights().version);
    CHECK(test::max_diff(w0, initial) > 1e-3);  // and training did move them
    INFO("ranks vs alone: " << test::max_diff(w0, alone.weights()));
  }
}

TEST_CASE("the learner loop spreads each batch over the ranks and releases them at the end", "[learner][dp][gloo]") {
  auto opts = trainer_options("ppo");
  auto other = opts;
  other.seed += 1;  // another start: rank 0's core sends its state before the first batch
  auto ranks = start_two_ranks(other);
  auto [co, single] = dp_core_options(opts, ranks.group.get());
  LearnerCore core(co);
  LearnerCore alone(single);
  for (std::uint32_t i = 0; i < 8; ++i) {
    core.admit(random_segment(7 + i), "");
    alone.admit(random_segment(7 + i), "");
    CHECK(core.batch_full() == alone.batch_full());
    if (core.batch_full()) {
      REQUIRE(core.train().ok());
      REQUIRE(alone.train().ok());
    }
  }
  release_learner_ranks(*ranks.group);
  auto done = ranks.rank1.get();
  REQUIRE(done.ok());
  CHECK(*done == 2);
  CHECK(core.updates() == 2);
  CHECK(test::max_diff(core.weights(), alone.weights()) < 2e-5);
}

TEST_CASE("the ranks take the state of whichever learner core trains next, such as one loaded from a checkpoint",
          "[learner][dp][gloo][checkpoint]") {
  auto opts = trainer_options("ppo");
  auto ranks = start_two_ranks(opts);
  auto [co, single] = dp_core_options(opts, ranks.group.get());
  auto feed = [](LearnerCore& core, std::uint32_t from) {
    for (std::uint32_t i = 0; i < 4; ++i) core.admit(random_segment(from + i), "");
    REQUIRE(core.batch_full());
    REQUIRE(core.train().ok());
  };
  // Two updates on one core: the ranks hold its state after them.
  LearnerCore first(co);
  feed(first, 20);
  feed(first, 30);
  const auto saved = first.trainer().save_state();
  // A second core starts from the state after one update (as a resume
  // from an older checkpoint would): the ranks must drop what they hold.
  LearnerCore alone(single);
  feed(alone, 20);
  LearnerCore second(co);
  REQUIRE(second.trainer().load_state(alone.trainer().save_state()).ok());
  feed(second, 40);
  feed(alone, 40);
  CHECK(test::max_diff(second.weights(), alone.weights()) < 2e-5);
  CHECK(second.trainer().version() == 2);
  // And back to the first core, which goes on from its own state.
  LearnerCore again(single);
  REQUIRE(again.trainer().load_state(saved).ok());
  feed(first, 50);
  feed(again, 50);
  CHECK(test::max_diff(first.weights(), again.weights()) < 2e-5);
  release_learner_ranks(*ranks.group);
  auto done = ranks.rank1.get();
  REQUIRE(done.ok());
  CHECK(*done == 4);
}

TEST_CASE("a rank that dies fails the group with a clear error, not a hang", "[learner][dp][gloo][defensive]") {
  auto s = store();
  auto rank1 = std::async(std::launch::async, [&] {
    auto group = LearnerGroup::join(GroupOptions{1, 2, "127.0.0.1", s->port(), 3s});
    return group.ok();  // joins, then goes away: its group is destroyed here
  });
  auto group = LearnerGroup::join(GroupOptions{0, 2, "127.0.0.1", s->port(), 3s});
  REQUIRE(group.ok());
  REQUIRE(rank1.get());
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::uint8_t> bytes{1, 2, 3};
  CHECK_THROWS_AS((*group)->broadcast_bytes(bytes), GroupError);
  CHECK(std::chrono::steady_clock::now() - t0 < 10s);
}

TEST_CASE("a segment the trainer cannot train on is rejected at the learner's door with the reason", "[learner][dp]") {
  auto [co, single] = dp_core_options(trainer_options("ppo"), nullptr);
  LearnerCore core(single);
  auto token = random_segment(1);
  token.tokens = TokenRows{};
  auto a = core.admit(token, "");
  CHECK(a.verdict == Verdict::rejected);
  CHECK(a.reason == "a token segment for the moe_mlp policy");
  CHECK(core.admit(wide_segment(), "").reason == "obs_dim mismatch");
  CHECK(core.admit(std::nullopt, "malformed").reason == "malformed");
  CHECK(core.batch_size() == 0);
  CHECK(core.admission().rejected() == 3);
  CHECK(core.admit(random_segment(2), "").verdict == Verdict::trained);
}

TEST_CASE("a rank whose update fails leaves the group, and rank 0 stops with a clear error instead of a hang",
          "[learner][dp][gloo][defensive]") {
  auto opts = trainer_options("ppo");
  auto ranks = start_two_ranks(opts);
  auto [co, single] = dp_core_options(opts, ranks.group.get());
  LearnerCore core(co);
  // A replayed log is taken at its word: a segment recorded as trained
  // that this trainer refuses lands in rank 1's slice (the door refuses
  // such segments live), so rank 1's update fails and rank 0's does not.
  RolloutRecordData trained;
  for (int i = 0; i < 3; ++i) core.admit_recorded(trained, random_segment(20 + static_cast<std::uint32_t>(i)));
  core.admit_recorded(trained, wide_segment());
  REQUIRE(core.batch_full());
  const auto t0 = std::chrono::steady_clock::now();
  auto r = core.train();
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == Errc::group_broken);
  auto done = ranks.rank1.get();
  REQUIRE_FALSE(done.ok());
  INFO(done.error().message);
  CHECK(done.error().message.find("rank 1's update failed: obs_dim mismatch") != std::string::npos);
  CHECK(std::chrono::steady_clock::now() - t0 < 15s);
}

TEST_CASE("a rank that never comes is a join error after the timeout", "[learner][dp][gloo][defensive]") {
  auto s = store();
  auto group = LearnerGroup::join(GroupOptions{0, 2, "127.0.0.1", s->port(), 1500ms});
  REQUIRE_FALSE(group.ok());
  CHECK(group.error().message.find("could not join the learner group") != std::string::npos);
}

TEST_CASE("garbage sent to the rendezvous store does not stop the ranks from forming and training",
          "[learner][dp][gloo][defensive][net]") {
  auto s = store();
  // Random bytes, each lot on a connection of its own: some start with one
  // of the store's command bytes and so name absurd lengths. (The store
  // listens on every interface of the head: docs/data-parallel.md.)
  for (std::uint32_t i = 0; i < 40; ++i) test::send_garbage(s->port(), 1 + (i * 37) % 300, i);
  auto rank1 = std::async(std::launch::async, [&] {
    auto group = LearnerGroup::join(GroupOptions{1, 2, "127.0.0.1", s->port(), 20s});
    if (!group) return -1.0f;
    auto t = torch::full({3}, 2.0f);
    (*group)->sum(t);
    return t[0].item<float>();
  });
  auto group = LearnerGroup::join(GroupOptions{0, 2, "127.0.0.1", s->port(), 20s});
  REQUIRE(group.ok());
  auto t = torch::full({3}, 1.0f);
  (*group)->sum(t);
  CHECK(t[0].item<float>() == 3.0f);
  CHECK(rank1.get() == 3.0f);
}

TEST_CASE("the rendezvous store can close once the ranks have joined, and the group trains on without it",
          "[learner][dp][gloo][net]") {
  auto s = store();
  const auto port = s->port();
  // Three ranks: ranks 1 and 2 also need each other's addresses from the
  // store, which join's closing barrier waits for.
  auto join = [port](int r) { return LearnerGroup::join(GroupOptions{r, 3, "127.0.0.1", port, 20s}); };
  auto r1 = std::async(std::launch::async, join, 1);
  auto r2 = std::async(std::launch::async, join, 2);
  auto g0 = join(0);
  REQUIRE(g0.ok());
  s.reset();  // as LearnerRanks does once rank 0 has joined
  auto g1 = r1.get();
  auto g2 = r2.get();
  REQUIRE(g1.ok());
  REQUIRE(g2.ok());
  // Nothing listens there any more.
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  CHECK(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0);
  close(fd);
  auto sum_on = [](LearnerGroup& g, float v) {
    auto t = torch::full({4}, v);
    g.sum(t);
    return t[0].item<float>();
  };
  auto f1 = std::async(std::launch::async, sum_on, std::ref(**g1), 2.0f);
  auto f2 = std::async(std::launch::async, sum_on, std::ref(**g2), 3.0f);
  CHECK(sum_on(**g0, 1.0f) == 6.0f);
  CHECK(f1.get() == 6.0f);
  CHECK(f2.get() == 6.0f);
}

TEST_CASE("a packed batch unpacks to the same segments and garbage is refused", "[learner][dp]") {
  std::vector<Segment> in{random_segment(1), random_segment(2)};
  auto bytes = pack_segments(in);
  auto out = unpack_segments(bytes);
  REQUIRE(out.ok());
  REQUIRE(out->size() == 2);
  CHECK(out->at(1).observations == in[1].observations);
  bytes.resize(bytes.size() - 5);
  CHECK_FALSE(unpack_segments(bytes).ok());
  std::vector<std::uint8_t> junk(100, 0xff);
  CHECK_FALSE(unpack_segments(junk).ok());
}

TEST_CASE("asking for CUDA without it is a clear error", "[learner][gpu]") {
  CHECK(check_device("cpu").ok());
  auto bad = check_device("tpu");
  CHECK_FALSE(bad.ok());
  if (!torch::cuda::is_available()) {
    auto cuda = check_device("cuda:0");
    REQUIRE_FALSE(cuda.ok());
    CHECK(cuda.error().message.find("no CUDA or no GPU is visible") != std::string::npos);
  }
}
