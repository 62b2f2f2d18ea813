#pragma once

// What a virtual user of `matchctl load` holds while it is in progress (its
// WebSocket, timer, token, requests on the wire); dropped when it is done.
// Shared by the two files of virtual_users (virtual_users.cpp, cycles.cpp).

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>

#include <boost/asio/steady_timer.hpp>

#include "app/matchctl/load/virtual_users.hpp"

namespace mm::load {

struct virtual_users::active_user {
  /// Its timer runs on `io`.
  explicit active_user(asio::io_context& io) : timer(io) {}
  std::shared_ptr<ws_client> ws;
  asio::steady_timer timer;
  std::string auth;
  int64_t cancel_delay_ms = -1;
  uint32_t timer_gen = 0; ///< a wait of an older arming is ignored
  uint16_t inflight = 0;
  uint8_t end_attempts = 0; ///< of the current cycle's end
  timer_use timer_armed = timer_use::none;
  /// Requests sent on the WebSocket, by id, until their reply (or their
  /// timeout, or the socket's end) calls back.
  struct pending_call {
    http_callback cb;
    std::unique_ptr<asio::steady_timer> timer;
  };
  std::unordered_map<uint32_t, pending_call> calls;
  uint32_t next_call = 0;
};

} // namespace mm::load
