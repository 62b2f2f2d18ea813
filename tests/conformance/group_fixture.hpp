#pragma once

// The fixture of the group conformance suites (group_conformance.cpp,
// proposal_conformance.cpp): a fresh queue with a shape on the store under
// test, two connections, and the calls the tests make.

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/shape.hpp"
#include "persistence/queue/group_codec.hpp"
#include "tests/support/store_harness.hpp"

namespace mm::test {

#define ASSERT_OK(x) \
  ASSERT_TRUE(x) << to_string((x).error().code) << ": " << (x).error().detail

inline std::string shape_of(const std::string& json,
                            const std::vector<std::string>& numbers = {}) {
  auto s = parse_shape("test", json, numbers);
  if (!s)
    throw std::runtime_error(s.error().detail);
  return s->spec;
}

class group_fixture : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    store_ = make_store_under_test(GetParam());
    client_ = std::make_unique<store_client>(store_.factory->connect());
    other_ = std::make_unique<store_client>(store_.factory->connect());
    q_ = fresh_queue(GetParam() + "-groups");
  }

  /// A ticket of the users `users` (the first leads) on `q_`.
  group_ticket_spec
  gspec(const std::string& ticket, const std::vector<std::string>& users,
        const std::string& shape, const std::vector<double>& balance = {},
        uint32_t ttl = 30000) {
    group_ticket_spec s;
    s.queue = q_;
    s.ticket = ticket;
    s.node = "n1";
    s.ttl_ms = ttl;
    s.shape = shape;
    for (size_t i = 0; i < users.size(); ++i) {
      party_member m;
      m.user = users[i];
      m.attrs = "{\"u\":\"" + users[i] + "\"}";
      if (i < balance.size())
        m.balance = std::to_string(static_cast<int64_t>(balance[i]));
      s.members.push_back(std::move(m));
    }
    return s;
  }

  outcome<group_claim_result> claim(store_client& c, const group_ticket_spec& s,
                                    uint32_t scan = 20) {
    return c.call(codec::group_claim_call(s, scan, 10000),
                  codec::parse_group_claim);
  }

  outcome<group_claim_result> claim(const group_ticket_spec& s,
                                    uint32_t scan = 20) {
    return claim(*client_, s, scan);
  }

  std::vector<std::string> waiting() {
    auto v = client_->command({"ZRANGE", codec::group_keys(q_)[0], "0", "-1"});
    std::vector<std::string> out;
    for (auto& e : v.elements)
      out.push_back(e.str);
    return out;
  }

  int64_t score_of(const std::string& ticket) {
    auto v = client_->command({"ZSCORE", codec::group_keys(q_)[0], ticket});
    return v.str.empty() ? -1 : std::stoll(v.str);
  }

  store_under_test store_;
  std::unique_ptr<store_client> client_;
  std::unique_ptr<store_client> other_;
  std::string q_;
};

} // namespace mm::test
