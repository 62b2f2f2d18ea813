#pragma once

// Where the time goes in an e2e_bench run: CPU and Redis samples at the
// start and end of the measured span, PostgreSQL backends sampled during it.

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "bench/bench_common.hpp"
#include "bench/bench_pg.hpp"
#include "persistence/queue/queue_store.hpp"

namespace mm::e2e_bench {

using bench::command_stat; // bench/bench_common.hpp

/// Everything sampled at the start and at the end of the measured span.
struct sample {
  double t = 0;
  uint64_t self_ns = 0, redis_ns = 0, pg_ns = 0, machine_ns = 0;
  std::map<std::string, uint64_t> threads;
  uint64_t redis_reads = 0; ///< socket reads Redis served (round trips)
  std::map<std::string, command_stat> redis_cmds;
};

/// Takes samples of this process, the machine, the PostgreSQL server and
/// Redis.
struct sampler {
  std::unique_ptr<queue_store> redis_admin; ///< INFO; null: embedded store
  int postmaster = 0;                       ///< 0: no PostgreSQL

  sample take() const;
};

/// "scheduler workers 1.20 s (60% of a core), ...": the CPU of each label
/// between two samples (threads that ended meanwhile are missing from `b`).
std::string describe_cpu(const std::map<std::string, uint64_t>& a,
                         const std::map<std::string, uint64_t>& b, double dt);

/// Redis commands per match between two samples: the engine's own calls
/// (EVALSHA, XADD) apart from the commands its scripts run (INFO
/// commandstats counts those too); the INFO calls of this bench left out.
struct command_figures {
  double evalsha = 0, evalsha_us = 0; ///< per match; server time per call
  double xadd = 0, other_top = 0;     ///< per match
  double inner = 0;                   ///< per match, inside the scripts
  std::string inner_top;              ///< "hget 7.00, hset 5.00, ..."
};

command_figures count_commands(const sample& a, const sample& b,
                               double matches);

/// What the PostgreSQL backends of the run's database were doing, sampled
/// while it ran, by the kind of connection (told by the statements it was
/// seen running).
struct pg_activity {
  std::map<std::string, std::map<std::string, uint64_t>> states; ///< by pid
  std::map<std::string, std::string> kind_of;                    ///< by pid
  uint64_t samples = 0;

  /// One sample of the client backends of database `db`.
  void take(bench::pg_conn& admin, const std::string& db);

  /// "finalizer (2 conn): ClientRead 50%, ... | relay (1 conn): ...".
  std::string describe() const;
};

} // namespace mm::e2e_bench
