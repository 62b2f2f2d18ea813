#pragma once

// The open WebSockets of one server and the moment each last heard from its
// client (internal to http_server.cpp and ws_session.cpp; no Beast). The
// moments sit in stable, contiguous slots that a socket writes without a
// lock: the keep-alive sweep reads them all once a tick and touches only
// the sockets gone quiet. (A std::set of weak_ptr walked by the sweep cost
// ~2 % of a core per 20,000 sockets in cache misses; docs/benchmarks.md.)

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

namespace mm {

class ws_session;

class ws_registry {
 public:
  /// When a socket last heard from its client: steady milliseconds, 0 for
  /// a free slot.
  using moment = std::atomic<int64_t>;

  /// A registered socket's place.
  struct place {
    uint32_t index = 0;
    /// Its moment: stays valid as long as the registry (slots are reused,
    /// never freed), but the socket must stop writing it at `remove`.
    moment* heard = nullptr;
  };

  ws_registry();
  ~ws_registry();
  ws_registry(const ws_registry&) = delete;
  ws_registry& operator=(const ws_registry&) = delete;

  /// Registers `s`, last heard at `now_ms` (> 0). Thread-safe.
  place add(const std::shared_ptr<ws_session>& s, int64_t now_ms);

  /// Frees `p`'s slot for the next socket. Thread-safe; idempotent for a
  /// slot not yet reused.
  void remove(const place& p);

  /// Calls `f(socket, heard_ms)` for each registered socket that still
  /// exists and last heard at or before `quiet_since_ms`, under the lock:
  /// `f` must not block, add or remove. Slots of sockets gone without
  /// `remove` are freed on the way. Thread-safe.
  void visit_quiet(int64_t quiet_since_ms,
                   const std::function<void(ws_session&, int64_t heard_ms)>& f);

  /// The registered sockets that still exist (frees the slots of those
  /// gone, as `visit_quiet`). Thread-safe.
  std::vector<std::shared_ptr<ws_session>> all();

 private:
  static constexpr uint32_t chunk_size = 1024;
  struct chunk;

  void free_slot(uint32_t index); // lock held

  std::mutex mtx_;
  std::vector<std::unique_ptr<chunk>> chunks_;
  std::vector<uint32_t> free_; ///< slots below used_ free for reuse
  uint32_t used_ = 0;          ///< slots ever handed out (high-water mark)
};

} // namespace mm
