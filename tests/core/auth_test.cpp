#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <catch2/catch.hpp>

#include "core/auth.hpp"
#include "tests/helpers.hpp"

using namespace rlx;

TEST_CASE("a proof of the cluster secret depends on the secret, the nonce and the node name", "[core][auth]") {
  const std::string s = "0123456789abcdef0123", n = random_nonce();
  const auto p = secret_proof(s, n, "rollout-a");
  CHECK(p.size() == 64);
  CHECK(proofs_equal(p, secret_proof(s, n, "rollout-a")));
  CHECK(!proofs_equal(p, secret_proof(s + "x", n, "rollout-a")));
  CHECK(!proofs_equal(p, secret_proof(s, random_nonce(), "rollout-a")));
  CHECK(!proofs_equal(p, secret_proof(s, n, "rollout-b")));
  CHECK(!proofs_equal(p, ""));
  CHECK(random_nonce() != random_nonce());
  // Known answer from another implementation:
  // printf 'nonce-1\nrollout-a' | openssl dgst -sha256 -hmac Jefe
  CHECK(secret_proof("Jefe", "nonce-1", "rollout-a") ==
        "574b033a04e02ab7c16bacf6fa974da8e3c862260c956a97c493cadf35a1e34e");
}

TEST_CASE("the cluster secret comes from the environment or a file and must be long enough", "[core][auth][config]") {
  const test::TempDir t("rlx-auth-test");
  const auto& dir = t.path;
  const auto file = dir / "secret";
  {
    std::ofstream out(file);
    out << "a-secret-from-a-file-1234\n";
  }
  unsetenv("RLX_CLUSTER_SECRET");
  unsetenv("RLX_CLUSTER_SECRET_FILE");
  auto none = load_cluster_secret();
  REQUIRE(!none.ok());
  CHECK(none.error().code == Errc::not_found);
  CHECK(*load_cluster_secret(file.string()) == "a-secret-from-a-file-1234");  // trailing newline dropped
  setenv("RLX_CLUSTER_SECRET_FILE", file.c_str(), 1);
  CHECK(*load_cluster_secret() == "a-secret-from-a-file-1234");
  setenv("RLX_CLUSTER_SECRET", "short", 1);
  auto short_one = load_cluster_secret();
  REQUIRE(!short_one.ok());
  CHECK(short_one.error().message.find("at least 16") != std::string::npos);
  setenv("RLX_CLUSTER_SECRET", "from-the-environment-0001", 1);
  CHECK(*load_cluster_secret() == "from-the-environment-0001");  // the variable wins over the file
  CHECK(!load_cluster_secret((dir / "missing").string()).ok());
  unsetenv("RLX_CLUSTER_SECRET");
  unsetenv("RLX_CLUSTER_SECRET_FILE");
  std::filesystem::remove_all(dir);
}
