#include "actors/engine.hpp"

#include <algorithm>
#include <cstdint>

#include <caf/all.hpp>
#include <caf/io/middleman.hpp>
#include <caf/io/middleman_actor.hpp>
#include <caf/openssl/manager.hpp>
#include <caf/openssl/publish.hpp>

#include "actors/basp_guard.hpp"
#include "actors/cluster_tls.hpp"
#include "actors/directory.hpp"
#include "actors/node_gateway.hpp"
#include "core/log_limit.hpp"
#include "core/logger.hpp"

#include <spdlog/spdlog.h>

namespace mm {

engine::engine(caf::actor_system& sys, engine_config cfg)
  : sys_(sys), cfg_(std::move(cfg)),
    sessions_(std::make_shared<session_table>()) {
  // nop
}

engine::~engine() {
  stop();
}

outcome<std::shared_ptr<engine>> engine::start(caf::actor_system& sys,
                                               engine_config cfg) {
  if (auto bad = check_cluster_config(cfg.cluster, cfg.node);
      bad.code != errc::none)
    return bad;
  if (cfg.cluster.enabled() && !sys.has_middleman())
    return failure{errc::invalid_argument,
                   "a cluster needs the io middleman: load it into the actor "
                   "system config (cfg.load<caf::io::middleman>())"};
  if (cfg.cluster.enabled() && cfg.cluster.tls()) {
    if (auto bad = check_cluster_tls_system(sys, cfg.cluster);
        bad.code != errc::none)
      return bad;
    if (auto bad = check_cluster_tls(cfg.cluster); bad.code != errc::none)
      return bad;
  }
  cfg.session.node = cfg.node;
  cfg.session.rules = cfg.rules;
  if (cfg.rules && !cfg.broker.queues.empty())
    for (auto& [queue, rs] : *cfg.rules)
      if (std::find(cfg.broker.queues.begin(), cfg.broker.queues.end(), queue)
          == cfg.broker.queues.end())
        return failure{errc::invalid_rules,
                       "rules for queue '" + queue
                         + "', which this node does not serve"};
  if (!cfg.metrics)
    cfg.metrics = std::make_shared<engine_metrics>();
  cfg.broker.metrics = cfg.metrics;
  cfg.finalizer.metrics = cfg.metrics;
  cfg.session.metrics = cfg.metrics;
  cfg.relay.metrics = cfg.metrics;
  cfg.swipe.metrics = cfg.metrics;
  cfg.lifecycle.metrics = cfg.metrics;
  cfg.directory.metrics = cfg.metrics;
  for (auto* t :
       {&cfg.broker.worker_timeout_ms, &cfg.finalizer.worker_timeout_ms,
        &cfg.relay.worker_timeout_ms, &cfg.lock.worker_timeout_ms,
        &cfg.swipe.worker_timeout_ms, &cfg.cluster.worker_timeout_ms})
    *t = cfg.worker_timeout_ms;
  // No COMMIT starts after 4/5 of the claim hold, so none starts after the
  // hold lapsed in the queue (docs/engine.md, "A cancel whose owner cannot
  // be asked").
  auto hold = std::max<uint32_t>(1, cfg.broker.hold_ms);
  if (cfg.finalizer.claim_window_ms == 0)
    cfg.finalizer.claim_window_ms = std::max<uint32_t>(1, hold - hold / 5);
  cfg.finalizer.claim_window_ms = std::min(cfg.finalizer.claim_window_ms, hold);
  std::shared_ptr<engine> e{new engine(sys, cfg)};
  if (cfg.queue_factory) {
    e->queue_store_ = cfg.queue_factory;
  } else if (cfg.use_redis) {
    e->queue_store_ = make_redis_store(cfg.redis);
  } else {
    embedded_options opts;
    opts.clock = cfg.clock;
    e->queue_store_ = make_embedded_store(opts);
  }
  if (cfg.match_factory)
    e->match_store_ = cfg.match_factory;
  else
    e->match_store_ = cfg.use_postgres ? make_pg_match_store(cfg.postgres)
                                       : make_memory_match_store();
  {
    // What a cancel whose owner cannot be asked waits for (session.hpp).
    auto& sc = e->cfg_.session;
    sc.commit_bound_ms = std::max(sc.commit_bound_ms,
                                  e->match_store_->commit_bound_ms());
    if (sc.owner_wait_ms == 0) {
      // (An unknown commit bound never answers `cancelled` this way: then
      // the wait only covers the hold, for `matched`.)
      uint64_t wait
        = uint64_t{hold} + 2ull * cfg.broker.sweep_interval_ms
          + (sc.commit_bound_ms == UINT32_MAX ? 0 : sc.commit_bound_ms) + 10000;
      sc.owner_wait_ms
        = static_cast<uint32_t>(std::min<uint64_t>(wait, UINT32_MAX));
    }
  }
  {
    auto conn = e->match_store_->connect();
    auto applied = conn->apply_migrations();
    if (!applied)
      return applied.error();
    // The outbox's time windows before the first commit, so that its rows
    // land in one (the lifecycle sweep keeps them ahead from here on). Not
    // fatal: without them rows go to the default partition.
    auto& lc = cfg.lifecycle;
    if (lc.partition_s > 0) {
      auto parts = conn->maintain_partitions(lc.partition_s, lc.retention_s,
                                             lc.partition_ahead);
      if (!parts)
        logger("engine")->warn("outbox partitions not maintained at start: "
                               "{}",
                               parts.error().detail);
    }
  }
  e->broker_ = spawn_queue_broker(sys, e->queue_store_, cfg.broker);
  e->directory_ = spawn_directory(sys, cfg.directory);
  if (cfg.run_relay)
    e->relay_ = spawn_outbox_relay(sys, e->match_store_, e->queue_store_,
                                   e->directory_, cfg.relay);
  auto fcfg = cfg.finalizer;
  fcfg.relay = e->relay_; // committed matches go to the relay at once
  // Its events leased to this node's relay and pushed to it: no fetch, no
  // lease write, no notification per match (docs/engine.md).
  if (e->relay_)
    fcfg.push_lease_ms = cfg.relay.lease_ms;
  if (!fcfg.cancels)
    fcfg.cancels = std::make_shared<cancel_registry>();
  e->finalizer_ = spawn_finalizer(sys, e->match_store_, e->broker_, fcfg);
  // Groups share the node's cancels: a member's cancel reaches either.
  group_finalizer_config gcfg;
  gcfg.cancels = fcfg.cancels;
  gcfg.relay = e->relay_;
  gcfg.push_lease_ms = fcfg.push_lease_ms;
  gcfg.worker_timeout_ms = fcfg.worker_timeout_ms;
  gcfg.metrics = cfg.metrics;
  gcfg.at_checkpoint = cfg.group_at_checkpoint;
  // Sessions that started short or lost a member go to backfill, spawned
  // after the group finalizer (which commits its fills): told through
  // this slot, set once below before any group is claimed.
  auto bf_slot = std::make_shared<backfill_actor>();
  auto to_backfill = [bf_slot](const std::string& session,
                               const std::string& queue) {
    if (*bf_slot)
      caf::anon_send(*bf_slot, backfill_atom_v, session, queue);
  };
  gcfg.on_short = to_backfill;
  e->group_finalizer_ = spawn_group_finalizer(sys, e->match_store_, e->broker_,
                                              std::move(gcfg));
  {
    backfill_config bc;
    bc.node = cfg.node;
    bc.ttl_ms = e->cfg_.session.ttl_ms;
    bc.heartbeat_ms = e->cfg_.session.heartbeat_ms;
    bc.request_timeout_ms = e->cfg_.session.route_timeout_ms;
    bc.rules = cfg.rules;
    bc.metrics = cfg.metrics;
    e->backfill_ = spawn_backfill(sys, e->match_store_, e->broker_,
                                  e->group_finalizer_, std::move(bc));
    *bf_slot = e->backfill_;
  }
  // Groups of a queue with a ready check are proposed first; the others
  // pass through to the group finalizer.
  ready_check_config rcfg;
  rcfg.node = cfg.node;
  rcfg.finalizer = e->group_finalizer_;
  rcfg.broker = e->broker_;
  rcfg.directory = e->directory_;
  rcfg.metrics = cfg.metrics;
  rcfg.on_held = cfg.proposals_held;
  e->ready_check_ = spawn_ready_check(sys, std::move(rcfg));
  // The gateway: routes to other nodes (cluster) and replays a registering
  // user's active match (always).
  e->gateway_ = spawn_node_gateway(
    sys, cfg.node, cfg.cluster, e->queue_store_, e->match_store_,
    gateway_links{e->directory_, e->finalizer_, e->party_members_,
                  cfg.node_stats});
  caf::anon_send(e->directory_, attach_atom_v, e->gateway_);
  if (cfg.cluster.enabled() && cfg.cluster.auto_connect) {
    auto& bind = cfg.cluster.bind;
    auto in = bind.empty() ? nullptr : bind.c_str();
    // With TLS a peer without a certificate of the cluster's CA is refused
    // in the handshake, before BASP reads a byte of it.
    // Without TLS, CAF listens on a free loopback port behind the guard,
    // which checks every BASP frame a peer sends (actors/basp_guard.hpp).
    auto port = cfg.cluster.tls()
                  ? caf::openssl::publish(e->gateway_, cfg.cluster.port, in,
                                          true)
                  : sys.middleman().publish(e->gateway_, 0, "127.0.0.1", true);
    if (port && !cfg.cluster.tls()) {
      std::string why;
      e->guard_ = start_basp_guard(bind, cfg.cluster.port, *port, {}, why);
      if (!e->guard_) {
        sys.middleman().unpublish(e->gateway_, *port);
        e->stop();
        return failure{errc::store_unavailable,
                       "cannot listen on the cluster port "
                         + format_address(bind.empty() ? "*" : bind,
                                          cfg.cluster.port)
                         + ": " + why};
      }
    }
    if (!port) {
      auto why = sys.render(port.error());
      e->stop();
      return failure{errc::store_unavailable,
                     "cannot publish the gateway on "
                       + format_address(bind.empty() ? "*" : bind,
                                        cfg.cluster.port)
                       + ": " + why};
    }
    e->published_port_ = *port;
  }
  auto lcfg = cfg.lifecycle;
  lcfg.relay = e->relay_; // ended sessions' events go out at once
  lcfg.on_member_left = to_backfill;
  e->lifecycle_ = spawn_lifecycle(sys, e->match_store_, lcfg);
  e->lock_ = spawn_pair_lock(sys, e->queue_store_, cfg.lock);
  e->swipe_ = spawn_swipe(sys, e->match_store_, e->lock_, e->finalizer_,
                          cfg.swipe);
  {
    // Parties own the group tickets (docs/groups.md); they use the
    // sessions' timing and are told their members' match events.
    party_config pc;
    pc.node = cfg.node;
    pc.ttl_ms = e->cfg_.session.ttl_ms;
    pc.heartbeat_ms = e->cfg_.session.heartbeat_ms;
    pc.request_timeout_ms = e->cfg_.session.route_timeout_ms;
    pc.recheck_ms = e->cfg_.session.owner_recheck_ms;
    pc.rules = cfg.rules;
    pc.metrics = cfg.metrics;
    std::weak_ptr<session_table> table = e->sessions_;
    party_links pl{e->broker_,
                   e->ready_check_,
                   e->directory_,
                   e->lifecycle_,
                   fcfg.cancels,
                   e->party_members_,
                   [table](const std::string& user) {
                     auto t = table.lock();
                     if (!t)
                       return session_actor{};
                     std::lock_guard<std::mutex> guard{t->mtx};
                     auto i = t->map.find(user);
                     return i == t->map.end() ? session_actor{} : i->second;
                   },
                   e->gateway_,
                   e->ready_check_};
    e->parties_ = spawn_party_hub(sys, std::move(pl), std::move(pc));
    // The gateway takes its hub from this node only: sent with a sender.
    caf::scoped_actor host{sys};
    host->send(e->gateway_, attach_atom_v, e->parties_);
  }
  auto as_actor = [](const auto& h) { return caf::actor_cast<caf::actor>(h); };
  e->watch_
    = spawn_core_watch(sys,
                       {{"broker", as_actor(e->broker_)},
                        {"finalizer", as_actor(e->finalizer_)},
                        {"group_finalizer", as_actor(e->group_finalizer_)},
                        {"ready_check", as_actor(e->ready_check_)},
                        {"backfill", as_actor(e->backfill_)},
                        {"directory", as_actor(e->directory_)},
                        {"relay", as_actor(e->relay_)},
                        {"gateway", as_actor(e->gateway_)},
                        {"lifecycle", as_actor(e->lifecycle_)},
                        {"pair_lock", as_actor(e->lock_)},
                        {"swipe", as_actor(e->swipe_)},
                        {"party_hub", as_actor(e->parties_)}},
                       e->health_, cfg.on_core_down);
  return e;
}

namespace {

void set_gauge(const std::shared_ptr<engine_metrics>& m, size_t n) {
  m->sessions_live.store(static_cast<int64_t>(n), std::memory_order_relaxed);
}

} // namespace

session_actor engine::session(const std::string& user,
                              subscriber_actor subscriber) {
  session_actor s;
  {
    std::lock_guard<std::mutex> guard{sessions_->mtx};
    auto& map = sessions_->map;
    auto i = map.find(user);
    if (i != map.end())
      return i->second;
    s = spawn_session(sys_, user,
                      session_links{broker_, finalizer_, directory_,
                                    std::move(subscriber), gateway_, lifecycle_,
                                    party_members_, parties_},
                      cfg_.session);
    map.emplace(user, s);
    set_gauge(cfg_.metrics, map.size());
  }
  // A session that stops (idle release, or killed) is forgotten, so that
  // the map holds live sessions only (I9 of docs/design.md). Attached
  // outside the lock: on an actor that is down already the hook runs at
  // once.
  std::weak_ptr<session_table> table = sessions_;
  auto addr = s.address();
  auto metrics = cfg_.metrics;
  s->attach_functor([table, user, addr, metrics] {
    auto t = table.lock();
    if (!t)
      return;
    std::lock_guard<std::mutex> guard{t->mtx};
    auto i = t->map.find(user);
    if (i != t->map.end() && i->second.address() == addr) {
      t->map.erase(i);
      set_gauge(metrics, t->map.size());
    }
  });
  return s;
}

session_actor engine::renew_session(const std::string& user,
                                    const session_actor& gone,
                                    subscriber_actor subscriber) {
  if (gone) {
    {
      std::lock_guard<std::mutex> guard{sessions_->mtx};
      auto i = sessions_->map.find(user);
      if (i != sessions_->map.end() && i->second == gone) {
        sessions_->map.erase(i);
        set_gauge(cfg_.metrics, sessions_->map.size());
      }
    }
    // Never two sessions of one user: a caller that was wrong about `gone`
    // being down loses it now.
    caf::anon_send_exit(gone, caf::exit_reason::user_shutdown);
  }
  return session(user, std::move(subscriber));
}

void engine::release(const std::string& user) {
  session_actor s;
  {
    std::lock_guard<std::mutex> guard{sessions_->mtx};
    auto i = sessions_->map.find(user);
    if (i == sessions_->map.end())
      return;
    s = std::move(i->second);
    sessions_->map.erase(i);
    set_gauge(cfg_.metrics, sessions_->map.size());
  }
  caf::anon_send_exit(s, caf::exit_reason::user_shutdown);
}

size_t engine::session_count() const {
  std::lock_guard<std::mutex> guard{sessions_->mtx};
  return sessions_->map.size();
}

void engine::stop() {
  health_->stopping(); // the core actors stop on purpose now
  if (watch_) {
    caf::anon_send_exit(watch_, caf::exit_reason::user_shutdown);
    watch_ = nullptr;
  }
  std::unordered_map<std::string, session_actor> sessions;
  {
    std::lock_guard<std::mutex> guard{sessions_->mtx};
    sessions.swap(sessions_->map);
    set_gauge(cfg_.metrics, 0);
  }
  if (gateway_ && cfg_.cluster.enabled()) {
    // Out of the membership now (not after member_ttl_ms): the other nodes
    // count our users as connected nowhere and stop routing here.
    if (cfg_.cluster.membership && queue_store_) {
      auto conn = queue_store_->connect();
      for (auto& r : conn->execute(cluster_leave_commands(cfg_.node)))
        if (r.code != errc::none)
          break; // it lapses on its own
    }
    if (published_port_ != 0) {
      if (cfg_.cluster.tls()) {
        // Not caf::openssl::unpublish: 0.17.6's header sends the manager a
        // message its interface lacks (it does not compile).
        caf::function_view<caf::io::middleman_actor> f{
          sys_.openssl_manager().actor_handle()};
        f(caf::unpublish_atom_v, caf::actor_cast<caf::actor_addr>(gateway_),
          published_port_);
      } else
        sys_.middleman().unpublish(gateway_, published_port_);
      published_port_ = 0;
    }
    if (guard_)
      guard_->stop();
  }
  for (auto& [user, s] : sessions)
    caf::anon_send_exit(s, caf::exit_reason::user_shutdown);
  auto bye = [](const auto& h) {
    if (h)
      caf::anon_send_exit(h, caf::exit_reason::user_shutdown);
  };
  bye(parties_); // its parties stop with it (linked below)
  bye(gateway_);
  bye(lifecycle_);
  bye(relay_);
  bye(swipe_);
  bye(lock_);
  bye(finalizer_);
  bye(backfill_);
  bye(ready_check_);
  bye(group_finalizer_);
  bye(directory_);
  bye(broker_);
  parties_ = nullptr;
  gateway_ = nullptr;
  lifecycle_ = nullptr;
  relay_ = nullptr;
  swipe_ = nullptr;
  lock_ = nullptr;
  finalizer_ = nullptr;
  backfill_ = nullptr;
  ready_check_ = nullptr;
  group_finalizer_ = nullptr;
  directory_ = nullptr;
  broker_ = nullptr;
}

} // namespace mm
