// The match.created payload is written out by hand on the commit's path
// (match_events.cpp); it must be the text the JSON document would dump,
// whatever the ids hold.

#include <gtest/gtest.h>

#include <chrono>
#include <set>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "persistence/matchdb/match_store.hpp"

using namespace mm;

namespace {

/// The payload as a JSON document, as it was built before.
std::string as_document(const std::string& sid, const match_request& r) {
  nlohmann::json j;
  j["event_id"] = match_created_event_id(sid);
  j["type"] = match_created_type;
  j["session_id"] = sid;
  j["queue"] = r.queue;
  j["users"] = nlohmann::json::array({
    {{"user", r.user_a}, {"ticket", r.ticket_a}},
    {{"user", r.user_b}, {"ticket", r.ticket_b}},
  });
  return j.dump();
}

TEST(match_events, the_created_payload_is_the_documents_text) {
  const std::string awkward[] = {
    "plain",
    "with \"quotes\"",
    "back\\slash",
    "tab\tnew\nline\r",
    "\b\f\x01\x1f",
    "caf\xc3\xa9 \xe2\x82\xac",
    "",
    "/slash</script>",
  };
  for (const auto& a : awkward)
    for (const auto& b : awkward) {
      match_request r;
      r.queue = a;
      r.user_a = a;
      r.ticket_a = b;
      r.user_b = b + "x";
      r.ticket_b = a;
      auto sid = new_session_id();
      auto got = match_created_payload(sid, r);
      EXPECT_EQ(got, as_document(sid, r));
      EXPECT_EQ(nlohmann::json::parse(got).at("users").at(0).at("user"), a);
    }
}

TEST(match_events, session_ids_are_time_ordered_uuids) {
  using namespace std::chrono;
  auto ms_of = [](const std::string& id) {
    // The first 48 bits: 8 + 4 hex digits around the first dash.
    return std::stoll(id.substr(0, 8) + id.substr(9, 4), nullptr, 16);
  };
  std::set<std::string> seen;
  for (int i = 0; i < 1000; ++i) {
    auto before
      = duration_cast<milliseconds>(system_clock::now().time_since_epoch())
          .count();
    auto id = new_session_id();
    auto after
      = duration_cast<milliseconds>(system_clock::now().time_since_epoch())
          .count();
    ASSERT_EQ(id.size(), 36u);
    // 8-4-4-4-12 lower-case hex digits.
    for (size_t k = 0; k < id.size(); ++k) {
      bool dash = k == 8 || k == 13 || k == 18 || k == 23;
      bool digit = std::string_view{"0123456789abcdef"}.find(id[k])
                   != std::string_view::npos;
      EXPECT_TRUE(dash ? id[k] == '-' : digit) << id << " at " << k;
    }
    EXPECT_EQ(id[14], '7');                                         // version 7
    EXPECT_NE(std::string{"89ab"}.find(id[19]), std::string::npos); // variant
    // The time it was made, in ms (a clock stepped back between the two
    // reads would leave the window empty: not on a test's scale).
    EXPECT_GE(ms_of(id), before);
    EXPECT_LE(ms_of(id), after);
    EXPECT_TRUE(seen.insert(id).second) << id;
  }
}

} // namespace
