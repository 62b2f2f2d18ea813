#pragma once

// matchd's failpoints (docs/matchd.md, "Failpoints"): test hooks that make
// a node die at one exact point, armed by MM_FAILPOINT at start.

#include <cstdint>
#include <string>

namespace mm {

struct engine_config;

/// A core actor a failpoint kills, and when (ms after start).
struct actor_kill {
  std::string name; ///< '' : none
  uint32_t after_ms = 0;
};

/// Reads MM_FAILPOINT once into `armed` and sets the hook it names in `ec`:
/// the finalizers SIGKILL this process at one point of a commit (of a pair
/// or a group: kill_before_commit, kill_after_commit), or the ready check
/// once it holds N open proposals (kill_holding_proposals=N); or it fills
/// `kill` (kill_actor=NAME@MS: one core actor killed MS ms after start,
/// which the caller does). Each hook prints `failpoint NAME: WHAT: SIGKILL`
/// on stderr before the signal. Empty: no hook, true. An unknown or
/// malformed failpoint: false (nothing armed that matters, the caller
/// refuses to start). Idempotent for one environment.
bool arm_failpoint(engine_config& ec, std::string& armed, actor_kill& kill);

} // namespace mm
