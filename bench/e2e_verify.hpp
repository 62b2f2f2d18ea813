#pragma once

// The checks of an e2e_bench run: the drivers' user records merged and
// checked per user and per session, then against the engine and database.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "bench/bench_common.hpp"
#include "bench/bench_pg.hpp"
#include "bench/e2e_driver.hpp"

namespace mm::e2e_bench {

/// What the users' records tell, merged over the drivers.
struct tally {
  uint64_t join_errors = 0, unknown = 0, failed = 0; ///< over the drivers
  std::string first_error; ///< of the first driver that had one
  uint64_t joined = 0;
  uint64_t first_join = UINT64_MAX, last_join = 0, last_event = 0; ///< ns
  /// ttm: join -> match_event; ttm_state: join -> the session's `matched`
  /// state; relay: for a claimer (its state comes with the finalizer's
  /// answer, before the event), that state -> its match_event: commit to
  /// delivery.
  std::vector<uint64_t> ttm, ttm_state, relay;
  size_t sessions = 0; ///< distinct sessions the events named
  uint64_t two_events = 0, not_named = 0, state_mismatch = 0,
           not_matched_state = 0, wrong_queue = 0; ///< users
  uint64_t one_sided = 0, other_receivers = 0, split_events = 0,
           cross_queue = 0;   ///< sessions (other_receivers: users)
  uint64_t double_booked = 0; ///< users in two sessions
  std::vector<std::vector<size_t>> waiting; ///< by queue: joined, no event
  uint64_t waiting_total = 0, too_many_waiting = 0;
};

/// Merges the reports of `reports.size()` drivers (driver d: users d,
/// d + drivers, ...) of a run of `users` users named with `prefix`, user i
/// in queue `queue_names[i % queues]`, and counts what they tell.
tally tally_users(const std::vector<driver_report>& reports, size_t users,
                  const std::string& prefix,
                  const std::vector<std::string>& queue_names);

/// Checks the users' records against each other and the engine's match
/// counter. `bounded`: the --duration bound stopped the joins;
/// `not_queued`: waiting users whose session is not `queued`.
void check_users(bench::problem_list& problems, const tally& t, size_t users,
                 bool bounded, uint64_t not_queued, uint64_t engine_matches);

/// Checks the run's database `db` (a connection to `conninfo`) against the
/// sessions seen and prints its counts; returns the transactions of the
/// whole run (read through `admin`; the engine must be stopped).
uint64_t check_database(bench::problem_list& problems, bench::pg_conn& admin,
                        const std::string& conninfo, const std::string& db,
                        size_t sessions, const std::string& tag);

} // namespace mm::e2e_bench
