#include "app/matchd/ws_requests.hpp"

#include <nlohmann/json.hpp>

namespace mm {

namespace {

using json = nlohmann::json;

constexpr std::size_t max_id_bytes = 64;

ws_request refuse(ws_request r, const std::string& name,
                  const std::string& detail) {
  r.what = ws_request::kind::refused;
  r.refusal = api_router::error(400, name, detail);
  return r;
}

/// A string id field of the frame, checked as the HTTP path's segment is.
bool id_field(const json& j, const char* key, std::string& out) {
  auto i = j.find(key);
  if (i == j.end() || !i->is_string())
    return false;
  out = i->get<std::string>();
  return valid_api_id(out);
}

std::string id_detail(const char* key) {
  return std::string{key} + ": must be 1-128 bytes of [A-Za-z0-9_.:@-]";
}

} // namespace

ws_request parse_ws_request(std::string_view text, const std::string& user) {
  ws_request r;
  json j = json::parse(text.begin(), text.end(), nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return refuse(std::move(r), "malformed_json",
                  "a request is a JSON object with id and op");
  auto id = j.find("id");
  bool id_ok
    = id != j.end()
      && ((id->is_string() && !id->get_ref<const std::string&>().empty()
           && id->get_ref<const std::string&>().size() <= max_id_bytes)
          || id->is_number_unsigned()
          || (id->is_number_integer() && id->get<int64_t>() >= 0));
  if (!id_ok)
    return refuse(std::move(r), "invalid_argument",
                  "id: a string of 1-64 bytes or an integer >= 0");
  r.id = id->dump(-1, ' ', false, json::error_handler_t::replace);
  auto op_it = j.find("op");
  if (op_it == j.end() || !op_it->is_string())
    return refuse(std::move(r), "invalid_argument", "op: a string");
  const auto& op = op_it->get_ref<const std::string&>();
  const std::string base = "/v1/users/" + user;
  // Routes with a JSON body take the HTTP route's body object as "body".
  auto with_body = [&](bool required) {
    auto b = j.find("body");
    if (b == j.end() && !required) {
      r.body = "{}";
      return true;
    }
    if (b == j.end() || !b->is_object())
      return false;
    r.body = b->dump(-1, ' ', false, json::error_handler_t::replace);
    return true;
  };
  if (op == "join" || op == "swipe") {
    if (!with_body(true))
      return refuse(std::move(r), "malformed_json",
                    "body: the JSON object of the HTTP route");
    r.what = ws_request::kind::http;
    r.method = "POST";
    r.target = base + (op == "join" ? "/tickets" : "/swipes");
    return r;
  }
  if (op == "cancel" || op == "state" || op == "heartbeat") {
    std::string ticket;
    if (!id_field(j, "ticket", ticket))
      return refuse(std::move(r), "invalid_argument", id_detail("ticket"));
    r.what = ws_request::kind::http;
    r.method = op == "cancel" ? "DELETE" : op == "state" ? "GET" : "POST";
    r.target = base + "/tickets/" + ticket;
    if (op == "heartbeat")
      r.target += "/heartbeat";
    return r;
  }
  if (op == "end" || op == "leave" || op == "backfill") {
    std::string session;
    if (!id_field(j, "session", session))
      return refuse(std::move(r), "invalid_argument", id_detail("session"));
    if (!with_body(false))
      return refuse(std::move(r), "malformed_json",
                    "body: the JSON object of the HTTP route");
    r.what = ws_request::kind::http;
    r.method = "POST";
    r.target = base + "/sessions/" + session + "/" + op;
    return r;
  }
  if (op == "party_create") {
    r.what = ws_request::kind::http;
    r.method = "POST";
    r.target = base + "/parties";
    r.body = "{}";
    return r;
  }
  // The party routes: "party" names it; join and queue take a body.
  static const std::pair<const char*, const char*> party_ops[]
    = {{"party_state", ""},
       {"party_join", "/members"},
       {"party_leave", "/leave"},
       {"party_queue", "/tickets"},
       {"party_cancel", "/cancel"}};
  for (auto& [name, tail] : party_ops) {
    if (op != name)
      continue;
    std::string party;
    if (!id_field(j, "party", party))
      return refuse(std::move(r), "invalid_argument", id_detail("party"));
    bool needs_body = op == "party_join" || op == "party_queue";
    if (!with_body(needs_body))
      return refuse(std::move(r), "malformed_json",
                    "body: the JSON object of the HTTP route");
    r.what = ws_request::kind::http;
    r.method = op == "party_state" ? "GET" : "POST";
    r.target = base + "/parties/" + party + tail;
    return r;
  }
  // A member's answer to a proposal: "proposal" names it, the body holds
  // its queue.
  if (op == "proposal_accept" || op == "proposal_decline") {
    std::string proposal;
    if (!id_field(j, "proposal", proposal))
      return refuse(std::move(r), "invalid_argument", id_detail("proposal"));
    if (!with_body(true))
      return refuse(std::move(r), "malformed_json",
                    "body: the JSON object of the HTTP route ({\"queue\"})");
    r.what = ws_request::kind::http;
    r.method = "POST";
    r.target = base + "/proposals/" + proposal
               + (op == "proposal_accept" ? "/accept" : "/decline");
    return r;
  }
  if (op == "auth") {
    auto t = j.find("token");
    if (t == j.end() || !t->is_string()
        || t->get_ref<const std::string&>().empty())
      return refuse(std::move(r), "invalid_argument", "token: a string");
    r.what = ws_request::kind::auth;
    r.token = t->get<std::string>();
    return r;
  }
  auto shown = json(op).dump(-1, ' ', false, json::error_handler_t::replace);
  return refuse(std::move(r), "unknown_op",
                "op " + shown.substr(0, 80)
                  + ": one of join, cancel, state, heartbeat, end, swipe, "
                    "auth");
}

std::string ws_reply_text(const std::string& id_json, const api_reply& r) {
  std::string out = "{\"type\":\"reply\",\"id\":";
  out += id_json;
  out += ",\"status\":";
  out += std::to_string(r.status);
  out += ",\"body\":";
  // User routes answer JSON; anything else is carried as a string.
  if (r.body.empty())
    out += "null";
  else if (r.content_type == "application/json")
    out += r.body;
  else
    out += json(r.body).dump(-1, ' ', false, json::error_handler_t::replace);
  out += '}';
  return out;
}

} // namespace mm
