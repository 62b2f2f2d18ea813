#pragma once

// One open WebSocket, /v1/users/{user}/events (internal to the HTTP server):
// an event sink of the hub that writes what it is given in order, ignores
// what the client sends (within --ws-rate), pings a quiet client and closes
// one that answers nothing for --ws-idle-timeout.

#include <chrono>
#include <deque>
#include <memory>
#include <string>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>

#include "app/hub.hpp"
#include "app/server_core.hpp"

namespace mm {

class ws_session : public event_sink,
                   public std::enable_shared_from_this<ws_session> {
public:
  using tcp = boost::asio::ip::tcp;
  using request = boost::beast::http::request<boost::beast::http::string_body>;

  /// Takes over an upgraded connection with its place among
  /// --max-connections and its user's WebSocket place.
  ws_session(tcp::socket&& sock, std::shared_ptr<server_core> core,
             conn_slot conn, ws_slot place);

  ~ws_session() override;

  const std::string& user() const {
    return user_;
  }

  /// Answers the upgrade `req`, then attaches to the hub. Call once.
  void run(request req);

  /// Queues `msg`; thread-safe, never blocks.
  void push(std::shared_ptr<const std::string> msg) override;

  /// Closes once everything queued is sent. Thread-safe, idempotent.
  void close_when_flushed();

private:
  void enqueue(std::shared_ptr<const std::string> msg);
  void do_write();
  void do_read();
  void do_close(boost::beast::websocket::close_code code);
  void finished();
  bool take_token();
  void over_rate();

  boost::beast::websocket::stream<boost::beast::tcp_stream> ws_;
  std::shared_ptr<server_core> core_;
  conn_slot conn_;
  ws_slot place_;
  std::string user_;
  boost::beast::flat_buffer in_;
  std::deque<std::shared_ptr<const std::string>> queue_;
  double tokens_;
  std::chrono::steady_clock::time_point refilled_;
  bool writing_ = false;
  bool open_ = false;
  bool closing_ = false;
  bool closed_ = false;
  bool done_ = false;
  bool over_rate_ = false;
};

} // namespace mm
