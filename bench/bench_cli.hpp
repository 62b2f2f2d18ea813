#pragma once

// CLI11 options shared by finalize_bench and swipe_bench (service_options,
// bench_common.hpp), in the order `-h` lists them.

#include <CLI/CLI.hpp>

#include "bench/bench_common.hpp"

namespace mm::bench {

/// --conninfo, --pg-dir.
inline void add_pg_options(CLI::App& app, service_options& o) {
  app.add_option("--conninfo", o.conninfo,
                 "libpq conninfo of an admin connection (a database per "
                 "variant is created and dropped there)");
  app.add_option("--pg-dir", o.pg_dir,
                 "directory of tests/support/postgres_server.sh (reads "
                 "DIR/port; user postgres on 127.0.0.1)");
}

/// --redis-host, --redis-port, --redis-dir.
inline void add_redis_options(CLI::App& app, service_options& o) {
  app.add_option("--redis-host", o.redis_host, "Redis host")
    ->capture_default_str();
  app.add_option("--redis-port", o.redis_port, "Redis port");
  app.add_option("--redis-dir", o.redis_dir,
                 "directory of a private redis-server (reads DIR/port)");
}

/// --variants, --ratio.
inline void add_variant_options(CLI::App& app, service_options& o,
                                const std::string& variants_help,
                                const std::string& ratio_help) {
  app.add_option("--variants", o.variants, variants_help)
    ->delimiter(',')
    ->capture_default_str();
  app.add_option("--ratio", o.ratio, ratio_help)
    ->delimiter(',')
    ->expected(2)
    ->capture_default_str();
}

/// --in-flight, --duration, --warmup.
inline void add_window_options(CLI::App& app, service_options& o,
                               const std::string& in_flight_help) {
  app.add_option("--in-flight", o.in_flight, in_flight_help)
    ->capture_default_str();
  app.add_option("--duration", o.duration_s, "seconds measured per variant")
    ->capture_default_str();
  app.add_option("--warmup", o.warmup_s, "seconds before measuring")
    ->capture_default_str();
}

/// --scheduler-threads, --keep-databases.
inline void add_run_options(CLI::App& app, service_options& o) {
  app
    .add_option("--scheduler-threads", o.scheduler_threads,
                "CAF scheduler threads (0: CAF default)")
    ->capture_default_str();
  app.add_flag("--keep-databases", o.keep_databases,
               "keep each variant's database for inspection");
}

} // namespace mm::bench
