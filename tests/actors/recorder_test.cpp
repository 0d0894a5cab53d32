// The recorder at the run's end: what arrives after the final flush (an
// explorer that did not drain in time) is not written and is no error.
#include <filesystem>

#include <caf/all.hpp>
#include <catch2/catch.hpp>
#include <spdlog/sinks/ringbuffer_sink.h>

#include "actors/recorder.hpp"
#include "tests/actors/actor_fixture.hpp"

using namespace rlx;

TEST_CASE_METHOD(test::ActorFixture, "a record after the final flush is not written and is no error",
                 "[actors][replay]") {
  const auto dir = std::filesystem::temp_directory_path() / ("rlx-recorder-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  auto writer = LogWriter::create(LogWriterOptions{dir});
  REQUIRE(writer.ok());
  std::shared_ptr<LogWriter> shared = std::move(*writer);
  auto sink = std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(16);
  auto log = std::make_shared<spdlog::logger>("recorder", sink);
  auto recorder = spawn_recorder(system, RecorderOptions{shared, {}, log});
  caf::scoped_actor self{system};

  self->send(recorder, version_atom::value, std::uint64_t{1}, std::uint64_t{7}, std::uint64_t{1}, std::uint64_t{10});
  std::uint64_t first = 0, second = 0;
  self->request(recorder, caf::infinite, flush_atom::value).receive([&](std::uint64_t n) { first = n; },
                                                                      [](const caf::error&) { FAIL("no flush"); });
  CHECK(first == 1);
  for (int i = 0; i < 3; ++i)  // late versions, after the log closed
    self->send(recorder, version_atom::value, static_cast<std::uint64_t>(2 + i), std::uint64_t{7}, std::uint64_t{2}, std::uint64_t{10});
  self->request(recorder, caf::infinite, flush_atom::value).receive([&](std::uint64_t n) { second = n; },
                                                                      [](const caf::error&) { FAIL("no flush"); });
  CHECK(second == 1);
  const auto said = sink->last_raw();
  int errors = 0, warnings = 0;
  for (const auto& m : said) errors += m.level == spdlog::level::err, warnings += m.level == spdlog::level::warn;
  CHECK(errors == 0);
  CHECK(warnings == 1);  // said once
  self->send_exit(recorder, caf::exit_reason::user_shutdown);
  std::filesystem::remove_all(dir);
}
