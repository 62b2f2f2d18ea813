#pragma once

// The process's own figures for /metrics, under the names every Prometheus
// client library uses (process_cpu_seconds_total, process_open_fds, ...),
// read from /proc/self at scrape time. No CAF, no Prometheus.

namespace mm {

struct process_sample {
  double cpu_seconds = 0;        ///< user + system CPU time
  double resident_bytes = 0;     ///< RSS
  double virtual_bytes = 0;      ///< address space
  double start_time_seconds = 0; ///< since the Unix epoch
  double open_fds = 0;           ///< entries of /proc/self/fd
  double max_fds = 0;            ///< soft RLIMIT_NOFILE
  bool ok = false;               ///< /proc/self/stat could be read
};

/// Reads the figures now. Thread-safe; never throws (`ok` false when /proc
/// is not there).
process_sample sample_process() noexcept;

} // namespace mm
