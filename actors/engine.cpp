#include "actors/engine.hpp"

#include <caf/all.hpp>

#include "actors/directory.hpp"

namespace mm {

engine::engine(caf::actor_system& sys, engine_config cfg)
  : sys_(sys), cfg_(std::move(cfg)) {
  // nop
}

engine::~engine() {
  stop();
}

outcome<std::shared_ptr<engine>> engine::start(caf::actor_system& sys,
                                               engine_config cfg) {
  cfg.session.node = cfg.node;
  if (!cfg.metrics)
    cfg.metrics = std::make_shared<engine_metrics>();
  cfg.broker.metrics = cfg.metrics;
  cfg.finalizer.metrics = cfg.metrics;
  cfg.session.metrics = cfg.metrics;
  cfg.relay.metrics = cfg.metrics;
  cfg.swipe.metrics = cfg.metrics;
  std::shared_ptr<engine> e{new engine(sys, cfg)};
  if (cfg.use_redis) {
    e->queue_store_ = make_redis_store(cfg.redis);
  } else {
    embedded_options opts;
    opts.clock = cfg.clock;
    e->queue_store_ = make_embedded_store(opts);
  }
  e->match_store_ = cfg.use_postgres ? make_pg_match_store(cfg.postgres)
                                     : make_memory_match_store();
  {
    auto conn = e->match_store_->connect();
    auto applied = conn->apply_migrations();
    if (!applied)
      return applied.error();
  }
  e->broker_ = spawn_queue_broker(sys, e->queue_store_, cfg.broker);
  e->directory_ = spawn_directory(sys);
  if (cfg.run_relay)
    e->relay_ = spawn_outbox_relay(sys, e->match_store_, e->queue_store_,
                                   e->directory_, cfg.relay);
  auto fcfg = cfg.finalizer;
  fcfg.relay = e->relay_; // committed matches wake the relay at once
  e->finalizer_ = spawn_finalizer(sys, e->match_store_, e->broker_, fcfg);
  e->lock_ = spawn_pair_lock(sys, e->queue_store_, cfg.lock);
  e->swipe_ = spawn_swipe(sys, e->match_store_, e->lock_, e->finalizer_,
                          cfg.swipe);
  return e;
}

session_actor engine::session(const std::string& user,
                              subscriber_actor subscriber) {
  std::lock_guard<std::mutex> guard{mtx_};
  auto i = sessions_.find(user);
  if (i != sessions_.end())
    return i->second;
  auto s = spawn_session(sys_, user,
                         session_links{broker_, finalizer_, directory_,
                                       std::move(subscriber)},
                         cfg_.session);
  sessions_.emplace(user, s);
  return s;
}

void engine::stop() {
  std::unordered_map<std::string, session_actor> sessions;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    sessions.swap(sessions_);
  }
  for (auto& [user, s] : sessions)
    caf::anon_send_exit(s, caf::exit_reason::user_shutdown);
  auto bye = [](const auto& h) {
    if (h)
      caf::anon_send_exit(h, caf::exit_reason::user_shutdown);
  };
  bye(relay_);
  bye(swipe_);
  bye(lock_);
  bye(finalizer_);
  bye(directory_);
  bye(broker_);
  relay_ = nullptr;
  swipe_ = nullptr;
  lock_ = nullptr;
  finalizer_ = nullptr;
  directory_ = nullptr;
  broker_ = nullptr;
}

} // namespace mm
