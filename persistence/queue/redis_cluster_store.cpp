// The queue store on a Redis Cluster. Every script call and command goes to
// the primary of its first key's slot (all of a queue's keys share the
// queue's hash tag, so a script's keys are always on one node). A batch is
// split by primary and pipelined on each; what comes back redirected is sent
// again:
//
//   MOVED s addr  -> slot s now lives on addr: note it, read the whole map
//                    again when addr is new or the map is older than 1 s,
//                    send the call to addr
//   ASK s addr    -> s is being migrated and this key is already there:
//                    ASKING + the call on addr, the map unchanged
//   TRYAGAIN, CLUSTERDOWN, LOADING, MASTERDOWN -> pause, send again
//   no connection -> read the map again (a replica may have been promoted),
//                    pause, send again
//
// until every call has its reply or `failover_wait_ms` has passed; then
// what is left fails with store_unavailable. A call that got no reply may
// have run (as with one Redis): the scripts are written to be retried.

#include "persistence/queue/redis_cluster_store.hpp"

#include "core/logger.hpp"
#include "persistence/queue/redis_slots.hpp"

#include <algorithm>
#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <spdlog/spdlog.h>

namespace mm {

namespace {

using redis_slots::address;
using clock_type = std::chrono::steady_clock;

/// A control connection for CLUSTER SLOTS: no scripts, short timeouts, one
/// attempt.
redis_link_options control_options(const redis_options& o, const address& a) {
  auto l = link_options(o, a.host, a.port);
  l.load_scripts = false;
  l.max_attempts = 1;
  l.connect_timeout_ms = std::min<uint32_t>(o.connect_timeout_ms, 1000);
  l.command_timeout_ms = std::min<uint32_t>(o.command_timeout_ms, 2000);
  return l;
}

std::vector<address> seed_addresses(const redis_options& o) {
  std::vector<address> out{address{o.host, o.port}};
  for (const auto& s : o.seeds)
    if (auto a = redis_slots::parse_address(s))
      if (std::find(out.begin(), out.end(), *a) == out.end())
        out.push_back(std::move(*a));
  return out;
}

/// Asks `a` for the slot map. Fills `map` and returns none, or the failure.
failure read_map(const redis_options& o, const address& a,
                 redis_slots::slot_map& map, bool& auth_refused) {
  redis_link link{control_options(o, a)};
  store_command cmd{"CLUSTER", "SLOTS"};
  auto r = link.exchange({link_request{nullptr, &cmd, false}}).at(0);
  auth_refused = link.auth_refused();
  if (r.code != errc::none)
    return failure{r.code, r.detail};
  if (r.value.type == store_value::kind::error) {
    if (r.value.str.rfind("NOAUTH", 0) == 0) {
      auth_refused = true;
      return failure{errc::store_auth_failed,
                     "redis wants a password (" + r.value.str + ")"};
    }
    return failure{errc::protocol_error, "CLUSTER SLOTS: " + r.value.str};
  }
  auto ok = map.assign(r.value);
  if (!ok)
    return ok.error();
  return failure{};
}

class redis_cluster_store final : public queue_store {
 public:
  explicit redis_cluster_store(redis_options opts)
    : opts_(std::move(opts)), seeds_(seed_addresses(opts_)) {
    if (!refresh())
      logger("queue_store")
        ->debug("redis cluster: no slot map yet ({}); will retry on first "
                "use",
                last_error_);
  }

  std::vector<store_reply> run(const std::vector<script_call>& calls) override {
    std::vector<link_request> reqs(calls.size());
    for (size_t i = 0; i < calls.size(); ++i)
      reqs[i].call = &calls[i];
    return exchange(reqs);
  }

  std::vector<store_reply>
  execute(const std::vector<store_command>& commands) override {
    std::vector<link_request> reqs(commands.size());
    for (size_t i = 0; i < commands.size(); ++i)
      reqs[i].command = &commands[i];
    return exchange(reqs);
  }

  bool blocking() const noexcept override {
    return true;
  }

 private:
  struct item {
    size_t index;
    std::optional<address> ask; ///< ASK target: once, after ASKING
  };

  /// The data link to `a`: scripts loaded, a reconnect per batch.
  redis_link& link_for(const address& a) {
    auto key = a.text();
    auto it = links_.find(key);
    if (it == links_.end()) {
      auto lo = link_options(opts_, a.host, a.port);
      lo.max_attempts = std::min<uint32_t>(opts_.max_attempts, 2);
      it = links_.emplace(key, std::make_unique<redis_link>(lo)).first;
    }
    return *it->second;
  }

  /// Reads the slot map from the primaries known, then the seeds. Drops the
  /// links of nodes that are no longer primaries.
  bool refresh() {
    last_refresh_ = clock_type::now();
    std::vector<address> candidates = map_.nodes();
    for (const auto& s : seeds_)
      if (std::find(candidates.begin(), candidates.end(), s)
          == candidates.end())
        candidates.push_back(s);
    for (const auto& a : candidates) {
      redis_slots::slot_map fresh;
      bool refused = false;
      auto f = read_map(opts_, a, fresh, refused);
      if (f.code != errc::none) {
        last_error_ = f.detail;
        if (refused)
          auth_refused_ = true;
        continue;
      }
      auth_refused_ = false;
      map_ = std::move(fresh);
      for (auto it = links_.begin(); it != links_.end();) {
        bool primary = false;
        for (const auto& n : map_.nodes())
          primary = primary || n.text() == it->first;
        it = primary ? std::next(it) : links_.erase(it);
      }
      return true;
    }
    return false;
  }

  std::optional<address> route(const link_request& r) const {
    auto slot = r.call != nullptr ? redis_slots::call_slot(*r.call)
                                  : redis_slots::command_slot(*r.command);
    if (!slot)
      return map_.empty() ? std::nullopt
                          : std::optional<address>{map_.nodes().front()};
    return map_.node_of(*slot);
  }

  std::vector<store_reply> exchange(const std::vector<link_request>& reqs) {
    std::vector<store_reply> out(reqs.size());
    std::vector<item> todo;
    for (size_t i = 0; i < reqs.size(); ++i) {
      if (reqs[i].call == nullptr
          && (reqs[i].command == nullptr || reqs[i].command->empty())) {
        out[i].code = errc::invalid_argument;
        out[i].detail = "empty command";
        continue;
      }
      todo.push_back(item{i, std::nullopt});
    }
    const auto deadline = clock_type::now()
                          + std::chrono::milliseconds(opts_.failover_wait_ms);
    std::string why;
    constexpr int max_rounds = 64; // redirect ping-pong is bounded too
    for (int round = 0; !todo.empty(); ++round) {
      if (map_.empty() && !refresh()) {
        why = last_error_;
        if (auth_refused_ || clock_type::now() >= deadline
            || round >= max_rounds)
          break;
        pause();
        continue;
      }
      // Split by node, keeping each node's calls in their batch order.
      std::map<std::string, std::pair<address, std::vector<item>>> groups;
      for (auto& it : todo) {
        auto to = it.ask ? it.ask : route(reqs[it.index]);
        auto& g = groups[to->text()];
        g.first = *to;
        g.second.push_back(std::move(it));
      }
      std::vector<item> next;
      bool reread = false;
      bool wait = false;
      // Every primary's part is written before any reply is read: the
      // shards work at once, and a batch waits for the slowest, not for
      // the sum.
      std::vector<std::vector<link_request>> parts;
      std::vector<redis_link*> links;
      parts.reserve(groups.size());
      links.reserve(groups.size());
      for (auto& [key, g] : groups) {
        links.push_back(&link_for(g.first));
        auto& part = parts.emplace_back();
        part.reserve(g.second.size());
        for (const auto& it : g.second) {
          auto r = reqs[it.index];
          r.asking = it.ask.has_value();
          part.push_back(r);
        }
        links.back()->send(part);
      }
      size_t n = 0;
      for (auto& [key, g] : groups) {
        auto& link = *links[n];
        auto replies = link.receive(parts[n]);
        ++n;
        for (size_t k = 0; k < replies.size(); ++k) {
          auto& r = replies[k];
          auto idx = g.second[k].index;
          if (r.code == errc::store_unavailable) {
            if (link.auth_refused()) {
              out[idx] = std::move(r);
              continue;
            }
            why = r.detail;
            next.push_back(item{idx, std::nullopt});
            reread = wait = true;
            continue;
          }
          if (r.code == errc::none
              && r.value.type == store_value::kind::error) {
            if (auto rd = redis_slots::parse_redirect(r.value.str)) {
              if (rd->ask) {
                next.push_back(item{idx, rd->to});
              } else {
                bool known = false;
                for (const auto& n : map_.nodes())
                  known = known || n == rd->to;
                map_.move(rd->slot, rd->to);
                reread = reread || !known
                         || clock_type::now() - last_refresh_
                              > std::chrono::seconds(1);
                next.push_back(item{idx, std::nullopt});
              }
              continue;
            }
            if (redis_slots::transient_error(r.value.str)) {
              why = r.value.str;
              next.push_back(item{idx, std::nullopt});
              wait = true;
              continue;
            }
          }
          out[idx] = std::move(r);
        }
      }
      todo = std::move(next);
      if (todo.empty() || clock_type::now() >= deadline
          || round + 1 >= max_rounds)
        break;
      if (reread)
        refresh();
      if (wait)
        pause();
    }
    for (const auto& it : todo) {
      out[it.index] = store_reply{};
      out[it.index].code = errc::store_unavailable;
      out[it.index].detail = "redis cluster: no primary answered within "
                             + std::to_string(opts_.failover_wait_ms)
                             + " ms: " + why;
    }
    return out;
  }

  void pause() const {
    std::this_thread::sleep_for(
      std::chrono::milliseconds(std::max<uint32_t>(opts_.retry_delay_ms, 10)));
  }

  redis_options opts_;
  std::vector<address> seeds_;
  redis_slots::slot_map map_;
  std::map<std::string, std::unique_ptr<redis_link>> links_;
  clock_type::time_point last_refresh_{};
  std::string last_error_;
  bool auth_refused_ = false;
};

class redis_cluster_factory final : public queue_store_factory {
 public:
  explicit redis_cluster_factory(redis_options opts) : opts_(std::move(opts)) {}

  std::unique_ptr<queue_store> connect() override {
    return std::make_unique<redis_cluster_store>(opts_);
  }

  std::string describe() const override {
    std::string out = "redis cluster " + opts_.host + ":"
                      + std::to_string(opts_.port);
    for (const auto& s : opts_.seeds)
      out += "," + s;
    return out;
  }

 private:
  const redis_options opts_;
};

} // namespace

std::shared_ptr<queue_store_factory>
make_redis_cluster_store(redis_options opts) {
  return std::make_shared<redis_cluster_factory>(std::move(opts));
}

outcome<redis_probe> probe_redis_cluster(const redis_options& opts) {
  failure last{errc::store_unavailable, "no seed given"};
  for (const auto& a : seed_addresses(opts)) {
    redis_slots::slot_map map;
    bool refused = false;
    auto f = read_map(opts, a, map, refused);
    if (refused)
      return failure{errc::store_auth_failed, f.detail};
    if (f.code == errc::none) {
      redis_link link{control_options(opts, a)};
      if (auto ok = check_functions(link); !ok)
        return ok.error();
      redis_probe p;
      p.cluster = true;
      p.primaries = map.nodes().size();
      return p;
    }
    last = f;
  }
  return last;
}

} // namespace mm
