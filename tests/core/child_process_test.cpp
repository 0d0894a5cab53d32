// Starting child processes (core/child_process.hpp): exec's own error comes
// back as the reason, pipes and a working directory reach the child, and
// a bare name is found in PATH when asked.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <fstream>

#include "core/child_process.hpp"
#include "tests/helpers.hpp"

using namespace rlx;

TEST_CASE("a program that cannot be executed is an error with exec's reason",
          "[core][child]") {
  auto missing = spawn_child({"/nonexistent/rlx-program"});
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().code == Errc::io);
  CHECK(missing.error().message.find("No such file or directory") != std::string::npos);
  ChildOptions in_missing_dir;
  in_missing_dir.cwd = "/nonexistent-dir";
  auto bad_cwd = spawn_child({"/bin/true"}, in_missing_dir);
  REQUIRE_FALSE(bad_cwd.ok());
  CHECK(bad_cwd.error().message.find("/nonexistent-dir") != std::string::npos);
}

TEST_CASE("a child gets the pipes, the working directory and the environment it is given", "[core][child]") {
  test::TempDir dir("rlx-child");
  int to_child[2], from_child[2];
  REQUIRE(pipe(to_child) == 0);
  REQUIRE(pipe(from_child) == 0);
  ChildOptions o;
  o.stdin_fd = to_child[0];
  o.stdout_fd = from_child[1];
  o.cwd = dir.path.string();
  o.env = {"RLX_CHILD_TEST=marked"};
  o.search_path = true;  // "sh", not "/bin/sh"
  auto pid = spawn_child({"sh", "-c", "read line; echo \"$line $RLX_CHILD_TEST $(pwd)\""}, o);
  REQUIRE(pid.ok());
  close(to_child[0]);
  close(from_child[1]);
  const std::string hello = "hello\n";
  REQUIRE(write(to_child[1], hello.data(), hello.size()) == static_cast<ssize_t>(hello.size()));
  close(to_child[1]);
  std::string out;
  char buf[256];
  for (ssize_t n; (n = read(from_child[0], buf, sizeof buf)) > 0;) out.append(buf, static_cast<std::size_t>(n));
  close(from_child[0]);
  const auto reaped = reap_children({*pid}, std::chrono::seconds(5));
  REQUIRE(reaped.size() == 1);
  CHECK(reaped[0].clean);
  CHECK(out == "hello marked " + std::filesystem::canonical(dir.path).string() + "\n");
}
