#include "app/matchd/console.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <map>

#include <nlohmann/json.hpp>
#include <openssl/rand.h>

#include "app/common/token.hpp"
#include "app/matchd/console_history.hpp"
#include "app/matchd/console_stats.hpp"
#include "core/metrics.hpp"
#include "mm_console_assets.hpp"

namespace mm {

namespace {

using json = nlohmann::json;

std::string text(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

int64_t unix_ms() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch())
    .count();
}

int64_t steady_us() {
  using namespace std::chrono;
  return duration_cast<microseconds>(steady_clock::now().time_since_epoch())
    .count();
}

/// Pages run only what they were served with: no inline script, nothing
/// from elsewhere, no framing; the token in the page's URL fragment is never
/// sent anywhere.
void page_headers(api_reply& r) {
  r.headers = {
    {"Content-Security-Policy",
     "default-src 'none'; script-src 'self'; style-src 'self'; "
     "connect-src 'self'; img-src 'self' data:; base-uri 'none'; "
     "form-action 'none'; frame-ancestors 'none'"},
    {"X-Content-Type-Options", "nosniff"},
    {"Referrer-Policy", "no-referrer"},
    {"Cache-Control", "no-cache"},
  };
}

std::string demo_user_id() {
  std::array<unsigned char, 8> raw{};
  if (RAND_bytes(raw.data(), static_cast<int>(raw.size())) != 1) {
    // The OpenSSL generator failing is not worth refusing a demo for:
    // demo users are not secrets, only distinct.
    auto t = static_cast<uint64_t>(steady_us());
    for (auto& c : raw) {
      c = static_cast<unsigned char>(t);
      t >>= 8;
    }
  }
  static const char* hex = "0123456789abcdef";
  std::string out = "demo-";
  for (auto c : raw) {
    out.push_back(hex[c >> 4]);
    out.push_back(hex[c & 15]);
  }
  return out;
}

} // namespace

console_routes::console_routes(console_settings settings,
                               std::shared_ptr<console_stats> stats,
                               std::shared_ptr<engine_metrics> metrics,
                               std::function<console_node_view()> node_view)
  : s_(std::move(settings)), stats_(std::move(stats)),
    metrics_(std::move(metrics)), node_view_(std::move(node_view)),
    started_unix_ms_(unix_ms()) {
  demo_tokens_ = 2 * s_.demo_rate;
}

bool console_routes::owns(const std::string& path) noexcept {
  return path == "/console" || path.rfind("/console/", 0) == 0
         || path.rfind("/v1/console/", 0) == 0;
}

bool console_routes::is_demo(const std::string& path) noexcept {
  return path == "/v1/console/demo" || path == "/console/demo.html"
         || path == "/console/demo.js" || path == "/console/style.css"
         || path == "/console/matchmaker.js";
}

void console_routes::serve(const std::string& method, const std::string& path,
                           const std::string& authorization,
                           const reply_fn& reply) const {
  if (path == "/v1/console/demo") {
    serve_demo(method, reply);
    return;
  }
  if (path == "/v1/console/stats" || path == "/v1/console/history"
      || path == "/v1/console/cluster" || is_console_action(path)) {
    if (s_.operators.empty()) {
      reply(api_router::error(404, "unknown_route",
                              "the console is off on this node "
                              "(--console-token, --console-operators)"));
      return;
    }
    static const std::string prefix = "Bearer ";
    if (authorization.compare(0, prefix.size(), prefix) != 0) {
      reply(api_router::error(401, "missing_token",
                              "the console needs an operator's token"));
      return;
    }
    auto who = s_.operators.find(authorization.substr(prefix.size()));
    if (!who) {
      reply(api_router::error(401, "bad_console_token",
                              "not the token of a console login of this "
                              "node"));
      return;
    }
    if (path != "/v1/console/stats" && path != "/v1/console/history"
        && path != "/v1/console/cluster") {
      serve_console_action(*who, method, path, s_.hooks, s_.queues, s_.audit,
                           reply);
      return;
    }
    if (method != "GET") {
      reply(api_router::error(405, "method_not_allowed", method + " " + path));
      return;
    }
    if (path == "/v1/console/cluster") {
      serve_cluster(reply);
      return;
    }
    api_reply r{200, path == "/v1/console/history"
                       ? (s_.history ? s_.history->json()
                                     : R"({"interval_s":0,"samples":[]})")
                       : stats_json()};
    r.headers = {{"Cache-Control", "no-store"}};
    reply(std::move(r));
    return;
  }
  serve_asset(method, path, reply);
}

void console_routes::serve_cluster(const reply_fn& reply) const {
  auto own = [this] {
    json node{{"node", s_.node}, {"stats", json::parse(stats_json())}};
    return text(json{{"node", s_.node}, {"nodes", json::array({node})}});
  };
  if (!s_.hooks.port) { // no engine behind it: this node alone
    api_reply r{200, own()};
    r.headers = {{"Cache-Control", "no-store"}};
    reply(std::move(r));
    return;
  }
  s_.hooks.port->cluster_stats([reply](outcome<std::string> text) {
    if (!text) {
      reply(api_router::error(503, "store_unavailable", text.error().detail));
      return;
    }
    api_reply r{200, std::move(*text)};
    r.headers = {{"Cache-Control", "no-store"}};
    reply(std::move(r));
  });
}

void console_routes::serve_asset(const std::string& method,
                                 const std::string& path,
                                 const reply_fn& reply) const {
  auto not_here = [&] {
    reply(api_router::error(404, "unknown_route",
                            "no route " + method + " " + path));
  };
  if (path.rfind("/v1/", 0) == 0) {
    not_here();
    return;
  }
  std::string name = path == "/console" || path == "/console/"
                       ? "index.html"
                       : path.substr(std::string{"/console/"}.size());
  bool console_on = !s_.operators.empty();
  bool demo_on = !s_.demo_queue.empty();
  bool wanted = name == "index.html" || name == "console.js" || name == "ops.js"
                    || name == "history.js" || name == "cluster.js"
                  ? console_on
                : name == "demo.html" || name == "demo.js"
                  ? demo_on
                  : console_on || demo_on;
  if (!wanted) {
    not_here();
    return;
  }
  const console_asset* found = nullptr;
  for (const auto& a : console_assets)
    if (name == a.name)
      found = &a;
  if (found == nullptr) {
    not_here();
    return;
  }
  if (method != "GET" && method != "HEAD") {
    reply(api_router::error(405, "method_not_allowed", method + " " + path));
    return;
  }
  if (path == "/console") {
    // Relative URLs in the page resolve under /console/.
    api_reply r{301, "", "text/plain; charset=utf-8"};
    r.headers = {{"Location", "/console/"}};
    reply(std::move(r));
    return;
  }
  api_reply r{200, method == "HEAD" ? std::string{} : std::string{found->body},
              found->content_type};
  page_headers(r);
  reply(std::move(r));
}

bool console_routes::take_demo_token() const {
  std::lock_guard<std::mutex> guard{mtx_};
  auto now = steady_us();
  if (demo_refilled_us_ != 0) {
    auto dt = static_cast<double>(now - demo_refilled_us_) / 1e6;
    demo_tokens_ = std::min(2 * s_.demo_rate, demo_tokens_ + dt * s_.demo_rate);
  }
  demo_refilled_us_ = now;
  if (demo_tokens_ < 1)
    return false;
  demo_tokens_ -= 1;
  return true;
}

void console_routes::serve_demo(const std::string& method,
                                const reply_fn& reply) const {
  if (s_.demo_queue.empty()) {
    reply(api_router::error(404, "demo_off",
                            "the demo is not enabled on this node "
                            "(--demo-queue)"));
    return;
  }
  if (method != "POST") {
    reply(api_router::error(405, "method_not_allowed",
                            method + " /v1/console/demo"));
    return;
  }
  if (!take_demo_token()) {
    reply(api_router::error(429, "rate_limited",
                            "too many demo users right now; try again in a "
                            "second"));
    return;
  }
  auto user = demo_user_id();
  auto now = unix_ms() / 1000;
  auto expires = now + s_.demo_ttl_s;
  // A JWT whose queues claim confines it to the demo queue: a visitor of
  // the page cannot join any other queue with it.
  json claims{{"sub", user},
              {"iat", now},
              {"exp", expires},
              {"queues", json::array({s_.demo_queue})}};
  if (!s_.token_audience.empty())
    claims["aud"] = s_.token_audience;
  if (!s_.token_issuer.empty())
    claims["iss"] = s_.token_issuer;
  auto token = sign_jwt(s_.secret, R"({"alg":"HS256","typ":"JWT"})",
                        claims.dump());
  json out{{"user", user},
           {"token", token},
           {"queue", s_.demo_queue},
           {"expires_at", expires}};
  api_reply r{200, text(out)};
  r.headers = {{"Cache-Control", "no-store"}};
  reply(std::move(r));
}

std::string console_routes::stats_json() const {
  auto depths = metrics_ ? metrics_->queue_depths()
                         : std::map<std::string, uint64_t>{};
  auto counted
    = stats_ ? stats_->all()
             : std::map<std::string, std::shared_ptr<queue_console_stats>>{};
  std::vector<std::string> names = s_.queues;
  for (auto& kv : depths)
    names.push_back(kv.first);
  for (auto& kv : counted)
    names.push_back(kv.first);
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  json queues = json::array();
  for (auto& name : names) {
    json q{{"name", name}};
    auto d = depths.find(name);
    q["depth"] = d == depths.end() ? 0 : d->second;
    std::array<uint64_t, console_wait_histogram::bounds_s.size() + 1> buckets{};
    uint64_t joins = 0, matched = 0, ended = 0, sum_us = 0;
    if (auto c = counted.find(name); c != counted.end()) {
      auto& s = *c->second;
      joins = s.joins.load();
      matched = s.matched.load();
      ended = s.ended.load();
      for (size_t i = 0; i < buckets.size(); ++i)
        buckets[i] = s.time_to_match.bucket(i);
      sum_us = s.time_to_match.sum_us();
    }
    uint64_t count = 0;
    for (auto n : buckets)
      count += n;
    q["joins"] = joins;
    q["matched_users"] = matched;
    q["ended_users"] = ended;
    q["sessions_active"] = matched > ended ? (matched - ended) / 2 : 0;
    q["time_to_match"] = json{{"buckets", buckets},
                              {"count", count},
                              {"sum_s", static_cast<double>(sum_us) / 1e6},
                              {"p50_s", quantile_s(buckets, 0.5)},
                              {"p90_s", quantile_s(buckets, 0.9)},
                              {"p99_s", quantile_s(buckets, 0.99)}};
    queues.push_back(std::move(q));
  }
  json node{
    {"id", s_.node}, {"started_ms", started_unix_ms_}, {"now_ms", unix_ms()}};
  if (metrics_) {
    node["matches"] = metrics_->matches.load();
    node["joins"] = metrics_->joins.load();
    node["cancels"] = metrics_->cancels.load();
    node["sessions_ended"] = metrics_->sessions_ended.load();
    node["session_actors"] = metrics_->sessions_live.load();
    node["client_links"] = metrics_->client_links.load();
    auto& m = *metrics_;
    node["proposals"] = json{{"made", m.proposals_made.load()},
                             {"accepted", m.proposals_accepted.load()},
                             {"declined", m.proposals_declined.load()},
                             {"timed_out", m.proposals_timed_out.load()},
                             {"lapsed", m.proposals_lapsed.load()}};
    // A fill's time as the console's quantiles read it (seconds).
    std::array<uint64_t, console_wait_histogram::bounds_s.size() + 1> fill{};
    for (size_t i = 0; i <= latency_histogram::bounds_ms.size(); ++i) {
      auto s = i < latency_histogram::bounds_ms.size()
                 ? latency_histogram::bounds_ms[i] / 1000.0
                 : 1e9;
      size_t k = 0;
      while (k < console_wait_histogram::bounds_s.size()
             && s > console_wait_histogram::bounds_s[k])
        ++k;
      fill[k] += m.backfill_fill_latency.bucket(i);
    }
    node["backfill"] = json{{"requests", m.backfill_requests.load()},
                            {"seats_filled", m.backfill_seats_filled.load()},
                            {"fill_p50_s", quantile_s(fill, 0.5)},
                            {"fill_p95_s", quantile_s(fill, 0.95)}};
  }
  if (node_view_) {
    auto v = node_view_();
    node["connections"] = v.connections;
    node["websockets"] = v.websockets;
  }
  if (s_.hooks.draining != nullptr)
    node["draining"] = s_.hooks.draining->load();
  json out{{"node", std::move(node)},
           {"paused_queues", s_.hooks.paused ? s_.hooks.paused->list()
                                             : std::vector<std::string>{}},
           {"demo_queue", s_.demo_queue},
           {"time_to_match_bounds_s", console_wait_histogram::bounds_s},
           {"queues", std::move(queues)}};
  return text(out);
}

void node_stats_source::set(
  const std::shared_ptr<const console_routes>& routes) {
  std::lock_guard<std::mutex> guard{mtx_};
  routes_ = routes;
}

std::string node_stats_source::json() const {
  std::shared_ptr<const console_routes> r;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    r = routes_.lock();
  }
  return r ? r->stats_json() : std::string{"{}"};
}

} // namespace mm
