#pragma once

// What the HTTP and WebSocket sessions of one http_server share (internal to
// http_server.cpp and ws_session.cpp; no Beast). Sessions hold it by
// shared_ptr: a session whose handler is destroyed with the io_context,
// after the server object, still finds its counters.

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "app/matchd/api.hpp"
#include "app/matchd/http_server.hpp"
#include "app/matchd/hub.hpp"
#include "app/matchd/ws_registry.hpp"
#include "core/log_limit.hpp"

namespace mm {

struct server_core {
  /// Sessions answer through `r`, WebSockets attach to `e`, `l` bounds them.
  server_core(std::shared_ptr<api_router> r, std::shared_ptr<hub> e,
              server_limits l)
    : router(std::move(r)), events(std::move(e)), limits(l) {
    // nop
  }

  std::shared_ptr<api_router> router;
  std::shared_ptr<hub> events;
  server_limits limits;
  server_stats stats;

  /// Counts an exception caught at a handler boundary and logs it
  /// (rate-limited: a request that throws every time must not flood the
  /// log). Thread-safe.
  void log_handler_error(const char* where, const char* what);

  // -- WebSockets: places per user and the open ones (for the drain) -------

  /// Takes one of `user`'s --max-websockets-per-user places; false when all
  /// are taken. Pair with `release_ws`. Thread-safe.
  bool reserve_ws(const std::string& user);

  /// Gives back one place of `user`. Not idempotent: once per successful
  /// `reserve_ws` (ws_slot does that). Thread-safe.
  void release_ws(const std::string& user);

  /// The open WebSockets, for the drain and the keep-alive sweep.
  ws_registry websockets;

 private:
  std::mutex mtx_;
  /// Open (or opening) WebSockets by user; a user with none has no entry,
  /// so the map does not grow with the users served.
  std::unordered_map<std::string, uint32_t> ws_per_user_;
  log_limit error_log_{5, std::chrono::seconds(10)};
};

/// One place among --max-connections, held by the connection's session for
/// as long as its socket is open (an upgraded connection hands it on to its
/// WebSocket). Move-only.
class conn_slot {
 public:
  /// Holds no place.
  conn_slot() = default;

  /// Takes a place: one more open connection in `core`'s stats (the
  /// caller checked --max-connections).
  explicit conn_slot(std::shared_ptr<server_core> core)
    : core_(std::move(core)) {
    ++core_->stats.open_connections;
  }

  /// Takes over `other`'s place; `other` holds none after.
  conn_slot(conn_slot&& other) noexcept : core_(std::move(other.core_)) {
    other.core_ = nullptr;
  }

  /// Gives this slot's place back, then takes over `other`'s.
  conn_slot& operator=(conn_slot&& other) noexcept {
    if (this != &other) {
      reset();
      core_ = std::move(other.core_);
      other.core_ = nullptr;
    }
    return *this;
  }

  conn_slot(const conn_slot&) = delete;
  conn_slot& operator=(const conn_slot&) = delete;

  /// Gives the place back.
  ~conn_slot() {
    reset();
  }

  /// Gives the place back. Idempotent.
  void reset() {
    if (core_)
      --core_->stats.open_connections;
    core_ = nullptr;
  }

 private:
  std::shared_ptr<server_core> core_;
};

/// One of a user's --max-websockets-per-user places. Move-only.
class ws_slot {
 public:
  /// Holds no place.
  ws_slot() = default;

  /// A place of `user`, or an empty slot when the user has none left.
  static ws_slot take(const std::shared_ptr<server_core>& core,
                      const std::string& user) {
    ws_slot s;
    if (core->reserve_ws(user)) {
      s.core_ = core;
      s.user_ = user;
    }
    return s;
  }

  /// Takes over `other`'s place; `other` holds none after.
  ws_slot(ws_slot&& other) noexcept
    : core_(std::move(other.core_)), user_(std::move(other.user_)) {
    other.core_ = nullptr;
  }

  ws_slot& operator=(ws_slot&&) = delete;
  ws_slot(const ws_slot&) = delete;
  ws_slot& operator=(const ws_slot&) = delete;

  /// Gives the place back.
  ~ws_slot() {
    reset();
  }

  /// True while the slot holds a place.
  explicit operator bool() const {
    return core_ != nullptr;
  }

  /// The user of the place (empty when `take` found none).
  const std::string& user() const {
    return user_;
  }

  /// Gives the place back. Idempotent.
  void reset() {
    if (core_)
      core_->release_ws(user_);
    core_ = nullptr;
  }

 private:
  std::shared_ptr<server_core> core_;
  std::string user_;
};

} // namespace mm
