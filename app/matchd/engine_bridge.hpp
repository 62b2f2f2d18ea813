#pragma once

// The engine behind the API: implements `engine_port` with one client link
// (and session) per user in matchd's actor system, for users that ask
// something or have a WebSocket open; an idle user's link and session stop
// (client_link.hpp) and are made again on the user's next request.

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include <caf/fwd.hpp>

#include "app/matchd/api.hpp"

namespace mm {

class match_tracer;

class console_stats;
class engine;
class hub;

struct bridge_config {
  uint32_t client_ttl_ms = 30000; ///< see client_link_config
  uint32_t request_timeout_ms
    = 30000; ///< an engine answer later than this: 503
  std::shared_ptr<console_stats> stats; ///< the console's counters; may be null
  std::shared_ptr<match_tracer> tracer; ///< traces of matches; may be null
};

class engine_bridge : public engine_port {
 public:
  using time_point = std::chrono::steady_clock::time_point;

  /// The engine port of `eng`: its client links run in `sys` and publish
  /// to `events`. Not idempotent: every call makes another bridge.
  static std::shared_ptr<engine_bridge>
  make(caf::actor_system& sys, std::shared_ptr<engine> eng,
       std::shared_ptr<hub> events, bridge_config cfg);

  ~engine_bridge() override;

  /// Cancels every live join ("shutting_down") and waits until each outcome
  /// is certain, at most until `deadline` (it blocks). Answers whether all
  /// finished. Idempotent.
  virtual bool drain(time_point deadline) = 0;

  /// Delivers every committed, undelivered outbox event now, at most until
  /// `deadline` (it blocks). Answers whether the relay finished in time
  /// (true without a relay). Idempotent.
  virtual bool flush_events(time_point deadline) = 0;

  /// Stops every client link (their sessions stop with the engine).
  /// Idempotent.
  virtual void stop() = 0;

  /// A WebSocket of `user` opened: the user gets a link (and a session)
  /// here if it has none, which keeps the session from its idle release
  /// while a WebSocket is open (client_link.hpp). Idempotent.
  virtual void attach(const std::string& user) = 0;

  /// A WebSocket of `user` closed: its link, if it has one here, starts
  /// the presence check of a live join once none is open. Idempotent.
  virtual void detach(const std::string& user) = 0;

  /// Users with a link on this node (also the `client_links` gauge).
  virtual size_t users() const = 0;
};

} // namespace mm
