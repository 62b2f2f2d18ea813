#pragma once

// The driver actors of e2e_bench: each owns a share of the virtual users,
// joins them through engine::session and is their subscriber.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <caf/fwd.hpp>

#include "messages/engine_types.hpp"

namespace mm {
class engine;
} // namespace mm

namespace mm::e2e_bench {

/// Counters the main thread polls while the drivers run. Per queue: users
/// joined and users settled (matched, or failed: no match will come).
struct shared_counts {
  explicit shared_counts(size_t queues)
    : joined_q(new std::atomic<uint64_t>[queues]),
      settled_q(new std::atomic<uint64_t>[queues]) {
    for (size_t q = 0; q < queues; ++q) {
      joined_q[q] = 0;
      settled_q[q] = 0;
    }
  }

  std::atomic<bool> stop{false}; ///< set by main: no more joins
  std::atomic<uint64_t> joined{0};
  std::atomic<uint64_t> matched{0};
  std::unique_ptr<std::atomic<uint64_t>[]> joined_q;
  std::unique_ptr<std::atomic<uint64_t>[]> settled_q;
};

/// One user as its driver saw it.
struct user_rec {
  uint64_t join_ns = 0;  ///< join sent; 0: never joined
  uint64_t event_ns = 0; ///< its first match_event reached the driver
  uint64_t state_ns = 0; ///< its session reported `matched`
  uint32_t events = 0;   ///< match events from its session (deduped there)
  bool settled = false;  ///< matched, or failed
  session_phase phase = session_phase::idle; ///< last state reported
  std::string event_id, session_id, queue, user_a, user_b; ///< first event
  std::string state_session; ///< session id of the `matched` state
  std::string detail;        ///< failed: why
};

/// What a driver hands over at the end (after its report message).
struct driver_report {
  std::vector<user_rec> users; ///< local index k: user first + k * step
  uint64_t join_errors = 0, unknown_senders = 0, failed = 0;
  std::string first_error;
};

/// The name of user `i` of the run with `prefix`.
std::string user_name(const std::string& prefix, size_t i);

/// Spawns `reports.size()` drivers for `users` users in `queue_names`
/// (user i in queue i % queues): driver d owns users d, d + drivers, ...,
/// keeps at most its share of `in_flight` of them joined but not settled
/// and, with `rate` > 0, paces its joins to its share of `rate` per second.
/// Driver d's report goes to `reports[d]` on `collect_reports`.
std::vector<caf::actor>
spawn_drivers(caf::actor_system& sys, const std::shared_ptr<engine>& eng,
              const std::shared_ptr<shared_counts>& sh,
              const std::string& prefix,
              const std::vector<std::string>& queue_names, size_t users,
              size_t in_flight, double rate,
              std::vector<driver_report>& reports);

/// Has every driver hand over its report and quit; throws when one does
/// not answer within 30 s.
void collect_reports(caf::scoped_actor& self,
                     const std::vector<caf::actor>& drvs);

} // namespace mm::e2e_bench
