// The Redis queue store on one Redis: one link (redis_link.hpp) per
// queue_store, every batch pipelined in one round trip. With
// redis_options::cluster the factory hands out cluster stores instead
// (redis_cluster_store.cpp).

#include "core/logger.hpp"
#include "persistence/queue/queue_store.hpp"
#include "persistence/queue/redis_cluster_store.hpp"
#include "persistence/queue/redis_link.hpp"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <spdlog/spdlog.h>

namespace mm {

redis_link_options link_options(const redis_options& o, std::string host,
                                uint16_t port) {
  redis_link_options l;
  l.host = std::move(host);
  l.port = port;
  l.connect_timeout_ms = o.connect_timeout_ms;
  l.command_timeout_ms = o.command_timeout_ms;
  l.max_attempts = o.max_attempts;
  l.retry_delay_ms = o.retry_delay_ms;
  l.user = o.user;
  l.password = o.password;
  return l;
}

namespace {

class redis_queue_store final : public queue_store {
 public:
  explicit redis_queue_store(const redis_options& opts)
    : link_(link_options(opts, opts.host, opts.port)) {
    // One eager attempt; when Redis is down the store stays disconnected and
    // tries again on first use.
    if (!link_.ensure_connected())
      logger("queue_store")
        ->debug("redis {} not reachable yet ({}); will retry on first use",
                link_.where(), link_.last_error());
  }

  std::vector<store_reply> run(const std::vector<script_call>& calls) override {
    std::vector<link_request> reqs(calls.size());
    for (size_t i = 0; i < calls.size(); ++i)
      reqs[i].call = &calls[i];
    return link_.exchange(reqs);
  }

  std::vector<store_reply>
  execute(const std::vector<store_command>& commands) override {
    std::vector<link_request> reqs(commands.size());
    for (size_t i = 0; i < commands.size(); ++i)
      reqs[i].command = &commands[i];
    return link_.exchange(reqs);
  }

  bool blocking() const noexcept override {
    return true;
  }

 private:
  redis_link link_;
};

class redis_store_factory final : public queue_store_factory {
 public:
  explicit redis_store_factory(redis_options opts) : opts_(std::move(opts)) {}

  std::unique_ptr<queue_store> connect() override {
    return std::make_unique<redis_queue_store>(opts_);
  }

  std::string describe() const override {
    return "redis " + opts_.host + ":" + std::to_string(opts_.port);
  }

 private:
  const redis_options opts_;
};

} // namespace

std::shared_ptr<queue_store_factory> make_redis_store(redis_options opts) {
  if (opts.cluster)
    return make_redis_cluster_store(std::move(opts));
  return std::make_shared<redis_store_factory>(std::move(opts));
}

outcome<redis_probe> probe_redis(const redis_options& opts) {
  if (opts.cluster)
    return probe_redis_cluster(opts);
  auto lo = link_options(opts, opts.host, opts.port);
  lo.load_scripts = false;
  lo.max_attempts = 1;
  redis_link link{lo};
  // PING answers NOAUTH when the server wants a password that was not given.
  store_command ping{"PING"};
  auto r = link.exchange({link_request{nullptr, &ping, false}}).at(0);
  if (link.auth_refused())
    return failure{errc::store_auth_failed, link.last_error()};
  if (r.code != errc::none)
    return failure{r.code, r.detail};
  if (r.value.type == store_value::kind::error) {
    if (r.value.str.rfind("NOAUTH", 0) == 0)
      return failure{errc::store_auth_failed,
                     "redis wants a password (" + r.value.str + ")"};
    return failure{errc::protocol_error, "PING: " + r.value.str};
  }
  if (auto ok = check_functions(link); !ok)
    return ok.error();
  return redis_probe{};
}

} // namespace mm
