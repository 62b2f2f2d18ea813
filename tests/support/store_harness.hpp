#pragma once

// A typed client over one queue_store connection, for tests and benchmarks
// that drive the scripts without actors, plus the two stores under test.

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>

#include "persistence/queue/queue_codec.hpp"
#include "persistence/queue/queue_store.hpp"
#include "tests/support/test_env.hpp"

namespace mm::test {

/// One connection and typed calls through the shared codec.
class store_client {
 public:
  explicit store_client(std::unique_ptr<queue_store> conn)
    : conn_(std::move(conn)) {}

  template <class T>
  outcome<T>
  call(outcome<script_call> c, outcome<T> (*parse)(const store_reply&)) {
    if (!c)
      return c.error();
    std::vector<script_call> calls{std::move(*c)};
    return parse(conn_->run(calls).at(0));
  }

  /// As above, with a parser that needs more than the reply.
  template <class T, class F>
  outcome<T> call_with(outcome<script_call> c, F parse) {
    if (!c)
      return c.error();
    std::vector<script_call> calls{std::move(*c)};
    return parse(conn_->run(calls).at(0));
  }

  outcome<enqueue_result> enqueue(const ticket_spec& s) {
    return call(codec::enqueue_call(s), codec::parse_enqueue);
  }

  outcome<claim_result> claim(const ticket_spec& s, uint32_t scan = 10,
                              bool rescan = false, uint32_t hold_ms = 10000) {
    return call(codec::claim_call(s, scan, hold_ms, rescan),
                codec::parse_claim);
  }

  outcome<cancel_result> cancel(const ticket_ref& r) {
    return call(codec::cancel_call(r), codec::parse_cancel);
  }

  outcome<heartbeat_result> heartbeat(const ticket_ref& r, uint32_t ttl) {
    return call(codec::heartbeat_call(r, ttl), codec::parse_heartbeat);
  }

  outcome<requeue_result> requeue(const std::string& q, const std::string& t) {
    return call(codec::requeue_call(q, t), codec::parse_requeue);
  }

  outcome<release_result> release(const std::string& q, const std::string& t) {
    return call(codec::release_call(q, t), codec::parse_release);
  }

  outcome<sweep_result> sweep(const std::string& q, uint32_t batch = 100) {
    return call(codec::sweep_call(q, batch), codec::parse_sweep);
  }

  /// Runs one plain command and returns its reply value.
  store_value command(store_command cmd) {
    std::vector<store_command> cmds{std::move(cmd)};
    auto r = conn_->execute(cmds).at(0);
    if (r.code != errc::none)
      throw std::runtime_error("store command failed: " + r.detail);
    return r.value;
  }

  /// Members of the waiting set in FIFO order.
  std::vector<std::string> waiting(const std::string& q) {
    auto v = command({"ZRANGE", codec::queue_keys(q)[0], "0", "-1"});
    std::vector<std::string> out;
    for (auto& e : v.elements)
      out.push_back(e.str);
    return out;
  }

  /// Number of ticket records (waiting or claimed) of a queue: the fields
  /// of its tickets hash but the users' pointers ('#' .. user,
  /// lua/lib/common.lua).
  int64_t records(const std::string& q) {
    auto all = command({"HGETALL", codec::queue_keys(q)[2]});
    int64_t n = 0;
    for (size_t i = 0; i < all.elements.size(); i += 2)
      if (all.elements[i].str.rfind('#', 0) != 0)
        ++n;
    return n;
  }

  /// The user's current ticket id, empty if none: its pointer in the
  /// tickets hash (or one of the layout before, in the users hash).
  std::string user_ticket(const std::string& q, const std::string& user) {
    auto keys = codec::queue_keys(q);
    auto ptr = command({"HGET", keys[2], "#" + user}).str;
    return !ptr.empty() ? ptr : command({"HGET", keys[3], user}).str;
  }

  queue_store& conn() {
    return *conn_;
  }

 private:
  std::unique_ptr<queue_store> conn_;
};

/// A store under test with a way to let its clock move on.
struct store_under_test {
  std::string name;
  std::shared_ptr<queue_store_factory> factory;
  /// Lets `ms` of store time pass (embedded: moves the injected clock;
  /// Redis: sleeps, since the server's clock is the only one there is).
  std::function<void(int64_t)> advance;
  /// The embedded store's clock offset against the system clock.
  std::shared_ptr<std::atomic<int64_t>> offset;
};

inline int64_t system_ms() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch())
    .count();
}

inline store_under_test make_store_under_test(const std::string& name) {
  store_under_test s;
  s.name = name;
  if (name == "embedded") {
    auto offset = std::make_shared<std::atomic<int64_t>>(0);
    embedded_options opts;
    opts.clock = [offset] { return system_ms() + offset->load(); };
    s.factory = make_embedded_store(opts);
    s.advance = [offset](int64_t ms) { *offset += ms; };
    s.offset = offset;
  } else if (name == "redis") {
    redis_options opts;
    opts.port = redis_port();
    s.factory = make_redis_store(opts);
    s.advance = [](int64_t ms) {
      std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    };
  } else if (name == "redis_cluster") {
    auto seeds = redis_cluster_seeds();
    redis_options opts;
    opts.cluster = true;
    auto colon = seeds.front().rfind(':');
    opts.host = seeds.front().substr(0, colon);
    opts.port
      = static_cast<uint16_t>(std::stoi(seeds.front().substr(colon + 1)));
    opts.seeds.assign(seeds.begin() + 1, seeds.end());
    s.factory = make_redis_store(opts);
    s.advance = [](int64_t ms) {
      std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    };
  } else {
    throw std::runtime_error("unknown store " + name);
  }
  return s;
}

/// A queue name unique to this process and call, so tests never share state.
inline std::string fresh_queue(const std::string& prefix) {
  static std::atomic<int> n{0};
  return prefix + "-" + std::to_string(system_ms() % 100000000) + "-"
         + std::to_string(n++);
}

inline ticket_spec spec(const std::string& q, const std::string& user,
                        const std::string& ticket, uint32_t ttl = 30000,
                        std::string node = "n1") {
  ticket_spec s;
  s.queue = q;
  s.user = user;
  s.ticket = ticket;
  s.node = std::move(node);
  s.ttl_ms = ttl;
  return s;
}

} // namespace mm::test
