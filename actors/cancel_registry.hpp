#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace mm {

/// The key of a queue ticket wherever one is remembered: (queue, user,
/// ticket). Ids cannot hold '\n'.
std::string ticket_key(const std::string& queue, const std::string& user,
                       const std::string& ticket);

/// Cancels of claimed tickets, shared between the finalizer actor and its
/// store workers (which consult it at the checkpoints inside a commit).
/// Keyed by (queue, user, ticket): two users' tickets of the same name are
/// different tickets. Thread-safe. Entries expire after `memory_ms` (longer
/// than any pair lives unfinalized), so the set stays bounded.
class cancel_registry {
 public:
  /// An empty registry that remembers each cancel for `memory_ms`.
  explicit cancel_registry(int64_t memory_ms = 120000);

  ~cancel_registry();

  /// Records a cancel of `user`'s `ticket` in `queue`. Idempotent.
  void add(const std::string& queue, const std::string& user,
           const std::string& ticket);

  /// True when `user`'s `ticket` in `queue` was cancelled within the memory.
  bool contains(const std::string& queue, const std::string& user,
                const std::string& ticket) const;

  /// Entries held (expired ones are dropped on the next `add`).
  size_t size() const;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

} // namespace mm
