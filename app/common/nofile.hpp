#pragma once

// The descriptor limit of a process that holds many sockets (matchd, the
// load generators): docs/matchd.md, "Many connected users".

#include <cstdint>

namespace mm {

/// Raises this process's soft RLIMIT_NOFILE to its hard limit (the most a
/// process may take without privilege) and returns the soft limit after it
/// (0 when it cannot be read). Idempotent.
uint64_t raise_nofile_limit();

} // namespace mm
