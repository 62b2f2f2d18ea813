#pragma once

// The stream value type of the embedded data set and its entry ids; its
// commands (XADD XLEN XRANGE) are in t_stream.cpp.

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

namespace mm::embedded {

/// A stream entry id, "<ms>-<seq>".
struct stream_id {
  uint64_t ms = 0;
  uint64_t seq = 0;
  /// By ms, then seq: the order of a stream.
  friend bool operator<(const stream_id& x, const stream_id& y) {
    return x.ms != y.ms ? x.ms < y.ms : x.seq < y.seq;
  }
  friend bool operator==(const stream_id& x, const stream_id& y) {
    return x.ms == y.ms && x.seq == y.seq;
  }
  /// "<ms>-<seq>", as XADD answers it.
  std::string to_string() const {
    return std::to_string(ms) + '-' + std::to_string(seq);
  }
};

struct stream_entry {
  stream_id id;
  std::vector<std::string> fields; // f1, v1, f2, v2, ...
};

struct stream_type {
  std::deque<stream_entry> entries; // ascending ids; trimmed at the front
  stream_id last;
};

} // namespace mm::embedded
