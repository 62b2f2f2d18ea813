#pragma once

// The sorted-set value type of the embedded data set; its commands (ZADD ZREM
// ZPOPMIN ZSCORE ZCARD ZRANGE ZRANGEBYSCORE ZRANGEBYLEX) are in t_zset.cpp.

#include <set>
#include <string>
#include <unordered_map>
#include <utility>

namespace mm::embedded {

/// Orders (score, member) like Redis; also compares against a bare score so
/// that lower_bound/upper_bound can find a score boundary.
struct zset_less {
  using is_transparent = void;
  using item = std::pair<double, std::string>;
  /// By score, then member in byte order.
  bool operator()(const item& x, const item& y) const {
    return x < y;
  }
  /// By score alone, for a score boundary.
  bool operator()(const item& x, double y) const {
    return x.first < y;
  }
  /// By score alone, for a score boundary.
  bool operator()(double x, const item& y) const {
    return x < y.first;
  }
};

struct zset_type {
  std::set<std::pair<double, std::string>, zset_less> ordered;
  std::unordered_map<std::string, double> scores;
};

} // namespace mm::embedded
