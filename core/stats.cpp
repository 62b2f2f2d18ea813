// Definitions of core/stats.hpp.

#include "core/stats.hpp"

#include <algorithm>
#include <cmath>
#include <iterator>

namespace mm {

namespace {

template <class T>
double percentile_of(std::vector<T>& xs, double q, rank_rule rule) {
  if (xs.empty())
    return 0;
  auto k = percentile_index(xs.size(), q, rule);
  auto kth = xs.begin() + static_cast<std::ptrdiff_t>(k);
  std::nth_element(xs.begin(), kth, xs.end());
  return static_cast<double>(*kth);
}

} // namespace

std::size_t percentile_index(std::size_t n, double q, rank_rule rule) {
  std::size_t k = 0;
  if (rule == rank_rule::nearest) {
    auto rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(n)));
    k = rank == 0 ? 0 : rank - 1;
  } else {
    k = static_cast<std::size_t>(q * static_cast<double>(n - 1));
  }
  return std::min(n - 1, k);
}

double percentile(std::vector<double>& xs, double q, rank_rule rule) {
  return percentile_of(xs, q, rule);
}

double percentile(std::vector<uint64_t>& xs, double q, rank_rule rule) {
  return percentile_of(xs, q, rule);
}

} // namespace mm
