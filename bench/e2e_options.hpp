#pragma once

// Options of e2e_bench: parsed in e2e_bench.cpp's main, read by every phase.

#include <cstddef>
#include <cstdint>
#include <string>

namespace mm::e2e_bench {

struct options {
  std::string store = "embedded"; ///< embedded | redis
  std::string db = "memory";      ///< memory | postgres
  std::string redis_host = "127.0.0.1";
  uint16_t redis_port = 0;
  std::string redis_dir;
  std::string pg;     ///< admin conninfo (a fresh database is made there)
  std::string pg_dir; ///< or the directory of postgres_server.sh
  size_t users = 0;   ///< 0: 100000 embedded+memory, else 40000
  size_t queues = 8;
  size_t in_flight = 2000;
  double rate = 0; ///< joins/s; 0: as fast as --in-flight allows
  size_t sched_threads = 2;
  std::string sched_policy = "sharing"; ///< CAF scheduler policy (matchd's)
  std::string clock = "lazy";           ///< timer thread (matchd's --clock)
  size_t drivers = 2;
  double duration_s = 60;      ///< bound on the joining phase
  double drain_s = 10;         ///< bound on the wait for matches after it
  uint32_t relay_batch = 0;    ///< relay_config::batch; 0: the engine's
  uint32_t broker_workers = 0; ///< broker_config::workers; 0: the engine's
  uint32_t finalizer_workers
    = 0; ///< finalizer_config::workers; 0: the engine's
  int32_t finalizer_delay_ms
    = -1; ///< finalizer_config::batch_delay_ms; -1: the engine's
  int32_t lookup_delay_ms
    = -1;            ///< lifecycle_config::lookup_delay_ms; -1: the engine's
  std::string label; ///< tag of the output lines
  bool keep_database = false;
  bool progress = true;
};

} // namespace mm::e2e_bench
