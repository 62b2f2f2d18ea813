#pragma once

// Time as the engine reads it. Deadlines and ordering use the store's clock
// (the Redis server's TIME inside scripts; see docs/design.md, problem 7);
// this header only names that clock's type for the embedded store and gives
// the one wall-clock reading used where a node's own time is acceptable
// (defaults, lags reported to operators).

#include <chrono>
#include <cstdint>
#include <functional>

namespace mm {

/// A clock in ms since the epoch. For the embedded queue store it plays the
/// role of the Redis server's clock: simulations inject one they control.
using store_clock = std::function<int64_t()>;

/// This node's wall clock in ms since the epoch.
inline int64_t wall_clock_ms() {
  using namespace std::chrono;
  return static_cast<int64_t>(
    duration_cast<milliseconds>(system_clock::now().time_since_epoch())
      .count());
}

} // namespace mm
