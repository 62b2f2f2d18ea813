#pragma once

// Repeated log lines, rate-limited: a failure that repeats at machine speed
// (accept at the descriptor limit, a store that refuses every command) must
// not turn into millions of identical lines.

#include <chrono>
#include <cstdint>
#include <mutex>

namespace mm {

/// Lets at most `burst` lines of one kind through per `interval` and counts
/// the rest. One limiter per call site (a "kind" is what that site logs).
/// Thread-safe.
class log_limit {
 public:
  using clock = std::chrono::steady_clock;

  /// At most `burst` lines per `interval`; the first window starts at the
  /// first `admit`.
  log_limit(uint32_t burst, clock::duration interval) noexcept
    : burst_(burst), interval_(interval) {
    // nop
  }

  /// Answers whether a line may be written now. When it may and lines were
  /// held back since the last one written, `suppressed` is their count:
  /// the caller writes a "suppressed K similar lines" line first. Not
  /// idempotent (each call is one line, written or counted).
  bool admit(uint64_t& suppressed) noexcept {
    std::lock_guard<std::mutex> guard{mtx_};
    auto now = clock::now();
    if (now - window_start_ >= interval_) {
      window_start_ = now;
      written_ = 0;
    }
    if (written_ >= burst_) {
      ++held_;
      return false;
    }
    ++written_;
    suppressed = held_;
    held_ = 0;
    return true;
  }

 private:
  uint32_t burst_;
  clock::duration interval_;
  std::mutex mtx_;
  clock::time_point window_start_{};
  uint32_t written_ = 0;
  uint64_t held_ = 0;
};

} // namespace mm

/// Logs through `log` (a logger pointer) at `level` (a logger member:
/// `warn`, `error`, `info`) at most 5 lines per 10 s from this call site,
/// and before the next line it lets through, how many it held back. For
/// every line that can repeat with the users, events or requests served
/// (a store outage fails them all at once). One limiter per call site.
#define MM_LOG_LIMITED(log, level, ...)                                 \
  do {                                                                  \
    static ::mm::log_limit mm_site_limit_{5, std::chrono::seconds(10)}; \
    uint64_t mm_held_ = 0;                                              \
    if (mm_site_limit_.admit(mm_held_)) {                               \
      if (mm_held_ > 0)                                                 \
        (log)->level("{} similar lines not logged", mm_held_);          \
      (log)->level(__VA_ARGS__);                                        \
    }                                                                   \
  } while (false)
