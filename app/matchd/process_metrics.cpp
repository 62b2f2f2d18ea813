#include "app/matchd/process_metrics.hpp"

#include <cstdio>
#include <cstring>
#include <ctime>
#include <dirent.h>
#include <string>
#include <sys/resource.h>
#include <unistd.h>

namespace mm {

namespace {

/// The boot time in seconds since the epoch: the wall clock less the time
/// since boot (CLOCK_BOOTTIME), so /proc/stat is not needed (the systemd
/// unit's ProcSubset=pid hides it). Taken once: a stable start time.
double boot_time() noexcept {
  static const double btime = [] {
    timespec real{}, boot{};
    clock_gettime(CLOCK_REALTIME, &real);
    clock_gettime(CLOCK_BOOTTIME, &boot);
    return static_cast<double>(real.tv_sec - boot.tv_sec)
           + static_cast<double>(real.tv_nsec - boot.tv_nsec) / 1e9;
  }();
  return btime;
}

} // namespace

process_sample sample_process() noexcept {
  process_sample s;
  auto ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  auto page = static_cast<double>(sysconf(_SC_PAGESIZE));
  if (auto* f = std::fopen("/proc/self/stat", "r")) {
    char buf[1024];
    auto n = std::fread(buf, 1, sizeof buf - 1, f);
    std::fclose(f);
    buf[n] = '\0';
    // The command name (field 2) may hold spaces and parentheses: the
    // fields we need follow its last ')'.
    if (auto* p = std::strrchr(buf, ')'); p != nullptr && ticks > 0) {
      // Field 3 (state) is the first after ')'; utime is 14, stime 15,
      // starttime 22, vsize 23, rss 24 (proc(5)).
      unsigned long long f14 = 0, f15 = 0, f22 = 0, f23 = 0;
      long long f24 = 0;
      int got = std::sscanf(p + 1,
                            " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u "
                            "%llu %llu %*d %*d %*d %*d %*d %*d %llu %llu %lld",
                            &f14, &f15, &f22, &f23, &f24);
      if (got == 5) {
        s.cpu_seconds = static_cast<double>(f14 + f15) / ticks;
        s.start_time_seconds = boot_time() + static_cast<double>(f22) / ticks;
        s.virtual_bytes = static_cast<double>(f23);
        s.resident_bytes = static_cast<double>(f24) * page;
        s.ok = true;
      }
    }
  }
  if (auto* d = opendir("/proc/self/fd")) {
    double n = 0;
    while (auto* e = readdir(d))
      if (e->d_name[0] != '.')
        ++n;
    closedir(d);
    s.open_fds = n - 1; // the directory stream's own descriptor
  }
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
    s.max_fds = rl.rlim_cur == RLIM_INFINITY ? 0
                                             : static_cast<double>(rl.rlim_cur);
  return s;
}

} // namespace mm
