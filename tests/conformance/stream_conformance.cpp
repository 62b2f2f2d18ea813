// The event stream's commands on every queue store (part of the
// queue_conformance_test binary): XADD with MAXLEN / MAXLEN ~ / MINID /
// NOMKSTREAM, as the outbox relay caps the stream (docs/persistence.md).
// Approximate trimming may keep more in Redis (whole radix-tree nodes) and
// trims exactly in the embedded store; the tests hold for both.

#include <gtest/gtest.h>

#include "tests/support/store_harness.hpp"

using namespace mm;
using namespace mm::test;

namespace {

class stream_conformance : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    store_ = make_store_under_test(GetParam());
    client_ = std::make_unique<store_client>(store_.factory->connect());
    key_ = "mm:events:" + fresh_queue(GetParam());
  }

  /// Runs one command; the reply value, errors included.
  store_value run(store_command cmd) {
    std::vector<store_command> cmds{std::move(cmd)};
    auto r = client_->conn().execute(cmds).at(0);
    EXPECT_EQ(r.code, errc::none) << r.detail;
    return r.value;
  }

  int64_t xlen() {
    return run({"XLEN", key_}).integer;
  }

  /// The ids in the stream, oldest first.
  std::vector<std::string> ids() {
    std::vector<std::string> out;
    for (auto& e : run({"XRANGE", key_, "-", "+"}).elements)
      out.push_back(e.elements.at(0).str);
    return out;
  }

  store_under_test store_;
  std::unique_ptr<store_client> client_;
  std::string key_;
};

std::string id(int i) {
  return std::to_string(i) + "-1";
}

TEST_P(stream_conformance, exact_maxlen_keeps_the_newest_entries) {
  for (int i = 1; i <= 10; ++i) {
    auto r = run({"XADD", key_, "MAXLEN", "4", id(i), "event_id", id(i)});
    ASSERT_EQ(r.type, store_value::kind::string) << r.str;
    EXPECT_EQ(r.str, id(i));
    EXPECT_EQ(xlen(), std::min(i, 4));
  }
  EXPECT_EQ(ids(), (std::vector<std::string>{id(7), id(8), id(9), id(10)}));
  // `=` is the same as no qualifier.
  run({"XADD", key_, "MAXLEN", "=", "2", "*", "event_id", "x"});
  EXPECT_EQ(xlen(), 2);
}

TEST_P(stream_conformance, approximate_maxlen_bounds_the_stream) {
  // What the relay sends: MAXLEN ~ N on every XADD. The stream never ends
  // below N while it has more, and never far above it (Redis keeps at most
  // one radix-tree node beyond N: 100 entries by default).
  const int cap = 50;
  std::vector<std::string> added;
  for (int i = 0; i < 400; ++i) {
    auto r = run({"XADD", key_, "MAXLEN", "~", std::to_string(cap), "*",
                  "event_id", "e" + std::to_string(i), "payload", "{}"});
    ASSERT_EQ(r.type, store_value::kind::string) << r.str;
    added.push_back(r.str);
    auto n = xlen();
    ASSERT_GE(n, std::min<int64_t>(i + 1, cap)) << i;
    ASSERT_LE(n, cap + 100) << i;
  }
  // What is left is the newest entries, in order.
  auto left = ids();
  ASSERT_FALSE(left.empty());
  std::vector<std::string> newest(added.end() - left.size(), added.end());
  EXPECT_EQ(left, newest);
}

TEST_P(stream_conformance, minid_and_nomkstream) {
  for (int i = 1; i <= 4; ++i)
    run({"XADD", key_, id(i), "f", "v"});
  EXPECT_EQ(run({"XADD", key_, "MINID", "3", id(5), "f", "v"}).str, id(5));
  EXPECT_EQ(ids(), (std::vector<std::string>{id(3), id(4), id(5)}));
  auto other = key_ + ":none";
  EXPECT_EQ(run({"XADD", other, "NOMKSTREAM", "*", "f", "v"}).type,
            store_value::kind::nil);
  EXPECT_EQ(run({"EXISTS", other}).integer, 0);
  EXPECT_EQ(
    run({"XADD", key_, "NOMKSTREAM", "MAXLEN", "1", "*", "f", "v"}).type,
    store_value::kind::string);
  EXPECT_EQ(xlen(), 1);
}

TEST_P(stream_conformance, bad_trim_options_are_refused_and_change_nothing) {
  run({"XADD", key_, "*", "f", "v"});
  auto refused = [&](store_command cmd, const std::string& text) {
    auto r = run(cmd);
    EXPECT_EQ(r.type, store_value::kind::error) << cmd[2];
    EXPECT_EQ(r.str, text);
  };
  refused({"XADD", key_, "MAXLEN", "-1", "*", "f", "v"},
          "ERR The MAXLEN argument must be >= 0.");
  refused({"XADD", key_, "MAXLEN", "x", "*", "f", "v"},
          "ERR value is not an integer or out of range");
  refused({"XADD", key_, "MAXLEN", "5", "LIMIT", "2", "*", "f", "v"},
          "ERR syntax error, LIMIT cannot be used without the special ~ "
          "option");
  refused({"XADD", key_, "LIMIT", "2", "*", "f", "v"},
          "ERR syntax error, LIMIT cannot be used without specifying a "
          "trimming strategy");
  refused({"XADD", key_, "MAXLEN", "~", "5", "LIMIT", "-1", "*", "f", "v"},
          "ERR The LIMIT argument must be >= 0.");
  refused({"XADD", key_, "MAXLEN", "5", "MINID", "1", "*", "f", "v"},
          "ERR syntax error, MAXLEN and MINID options at the same time are "
          "not compatible");
  refused({"XADD", key_, "MAXLEN", "5", "*", "f"},
          "ERR wrong number of arguments for 'xadd' command");
  refused({"XADD", key_, "MAXLEN", "5", "bad", "f", "v"},
          "ERR Invalid stream ID specified as stream command argument");
  EXPECT_EQ(xlen(), 1);
}

INSTANTIATE_TEST_SUITE_P(stores, stream_conformance,
                         ::testing::Values("embedded", "redis",
                                           "redis_cluster"),
                         [](const auto& info) { return info.param; });

} // namespace
