#include "core/auth.hpp"

#include <cstdlib>
#include <fstream>
#include <sstream>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

namespace rlx {

namespace {

std::string hex(const unsigned char* p, std::size_t n) {
  static const char digits[] = "0123456789abcdef";
  std::string out(2 * n, '0');
  for (std::size_t i = 0; i < n; ++i) {
    out[2 * i] = digits[p[i] >> 4];
    out[2 * i + 1] = digits[p[i] & 15];
  }
  return out;
}

std::string random_hex(std::size_t bytes) {
  std::string raw(bytes, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(raw.data()), static_cast<int>(bytes)) != 1)
    throw std::runtime_error("the system random generator failed");
  return hex(reinterpret_cast<const unsigned char*>(raw.data()), bytes);
}

Result<std::string> read_secret_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(Errc::io, "cannot read the cluster secret file " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  if (!s.empty() && s.back() == '\n') s.pop_back();
  if (!s.empty() && s.back() == '\r') s.pop_back();
  return s;
}

}  // namespace

Result<std::string> load_cluster_secret(const std::string& file) {
  std::string secret, from;
  if (!file.empty()) {
    auto s = read_secret_file(file);
    if (!s) return s.error();
    secret = *s;
    from = file;
  } else if (const char* v = std::getenv("RLX_CLUSTER_SECRET"); v && *v) {
    secret = v;
    from = "RLX_CLUSTER_SECRET";
  } else if (const char* f = std::getenv("RLX_CLUSTER_SECRET_FILE"); f && *f) {
    auto s = read_secret_file(f);
    if (!s) return s.error();
    secret = *s;
    from = f;
  } else {
    return make_error(Errc::not_found,
                      "no cluster secret: set RLX_CLUSTER_SECRET or RLX_CLUSTER_SECRET_FILE (or pass --secret-file)");
  }
  if (secret.size() < 16)
    return make_error(Errc::config_range, "the cluster secret from " + from + " is " + std::to_string(secret.size()) +
                                              " bytes; at least 16 are needed");
  return secret;
}

std::string random_secret() { return random_hex(32); }

std::string random_nonce() { return random_hex(32); }

std::string secret_proof(const std::string& secret, const std::string& nonce, const std::string& node) {
  const std::string msg = nonce + "\n" + node;
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()), reinterpret_cast<const unsigned char*>(msg.data()),
       msg.size(), mac, &len);
  return hex(mac, len);
}

bool proofs_equal(const std::string& a, const std::string& b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace rlx
