// The console's lookups and actions (console_actions.hpp).

#include "app/matchd/console_actions.hpp"

#include <algorithm>
#include <chrono>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/matchd/api_util.hpp"

namespace mm {

// -- engine_port's defaults: an engine without the console's calls ------------

bool engine_port::has_user(const std::string&) const {
  return false;
}

void engine_port::find_session(const std::string&,
                               std::function<void(outcome<std::string>)> cb) {
  cb(failure{errc::not_found, "no database here"});
}

void engine_port::cluster_stats(std::function<void(outcome<std::string>)> cb) {
  cb(failure{errc::not_found, "no cluster view here"});
}

void engine_port::inspect(const std::string&, ticket_cb cb) {
  cb(failure{errc::not_found, "no such user on this node"});
}

void engine_port::cancel_because(const std::string& user,
                                 const std::string& ticket, const std::string&,
                                 ticket_cb cb) {
  cancel(user, ticket, std::move(cb));
}

bool paused_queues::has(const std::string& queue) const {
  std::lock_guard<std::mutex> guard{mtx_};
  return names_.count(queue) != 0;
}

bool paused_queues::set(const std::string& queue, bool paused) {
  std::lock_guard<std::mutex> guard{mtx_};
  return paused ? names_.insert(queue).second : names_.erase(queue) != 0;
}

std::vector<std::string> paused_queues::list() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return {names_.begin(), names_.end()};
}

namespace {

using api_detail::json;
using api_detail::text;

const std::string prefix = "/v1/console/";

std::vector<std::string> segments(const std::string& path) {
  std::vector<std::string> out;
  size_t i = prefix.size();
  while (i <= path.size()) {
    auto j = path.find('/', i);
    if (j == std::string::npos)
      j = path.size();
    out.push_back(path.substr(i, j - i));
    i = j + 1;
  }
  return out;
}

int64_t unix_ms() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch())
    .count();
}

/// One audited request: who, what on which target, and how it ended. A
/// copy of each: the engine may answer after the request that asked is
/// gone (console_actions_test).
struct audited {
  console_operator who;
  std::shared_ptr<console_audit> audit;
  std::string action;
  json target = json::object();

  /// Writes the entry for `r` and hands `r` on.
  void answer(const reply_fn& reply, api_reply r) const {
    json e{{"at_ms", unix_ms()},
           {"operator", who.name},
           {"role", to_string(who.role)},
           {"action", action},
           {"target", target},
           {"status", r.status}};
    auto body = json::parse(r.body, nullptr, false);
    if (r.status >= 400 && body.is_object())
      e["error"] = body.value("error", std::string{});
    audit->write(text(e));
    reply(std::move(r));
  }
};

api_reply forbidden_role(const console_operator& who, const std::string& what) {
  return api_router::error(403, "forbidden_role",
                           "the viewer '" + who.name + "' may not " + what
                             + " (an operator's action)");
}

/// The engine's answer about a ticket, as the API names it.
ticket_cb ticket_answer(audited a, reply_fn reply) {
  return api_detail::guarded<outcome<ticket_view>>(
    reply, [a = std::move(a), reply](outcome<ticket_view> r) {
      if (!r) {
        a.answer(reply, api_detail::refusal(r.error()));
        return;
      }
      a.answer(reply, api_reply{200, to_json(*r)});
    });
}

void on_user(const console_operator& who, const std::string& method,
             const std::vector<std::string>& seg, const console_hooks& hooks,
             std::shared_ptr<console_audit> audit, const reply_fn& reply) {
  // users/{user}, users/{user}/tickets/{ticket}/cancel,
  // users/{user}/sessions/{session}/end
  const auto& user = seg[1];
  bool lookup = seg.size() == 2;
  bool cancel = seg.size() == 5 && seg[2] == "tickets" && seg[4] == "cancel";
  bool end = seg.size() == 5 && seg[2] == "sessions" && seg[4] == "end";
  if (!lookup && !cancel && !end) {
    reply(api_router::error(404, "unknown_route", "no console route"));
    return;
  }
  if (method != (lookup ? "GET" : "POST")) {
    reply(api_router::error(405, "method_not_allowed", method));
    return;
  }
  audited a{who, audit,
            lookup   ? "lookup_user"
            : cancel ? "cancel_ticket"
                     : "end_session"};
  a.target["user"] = user;
  if (!lookup)
    a.target[cancel ? "ticket" : "session"] = seg[3];
  if (!valid_api_id(user) || (!lookup && !valid_api_id(seg[3]))) {
    a.answer(reply, api_detail::bad_id(lookup ? "user" : "id"));
    return;
  }
  if (!lookup && who.role != console_role::operator_) {
    a.answer(reply,
             forbidden_role(who, cancel ? "cancel tickets" : "end sessions"));
    return;
  }
  if (!hooks.port || !hooks.port->has_user(user)) {
    a.answer(reply,
             api_router::error(404, "user_not_here",
                               "user '" + user
                                 + "' has no link on this node: act on the "
                                   "node it is connected to"));
    return;
  }
  if (lookup) {
    hooks.port->inspect(user, ticket_answer(a, reply));
    return;
  }
  if (cancel) {
    hooks.port->cancel_because(user, seg[3], "cancelled by an operator",
                               ticket_answer(a, reply));
    return;
  }
  hooks.port->end(
    user, seg[3], "ended by operator " + who.name,
    api_detail::guarded<outcome<end_view>>(reply, [a,
                                                   reply](outcome<end_view> r) {
      if (!r) {
        a.answer(reply, api_detail::refusal(r.error()));
        return;
      }
      json out{{"session_id", r->session_id}, {"state", "ended"},
               {"queue", r->queue},           {"ended_by", r->ended_by},
               {"reason", r->reason},         {"ended_now", r->ended_now}};
      a.answer(reply, api_reply{200, text(out)});
    }));
}

void on_session(const console_operator& who, const std::string& method,
                const std::string& id, const console_hooks& hooks,
                std::shared_ptr<console_audit> audit, const reply_fn& reply) {
  // sessions/{session}: from the database, whichever node holds it.
  if (method != "GET") {
    reply(api_router::error(405, "method_not_allowed", method));
    return;
  }
  audited a{who, audit, "lookup_session"};
  a.target["session"] = id;
  if (!valid_api_id(id)) {
    a.answer(reply, api_detail::bad_id("session"));
    return;
  }
  if (!hooks.port) {
    a.answer(reply, api_router::error(404, "not_found", "no database here"));
    return;
  }
  hooks.port->find_session(
    id, api_detail::guarded<outcome<std::string>>(
          reply, [a, reply](outcome<std::string> r) {
            if (!r) {
              a.answer(reply, api_detail::refusal(r.error()));
              return;
            }
            a.answer(reply, api_reply{200, std::move(*r)});
          }));
}

void on_switch(const console_operator& who, const std::string& method,
               const std::vector<std::string>& seg, const console_hooks& hooks,
               const std::vector<std::string>& queues,
               std::shared_ptr<console_audit> audit, const reply_fn& reply) {
  // queues/{queue}/pause|resume, node/drain|resume
  bool queue = seg[0] == "queues" && seg.size() == 3
               && (seg[2] == "pause" || seg[2] == "resume");
  bool node = seg[0] == "node" && seg.size() == 2
              && (seg[1] == "drain" || seg[1] == "resume");
  if (!queue && !node) {
    reply(api_router::error(404, "unknown_route", "no console route"));
    return;
  }
  if (method != "POST") {
    reply(api_router::error(405, "method_not_allowed", method));
    return;
  }
  const auto& verb = seg.back();
  audited a{who, audit,
            queue ? (verb == "pause" ? "pause_queue" : "resume_queue")
                  : (verb == "drain" ? "drain_node" : "resume_node")};
  if (queue)
    a.target["queue"] = seg[1];
  if (who.role != console_role::operator_) {
    a.answer(reply, forbidden_role(who, queue ? verb + " queues"
                                              : verb + " the node"));
    return;
  }
  if (queue) {
    const auto& q = seg[1];
    bool known = queues.empty()
                   ? valid_api_id(q)
                   : std::find(queues.begin(), queues.end(), q) != queues.end();
    if (!known || !hooks.paused) {
      a.answer(reply, api_router::error(404, "unknown_queue",
                                        "unknown queue '" + q + "'"));
      return;
    }
    bool changed = hooks.paused->set(q, verb == "pause");
    a.answer(reply, api_reply{200, text(json{{"queue", q},
                                             {"paused", verb == "pause"},
                                             {"changed", changed}})});
    return;
  }
  if (hooks.draining == nullptr) {
    a.answer(reply, api_router::error(404, "unknown_route",
                                      "this node cannot drain from here"));
    return;
  }
  bool drain = verb == "drain";
  bool changed = hooks.draining->exchange(drain) != drain;
  a.answer(reply, api_reply{200, text(json{{"draining", drain},
                                           {"changed", changed}})});
}

} // namespace

bool is_console_action(const std::string& path) noexcept {
  if (path.compare(0, prefix.size(), prefix) != 0)
    return false;
  auto rest = path.substr(prefix.size());
  return rest == "whoami" || rest == "audit" || rest.rfind("users/", 0) == 0
         || rest.rfind("queues/", 0) == 0 || rest.rfind("node/", 0) == 0
         || rest.rfind("sessions/", 0) == 0;
}

void serve_console_action(const console_operator& who,
                          const std::string& method, const std::string& path,
                          const console_hooks& hooks,
                          const std::vector<std::string>& queues,
                          std::shared_ptr<console_audit> audit,
                          const reply_fn& reply) {
  auto seg = segments(path);
  if (seg.size() == 1 && (seg[0] == "whoami" || seg[0] == "audit")) {
    if (method != "GET") {
      reply(api_router::error(405, "method_not_allowed", method + " " + path));
      return;
    }
    api_reply r{
      200, seg[0] == "whoami"
             ? text(json{{"name", who.name}, {"role", to_string(who.role)}})
             : "{\"entries\":" + audit->recent_json() + "}"};
    r.headers = {{"Cache-Control", "no-store"}};
    reply(std::move(r));
    return;
  }
  if (seg[0] == "users" && seg.size() >= 2) {
    on_user(who, method, seg, hooks, audit, reply);
    return;
  }
  if (seg[0] == "sessions" && seg.size() == 2) {
    on_session(who, method, seg[1], hooks, audit, reply);
    return;
  }
  if (seg[0] == "queues" || seg[0] == "node") {
    on_switch(who, method, seg, hooks, queues, audit, reply);
    return;
  }
  reply(
    api_router::error(404, "unknown_route", "no route " + method + " " + path));
}

} // namespace mm
