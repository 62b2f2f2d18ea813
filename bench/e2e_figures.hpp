#pragma once

// The figures of an e2e_bench run: what a run leaves behind and the lines
// printed from it, last the "e2e_embed ..." line bench/run reads.

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

#include "bench/bench_common.hpp"
#include "bench/e2e_costs.hpp"
#include "bench/e2e_options.hpp"
#include "bench/e2e_verify.hpp"

namespace mm::e2e_bench {

/// The engine's counters at the end of a run.
struct engine_counts {
  uint64_t matches = 0, claims = 0, conflicts = 0, relay_retries = 0,
           requeues = 0, delivered = 0;
};

/// What a run leaves for its figures.
struct run_record {
  size_t users = 0;
  bool drained = true; ///< settled before the --drain bound passed
  sample s0, s1;       ///< the start and the end of the measured span
  pg_activity activity;
  tally t;
  engine_counts counts;
  /// Unmatched users whose session is not `queued`, by its phase.
  std::map<std::string, uint64_t> waiting_phases;
  uint64_t xacts = 0; ///< PostgreSQL transactions of the whole run
  bench::problem_list problems;
};

/// Prints the figures of `r` (reorders its latency samples): matches/s,
/// time-to-match, where the time went, the engine's counters, the
/// violations and the final "e2e_embed ..." line.
void print_figures(const options& o, const std::string& tag, run_record& r);

} // namespace mm::e2e_bench
