#pragma once

// The embedding API: a host application runs the whole engine inside its own
// caf::actor_system. See docs/embedding.md for a complete host program.

#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "actors/backfill.hpp"
#include "actors/cluster_config.hpp"
#include "actors/core_watch.hpp"
#include "actors/directory.hpp"
#include "actors/finalizer.hpp"
#include "actors/group_finalizer.hpp"
#include "actors/lifecycle.hpp"
#include "actors/outbox_relay.hpp"
#include "actors/pair_lock.hpp"
#include "actors/party_hub.hpp"
#include "actors/queue_broker.hpp"
#include "actors/ready_check.hpp"
#include "actors/session.hpp"
#include "actors/swipe.hpp"
#include "core/metrics.hpp"
#include "core/outcome.hpp"
#include "persistence/matchdb/match_store.hpp"
#include "persistence/queue/queue_store.hpp"

namespace mm {

class basp_guard;

/// Everything the engine needs; the defaults run on the embedded queue store
/// and the in-memory persistence (single node, not durable).
struct engine_config {
  std::string node = "node-1";
  /// Queue store: the embedded one unless `use_redis`.
  bool use_redis = false;
  redis_options redis;
  /// Clock of the embedded queue store (simulations); system clock if empty.
  store_clock clock;
  /// Persistence: in memory unless `use_postgres`.
  bool use_postgres = false;
  pg_options postgres;
  broker_config broker;
  finalizer_config finalizer;
  /// Test hook of the group finalizer (group_finalizer_config::at_checkpoint;
  /// its other settings follow `finalizer`'s). May be empty.
  std::function<void(checkpoint, const group_commit&)> group_at_checkpoint;
  /// Test hook of the ready check (ready_check_config::on_held). May be
  /// empty.
  std::function<void(std::size_t)> proposals_held;
  /// This node's console counters as JSON text, answered to the peers'
  /// cluster pages (docs/console.md, "The cluster"); empty: "{}". Called
  /// on an actor's thread: thread-safe, quick.
  std::function<std::string()> node_stats;
  session_config session; ///< `node` is overwritten with `node` above
  /// Match rules by queue (docs/rules.md; core/rules.hpp parse_rule_book
  /// makes them from JSON). Null or no entry: the queue is plain FIFO.
  /// Overwrites `session.rules`. With `broker.queues` set, every queue
  /// with rules must be one of them.
  std::shared_ptr<const rule_book> rules;
  /// Events kept for users without a session here: how long, how many.
  directory_config directory;
  relay_config relay;
  pair_lock_config lock; ///< mutual likes: wait and lease bounds
  swipe_config swipe;
  /// Sessions end: maximum duration, sweep period, retention of delivered
  /// events and closed sessions (docs/engine.md).
  lifecycle_config lifecycle;
  /// Run the outbox relay (off only for tests that drive it themselves).
  bool run_relay = true;
  /// This node's part in a cluster (docs/cluster.md); `cluster.port == 0`
  /// (the default): a single node. With a cluster, `use_redis` should be
  /// set (the nodes share one queue store and one database; the embedded
  /// stores are shared only by engines of one process, see below).
  cluster_config cluster;
  /// Use these stores instead of making them from the settings above
  /// (`use_redis`, `redis`, `clock`, `use_postgres`, `postgres` are then
  /// ignored for that store). Several engines in one process given the same
  /// factories share queues and database: a simulated cluster.
  std::shared_ptr<queue_store_factory> queue_factory;
  std::shared_ptr<match_store_factory> match_factory;
  /// What the engine counts; made by `engine::start` when null. The engine
  /// hands it to every actor it spawns (it overwrites the `metrics` of
  /// `broker`, `finalizer`, `session`, `directory`, `relay`, `swipe` and
  /// `lifecycle` above).
  std::shared_ptr<engine_metrics> metrics;
  /// Called once (from an actor thread) when a core actor (broker,
  /// finalizer, group finalizer, directory, relay, gateway, lifecycle, pair
  /// lock, swipe)
  /// stops while the engine runs: the node cannot serve any more, and the
  /// host takes it out of service (matchd drains and exits 70). Also
  /// readable as `engine::down()`. May be empty.
  core_down_fn on_core_down;
  /// Bound on one job of any store worker (a batch of Redis calls, a group
  /// commit, a lookup). The stores' own timeouts bound a server that is
  /// down; a frozen one whose kernel still answers TCP is caught only here:
  /// the worker's actor stops, and with it the engine (`on_core_down`). Must
  /// exceed the stores' worst case (with the defaults: Redis 3 attempts x
  /// (2 s connect + 5 s command), PostgreSQL 5 s per statement). Copied
  /// into the broker, finalizer, relay, pair lock, swipe and gateway
  /// settings. 0: no bound.
  uint32_t worker_timeout_ms = 60000;
};

/// One engine inside a host's actor system: queue broker, finalizer,
/// directory, outbox relay, node gateway, and one session actor per user.
class engine {
 public:
  /// Connects the stores, applies the database migrations and spawns the
  /// engine's actors in `sys`. Fails with `store_unavailable` when the
  /// database cannot be reached, `protocol_error` when a migration fails,
  /// `invalid_argument` for a bad `cluster` section (check_cluster_config,
  /// and with TLS check_cluster_tls_system and check_cluster_tls) or a
  /// cluster in an actor system without the io middleman, `invalid_rules`
  /// for rules of a queue outside a non-empty `broker.queues`.
  ///
  /// With a cluster (`cfg.cluster.port != 0`) the host's actor system MUST
  /// have loaded the io middleman before it started
  /// (`actor_system_config::load<caf::io::middleman>()`) and registered the
  /// project's types (`register_types`) — on every node. With
  /// `cluster.auto_connect` (the default) this call publishes the gateway
  /// on `cluster.port` (blocks until the port is open; fails with
  /// `store_unavailable` naming the port when it cannot be opened); without
  /// it, the host publishes `gateway()` itself and introduces peers with
  /// `peer_atom`. Not idempotent: every call starts another engine.
  static outcome<std::shared_ptr<engine>> start(caf::actor_system& sys,
                                                engine_config cfg);

  /// Stops the engine (as `stop`).
  ~engine();

  /// The session actor of `user`, spawned on first use; later calls return
  /// the same actor (and ignore `subscriber`) while it lives. Send it
  /// `join_atom`, `cancel_atom`, `state_atom`; `subscriber` receives every
  /// state change and every match event of the user. A session that is
  /// idle for `config().session.idle_release_ms` (not live, no request)
  /// stops and the engine forgets it: the next call spawns a fresh one,
  /// which knows nothing of the user (the stores do). A holder of a handle
  /// learns of that by monitoring it, or by a request that fails with
  /// `caf::sec::request_receiver_down`: it then calls `renew_session`.
  /// Idempotent per user (while the session lives). Thread-safe.
  session_actor session(const std::string& user,
                        subscriber_actor subscriber = {});

  /// For a holder whose session handle `gone` is down: forgets `gone` if
  /// the engine still maps `user` to it (its down message may not have
  /// reached the engine yet) and stops it (nothing happens to a dead
  /// actor), then answers as `session(user, subscriber)`. Call it only with
  /// a handle that is down. Idempotent per `gone`. Thread-safe.
  session_actor renew_session(const std::string& user,
                              const session_actor& gone,
                              subscriber_actor subscriber = {});

  /// Stops the session actor of `user` and forgets it: the next
  /// `session(user)` spawns a fresh one, which knows nothing of the user
  /// (the stores do). Idempotent.
  void release(const std::string& user);

  /// Session actors alive now (also the `sessions_live` gauge).
  /// Thread-safe.
  size_t session_count() const;

  /// Stops every actor of the engine (sessions included). With a cluster it
  /// first takes this node's membership record out of the queue store (so
  /// the other nodes count its users as connected nowhere at once) and
  /// unpublishes the gateway: it then blocks for up to a store round trip
  /// and a middleman call — call it from a host thread, never from inside
  /// an actor. The actor handles below are invalid afterwards. Idempotent.
  void stop();

  /// The queue broker.
  queue_broker_actor broker() const {
    return broker_;
  }

  /// The finalizer.
  finalizer_actor finalizer() const {
    return finalizer_;
  }

  /// The group finalizer (docs/groups.md): commits claimed groups.
  group_finalizer_actor group_finalizer() const {
    return group_finalizer_;
  }

  /// Parties (docs/groups.md, "Parties"): create, join, leave, queue,
  /// cancel and look at parties; a queue with a shape is joined through
  /// here (alone: a party of one). Thread-safe.
  party_hub_actor parties() const {
    return parties_;
  }

  /// Backfill (docs/groups.md "Backfill"): a member of a group session, or
  /// the host (user ''), asks for players for its open seats. Thread-safe.
  backfill_actor backfill() const {
    return backfill_;
  }

  /// Which party each user of this node is in. Thread-safe.
  std::shared_ptr<party_registry> party_members() const {
    return party_members_;
  }

  /// The directory (user -> session actor on this node).
  directory_actor directory() const {
    return directory_;
  }

  /// The outbox relay; invalid without `run_relay`.
  outbox_relay_actor relay() const {
    return relay_;
  }

  /// The node's gateway (always running: it also replays a registering
  /// user's active match; with a cluster it routes between nodes).
  node_gateway_actor gateway() const {
    return gateway_;
  }

  /// Ends sessions (`end_atom`), expires old ones, prunes the database.
  lifecycle_actor lifecycle() const {
    return lifecycle_;
  }

  /// Mutual likes: send `swipe_atom, swipe_request`. Thread-safe.
  swipe_actor swipes() const {
    return swipe_;
  }

  /// The pair lock the swipe actor uses.
  pair_lock_actor pair_lock() const {
    return lock_;
  }

  /// The queue store the engine uses (made or given in the config).
  std::shared_ptr<queue_store_factory> queue_store() const {
    return queue_store_;
  }

  /// The match store the engine uses (made or given in the config).
  std::shared_ptr<match_store_factory> match_store() const {
    return match_store_;
  }

  /// The configuration as the engine completed it (metrics, bounds).
  const engine_config& config() const {
    return cfg_;
  }

  /// The engine's counters (never null). Thread-safe to read at any time.
  std::shared_ptr<engine_metrics> metrics() const {
    return cfg_.metrics;
  }

  /// Empty while every core actor runs; else which one stopped and why
  /// (the node cannot serve). Thread-safe.
  std::string down() const {
    return health_->down();
  }

 private:
  engine(caf::actor_system& sys, engine_config cfg);

  caf::actor_system& sys_;
  engine_config cfg_;
  std::shared_ptr<queue_store_factory> queue_store_;
  std::shared_ptr<match_store_factory> match_store_;
  queue_broker_actor broker_;
  finalizer_actor finalizer_;
  group_finalizer_actor group_finalizer_;
  ready_check_actor ready_check_;
  backfill_actor backfill_;
  directory_actor directory_;
  outbox_relay_actor relay_;
  node_gateway_actor gateway_;
  lifecycle_actor lifecycle_;
  party_hub_actor parties_;
  std::shared_ptr<party_registry> party_members_
    = std::make_shared<party_registry>();
  uint16_t published_port_ = 0; ///< CAF's port; 0: the engine did not publish
  /// In front of a plaintext cluster port (actors/basp_guard.hpp).
  std::unique_ptr<basp_guard> guard_;
  pair_lock_actor lock_;
  swipe_actor swipe_;
  /// The sessions by user; shared with the exit hooks of the sessions,
  /// which take a session out when it stops.
  struct session_table {
    std::mutex mtx;
    std::unordered_map<std::string, session_actor> map;
  };
  std::shared_ptr<session_table> sessions_;
  std::shared_ptr<core_health> health_ = std::make_shared<core_health>();
  caf::actor watch_; ///< core_watch.hpp
};

} // namespace mm
