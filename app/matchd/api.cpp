#include "app/matchd/api.hpp"
#include "app/matchd/api_util.hpp"
#include "app/matchd/party_api.hpp"

#include "core/ticket_id.hpp"

#include <chrono>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/common/token.hpp"
#include "app/matchd/console.hpp"
#include "app/matchd/hub.hpp"
#include "core/log_limit.hpp"
#include "core/logger.hpp"

#include <spdlog/spdlog.h>

namespace mm {

using namespace api_detail;

namespace {

std::vector<std::string> split_path(const std::string& path) {
  std::vector<std::string> out;
  size_t pos = 1;
  while (pos <= path.size()) {
    auto next = path.find('/', pos);
    if (next == std::string::npos)
      next = path.size();
    out.push_back(path.substr(pos, next - pos));
    pos = next + 1;
  }
  return out;
}

std::string query_param(const std::string& query, const std::string& key) {
  size_t pos = 0;
  while (pos < query.size()) {
    auto amp = query.find('&', pos);
    if (amp == std::string::npos)
      amp = query.size();
    auto item = query.substr(pos, amp - pos);
    if (item.compare(0, key.size() + 1, key + "=") == 0)
      return item.substr(key.size() + 1);
    pos = amp + 1;
  }
  return {};
}

std::string bearer(const std::string& authorization) {
  static const std::string prefix = "Bearer ";
  if (authorization.compare(0, prefix.size(), prefix) != 0)
    return {};
  return authorization.substr(prefix.size());
}

int64_t unix_now() {
  using namespace std::chrono;
  return duration_cast<seconds>(system_clock::now().time_since_epoch()).count();
}

// -- the route table ----------------------------------------------------------

enum class route_id {
  healthz,
  readyz,
  metrics,
  openapi,
  join,
  ticket_get,
  ticket_cancel,
  heartbeat,
  swipe,
  end,
  events,
  party,        // answered by serve_party (app/matchd/party_api.hpp)
  console_page, // answered by console_routes (docs/console.md) ...
  console_asset,
  console_stats,
  console_demo,   // ... when the console or the demo is on
  console_action, // lookups and actions (app/matchd/console_actions.hpp)
};

struct route_entry {
  route_id id;
  api_route spec;
  party_route party = party_route::create; ///< of a `party` route
};

// Every route the router answers: dispatch below, api_routes() and the
// OpenAPI coverage test read this one table. A new route goes here, in
// docs/openapi.yaml and in docs/api.md.
const route_entry route_table[] = {
  {route_id::healthz, {"GET", "/healthz", false, false}},
  {route_id::readyz, {"GET", "/readyz", false, false}},
  {route_id::metrics, {"GET", "/metrics", false, false}},
  {route_id::openapi, {"GET", "/openapi.json", false, false}},
  {route_id::join, {"POST", "/v1/users/{user}/tickets", false, true}},
  {route_id::ticket_get,
   {"GET", "/v1/users/{user}/tickets/{ticket}", false, true}},
  {route_id::ticket_cancel,
   {"DELETE", "/v1/users/{user}/tickets/{ticket}", false, true}},
  {route_id::heartbeat,
   {"POST", "/v1/users/{user}/tickets/{ticket}/heartbeat", false, true}},
  {route_id::swipe, {"POST", "/v1/users/{user}/swipes", false, true}},
  {route_id::end,
   {"POST", "/v1/users/{user}/sessions/{session}/end", false, true}},
  {route_id::events, {"GET", "/v1/users/{user}/events", true, true}},
  {route_id::party,
   {"POST", "/v1/users/{user}/sessions/{session}/leave", false, true},
   party_route::leave_session},
  {route_id::party,
   {"POST", "/v1/users/{user}/parties", false, true},
   party_route::create},
  {route_id::party,
   {"GET", "/v1/users/{user}/parties/{party}", false, true},
   party_route::state},
  {route_id::party,
   {"POST", "/v1/users/{user}/parties/{party}/members", false, true},
   party_route::join},
  {route_id::party,
   {"POST", "/v1/users/{user}/parties/{party}/leave", false, true},
   party_route::leave},
  {route_id::party,
   {"POST", "/v1/users/{user}/parties/{party}/tickets", false, true},
   party_route::queue},
  {route_id::party,
   {"POST", "/v1/users/{user}/parties/{party}/cancel", false, true},
   party_route::cancel},
  {route_id::party,
   {"POST", "/v1/users/{user}/proposals/{proposal}/accept", false, true},
   party_route::accept},
  {route_id::party,
   {"POST", "/v1/users/{user}/proposals/{proposal}/decline", false, true},
   party_route::decline},
  {route_id::party,
   {"POST", "/v1/users/{user}/sessions/{session}/backfill", false, true},
   party_route::backfill},
  // The web console: console_routes answers them (its own operator token
  // for the stats) when it is on; off, they are unknown routes.
  {route_id::console_page, {"GET", "/console", false, false}},
  {route_id::console_asset, {"GET", "/console/{asset}", false, false}},
  {route_id::console_stats, {"GET", "/v1/console/stats", false, true}},
  {route_id::console_demo, {"POST", "/v1/console/demo", false, false}},
  {route_id::console_stats, {"GET", "/v1/console/history", false, true}},
  {route_id::console_stats, {"GET", "/v1/console/cluster", false, true}},
  {route_id::console_action, {"GET", "/v1/console/whoami", false, true}},
  {route_id::console_action, {"GET", "/v1/console/audit", false, true}},
  {route_id::console_action, {"GET", "/v1/console/users/{user}", false, true}},
  {route_id::console_action,
   {"GET", "/v1/console/sessions/{session}", false, true}},
  {route_id::console_action,
   {"POST", "/v1/console/users/{user}/tickets/{ticket}/cancel", false, true}},
  {route_id::console_action,
   {"POST", "/v1/console/users/{user}/sessions/{session}/end", false, true}},
  {route_id::console_action,
   {"POST", "/v1/console/queues/{queue}/pause", false, true}},
  {route_id::console_action,
   {"POST", "/v1/console/queues/{queue}/resume", false, true}},
  {route_id::console_action, {"POST", "/v1/console/node/drain", false, true}},
  {route_id::console_action, {"POST", "/v1/console/node/resume", false, true}},
};

/// The segments of each table entry's path, split once.
const std::vector<std::vector<std::string>>& table_segments() {
  static const auto segs = [] {
    std::vector<std::vector<std::string>> out;
    for (auto& r : route_table)
      out.push_back(split_path(r.spec.path));
    return out;
  }();
  return segs;
}

/// True when `parts` (a split path) fits `segs` (a split template); a
/// `{name}` segment takes any one segment, which goes to `params` in order.
bool path_fits(const std::vector<std::string>& segs,
               const std::vector<std::string>& parts,
               std::vector<std::string>& params) {
  if (segs.size() != parts.size())
    return false;
  std::vector<std::string> out;
  for (size_t i = 0; i < segs.size(); ++i) {
    if (!segs[i].empty() && segs[i].front() == '{')
      out.push_back(parts[i]);
    else if (segs[i] != parts[i])
      return false;
  }
  params = std::move(out);
  return true;
}

struct route_match {
  const route_entry* route = nullptr; ///< null: no route for the method
  bool path_known = false;            ///< some route has this path
  bool path_is_websocket = false;     ///< ... and it is a WebSocket route
  std::vector<std::string> params;
};

/// The route for `method` and `path`, as an upgrade (`websocket`) or as a
/// plain request.
route_match find_route(const std::string& method, const std::string& path,
                       bool websocket) {
  route_match m;
  auto parts = split_path(path);
  std::vector<std::string> params;
  auto& segs = table_segments();
  for (size_t i = 0; i < std::size(route_table); ++i) {
    auto& r = route_table[i];
    if (!path_fits(segs[i], parts, params))
      continue;
    m.path_known = true;
    m.path_is_websocket |= r.spec.websocket;
    if (r.spec.websocket == websocket && method == r.spec.method) {
      m.route = &r;
      m.params = std::move(params);
      return m;
    }
  }
  return m;
}

} // namespace

engine_port::~engine_port() {
  // nop
}

const std::vector<api_route>& api_routes() {
  static const std::vector<api_route> routes = [] {
    std::vector<api_route> out;
    for (auto& r : route_table)
      out.push_back(r.spec);
    return out;
  }();
  return routes;
}

bool valid_api_id(const std::string& id) noexcept {
  return valid_client_id(id);
}

std::string to_json(const ticket_view& t) {
  json j{{"user", t.user},
         {"queue", t.queue},
         {"ticket", t.ticket},
         {"state", t.state}};
  if (!t.session_id.empty())
    j["session_id"] = t.session_id;
  if (!t.detail.empty())
    j["detail"] = t.detail;
  if (!t.windows.empty()) {
    auto w = json::parse(t.windows, nullptr, false);
    if (!w.is_discarded())
      j["windows"] = std::move(w);
  }
  return text(j);
}

api_router::api_router(std::shared_ptr<api_context> ctx,
                       std::shared_ptr<engine_port> port, api_surface surface)
  : ctx_(std::move(ctx)), port_(std::move(port)), surface_(surface) {
  // nop
}

std::string route_label(const std::string& method, const std::string& path) {
  if (console_routes::owns(path) && path.rfind("/v1/", 0) != 0)
    return path.rfind("/console/", 0) == 0 ? "/console/{asset}" : "/console";
  auto m = find_route(method, path, false);
  return m.route != nullptr ? m.route->spec.path : "unmatched";
}

std::optional<api_reply>
api_router::off_surface(const std::string& path) const {
  if (surface_ == api_surface::all)
    return std::nullopt;
  // The operations: what an operator or a probe reads, never a user.
  bool ops = path == "/healthz" || path == "/readyz" || path == "/metrics"
             || (console_routes::owns(path) && !console_routes::is_demo(path));
  if (surface_ == api_surface::public_api && ops)
    return error(404, "unknown_route",
                 path + " is served on the admin listener (--admin-listen)");
  if (surface_ == api_surface::admin && !ops && path != "/openapi.json")
    return error(404, "unknown_route",
                 "the admin listener serves /healthz, /readyz, /metrics and "
                 "the console; the API is on --listen");
  return std::nullopt;
}

api_reply api_router::error(unsigned status, const std::string& name,
                            const std::string& detail) {
  json j{{"error", name}, {"detail", detail}};
  return api_reply{status, text(j)};
}

unsigned api_router::status_of(errc code) noexcept {
  switch (code) {
    case errc::invalid_argument:
    case errc::invalid_attribute:
    case errc::party_too_large:
      return 400;
    case errc::not_found:
    case errc::unknown_queue:
      return 404;
    case errc::forbidden:
      return 403;
    case errc::in_session:
    case errc::duplicate_ticket:
    case errc::conflict:
    case errc::stale_token:
    case errc::in_flight:
    case errc::cancelled:
    case errc::too_many_queues:
    case errc::in_party:
      return 409;
    case errc::store_unavailable:
    case errc::store_auth_failed:
    case errc::shutting_down:
      return 503;
    default:
      return 500;
  }
}

ws_admission api_router::admit_ws(const std::string& target,
                                  const std::string& authorization) const {
  ws_admission res;
  auto qpos = target.find('?');
  auto path = target.substr(0, qpos);
  auto query = qpos == std::string::npos ? std::string{}
                                         : target.substr(qpos + 1);
  auto m = find_route("GET", path, true);
  if (m.route == nullptr || surface_ == api_surface::admin) {
    res.refusal = error(404, "unknown_route", "no WebSocket route " + path);
    return res;
  }
  if (ctx_->draining.load()) {
    res.refusal = error(503, "shutting_down", "the node is draining");
    return res;
  }
  auto tok = bearer(authorization);
  if (tok.empty())
    tok = query_param(query, "access_token");
  auto check = verify_bearer(ctx_->tokens, tok, unix_now());
  if (check.error != token_error::none) {
    res.refusal = error(401, to_string(check.error), check.detail);
    return res;
  }
  if (check.user != m.params[0]) {
    res.refusal = error(403, "forbidden", "a token acts only as its own user");
    return res;
  }
  if (!valid_api_id(check.user)) { // as for every other route
    res.refusal = bad_id("user");
    return res;
  }
  res.ok = true;
  res.who = std::move(check);
  return res;
}

void api_router::handle(const std::string& method, const std::string& target,
                        const std::string& authorization,
                        const std::string& body, reply_fn done) const {
  guarded_serve(method, target, authorization, nullptr, body, std::move(done));
}

void api_router::handle_as(const std::string& method, const std::string& target,
                           const token_check& who, const std::string& body,
                           reply_fn done) const {
  guarded_serve(method, target, {}, &who, body, std::move(done));
}

void api_router::guarded_serve(const std::string& method,
                               const std::string& target,
                               const std::string& authorization,
                               const token_check* known,
                               const std::string& body, reply_fn done) const {
  // Exactly one answer, whatever throws where: here or in an engine
  // callback (those run on the engine's threads).
  auto ctx = ctx_;
  auto once = std::make_shared<std::atomic<bool>>(false);
  auto started = std::chrono::steady_clock::now();
  auto label = ctx->count_request
                 ? route_label(method, target.substr(0, target.find('?')))
                 : std::string{};
  reply_fn answer = [ctx, done, once, started, label, method](api_reply r) {
    if (once->exchange(true))
      return;
    if (ctx->count_request)
      ctx->count_request(label, method, r.status,
                         std::chrono::duration<double>(
                           std::chrono::steady_clock::now() - started)
                           .count());
    done(std::move(r));
  };
  try {
    serve(method, target, authorization, known, body, answer);
  } catch (const std::exception& e) {
    internal_error(answer, e.what());
  } catch (...) {
    internal_error(answer, "unknown exception");
  }
}

void api_router::serve(const std::string& method, const std::string& target,
                       const std::string& authorization,
                       const token_check* known, const std::string& body,
                       const reply_fn& reply) const {
  auto path = target.substr(0, target.find('?'));
  if (auto off = off_surface(path)) {
    reply(std::move(*off));
    return;
  }
  // -- the web console: its own token (docs/console.md) ---------------------
  if (ctx_->console && console_routes::owns(path)) {
    ctx_->console->serve(method, path, authorization, reply);
    return;
  }
  auto m = find_route(method, path, false);
  if (m.route == nullptr) {
    if (!m.path_known)
      reply(error(404, "unknown_route", "no route " + method + " " + path));
    else
      reply(error(405, "method_not_allowed",
                  m.path_is_websocket ? "the events route is a WebSocket"
                                      : method + " " + path));
    return;
  }
  auto route = m.route->id;
  if (route == route_id::console_page || route == route_id::console_asset
      || route == route_id::console_stats || route == route_id::console_demo
      || route == route_id::console_action) {
    reply(error(404, "unknown_route",
                "the console is off on this node (--console-token, "
                "--console-operators, --demo-queue)"));
    return;
  }
  // -- operations: no token -------------------------------------------------
  switch (route) {
    case route_id::healthz:
      reply(ok(json{{"status", "ok"}}));
      return;
    case route_id::readyz: {
      std::string why;
      if (ctx_->draining.load())
        reply(api_reply{503, text(json{{"status", "not_ready"},
                                       {"error", "shutting_down"},
                                       {"detail", "the node is draining"}})});
      else if (ctx_->ready && !ctx_->ready(why))
        reply(api_reply{503, text(json{{"status", "not_ready"},
                                       {"error", "store_unavailable"},
                                       {"detail", why}})});
      else
        reply(ok(json{{"status", "ready"}}));
      return;
    }
    case route_id::metrics:
      reply(api_reply{200, ctx_->metrics_text ? ctx_->metrics_text() : "",
                      "text/plain; version=0.0.4"});
      return;
    case route_id::openapi:
      reply(api_reply{200, openapi_json()});
      return;
    default:
      break;
  }
  // -- /v1/users/{user}/...: a token that acts as the user --------------------
  // A socket's token was verified when it opened: only its expiry again.
  token_check verified;
  if (known == nullptr) {
    verified = verify_bearer(ctx_->tokens, bearer(authorization), unix_now());
  } else if (unix_now() >= known->valid_until) {
    verified.error = token_error::expired;
    verified.detail = "the token's expiry has passed";
  }
  const token_check& check
    = known != nullptr && verified.error == token_error::none ? *known
                                                              : verified;
  if (check.error != token_error::none) {
    reply(error(401, to_string(check.error), check.detail));
    return;
  }
  const auto& user = m.params[0];
  if (check.user != user) {
    reply(error(403, "forbidden", "a token acts only as its own user"));
    return;
  }
  if (!valid_api_id(user)) {
    reply(bad_id("user"));
    return;
  }
  if (ctx_->events)
    ctx_->events->touch(user);
  auto on_ticket
    = guarded<outcome<ticket_view>>(reply, [reply](outcome<ticket_view> res) {
        if (res)
          reply(api_reply{200, to_json(*res)});
        else
          reply(refusal(res.error()));
      });
  if (route == route_id::party) {
    // An empty body reads as {} (create, leave and cancel need none).
    json pj = body.empty() ? json::object() : json::parse(body, nullptr, false);
    if (pj.is_discarded() || !pj.is_object()) {
      reply(error(400, "malformed_json", "the body must be a JSON object"));
      return;
    }
    serve_party(
      *port_, m.route->party, user, m.params, pj, *ctx_,
      [&check](const std::string& q) { return check.may_join(q); }, reply);
    return;
  }
  if (route == route_id::ticket_get || route == route_id::ticket_cancel
      || route == route_id::heartbeat) {
    const auto& ticket = m.params[1];
    if (!valid_api_id(ticket)) {
      reply(bad_id("ticket"));
      return;
    }
    if (route == route_id::ticket_cancel)
      port_->cancel(user, ticket, on_ticket);
    else
      port_->state(user, ticket, on_ticket);
    return;
  }
  // Routes with a JSON body.
  json j = json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    reply(error(400, "malformed_json", "the body must be a JSON object"));
    return;
  }
  api_reply err;
  if (route == route_id::end) {
    const auto& session = m.params[1];
    std::string reason = "ended";
    if (!string_field(j, "reason", false, reason, err)) {
      reply(err);
      return;
    }
    if (!valid_api_id(session)) {
      reply(bad_id("session"));
      return;
    }
    if (reason.empty() || reason.size() > 256) {
      reply(error(400, "invalid_argument", "reason: 1-256 bytes"));
      return;
    }
    port_->end(
      user, session, reason,
      guarded<outcome<end_view>>(reply, [reply](outcome<end_view> res) {
        if (!res) {
          reply(refusal(res.error()));
          return;
        }
        json out{
          {"session_id", res->session_id}, {"state", "ended"},
          {"queue", res->queue},           {"ended_by", res->ended_by},
          {"reason", res->reason},         {"ended_now", res->ended_now}};
        reply(api_reply{200, text(out)});
      }));
    return;
  }
  if (route == route_id::join) {
    if (ctx_->draining.load()) {
      reply(error(503, "shutting_down", "the node is draining"));
      return;
    }
    std::string queue, ticket, attrs;
    if (auto a = j.find("attrs"); a != j.end() && a->is_object()) {
      // Typed attributes of a queue with rules (docs/rules.md); the engine
      // checks them against the queue's declarations.
      attrs = a->dump(-1, ' ', false, json::error_handler_t::replace);
    } else if (!string_field(j, "attrs", false, attrs, err)) {
      reply(err);
      return;
    }
    if (!string_field(j, "queue", true, queue, err)
        || !string_field(j, "ticket", true, ticket, err)) {
      reply(err);
      return;
    }
    if (!valid_api_id(queue)) {
      reply(bad_id("queue"));
      return;
    }
    if (!check.may_join(queue)) {
      reply(error(403, "forbidden",
                  "this token may not join queue '" + queue
                    + "' (its queues claim)"));
      return;
    }
    if (!ctx_->queues.empty() && ctx_->queues.count(queue) == 0) {
      // Not declared: answered here, so an invented name creates nothing
      // (no session actor, no client link, no store key, no metric).
      reply(error(404, "unknown_queue", "unknown queue '" + queue + "'"));
      return;
    }
    if (ctx_->paused->has(queue)) {
      reply(error(503, "queue_paused",
                  "queue '" + queue + "' is paused by an operator"));
      return;
    }
    if (!valid_api_id(ticket)) {
      reply(bad_id("ticket"));
      return;
    }
    // JSON strings are UTF-8, but "\u0000" is a NUL, which the match store
    // refuses when the ticket is matched (queue_codec.hpp).
    if (attrs.size() > 4096 || attrs.find('\0') != std::string::npos) {
      reply(error(400, "invalid_argument",
                  "attrs: at most 4096 bytes, without NUL"));
      return;
    }
    uint32_t give_up_after_s = 0;
    if (auto g = j.find("give_up_after_s"); g != j.end()) {
      if (!g->is_number_integer() || g->get<int64_t>() < 1
          || g->get<int64_t>() > 86400) {
        reply(error(400, "invalid_argument",
                    "give_up_after_s: an integer from 1 to 86400"));
        return;
      }
      give_up_after_s = static_cast<uint32_t>(g->get<int64_t>());
    }
    if (std::string why; ctx_->store_down && ctx_->store_down(why)) {
      // Nothing was asked of the engine: nothing changed.
      reply(refusal(failure{errc::store_unavailable, why}));
      return;
    }
    port_->join(user, queue, ticket, attrs, give_up_after_s, on_ticket);
    return;
  }
  // r_swipe
  std::string to, action;
  if (!string_field(j, "to", true, to, err)
      || !string_field(j, "action", true, action, err)) {
    reply(err);
    return;
  }
  if (!valid_api_id(to)) {
    reply(bad_id("to"));
    return;
  }
  if (to == user) {
    reply(error(400, "invalid_argument", "to: a user cannot swipe itself"));
    return;
  }
  if (action != "LIKE" && action != "DISLIKE") {
    reply(error(400, "invalid_argument", "action: must be LIKE or DISLIKE"));
    return;
  }
  port_->swipe(
    user, to, action == "LIKE",
    guarded<outcome<swipe_view>>(reply, [reply](outcome<swipe_view> res) {
      if (!res) {
        reply(refusal(res.error()));
        return;
      }
      json out{{"mutual", res->mutual}, {"created", res->created}};
      if (!res->session_id.empty())
        out["session_id"] = res->session_id;
      reply(api_reply{200, text(out)});
    }));
}

} // namespace mm
