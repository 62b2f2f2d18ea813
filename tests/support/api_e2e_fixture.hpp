#pragma once

// The fixture of the matchd end-to-end suites (api_e2e_test over HTTP,
// ws_api_e2e_test over the WebSocket's requests): one matchd per test on
// the embedded stores or on a private Redis + PostgreSQL, a declared queue
// of its own, tokens of a shared secret.

#include <chrono>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "app/common/token.hpp"
#include "tests/support/api_client.hpp"
#include "tests/support/matchd_process.hpp"
#include "tests/support/pg_client.hpp"
#include "tests/support/test_env.hpp"

namespace mm::test {

using namespace std::chrono_literals;

inline const std::string secret = "e2e-secret-0123456789";

inline int64_t now_s() {
  return std::chrono::duration_cast<std::chrono::seconds>(
           std::chrono::system_clock::now().time_since_epoch())
    .count();
}

inline std::string token(const std::string& user) {
  return sign_token(secret, user, now_s() + 3600);
}

inline std::string unique(const std::string& prefix) {
  static std::mt19937_64 rng{std::random_device{}()};
  return prefix + std::to_string(rng() % 1000000000);
}

class api_e2e : public ::testing::TestWithParam<std::string> {
 protected:
  /// Options of this suite's matchd besides the common ones.
  virtual std::vector<std::string> extra_args() const {
    return {};
  }

  void SetUp() override {
    std::vector<std::string> args{"--secret", secret,        "--client-ttl",
                                  "2000",     "--log-level", "warn"};
    // Each test's own queue, declared (the node serves no other); known
    // before extra_args, which may name it (a rules file).
    queue_ = unique("q");
    for (auto& a : extra_args())
      args.push_back(a);
    if (GetParam() == "redis_pg") {
      args.push_back("--redis");
      args.push_back("127.0.0.1:" + std::to_string(redis_port()));
      args.push_back("--postgres");
      args.push_back(pg_conninfo(fresh_database("api_e2e")));
    }
    args.push_back("--queues");
    args.push_back(queue_);
    auto log = std::string{::testing::TempDir()} + "matchd_e2e_" + GetParam()
               + ".log";
    node_ = std::make_unique<matchd_process>(args, log);
    http_ = std::make_unique<http_conn>(node_->port());
  }

  std::string path(const std::string& user, const std::string& rest = "") {
    return "/v1/users/" + user + rest;
  }

  http_answer join(const std::string& user, const std::string& ticket,
                   const std::string& tok = {}) {
    json body{{"queue", queue_}, {"ticket", ticket}};
    return http_->request(http::verb::post, path(user, "/tickets"),
                          tok.empty() ? token(user) : tok, body.dump());
  }

  http_answer like(const std::string& from, const std::string& to) {
    return http_->request(http::verb::post, path(from, "/swipes"), token(from),
                          json{{"to", to}, {"action", "LIKE"}}.dump());
  }

  double gauge(const std::string& name) {
    return metric(*http_, name);
  }

  std::unique_ptr<matchd_process> node_;
  std::unique_ptr<http_conn> http_;
  std::string queue_;
};

} // namespace mm::test
