// Where the time goes in an e2e_bench run (see e2e_costs.hpp): CPU by
// thread kind, Redis INFO, the PostgreSQL backends' states. No CAF here.

#include "bench/e2e_costs.hpp"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <utility>
#include <vector>

#include "bench/bench_common.hpp"

namespace mm::e2e_bench {

using namespace mm::bench;

namespace {

/// What a thread of this process is, by its name. CAF 0.17.6 names its
/// scheduler workers after the multiplexer and every detached actor
/// "caf.actor" (here: the store workers with their blocking connections).
std::string thread_label(const std::string& comm) {
  if (comm == "caf.multiplexer")
    return "scheduler workers";
  if (comm == "caf.actor")
    return "detached store workers";
  if (comm == "caf.clock")
    return "timers (caf.clock)";
  return comm.empty() ? "?" : comm;
}

/// CPU (ns) of this process's threads, summed by `thread_label`.
std::map<std::string, uint64_t> cpu_by_thread_label() {
  std::map<std::string, uint64_t> out;
  for (auto& [tid, ns] : thread_cpu_ns()) {
    std::ifstream in("/proc/self/task/" + std::to_string(tid) + "/comm");
    std::string comm;
    std::getline(in, comm);
    out[thread_label(comm)] += ns;
  }
  return out;
}

/// INFO commandstats of the server behind `conn`, by command name.
std::map<std::string, command_stat> redis_commandstats(queue_store& conn) {
  auto r = conn.execute({{"INFO", "commandstats"}});
  if (r.empty() || r[0].code != errc::none)
    return {};
  return parse_commandstats(r[0].value.str);
}

} // namespace

std::string describe_cpu(const std::map<std::string, uint64_t>& a,
                         const std::map<std::string, uint64_t>& b, double dt) {
  std::vector<std::pair<uint64_t, std::string>> d;
  for (auto& [label, ns] : b) {
    auto i = a.find(label);
    auto was = i != a.end() ? std::min(i->second, ns) : 0;
    if (ns > was)
      d.emplace_back(ns - was, label);
  }
  std::sort(d.rbegin(), d.rend());
  std::string out;
  for (auto& [ns, label] : d) {
    char buf[160];
    std::snprintf(buf, sizeof(buf), "%s%s %.2f s (%.0f%% of a core)",
                  out.empty() ? "" : ", ", label.c_str(),
                  static_cast<double>(ns) / 1e9,
                  100.0 * static_cast<double>(ns) / (dt * 1e9));
    out += buf;
  }
  return out;
}

sample sampler::take() const {
  sample s;
  s.t = now_s();
  s.self_ns = process_cpu_ns();
  s.pg_ns = server_cpu_ns(postmaster);
  s.machine_ns = machine_busy_ns();
  s.threads = cpu_by_thread_label();
  if (redis_admin) {
    s.redis_ns = redis_cpu_ns(*redis_admin);
    s.redis_reads = static_cast<uint64_t>(
      redis_info(*redis_admin, "stats")["total_reads_processed"]);
    s.redis_cmds = redis_commandstats(*redis_admin);
  }
  return s;
}

command_figures count_commands(const sample& a, const sample& b,
                               double matches) {
  command_figures out;
  std::vector<std::pair<uint64_t, std::string>> inner;
  for (auto& [name, st] : b.redis_cmds) {
    auto i = a.redis_cmds.find(name);
    auto was = i != a.redis_cmds.end() ? i->second : command_stat{};
    if (name == "info" || st.calls <= was.calls)
      continue;
    auto n = static_cast<double>(st.calls - was.calls);
    if (name == "evalsha" || name == "eval" || name == "fcall") {
      out.evalsha += n / matches;
      out.evalsha_us += static_cast<double>(st.usec - was.usec);
    } else if (name == "xadd") {
      out.xadd += n / matches;
    } else if (name == "script" || name == "function" || name == "unlink"
               || name == "ping") {
      out.other_top += n / matches;
    } else {
      out.inner += n / matches;
      inner.emplace_back(st.calls - was.calls, name);
    }
  }
  if (out.evalsha > 0)
    out.evalsha_us /= out.evalsha * matches;
  std::sort(inner.rbegin(), inner.rend());
  for (size_t k = 0; k < inner.size() && k < 6; ++k) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%s%s %.2f", k == 0 ? "" : ", ",
                  inner[k].second.c_str(),
                  static_cast<double>(inner[k].first) / matches);
    out.inner_top += buf;
  }
  return out;
}

void pg_activity::take(pg_conn& admin, const std::string& db) {
  static const std::string kind_sql
    = "CASE WHEN query LIKE '%INSERT INTO match_sessions%' OR query LIKE "
      "'%NOTIFY%' THEN 'finalizer' WHEN query LIKE 'LISTEN%' THEN "
      "'relay listen' WHEN query LIKE '%session.ended%' THEN 'lifecycle' "
      "WHEN query LIKE '%outbox%' THEN 'relay' ELSE '' END";
  auto rows = admin.query(std::string{"SELECT pid, "} + backend_state_sql + ", "
                          + kind_sql
                          + " FROM pg_stat_activity WHERE datname = '" + db
                          + "' AND backend_type = 'client backend'");
  ++samples;
  for (auto& row : rows) {
    auto& kind = kind_of[row[0]];
    if (kind.empty())
      kind = row[2];
    ++states[row[0]][row[1]];
  }
}

std::string pg_activity::describe() const {
  std::map<std::string, std::map<std::string, uint64_t>> by_kind;
  std::map<std::string, size_t> conns;
  for (auto& [pid, st] : states) {
    auto i = kind_of.find(pid);
    auto kind = i == kind_of.end() || i->second.empty() ? "unclassified"
                                                        : i->second;
    ++conns[kind];
    for (auto& [state, n] : st)
      by_kind[kind][state] += n;
  }
  std::string out;
  for (auto& [kind, st] : by_kind)
    out += (out.empty() ? "" : " | ") + kind + " ("
           + std::to_string(conns[kind])
           + " conn): " + describe_shares(st, 2.0);
  return out.empty() ? "no samples" : out;
}

} // namespace mm::e2e_bench
