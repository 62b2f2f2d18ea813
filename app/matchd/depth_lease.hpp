#pragma once

// Which node exports a shared queue's depth. Nodes on one queue store see
// the same queues; if each exported `mm_queue_depth` a cluster-wide sum()
// would count every waiter once per node. So each queue's depth is
// exported by the one node that holds its lease (lua/depth_lease.lua,
// key `mm:{queue}:reporter`, on the store's clock): every node asks for the
// leases of the queues its broker knows about once a second; the holder
// renews, a free lease goes to whoever asks first. See docs/matchd.md,
// "Metrics". No CAF.

#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "persistence/queue/queue_store.hpp"

namespace mm {

class depth_lease {
 public:
  using clock = std::chrono::steady_clock;

  /// `node` is this node's id (the lease's value); `ttl` how long a lease
  /// lasts without renewal (a dead holder's queues are reported again by
  /// another node after at most `ttl` plus one round).
  explicit depth_lease(std::string node, std::chrono::milliseconds ttl
                                         = std::chrono::milliseconds(3000));

  /// Asks the store for the lease of each of `queues`, pipelined in one
  /// round trip; forgets the leases of queues not listed (the broker forgot
  /// them: their leases lapse). A call the store could not answer keeps
  /// what was held until it runs out. Thread-safe; idempotent.
  void renew(queue_store& store, const std::vector<std::string>& queues);

  /// True when this node holds the lease of `queue` now, by the local
  /// clock: from before the ask for `ttl` less a margin, so the store's
  /// lease always outlives our belief (never two reporters at once).
  /// Thread-safe.
  bool holds(const std::string& queue) const;

  /// Key of the lease of `queue`.
  static std::string key(const std::string& queue);

 private:
  std::string node_;
  std::chrono::milliseconds ttl_;
  mutable std::mutex mtx_;
  std::map<std::string, clock::time_point> until_;
};

} // namespace mm
