// The enum-like settings: each name parses to its enumerator and back, an
// unknown name is refused by the configuration with the names allowed, and
// a value set in code survives the TOML writer.
#include <catch2/catch.hpp>

#include "core/choices.hpp"
#include "tests/helpers.hpp"

using namespace rlx;

namespace {
template <Choice E>
void check_round_trip() {
  const auto names = choice_names<E>();
  REQUIRE_FALSE(names.empty());
  for (std::size_t i = 0; i < names.size(); ++i) {
    const auto e = choice_of<E>(names[i]);
    REQUIRE(e.has_value());
    CHECK(static_cast<std::size_t>(*e) == i);
    CHECK(to_string(*e) == names[i]);
  }
  CHECK_FALSE(choice_of<E>("").has_value());
  CHECK_FALSE(choice_of<E>(names.front() + "x").has_value());
}
}  // namespace

TEST_CASE("every enum-like setting's names map to its enumerators and back", "[core][config]") {
  check_round_trip<RunMode>();
  check_round_trip<PolicyKind>();
  check_round_trip<Algorithm>();
  check_round_trip<Collectives>();
  check_round_trip<EnvPlacement>();
  check_round_trip<EnvProtocol>();
  check_round_trip<Launcher>();
  CHECK(to_string(Collectives::automatic) == "auto");  // a name that is no C++ identifier
}

TEST_CASE("an unknown name of an enum-like setting is refused with the names allowed", "[core][config]") {
  auto mode = test::parse("[run]\nmode = \"lockstep\"\n[[node]]\nname = \"head\"\nexplorers = 1\n");
  REQUIRE_FALSE(mode.ok());
  CHECK(mode.error().code == Errc::config_range);
  CHECK(mode.error().message.find("run.mode") != std::string::npos);
  CHECK(mode.error().message.find("async") != std::string::npos);
  auto kind = test::parse("[policy]\nkind = \"lstm\"\n[[node]]\nname = \"head\"\nexplorers = 1\n");
  REQUIRE_FALSE(kind.ok());
  CHECK(kind.error().code == Errc::config_unknown_name);
  CHECK(kind.error().message.find("moe_transformer") != std::string::npos);
}

TEST_CASE("enum-like settings set in code are written by name and read back", "[core][config]") {
  auto c = test::default_config();
  c.run.mode = RunMode::sync;
  c.learner.batch_segments = static_cast<std::int64_t>(c.total_explorers());
  c.learner.algorithm = Algorithm::vtrace;
  c.learner.correction = Correction::decoupled;  // V-trace has its own (the main job's "none" is refused with it)
  c.explorer.env_placement = EnvPlacement::local;
  c.external.protocol = EnvProtocol::capnp;
  const std::string text = to_toml(c);
  INFO(text);
  CHECK(text.find("mode = 'sync'") != std::string::npos);
  auto back = test::parse(text);
  REQUIRE(back.ok());
  CHECK(back->run.mode == RunMode::sync);
  CHECK(back->learner.algorithm == Algorithm::vtrace);
  CHECK(back->learner.correction == Correction::decoupled);
  CHECK(back->explorer.env_placement == EnvPlacement::local);
  CHECK(back->external.protocol == EnvProtocol::capnp);
  CHECK(back->policy.kind == PolicyKind::moe_mlp);
}
