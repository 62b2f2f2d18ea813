// The console's actions (app/matchd/console_actions.hpp) answer after the
// engine does, on another thread and after the request that asked is
// gone: the audit entry still names who asked (it once held a reference
// to the caller's login, read after the caller had dropped it).

#include <gtest/gtest.h>

#include <optional>

#include <nlohmann/json.hpp>

#include "app/matchd/console_actions.hpp"

using namespace mm;

namespace {

/// An engine that holds a lookup's callback until told to answer.
class later_port : public engine_port {
 public:
  void join(const std::string&, const std::string&, const std::string&,
            const std::string&, uint32_t, ticket_cb cb) override {
    cb(failure{errc::not_found, "unused"});
  }
  void cancel(const std::string&, const std::string&, ticket_cb cb) override {
    cb(failure{errc::not_found, "unused"});
  }
  void state(const std::string&, const std::string&, ticket_cb cb) override {
    cb(failure{errc::not_found, "unused"});
  }
  void swipe(const std::string&, const std::string&, bool,
             swipe_cb cb) override {
    cb(failure{errc::not_found, "unused"});
  }
  void end(const std::string&, const std::string&, const std::string&,
           end_cb cb) override {
    cb(failure{errc::not_found, "unused"});
  }
  bool has_user(const std::string&) const override {
    return true;
  }
  void inspect(const std::string& user, ticket_cb cb) override {
    user_ = user;
    held_ = std::move(cb);
  }
  void answer() {
    ticket_view v;
    v.user = user_;
    v.state = "queued";
    held_(v);
  }

 private:
  std::string user_;
  ticket_cb held_;
};

} // namespace

TEST(console_actions, an_answer_after_the_request_names_who_asked) {
  auto port = std::make_shared<later_port>();
  auto audit = std::make_shared<console_audit>();
  console_hooks hooks{port, nullptr, nullptr};
  unsigned status = 0;
  // The login lives in storage the caller reuses once it has asked.
  std::optional<console_operator> who{
    console_operator{"alice-the-operator", console_role::operator_}};
  serve_console_action(*who, "GET", "/v1/console/users/u1", hooks, {}, audit,
                       [&](api_reply r) { status = r.status; });
  who.reset();
  who.emplace(console_operator{"mallory-the-other", console_role::viewer});
  port->answer();
  EXPECT_EQ(status, 200u);
  auto entries = nlohmann::json::parse(audit->recent_json());
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0]["operator"], "alice-the-operator");
  EXPECT_EQ(entries[0]["role"], "operator");
  EXPECT_EQ(entries[0]["action"], "lookup_user");
}
