#pragma once

// CAF's scheduler with a clock that wakes only when it must (docs/
// benchmarks.md, "Issue 34's ratios"). CAF 0.17's clock thread is woken by
// every timed request, delayed send and receive timeout, under one lock,
// although nearly all of them are due seconds later (and a request's
// timeout is never cancelled: it fires later into the actor). This clock
// queues them and wakes its thread only for an event due before the one it
// already sleeps until (or a full queue); the thread applies the queue, in
// order, before it ships anything, so nothing fires late or after its
// cancellation.

#include <chrono>

namespace caf {
class actor_system_config;
} // namespace caf

namespace mm {

/// Makes an actor system built from `cfg` run CAF's scheduler (the policy
/// `cfg`'s "scheduler.policy" names, "sharing" or else "stealing") with the
/// lazy clock above. Call once, after setting "scheduler.policy" and
/// before the actor_system is constructed. Leaves the test coordinator
/// ("testing") and a profiling scheduler as they are.
void use_lazy_clock(caf::actor_system_config& cfg);

/// When the lazy clock fires a request's timeout due at `t` (set at `now`).
/// The timeout is a backstop that nearly always comes after the answer (and
/// is never cancelled): one of a second or more fires on a 125 ms grid,
/// never before `t`, so that the timeouts of many requests share one wake
/// of the clock instead of one each.
std::chrono::steady_clock::time_point
request_timeout_due(std::chrono::steady_clock::time_point t,
                    std::chrono::steady_clock::time_point now);

} // namespace mm
