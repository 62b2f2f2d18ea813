#pragma once

// A small synchronous HTTP and WebSocket client for end-to-end tests
// (Boost.Beast), speaking to matchd over real sockets.

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>
#include <string>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <nlohmann/json.hpp>

namespace mm::test {

namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
using tcp = boost::asio::ip::tcp;
using json = nlohmann::json;

struct http_answer {
  unsigned status = 0;
  std::string body;

  json as_json() const {
    return json::parse(body, nullptr, false);
  }

  std::string error() const {
    auto j = as_json();
    return j.is_object() && j.contains("error") ? j["error"].get<std::string>()
                                                : std::string{};
  }
};

/// One keep-alive connection; reconnects when the server closed it.
class http_conn {
public:
  explicit http_conn(uint16_t port) : port_(port), stream_(ioc_) {
  }

  http_answer request(http::verb method, const std::string& target,
                      const std::string& token = {},
                      const std::string& body = {}) {
    for (int attempt = 0; attempt < 2; ++attempt) {
      try {
        if (!connected_) {
          stream_.connect(tcp::endpoint{boost::asio::ip::make_address("127.0.0.1"),
                                        port_});
          connected_ = true;
        }
        http::request<http::string_body> req{method, target, 11};
        req.set(http::field::host, "127.0.0.1");
        if (!token.empty())
          req.set(http::field::authorization, "Bearer " + token);
        if (!body.empty() || method == http::verb::post) {
          req.set(http::field::content_type, "application/json");
          req.body() = body;
        }
        req.prepare_payload();
        req.keep_alive(true);
        http::write(stream_, req);
        beast::flat_buffer buf;
        http::response<http::string_body> res;
        http::read(stream_, buf, res);
        if (!res.keep_alive())
          close();
        return http_answer{res.result_int(), res.body()};
      } catch (const std::exception&) {
        close();
        if (attempt == 1)
          throw;
      }
    }
    return {};
  }

  void close() {
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
    stream_.close();
    connected_ = false;
  }

private:
  boost::asio::io_context ioc_;
  uint16_t port_;
  beast::tcp_stream stream_;
  bool connected_ = false;
};

/// A user's event WebSocket. A reader thread queues what arrives (sync
/// Beast reads have no timeout), `next` waits on that queue.
class ws_conn {
public:
  /// Opens /v1/users/{user}/events; throws on a refused handshake.
  ws_conn(uint16_t port, const std::string& user, const std::string& token)
    : ws_(ioc_) {
    beast::get_lowest_layer(ws_).connect(
      tcp::endpoint{boost::asio::ip::make_address("127.0.0.1"), port});
    ws_.set_option(websocket::stream_base::decorator(
      [token](websocket::request_type& req) {
        req.set(http::field::authorization, "Bearer " + token);
      }));
    ws_.handshake("127.0.0.1", "/v1/users/" + user + "/events");
    reader_ = std::thread([this] {
      for (;;) {
        beast::flat_buffer buf;
        beast::error_code ec;
        ws_.read(buf, ec);
        std::lock_guard<std::mutex> guard{mtx_};
        if (ec) {
          closed_ = true;
          cv_.notify_all();
          return;
        }
        inbox_.push_back(
          json::parse(beast::buffers_to_string(buf.data()), nullptr, false));
        cv_.notify_all();
      }
    });
  }

  ~ws_conn() {
    beast::error_code ec;
    beast::get_lowest_layer(ws_).socket().shutdown(tcp::socket::shutdown_both,
                                                   ec);
    reader_.join();
  }

  /// The next message within `timeout`, or nothing.
  std::optional<json> next(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> guard{mtx_};
    cv_.wait_for(guard, timeout, [this] { return !inbox_.empty() || closed_; });
    if (inbox_.empty())
      return std::nullopt;
    auto m = std::move(inbox_.front());
    inbox_.pop_front();
    return m;
  }

  /// True once the server closed the connection (after what it queued).
  bool closed(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> guard{mtx_};
    return cv_.wait_for(guard, timeout, [this] { return closed_; });
  }

  /// The next message of `type` within `timeout` (others are skipped).
  std::optional<json> next_of(const std::string& type,
                              std::chrono::milliseconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
      auto m = next(left);
      if (!m)
        return std::nullopt;
      if (m->is_object() && (*m)["type"] == type)
        return m;
    }
    return std::nullopt;
  }

private:
  boost::asio::io_context ioc_;
  websocket::stream<beast::tcp_stream> ws_;
  std::thread reader_;
  std::mutex mtx_;
  std::condition_variable cv_;
  std::deque<json> inbox_;
  bool closed_ = false;
};

/// Sends a WebSocket upgrade request to `target` and answers the HTTP status
/// of the answer (101 when it was accepted).
inline unsigned ws_handshake_status(uint16_t port, const std::string& target,
                                    const std::string& token) {
  boost::asio::io_context ioc;
  beast::tcp_stream stream{ioc};
  stream.connect(tcp::endpoint{boost::asio::ip::make_address("127.0.0.1"), port});
  http::request<http::empty_body> req{http::verb::get, target, 11};
  req.set(http::field::host, "127.0.0.1");
  req.set(http::field::connection, "Upgrade");
  req.set(http::field::upgrade, "websocket");
  req.set(http::field::sec_websocket_version, "13");
  req.set(http::field::sec_websocket_key, "dGhlIHNhbXBsZSBub25jZQ==");
  if (!token.empty())
    req.set(http::field::authorization, "Bearer " + token);
  http::write(stream, req);
  beast::flat_buffer buf;
  http::response_parser<http::empty_body> parser;
  parser.skip(true); // a 101 has no body; a refusal's body does not matter
  beast::error_code ec;
  http::read_header(stream, buf, parser, ec);
  return parser.get().result_int();
}

} // namespace mm::test
