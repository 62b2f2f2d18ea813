#pragma once

// The web console of matchd (docs/console.md): static pages compiled into
// the binary (cmake/embed_console.cmake), a JSON stats route for the live
// page behind an operator token, and the "try it" demo's token route. No
// CAF, no Beast.

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "app/matchd/api.hpp"
#include "app/matchd/console_actions.hpp"
#include "app/matchd/console_operators.hpp"

namespace mm {

class console_history;
class console_stats;
struct engine_metrics;

struct console_settings {
  /// Who may log in: --console-operators and --console-token (the login
  /// "console"). None: the console is off (its pages and routes answer
  /// 404).
  console_operators operators;
  /// Where every lookup and action is written (never null once served).
  std::shared_ptr<console_audit> audit = std::make_shared<console_audit>();
  /// What the actions act on.
  console_hooks hooks;
  /// The last hour's samples (GET /v1/console/history); may be null.
  std::shared_ptr<console_history> history;
  /// --demo-queue: the queue demo users join. Empty: the demo is off.
  std::string demo_queue;
  uint32_t demo_ttl_s = 600; ///< lifetime of a demo user's token
  double demo_rate = 5;      ///< demo tokens per second, node-wide (burst 2x)
  std::string secret;        ///< signs the demo users' tokens
  /// --token-audience / --token-issuer: named in the demo users' JWTs.
  std::string token_audience;
  std::string token_issuer;
  std::string node;
  /// The declared queues (shown even before their first join); empty in
  /// open mode.
  std::vector<std::string> queues;
};

/// What the transport has open right now.
struct console_node_view {
  int64_t connections = 0;
  int64_t websockets = 0;
};

/// The console's routes, answered for the router.
class console_routes {
 public:
  /// Serves with `settings`; `stats` and `metrics` (either may be null) and
  /// `node_view` are read at each stats request.
  console_routes(console_settings settings,
                 std::shared_ptr<console_stats> stats,
                 std::shared_ptr<engine_metrics> metrics,
                 std::function<console_node_view()> node_view);

  /// True for the paths the console answers: /console, /console/...,
  /// /v1/console/....
  static bool owns(const std::string& path) noexcept;

  /// True for the demo's paths (its page, script, style, the client and
  /// POST /v1/console/demo): public, unlike the console's.
  static bool is_demo(const std::string& path) noexcept;

  /// Answers one request of an owned path; `reply` is called once, on this
  /// thread:
  /// - /v1/console/cluster: 200 and every live node's `stats_json`;
  /// - /v1/console/stats: 200 and `stats_json`; 404 `unknown_route` while
  ///   the console is off, 405 `method_not_allowed` for any method but GET,
  ///   401 `missing_token` or `bad_console_token` without a login's token;
  /// - /v1/console/history: 200 and the last hour's samples, likewise;
  /// - the lookups and actions (`serve_console_action`), behind a login's
  ///   token likewise;
  /// - /v1/console/demo: 200 {user, token, queue, expires_at}; 404
  ///   `demo_off`, 405 for any method but POST, 429 `rate_limited` past
  ///   demo_rate;
  /// - /console: 301 to /console/; /console/{asset}: 200 and the file; 404
  ///   `unknown_route` for a file that is not there or whose page is off,
  ///   405 for any method but GET and HEAD.
  /// Idempotent except POST /v1/console/demo (a new demo user each time).
  void serve(const std::string& method, const std::string& path,
             const std::string& authorization, const reply_fn& reply) const;

  /// The stats JSON (GET /v1/console/stats), for tests and the route.
  std::string stats_json() const;

 private:
  /// GET /v1/console/cluster: every live node's stats_json through the
  /// engine's gateway (hooks.port), or this node's alone without one.
  void serve_cluster(const reply_fn& reply) const;
  /// The pages and scripts (see `serve`).
  void serve_asset(const std::string& method, const std::string& path,
                   const reply_fn& reply) const;
  /// POST /v1/console/demo (see `serve`).
  void serve_demo(const std::string& method, const reply_fn& reply) const;
  /// One demo user from the node-wide bucket; false when it is empty.
  /// Thread-safe.
  bool take_demo_token() const;

  console_settings s_;
  std::shared_ptr<console_stats> stats_;
  std::shared_ptr<engine_metrics> metrics_;
  std::function<console_node_view()> node_view_;
  int64_t started_unix_ms_;
  mutable std::mutex mtx_; // guards the demo's token bucket
  mutable double demo_tokens_;
  mutable int64_t demo_refilled_us_ = 0;
};

/// Where the node's gateway reads this node's console counters for the
/// peers' cluster pages: the console once it exists ("{}" before, and on a
/// node without a console). Thread-safe.
class node_stats_source {
 public:
  /// Serves `routes`' stats from now on (null: "{}"). Idempotent.
  void set(const std::shared_ptr<const console_routes>& routes);
  /// The stats JSON text.
  std::string json() const;

 private:
  mutable std::mutex mtx_;
  std::weak_ptr<const console_routes> routes_;
};

} // namespace mm
