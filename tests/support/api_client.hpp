#pragma once

// Synchronous test helpers on matchctl's client (app/common/http_client.hpp) for
// matchd on loopback: one request at a time, a user's event WebSocket read
// on a thread of its own, and the status of a WebSocket upgrade.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <utility>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/beast/http/verb.hpp>
#include <nlohmann/json.hpp>

#include "app/common/http_client.hpp"

namespace mm::test {

namespace http = boost::beast::http;
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

/// matchd on 127.0.0.1:`port`; throws when that does not resolve.
inline http_endpoint loopback(uint16_t port) {
  asio::io_context io;
  http_url url;
  url.host = "127.0.0.1";
  url.port = std::to_string(port);
  http_endpoint ep;
  std::string err;
  if (!resolve_endpoint(io, url, ep, err))
    throw std::runtime_error(err);
  return ep;
}

/// "Bearer <token>", or nothing for no token.
inline std::string bearer(const std::string& token) {
  return token.empty() ? std::string{} : "Bearer " + token;
}

/// One keep-alive connection (an http_pool of one, which reconnects when the
/// server closed it). Each request waits for its answer; a transport error
/// throws.
class http_conn {
 public:
  explicit http_conn(uint16_t port) : pool_(io_, loopback(port), one()) {}

  http_answer request(http::verb method, const std::string& target,
                      const std::string& token = {},
                      const std::string& body = {}) {
    std::optional<http_result> res;
    pool_.request(method, target, bearer(token), body,
                  [&res](http_result&& r) { res = std::move(r); });
    io_.restart();
    while (!res && io_.run_one() > 0)
      ;
    if (!res || res->ec)
      throw std::runtime_error(target + ": "
                               + (res ? res->ec.message() : "no answer"));
    return http_answer{res->status, std::move(res->body)};
  }

 private:
  static http_pool_options one() {
    http_pool_options opts;
    opts.max_connections = 1;
    return opts;
  }

  asio::io_context io_;
  http_pool pool_;
};

/// A user's event WebSocket. Its client runs on a thread of its own and
/// queues what arrives; `next` waits on that queue.
class ws_conn {
 public:
  /// Opens /v1/users/{user}/events; throws on a refused handshake.
  ws_conn(uint16_t port, const std::string& user, const std::string& token)
    : where_(loopback(port)),
      ws_(std::make_shared<ws_client>(
        io_, where_, "/v1/users/" + user + "/events", bearer(token))) {
    ws_handlers h;
    h.on_open = [this] { update([this] { opened_ = true; }); };
    h.on_message = [this](std::string_view text) {
      auto m = json::parse(text, nullptr, false);
      update([this, &m] { inbox_.push_back(std::move(m)); });
    };
    h.on_close = [this](const ws_close_info& info) {
      update([this, &info] {
        closed_ = true;
        refused_ = info.http_status;
      });
    };
    ws_->start(std::move(h));
    io_thread_ = std::thread([this] { io_.run(); });
    std::unique_lock<std::mutex> guard{mtx_};
    cv_.wait(guard, [this] { return opened_ || closed_; });
    if (!opened_) {
      guard.unlock();
      stop();
      throw std::runtime_error("WebSocket refused: HTTP "
                               + std::to_string(refused_));
    }
  }

  ~ws_conn() {
    stop();
  }

  ws_conn(const ws_conn&) = delete;
  ws_conn& operator=(const ws_conn&) = delete;

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

  /// Sends one text message (a request, docs/api.md "Requests on the
  /// WebSocket"); false when the socket is not open.
  bool send(std::string text) {
    std::promise<bool> sent;
    auto f = sent.get_future();
    asio::post(io_, [this, &sent, t = std::move(text)]() mutable {
      sent.set_value(ws_->send(std::move(t)));
    });
    return f.get();
  }

  /// The reply to request `id` within `timeout`; other messages stay queued.
  std::optional<json> reply_to(const json& id,
                               std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> guard{mtx_};
    std::optional<json> found;
    cv_.wait_for(guard, timeout, [&] {
      for (auto i = inbox_.begin(); i != inbox_.end(); ++i) {
        if (i->is_object() && (*i)["type"] == "reply" && (*i)["id"] == id) {
          found = std::move(*i);
          inbox_.erase(i);
          return true;
        }
      }
      return closed_;
    });
    return found;
  }

  /// Sends request `msg` (with its "id") and waits for its reply.
  std::optional<json> request(const json& msg, std::chrono::milliseconds timeout
                                               = std::chrono::seconds(10)) {
    if (!send(msg.dump()))
      return std::nullopt;
    return reply_to(msg.at("id"), timeout);
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
  template <class F>
  void update(F f) {
    std::lock_guard<std::mutex> guard{mtx_};
    f();
    cv_.notify_all();
  }

  /// Drops the connection (the client is used on its own thread only) and
  /// ends that thread. Idempotent.
  void stop() {
    if (!io_thread_.joinable())
      return;
    asio::post(io_, [ws = ws_] { ws->abort(); });
    {
      std::unique_lock<std::mutex> guard{mtx_};
      cv_.wait_for(guard, std::chrono::seconds(5), [this] { return closed_; });
    }
    io_.stop();
    io_thread_.join();
  }

  http_endpoint where_; // the client refers to it
  asio::io_context io_;
  std::shared_ptr<ws_client> ws_;
  std::thread io_thread_;
  std::mutex mtx_;
  std::condition_variable cv_;
  std::deque<json> inbox_;
  bool opened_ = false;
  bool closed_ = false;
  unsigned refused_ = 0;
};

/// Sends a WebSocket upgrade request to `target` and answers the HTTP status
/// of the answer (101 when it was accepted).
inline unsigned ws_handshake_status(uint16_t port, const std::string& target,
                                    const std::string& token) {
  auto where = loopback(port);
  asio::io_context io;
  auto ws = std::make_shared<ws_client>(io, where, target, bearer(token));
  unsigned status = 0;
  bool closed = false;
  ws_handlers h;
  h.on_open = [&] {
    status = 101;
    ws->abort();
  };
  h.on_close = [&](const ws_close_info& info) {
    if (!info.opened)
      status = info.http_status;
    closed = true;
  };
  ws->start(std::move(h));
  while (!closed && io.run_one() > 0)
    ;
  return status;
}

/// A metric's value in a /metrics text ("name{...} value"); -1 when absent.
inline double metric_in(const std::string& text, const std::string& name) {
  auto pos = text.find("\n" + name + "{");
  if (pos == std::string::npos)
    return -1;
  auto eol = text.find('\n', pos + 1);
  auto line = text.substr(pos + 1, eol - pos - 1);
  return std::stod(line.substr(line.rfind(' ') + 1));
}

/// A counter's or gauge's value in the node's /metrics; -1 when absent.
inline double metric(http_conn& c, const std::string& name) {
  return metric_in(c.request(http::verb::get, "/metrics").body, name);
}

/// Polls `pred` every 50 ms for at most `bound`; answers its last value.
template <class Pred>
bool eventually(Pred pred, std::chrono::milliseconds bound) {
  auto deadline = std::chrono::steady_clock::now() + bound;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline)
      return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return true;
}

} // namespace mm::test
