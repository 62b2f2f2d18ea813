// The figures of an e2e_bench run (see e2e_figures.hpp): the lines printed
// after the checks, in the format bench/run and docs/benchmarks.md read.

#include "bench/e2e_figures.hpp"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <thread>

namespace mm::e2e_bench {

using namespace mm::bench;

void print_figures(const options& o, const std::string& tag, run_record& r) {
  const bool redis = o.store == "redis";
  const bool pg = o.db == "postgres";
  auto& t = r.t;
  const auto& s0 = r.s0;
  const auto& s1 = r.s1;
  const auto& n = r.counts;
  auto n_sessions = static_cast<double>(t.sessions);
  auto span = t.last_event > t.first_join
                ? static_cast<double>(t.last_event - t.first_join) / 1e9
                : 0.0;
  auto matches_per_s = span > 0 ? n_sessions / span : 0.0;
  auto join_span
    = static_cast<double>(t.last_join - std::min(t.first_join, t.last_join))
      / 1e9;
  auto p50 = percentile_ms(t.ttm, 0.50), p95 = percentile_ms(t.ttm, 0.95),
       p99 = percentile_ms(t.ttm, 0.99), max = percentile_ms(t.ttm, 1.0);
  auto sp50 = percentile_ms(t.ttm_state, 0.50),
       sp99 = percentile_ms(t.ttm_state, 0.99);
  auto rp50 = percentile_ms(t.relay, 0.50), rp99 = percentile_ms(t.relay, 0.99);
  auto dt = s1.t - s0.t;
  auto per_match = std::max(1.0, n_sessions);
  auto per_match_us = [&](uint64_t a, uint64_t b) {
    return static_cast<double>(b - a) / per_match / 1e3;
  };
  auto busy = [&](uint64_t a, uint64_t b) {
    return 100.0 * static_cast<double>(b - a) / (dt * 1e9);
  };
  auto cores = std::max(1u, std::thread::hardware_concurrency());
  auto ours = (s1.self_ns - s0.self_ns) + (s1.redis_ns - s0.redis_ns)
              + (s1.pg_ns - s0.pg_ns);
  auto all = s1.machine_ns - s0.machine_ns;
  std::printf("[%s] %" PRIu64 " of %zu users joined in %.2f s (%.0f "
              "joins/s), %zu matches, %" PRIu64 " users waiting; first join "
              "to last match event %.2f s: %.0f matches/s%s\n",
              tag.c_str(), t.joined, r.users, join_span,
              join_span > 0 ? static_cast<double>(t.joined) / join_span : 0.0,
              t.sessions, t.waiting_total, span, matches_per_s,
              r.drained ? "" : " (DRAIN BOUND PASSED)");
  std::printf("[%s]   time-to-match (join sent -> match_event at the "
              "subscriber, %zu users): p50 %.2f ms p95 %.2f ms p99 %.2f ms "
              "max %.2f ms | to the session's matched state: p50 %.2f ms "
              "p99 %.2f ms | claimer's commit answer -> its event (the "
              "relay, %zu users): p50 %.2f ms p99 %.2f ms\n",
              tag.c_str(), t.ttm.size(), p50, p95, p99, max, sp50, sp99,
              t.relay.size(), rp50, rp99);
  std::printf("[%s]   cpu per match: bench process %.1f us, redis %.1f us, "
              "postgres %.1f us | busy (%% of one core) over %.2f s: bench "
              "%.0f%%, redis %.0f%%, postgres %.0f%%; machine %.0f%% of %u "
              "cores, other processes %.0f%% of one core\n",
              tag.c_str(), per_match_us(s0.self_ns, s1.self_ns),
              per_match_us(s0.redis_ns, s1.redis_ns),
              per_match_us(s0.pg_ns, s1.pg_ns), dt,
              busy(s0.self_ns, s1.self_ns), busy(s0.redis_ns, s1.redis_ns),
              busy(s0.pg_ns, s1.pg_ns), busy(0, all) / cores, cores,
              all > ours ? busy(ours, all) : 0.0);
  {
    // Everything else on the machine shows in "other processes"; the
    // ceiling is what our measured CPU cost per match allows on all cores.
    auto cost = static_cast<double>(ours) / per_match;
    std::printf("[%s]   CPU ceiling at this cost: %u cores / %.1f us = %.0f "
                "matches/s (measured: %.0f%% of it)\n",
                tag.c_str(), cores, cost / 1e3, cores * 1e9 / cost,
                100.0 * matches_per_s * cost / (cores * 1e9));
  }
  std::printf("[%s]   bench threads: %s\n", tag.c_str(),
              describe_cpu(s0.threads, s1.threads, dt).c_str());
  if (redis) {
    auto c = count_commands(s0, s1, per_match);
    auto calls = (c.evalsha + c.xadd + c.other_top) * per_match;
    auto reads = static_cast<double>(s1.redis_reads - s0.redis_reads);
    std::printf("[%s]   redis per match: %.2f FCALL (%.1f us each inside "
                "the server, their script's commands included), %.2f XADD, "
                "%.2f other calls; the scripts ran %.1f commands (%s); %.2f "
                "socket reads (%.1f calls per read: the pipelining)\n",
                tag.c_str(), c.evalsha, c.evalsha_us, c.xadd, c.other_top,
                c.inner, c.inner_top.c_str(), reads / per_match,
                reads > 0 ? calls / reads : 0.0);
  }
  if (pg) {
    std::printf("[%s]   postgres: %.3f transactions per match (whole run) | "
                "backends (pg_stat_activity every 20 ms, %" PRIu64
                " samples): %s\n",
                tag.c_str(), static_cast<double>(r.xacts) / per_match,
                r.activity.samples, r.activity.describe().c_str());
  }
  std::printf("[%s]   engine counters: %" PRIu64 " claim scripts (%.2f per "
              "match), %" PRIu64 " matches, %" PRIu64
              " events delivered, %" PRIu64 " relay retries, %" PRIu64
              " conflicts, %" PRIu64 " requeues\n",
              tag.c_str(), n.claims, static_cast<double>(n.claims) / per_match,
              n.matches, n.delivered, n.relay_retries, n.conflicts, n.requeues);
  if (!r.waiting_phases.empty())
    std::printf("[%s]   unmatched users not queued: %s\n", tag.c_str(),
                describe_shares(r.waiting_phases, 0).c_str());
  r.problems.print(tag);
  if (!t.first_error.empty())
    std::printf("[%s]   first error: %s\n", tag.c_str(), t.first_error.c_str());
  std::printf("e2e_embed store=%s db=%s users=%zu joined=%" PRIu64
              " matches=%zu matches_per_s=%.1f p50_ms=%.2f p95_ms=%.2f "
              "p99_ms=%.2f max_ms=%.2f violations=%zu cpu_s=%.2f "
              "redis_cpu_s=%.2f pg_cpu_s=%.2f rate=%.0f in_flight=%zu\n",
              o.store.c_str(), o.db.c_str(), r.users, t.joined, t.sessions,
              matches_per_s, p50, p95, p99, max, r.problems.size(),
              static_cast<double>(s1.self_ns - s0.self_ns) / 1e9,
              static_cast<double>(s1.redis_ns - s0.redis_ns) / 1e9,
              static_cast<double>(s1.pg_ns - s0.pg_ns) / 1e9, o.rate,
              o.in_flight);
  std::fflush(stdout);
}

} // namespace mm::e2e_bench
