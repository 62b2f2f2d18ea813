#pragma once

// The bound on one job of a store worker (a detached actor blocked in a C
// client): every store call has its own timeouts, but a server that is
// frozen while its kernel still answers TCP (SIGSTOP, a VM paused) is seen by
// none of them, so the request to the worker carries a backstop too.

#include <chrono>
#include <cstdint>

#include <caf/duration.hpp>

namespace mm {

/// The timeout of a request to a store worker: `ms` milliseconds, or none
/// when `ms` is 0.
inline caf::duration worker_bound(uint32_t ms) {
  if (ms == 0)
    return caf::duration{caf::infinite};
  return caf::duration{std::chrono::milliseconds(ms)};
}

} // namespace mm
