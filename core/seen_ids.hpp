#pragma once

// The ids an actor has handled lately (at-least-once delivery: a repeat is
// dropped), bounded, and free while empty: sessions and parties keep one
// each, a node keeps one per connected user.

#include <cstddef>
#include <set>
#include <string>
#include <vector>

namespace mm {

class seen_ids {
 public:
  explicit seen_ids(std::size_t capacity) : capacity_(capacity) {}

  /// Records `id`; false when it is among the last `capacity` recorded
  /// (then nothing changes). The oldest id is forgotten past the capacity.
  bool insert(const std::string& id) {
    if (!set_.insert(id).second)
      return false;
    if (ring_.size() < capacity_) {
      ring_.push_back(id);
      return true;
    }
    set_.erase(ring_[next_]);
    ring_[next_] = id;
    next_ = (next_ + 1) % capacity_;
    return true;
  }

  std::size_t size() const noexcept {
    return set_.size();
  }

 private:
  std::size_t capacity_;
  std::set<std::string> set_;
  std::vector<std::string> ring_; // insertion order; next_ is the oldest
  std::size_t next_ = 0;
};

} // namespace mm
