// Definitions of bench_common.hpp (no CAF, no libpq): the counting queue
// store, CPU accounting from /proc, Redis INFO, figures, port files.

#include "bench/bench_common.hpp"

#include "core/stats.hpp"

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <dirent.h>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace mm::bench {

// -- options ------------------------------------------------------------------

void check_label(const std::string& label) {
  for (char c : label)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_')
      throw std::invalid_argument("variant label '" + label
                                  + "': letters, digits and _ only");
}

bool read_port(const std::string& dir, uint16_t& port) {
  std::ifstream in(dir + "/port");
  int p = 0;
  if (!(in >> p) || p <= 0 || p > 65535) {
    std::fprintf(stderr, "no port file in %s\n", dir.c_str());
    return false;
  }
  port = static_cast<uint16_t>(p);
  return true;
}

bool resolve_conninfo(service_options& o) {
  if (!o.conninfo.empty())
    return true;
  if (o.pg_dir.empty()) {
    std::fprintf(stderr, "PostgreSQL is needed: --conninfo or --pg-dir\n");
    return false;
  }
  uint16_t port = 0;
  if (!read_port(o.pg_dir, port))
    return false;
  o.conninfo = "host=127.0.0.1 port=" + std::to_string(port)
               + " user=postgres dbname=postgres";
  return true;
}

bool resolve_redis_port(service_options& o, const char* missing) {
  if (o.redis_port != 0)
    return true;
  if (o.redis_dir.empty()) {
    std::fputs(missing, stderr);
    return false;
  }
  return read_port(o.redis_dir, o.redis_port);
}

// -- counting store -----------------------------------------------------------

namespace {

class counting_store final : public queue_store {
 public:
  counting_store(std::unique_ptr<queue_store> inner,
                 std::shared_ptr<store_counters> c)
    : inner_(std::move(inner)), c_(std::move(c)) {}

  std::vector<store_reply> run(const std::vector<script_call>& calls) override {
    c_->threads.note();
    auto t0 = steady_ns();
    auto out = inner_->run(calls);
    count(calls.size(), steady_ns() - t0);
    return out;
  }

  std::vector<store_reply>
  execute(const std::vector<store_command>& commands) override {
    c_->threads.note();
    auto t0 = steady_ns();
    auto out = inner_->execute(commands);
    count(commands.size(), steady_ns() - t0);
    return out;
  }

  bool blocking() const noexcept override {
    return inner_->blocking();
  }

 private:
  void count(size_t n, uint64_t ns) {
    c_->batches.fetch_add(1, std::memory_order_relaxed);
    c_->calls.fetch_add(n, std::memory_order_relaxed);
    c_->busy_ns.fetch_add(ns, std::memory_order_relaxed);
    raise_max(c_->max_batch, n);
  }

  std::unique_ptr<queue_store> inner_;
  std::shared_ptr<store_counters> c_;
};

} // namespace

std::shared_ptr<queue_store_factory>
counting_factory(std::shared_ptr<queue_store_factory> inner,
                 std::shared_ptr<store_counters> counters) {
  return std::make_shared<
    counting_factory_of<queue_store_factory, counting_store, store_counters>>(
    std::move(inner), std::move(counters));
}

// -- CPU accounting -----------------------------------------------------------

namespace {

uint64_t tick_ns() {
  static const uint64_t ns = 1000000000ull / sysconf(_SC_CLK_TCK);
  return ns;
}

/// ppid and utime+stime (ns) of a process or thread, from a stat file.
bool proc_stat_path(const std::string& path, int& ppid, uint64_t& cpu_ns) {
  std::ifstream in(path);
  std::string line;
  if (!std::getline(in, line))
    return false;
  // The command name may hold spaces: fields start after the last ')'.
  auto close = line.rfind(')');
  if (close == std::string::npos || close + 2 > line.size())
    return false;
  std::istringstream rest(line.substr(close + 2));
  std::string field;
  uint64_t utime = 0, stime = 0;
  ppid = 0;
  // Field 3 is the state, 4 the ppid; utime and stime are fields 14 and 15.
  for (int i = 3; i <= 15 && rest >> field; ++i) {
    if (i == 4)
      ppid = std::atoi(field.c_str());
    else if (i == 14)
      utime = std::stoull(field);
    else if (i == 15)
      stime = std::stoull(field);
  }
  cpu_ns = (utime + stime) * tick_ns();
  return true;
}

} // namespace

std::map<int, uint64_t> thread_cpu_ns() {
  std::map<int, uint64_t> out;
  if (DIR* d = opendir("/proc/self/task")) {
    while (auto* e = readdir(d)) {
      if (e->d_name[0] < '0' || e->d_name[0] > '9')
        continue;
      int tid = std::atoi(e->d_name);
      int ignored = 0;
      uint64_t ns = 0;
      if (proc_stat_path(std::string{"/proc/self/task/"} + e->d_name + "/stat",
                         ignored, ns))
        out[tid] = ns;
    }
    closedir(d);
  }
  return out;
}

uint64_t process_cpu_ns() {
  rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  auto ns = [](const timeval& tv) {
    return static_cast<uint64_t>(tv.tv_sec) * 1000000000ull
           + static_cast<uint64_t>(tv.tv_usec) * 1000ull;
  };
  return ns(ru.ru_utime) + ns(ru.ru_stime);
}

int current_tid() {
  thread_local int tid = static_cast<int>(syscall(SYS_gettid));
  return tid;
}

bool proc_stat(int pid, int& ppid, uint64_t& cpu_ns) {
  return proc_stat_path("/proc/" + std::to_string(pid) + "/stat", ppid, cpu_ns);
}

uint64_t server_cpu_ns(int pid) {
  if (pid <= 0)
    return 0;
  uint64_t sum = 0;
  if (DIR* d = opendir("/proc")) {
    while (auto* e = readdir(d)) {
      if (e->d_name[0] < '0' || e->d_name[0] > '9')
        continue;
      int p = std::atoi(e->d_name);
      int ppid = 0;
      uint64_t ns = 0;
      if (proc_stat(p, ppid, ns) && (p == pid || ppid == pid))
        sum += ns;
    }
    closedir(d);
  }
  return sum;
}

uint64_t machine_busy_ns() {
  std::ifstream in("/proc/stat");
  std::string cpu;
  uint64_t v[8] = {0};
  in >> cpu;
  uint64_t total = 0;
  for (auto& x : v) {
    in >> x;
    total += x;
  }
  return (total - v[3] - v[4]) * tick_ns();
}

std::map<std::string, double> redis_info(queue_store& conn,
                                         const std::string& section) {
  std::map<std::string, double> out;
  auto r = conn.execute({{"INFO", section}});
  if (r.empty() || r[0].code != errc::none)
    return out;
  std::istringstream in(r[0].value.str);
  for (std::string line; std::getline(in, line);) {
    auto colon = line.find(':');
    if (colon == std::string::npos || line[0] == '#')
      continue;
    try {
      out[line.substr(0, colon)] = std::stod(line.substr(colon + 1));
    } catch (const std::exception&) {
      // not a number
    }
  }
  return out;
}

uint64_t redis_cpu_ns(queue_store& conn) {
  auto cpu = redis_info(conn, "cpu");
  return static_cast<uint64_t>((cpu["used_cpu_user"] + cpu["used_cpu_sys"])
                               * 1e9);
}

// -- figures ------------------------------------------------------------------

double percentile_ms(std::vector<uint64_t>& xs, double q) {
  return percentile(xs, q, rank_rule::lower) / 1e6;
}

std::string describe_shares(const std::map<std::string, uint64_t>& counts,
                            double min_pct) {
  uint64_t total = 0;
  std::vector<std::pair<uint64_t, std::string>> by_count;
  for (auto& [k, n] : counts) {
    total += n;
    by_count.emplace_back(n, k);
  }
  std::sort(by_count.rbegin(), by_count.rend());
  std::string out;
  double rest = 0;
  for (auto& [n, k] : by_count) {
    auto pct = 100.0 * static_cast<double>(n)
               / static_cast<double>(std::max<uint64_t>(1, total));
    if (pct < min_pct) {
      rest += pct;
      continue;
    }
    char buf[128];
    std::snprintf(buf, sizeof(buf), "%s%s %.0f%%", out.empty() ? "" : ", ",
                  k.c_str(), pct);
    out += buf;
  }
  if (rest > 0) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), ", other %.0f%%", rest);
    out += buf;
  }
  return out;
}

void problem_list::print(const std::string& tag) const {
  for (auto& p : items)
    std::printf("[%s]   VIOLATION %s\n", tag.c_str(), p.c_str());
}

std::map<std::string, command_stat>
parse_commandstats(const std::string& info) {
  std::map<std::string, command_stat> out;
  std::istringstream in(info);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("cmdstat_", 0) != 0)
      continue;
    auto colon = line.find(':');
    if (colon == std::string::npos)
      continue;
    command_stat st;
    std::istringstream fields(line.substr(colon + 1));
    for (std::string kv; std::getline(fields, kv, ',');) {
      auto eq = kv.find('=');
      if (eq == std::string::npos)
        continue;
      auto key = kv.substr(0, eq);
      if (key == "calls")
        st.calls = std::strtoull(kv.c_str() + eq + 1, nullptr, 10);
      else if (key == "usec")
        st.usec = std::strtoull(kv.c_str() + eq + 1, nullptr, 10);
    }
    out[line.substr(8, colon - 8)] = st;
  }
  return out;
}

} // namespace mm::bench
