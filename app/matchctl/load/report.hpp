#pragma once

// The report of `matchctl load`: the figures summed up from the records, the
// text on stdout (its last line is for scripts) and the JSON file.

#include <cstddef>
#include <cstdint>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "app/matchctl/load.hpp"

namespace mm::load {

/// What the io threads gathered besides the records.
struct run_extras {
  std::map<std::string, uint64_t> errors;
  std::vector<extra_event> extras;
  uint64_t duplicates = 0;
  uint64_t ok_answers = 0;
  double duration_s = 0;
  /// Latency samples in ms (virtual_users has what each one is).
  std::vector<double> connect_ms, join_ms, match_ms;
  /// First join, last first-match of a cycle, last cycle over (us since the
  /// start; -1: none).
  int64_t first_join_us = -1;
  int64_t last_event_us = -1;
  int64_t last_cycle_us = -1;
  /// From the session ledger (--cycles): sessions seen, and ended.
  uint64_t sessions_seen = 0;
  uint64_t sessions_ended = 0;
};

/// Latencies in ms, by the nearest rank (core/stats.hpp).
struct distribution {
  double p50 = 0, p95 = 0, p99 = 0, max = 0;
};

/// The figures of the report.
struct load_summary {
  uint64_t started = 0, joined = 0, matched = 0, cancel_requested = 0,
           cancelled = 0, cancel_too_late = 0, waiting = 0, notices = 0,
           unreachable = 0, ended = 0, ws_failed = 0, error_total = 0;
  std::size_t sessions = 0;
  double matches_per_s = 0;
  uint64_t cycles_planned = 0, cycles_completed = 0, sessions_ended = 0;
  /// Joins sent and joins answered 2xx, over every cycle.
  uint64_t joins_sent = 0, joins_ok = 0, joins_refused = 0;
  /// joins_ok / joins_sent; 0 when no join was sent.
  double availability = 0;
  double cycles_per_s = 0;
  distribution time_to_match, ws_connect, join;
  std::map<std::string, uint64_t> ended_details;
  std::vector<std::string> matched_users, cancelled_users, waiting_users;
  std::vector<std::string> cancel_requested_users; ///< sent a DELETE
};

/// Sums the records up. `matched` counts a user once per session it was
/// matched in (with --cycles, several times).
load_summary summarize(const load_options& opts,
                       const std::vector<user_record>& recs,
                       const run_extras& run);

/// Prints the report to `out`; its last two lines are for scripts:
/// "availability=X.XX joins=N answered=N min=X.XX" (joins answered 2xx of
/// joins sent, and the --min-availability it is held to), then
/// "verdict=...". With --cycles it has a "cycles" line, and the last line more
/// fields at its end (cycles=.. sessions_ended=.. cycles_per_s=..
/// overlapping_sessions=.. missing_session_ended=.. end_mismatches=..
/// in_session_after_end=..).
void print_report(std::ostream& out, const load_options& opts,
                  const std::vector<user_record>& recs, const run_extras& run,
                  const load_summary& s, const checker_result& c);

/// Writes the report as JSON to `file`; false when that failed.
bool write_json(const std::string& file, const load_options& opts,
                const run_extras& run, const load_summary& s,
                const checker_result& c);

} // namespace mm::load
