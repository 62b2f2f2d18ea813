#pragma once

// CAF pieces of the benches that drive actors (broker_bench.cpp,
// finalize_bench.cpp, swipe_bench.cpp). Only for CAF translation units.

#include <caf/all.hpp>

#include <chrono>
#include <cstdio>
#include <string>

#include "messages/type_ids.hpp"

namespace mm::bench {

/// The project's types registered and `threads` scheduler threads (0: CAF's
/// default).
inline void configure(caf::actor_system_config& cfg, size_t threads) {
  register_types(cfg);
  if (threads > 0)
    cfg.set("scheduler.max-threads", threads);
}

/// Waits up to 30 s for the driver `drv` to report that it drained (a
/// uint32_t message to `waiter`); kills it and says so when it does not.
inline void await_drain(caf::scoped_actor& waiter, const caf::actor& drv,
                        const std::string& tag) {
  bool drained = false;
  waiter->receive([&](uint32_t) { drained = true; },
                  caf::after(std::chrono::seconds(30)) >> [] {});
  if (!drained) {
    caf::anon_send_exit(drv, caf::exit_reason::user_shutdown);
    std::printf("[%s] driver did not drain within 30 s\n", tag.c_str());
  }
}

} // namespace mm::bench
