#pragma once

// The engine's watch over its core actors: the broker, finalizer,
// directory, relay, gateway, lifecycle, pair lock and swipe actors are
// spawned once per engine and every session holds their handles, so one
// that stops takes the node's service with it. The watch notices at once,
// records which one and why, and tells the host, which takes the node out
// of service (matchd: /readyz 503, drain, exit 70 for its supervisor to
// restart it). Nothing is restarted in place.

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <caf/fwd.hpp>

namespace mm {

/// What the watch saw. Thread-safe.
class core_health {
 public:
  /// Empty while every core actor runs; else "NAME stopped: REASON" for
  /// the first that stopped.
  std::string down() const;

  /// Records the stop `what`; true for the first one. False, recording
  /// nothing, when one was recorded before or the engine is stopping (its
  /// actors stop on purpose).
  bool record(const std::string& what);

  /// From now on stops are expected (the engine stops). Idempotent.
  void stopping();

 private:
  mutable std::mutex mtx_;
  std::string down_;
  bool stopping_ = false;
};

/// Called once with what `core_health::down` says, from an actor thread.
using core_down_fn = std::function<void(const std::string&)>;

/// Spawns the watch: it monitors each (name, actor) of `core`; the first
/// that stops while `health` is not stopping is recorded there, logged, and
/// handed to `on_down` (may be empty). Not idempotent: every call spawns
/// another watch.
caf::actor
spawn_core_watch(caf::actor_system& sys,
                 std::vector<std::pair<std::string, caf::actor>> core,
                 std::shared_ptr<core_health> health, core_down_fn on_down);

} // namespace mm
