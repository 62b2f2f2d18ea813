// Fuzz target `body`: the JSON bodies of the API's POST routes (join, swipe,
// end) and the attrs of a join, sent with a valid token through the real
// router and engine. Byte 0 picks the route and the user (see `route`); the
// rest is the body, or for route 3 the inside of the attrs string of a join
// (escapes, invalid UTF-8, lengths).
//
// Invariants, against an independent reading of the body with nlohmann:
// a body that is not a JSON object is refused 400 `malformed_json`, and a
// JSON object never is; a field outside the documented bounds is refused 400
// (404 `unknown_queue` for a well-formed, undeclared queue) and a body
// within them is not refused 400; what a 200 answers is what was asked;
// attrs the match store would refuse (a NUL) are refused at the door.

#include <cstddef>
#include <cstdint>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "app/common/token.hpp"
#include "tests/fuzz/api_fixture.hpp"

using namespace mm;
using json = nlohmann::json;

namespace {

bool is_string_field(const json& j, const char* key, std::string& out) {
  auto i = j.find(key);
  if (i == j.end() || !i->is_string())
    return false;
  out = i->get<std::string>();
  return true;
}

/// Absent, or a string within `max` bytes.
bool optional_string(const json& j, const char* key, size_t max,
                     std::string& out) {
  auto i = j.find(key);
  if (i == j.end())
    return true;
  if (!i->is_string())
    return false;
  out = i->get<std::string>();
  return out.size() <= max;
}

void expect(bool ok, const std::string& what, const api_reply& r,
            const std::string& input) {
  if (!ok)
    fuzz::fail(what + " (answer " + std::to_string(r.status) + " " + r.body
                 + ")",
               input);
}

void check_join(const std::string& user, const json& j, const api_reply& r,
                const std::string& input) {
  std::string queue, ticket, attrs;
  bool bad = !is_string_field(j, "queue", queue) || !valid_api_id(queue)
             || !is_string_field(j, "ticket", ticket) || !valid_api_id(ticket)
             || !optional_string(j, "attrs", 4096, attrs)
             || attrs.find('\0') != std::string::npos;
  if (auto g = j.find("give_up_after_s"); g != j.end())
    bad = bad || !g->is_number_integer() || g->get<int64_t>() < 1
          || g->get<int64_t>() > 86400;
  bool declared = queue == "default" || queue == "voice";
  auto name = fuzz::error_name(r);
  if (bad) {
    expect(r.status == 400 || (r.status == 404 && name == "unknown_queue"),
           "a join outside the bounds was not refused", r, input);
    return;
  }
  if (!declared) {
    expect(r.status == 404 && name == "unknown_queue",
           "a join of an undeclared queue was not refused 404", r, input);
    return;
  }
  expect(r.status != 400 && r.status != 404, "a well-formed join was refused",
         r, input);
  if (r.status != 200)
    return;
  // The user and ticket asked for; the queue is the one the ticket was
  // first joined in (a join is idempotent per user and ticket).
  auto a = json::parse(r.body);
  expect(a.value("user", "") == user && a.value("ticket", "") == ticket,
         "the join answered another ticket", r, input);
  static const std::set<std::string> states{
    "claiming", "queued", "finalizing", "matched", "cancelled", "failed"};
  expect(states.count(a.value("state", "")) > 0, "unknown ticket state", r,
         input);
}

void check_swipe(const std::string& user, const json& j, const api_reply& r,
                 const std::string& input) {
  std::string to, action;
  bool bad = !is_string_field(j, "to", to)
             || !is_string_field(j, "action", action) || !valid_api_id(to)
             || to == user || (action != "LIKE" && action != "DISLIKE");
  expect(bad == (r.status == 400), "swipe validation disagrees", r, input);
  if (r.status == 200) {
    auto a = json::parse(r.body);
    expect(a.contains("mutual") && a["mutual"].is_boolean()
             && a.contains("created") && a["created"].is_boolean(),
           "a swipe answer without mutual/created", r, input);
  }
}

void check_end(const json& j, const api_reply& r, const std::string& input) {
  std::string reason = "ended";
  bool bad = !optional_string(j, "reason", 256, reason) || reason.empty();
  expect(bad == (r.status == 400), "end validation disagrees", r, input);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1)
    return 0;
  const std::string input(reinterpret_cast<const char*>(data), size);
  auto route = data[0] % 4;
  const std::string user = (data[0] / 4) % 2 == 0 ? "alice" : "bob";
  std::string body = input.substr(1);
  if (route == 3)
    body = R"({"queue":"default","ticket":"t-attrs","attrs":")" + body + "\"}";
  static const std::string auth
    = "Bearer " + sign_token(fuzz::secret, "alice", 4102444800);
  static const std::string auth_bob
    = "Bearer " + sign_token(fuzz::secret, "bob", 4102444800);
  std::string target = "/v1/users/" + user
                       + (route == 1   ? "/swipes"
                          : route == 2 ? "/sessions/s-unknown/end"
                                       : "/tickets");
  auto r = fuzz::ask("POST", target, user == "alice" ? auth : auth_bob, body);
  fuzz::check_reply(r, input);
  auto j = json::parse(body, nullptr, false);
  bool object = !j.is_discarded() && j.is_object();
  auto name = fuzz::error_name(r);
  expect(object == (name != "malformed_json"),
         object ? "a JSON object refused as malformed"
                : "a body that is not a JSON object was not refused",
         r, input);
  if (!object)
    return 0;
  if (route == 0 || route == 3)
    check_join(user, j, r, input);
  else if (route == 1)
    check_swipe(user, j, r, input);
  else
    check_end(j, r, input);
  return 0;
}
