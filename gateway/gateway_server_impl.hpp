// The gateway endpoint's insides, shared by its source files
// (gateway_server.cpp: the server, sessions and tokenize;
// gateway_completions.cpp: completions, streamed or not). Private to
// gateway/.
#pragma once

#include <atomic>
#include <cstdint>
#include <future>
#include <mutex>
#include <thread>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "gateway/gateway_server.hpp"

namespace rlx {

struct GatewayServer::Impl {
  GatewayServerOptions options;
  httplib::Server server;
  std::uint16_t port = 0;
  mutable std::mutex mu;
  GatewayServed served;
  std::atomic<std::uint64_t> next_id{1};
  int listen_fd = -1;
  std::promise<void> listened;
  std::thread thread;
  void count(std::uint64_t GatewayServed::*field) {
    std::lock_guard lock(mu);
    ++(served.*field);
  }
};


namespace gateway_http {

using Impl = GatewayServer::Impl;
using json = nlohmann::json;

std::string peer_of(const httplib::Request& req);
// OpenAI's error shape with `status`.
void reply_error(httplib::Response& res, int status, const std::string& message, const std::string& type,
                 const std::string& code = "");
// Errors of the hub and the parser, as HTTP (counted).
void reply_error(Impl& impl, httplib::Response& res, const Error& e);
// The bearer token, or 401 (counted, a stranger).
bool authorized(Impl& impl, const httplib::Request& req, httplib::Response& res);
Result<json> json_object_body(const std::string& body);
Result<std::uint64_t> session_number(const std::string& text);

// POST /v1/completions and /v1/chat/completions.
void complete(Impl& impl, const httplib::Request& req, httplib::Response& res, bool chat);

}  // namespace gateway_http
}  // namespace rlx
