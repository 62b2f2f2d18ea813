#pragma once

// Percentiles of measured samples (latencies), written once for matchctl
// load and the benches. No CAF.

#include <cstddef>
#include <cstdint>
#include <vector>

namespace mm {

/// Which of n sorted samples a q-quantile names. matchctl load and the
/// benches count differently; both rules are kept so that their figures
/// stay comparable with the ones recorded in docs/benchmarks.md.
enum class rank_rule {
  /// The ceil(q * n)-th smallest, the first for q = 0 (the nearest rank):
  /// matchctl load.
  nearest,
  /// The one at index floor(q * (n - 1)), counted from 0: the benches.
  lower,
};

/// The index of the q-quantile (0 <= q <= 1) among `n` > 0 sorted samples,
/// at most `n - 1`.
std::size_t percentile_index(std::size_t n, double q, rank_rule rule);

/// The q-quantile (0 <= q <= 1) of `xs`; 0 when `xs` is empty. Reorders
/// `xs` (a partial sort), so the value is the same whether or not `xs` was
/// sorted before. Idempotent in its result.
double percentile(std::vector<double>& xs, double q, rank_rule rule);

/// As above, for integer samples (e.g. nanoseconds).
double percentile(std::vector<uint64_t>& xs, double q, rank_rule rule);

} // namespace mm
