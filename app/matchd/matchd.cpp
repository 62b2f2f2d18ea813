// matchd: one node of the engine behind the HTTP/WebSocket API (docs/api.md).
//
// Start-up: settings -> logging -> actor system -> engine (stores, migrations)
// -> API -> listen. SIGTERM/SIGINT drains: stop accepting, refuse new joins,
// cancel the live joins and wait until each is certain (in-flight
// finalizations finish), deliver committed events, close the WebSockets
// after their queues are sent, stop, exit 0 — all within --drain-timeout.

#include <atomic>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <mutex>
#include <thread>

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <caf/all.hpp>
#include <caf/io/middleman.hpp>
#include <spdlog/spdlog.h>

#include "actors/cluster_tls.hpp"

#include "actors/engine.hpp"
#include "actors/lazy_clock.hpp"
#include "app/common/nofile.hpp"
#include "app/matchd/console.hpp"
#include "app/matchd/console_history.hpp"
#include "app/matchd/console_stats.hpp"
#include "app/matchd/depth_lease.hpp"
#include "app/matchd/engine_bridge.hpp"
#include "app/matchd/engine_settings.hpp"
#include "app/matchd/failpoint.hpp"
#include "app/matchd/heap.hpp"
#include "app/matchd/http_server.hpp"
#include "app/matchd/hub.hpp"
#include "app/matchd/jwks_source.hpp"
#include "app/matchd/matchd_config.hpp"
#include "app/matchd/metrics_text.hpp"
#include "app/matchd/notify.hpp"
#include "app/matchd/readiness_probe.hpp"
#include "app/matchd/tracing.hpp"
#include "core/logger.hpp"

using namespace mm;

#ifdef MM_JEMALLOC
// jemalloc's options, read at its first allocation (MALLOC_CONF in the
// environment is applied on top). A background thread hands pages freed
// after a peak back to the system within about a second (dirty pages) and
// at once after that (no muzzy stage: MADV_FREE'd pages would still count
// in the RSS until the kernel is short of memory), so the node's RSS
// follows what it holds now (docs/matchd.md, "Memory").
extern "C" {
const char* malloc_conf
  = "background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0";
}
#endif

namespace {

/// Waits until every actor of `sys` is done, or until `by`: false then.
bool actors_done_by(caf::actor_system& sys,
                    std::chrono::steady_clock::time_point by) {
  auto done = std::make_shared<std::promise<void>>();
  auto fut = done->get_future();
  std::thread waiter{[&sys, done] {
    sys.await_all_actors_done();
    done->set_value();
  }};
  if (fut.wait_until(by) == std::future_status::ready) {
    waiter.join();
    return true;
  }
  waiter.detach(); // the process exits at once
  return false;
}

int run(const matchd_config& mc) {
  auto lg = logger("matchd");
  // The main thread waits for the signals; every other thread (started
  // below) inherits the mask and never sees them.
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGTERM);
  sigaddset(&sigs, SIGINT);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);

  cluster_config cluster;
  cluster.port = mc.cluster_port;
  cluster.host = mc.cluster_host;
  cluster.bind = mc.cluster_bind;
  cluster.tls_cert = mc.cluster_cert;
  cluster.tls_key = mc.cluster_key;
  cluster.tls_ca = mc.cluster_ca;
  cluster.insecure = mc.cluster_insecure;
  cluster.peers = mc.peers;
  cluster.membership = mc.membership;
  cluster.member_ttl_ms = mc.member_ttl_ms;
  if (cluster.heartbeat_ms >= cluster.member_ttl_ms)
    cluster.heartbeat_ms = cluster.member_ttl_ms / 3;
  if (auto bad = check_cluster_config(cluster, mc.node);
      bad.code != errc::none) {
    lg->error("bad cluster settings: {}", bad.detail);
    return 2;
  }
  // A bad certificate file is a named error now, not a refused peer later.
  if (auto bad = check_cluster_tls(cluster); bad.code != errc::none) {
    lg->error("bad cluster certificates: {}", bad.detail);
    return 2;
  }
  // The identity provider's keys: read before anything starts.
  std::shared_ptr<key_source> keys;
  if (!mc.jwks_file.empty() || !mc.jwks_url.empty()) {
    jwks_options jo;
    jo.file = mc.jwks_file;
    jo.url = mc.jwks_url;
    jo.ca_file = mc.jwks_ca_file;
    jo.refresh_s = mc.jwks_refresh_s;
    std::string err;
    keys = start_jwks(jo, err);
    if (!keys) {
      lg->error("JWK Set (--jwks-file/--jwks-url) not usable: {}", err);
      return 2;
    }
  }
  // The console's logins and audit file: named errors before anything runs.
  console_operators logins;
  auto audit = std::make_shared<console_audit>();
  if (std::string err;
      (!mc.console_operators.empty() && !logins.load(mc.console_operators, err))
      || !audit->open(mc.console_audit, err)) {
    lg->error("the console: {}", err);
    return 2;
  }
  if (!mc.console_token.empty())
    logins.add_shared(mc.console_token);

  caf::actor_system_config cfg;
  register_types(cfg);
  if (cluster.enabled()) // the gateway is published and reached (over TLS)
    use_cluster_tls(cfg, cluster);
  cfg.set("scheduler.max-threads", static_cast<size_t>(mc.threads));
  if (mc.scheduler == "stealing")
    cfg.set("scheduler.policy", caf::atom("stealing"));
  else
    cfg.set("scheduler.policy", caf::atom("sharing"));
  if (mc.clock == "lazy")
    use_lazy_clock(cfg);
  cfg.set("logger.verbosity", caf::atom("quiet"));
  caf::actor_system sys{cfg};

  engine_config ec;
  engine_settings_of(mc, ec);
  // Traces of matches (--otlp-endpoint): the finalizer's times, the links'.
  std::shared_ptr<match_tracer> tracer;
  if (!mc.otlp_endpoint.empty()) {
    ec.finalizer.timings = std::make_shared<match_timings>();
    tracing_options to;
    to.endpoint = mc.otlp_endpoint;
    to.ca_file = mc.otlp_ca_file;
    to.sample = mc.otlp_sample;
    to.node = mc.node;
    tracer = start_tracer(to, ec.finalizer.timings);
    lg->info("traces of {}% of matches to {} (OTLP/HTTP, JSON)",
             mc.otlp_sample * 100, mc.otlp_endpoint);
  }
  std::string failpoint;
  actor_kill kill;
  if (!arm_failpoint(ec, failpoint, kill)) {
    lg->error("MM_FAILPOINT={}: unknown or malformed failpoint "
              "(kill_before_commit, kill_after_commit, "
              "kill_holding_proposals=N with N >= 1, kill_actor=NAME@MS "
              "with NAME one of broker, finalizer, directory, relay, "
              "gateway, lifecycle, pair_lock, swipe)",
              failpoint);
    return 2;
  }
  if (!failpoint.empty())
    lg->warn("failpoint {} armed (MM_FAILPOINT): a test hook, never for "
             "production",
             failpoint);
  // A core actor that stops takes the node out of service: not ready, a
  // drain, exit 70 (EX_SOFTWARE) for the supervisor to restart it.
  auto core_down = std::make_shared<std::atomic<bool>>(false);
  ec.on_core_down = [core_down](const std::string&) {
    if (!core_down->exchange(true))
      ::kill(::getpid(), SIGTERM); // the main thread's sigwait drains
  };
  if (!mc.redis.empty()) {
    ec.use_redis = true;
    ec.redis.host = mc.redis_host;
    ec.redis.port = mc.redis_port;
    ec.redis.seeds = mc.redis_seeds;
    ec.redis.cluster = mc.redis_cluster;
    ec.redis.user = mc.redis_user;
    ec.redis.password = mc.redis_password;
    // Refused credentials are a configuration error, named now; a Redis
    // that is not up yet is not (the node waits for it, /readyz says so).
    auto probe = probe_redis(ec.redis);
    if (!probe && probe.error().code == errc::store_auth_failed) {
      lg->error("store_auth_failed: {}", probe.error().detail);
      return 2;
    }
    if (probe)
      lg->info("queue store: {}", probe->cluster
                                    ? "redis cluster of "
                                        + std::to_string(probe->primaries)
                                        + " primaries"
                                    : std::string{"one redis"});
    else
      lg->warn("queue store not reachable yet: {} ({})",
               to_string(probe.error().code), probe.error().detail);
  }
  if (!mc.postgres.empty()) {
    ec.use_postgres = true;
    ec.postgres.conninfo = mc.postgres;
  }
  // The readiness probe's word on the database, for the joins' in-session
  // checks (lifecycle_config::database_down).
  auto database_down = std::make_shared<std::atomic<bool>>(false);
  ec.lifecycle.database_down = database_down;
  ec.cluster = cluster;
  if (!ec.use_redis || !ec.use_postgres)
    lg->warn("NOT DURABLE: running on {}{}{}: waiting users and matches are "
             "lost when this process ends; give --redis and --postgres in "
             "production",
             ec.use_redis ? "" : "the embedded queue store",
             !ec.use_redis && !ec.use_postgres ? " and " : "",
             ec.use_postgres ? "" : "in-memory persistence");
  // The peers' cluster pages read this node's console counters; the
  // console is made below, once the engine runs (nothing until then).
  auto console_source = std::make_shared<node_stats_source>();
  ec.node_stats = [console_source] { return console_source->json(); };
  auto started = engine::start(sys, ec);
  if (!started) {
    lg->error("cannot start the engine: {} ({})",
              to_string(started.error().code), started.error().detail);
    return 1;
  }
  auto eng = *started;
  auto metrics = eng->metrics();
  if (!kill.name.empty()) {
    caf::actor victim;
    auto pick = [&](const auto& h) { victim = caf::actor_cast<caf::actor>(h); };
    if (kill.name == "broker")
      pick(eng->broker());
    else if (kill.name == "finalizer")
      pick(eng->finalizer());
    else if (kill.name == "directory")
      pick(eng->directory());
    else if (kill.name == "relay")
      pick(eng->relay());
    else if (kill.name == "gateway")
      pick(eng->gateway());
    else if (kill.name == "lifecycle")
      pick(eng->lifecycle());
    else if (kill.name == "pair_lock")
      pick(eng->pair_lock());
    else
      pick(eng->swipes());
    std::thread{[victim, ms = kill.after_ms] {
      std::this_thread::sleep_for(std::chrono::milliseconds(ms));
      caf::anon_send_exit(victim, caf::exit_reason::kill);
    }}.detach();
  }

  // The hub keeps a user's last sign of life only as long as the presence
  // check (--client-ttl) reads it.
  auto events = std::make_shared<hub>(
    64, std::chrono::seconds{300}, std::chrono::milliseconds(mc.client_ttl_ms));
  bool console_on = !mc.console_token.empty() || !mc.console_operators.empty()
                    || !mc.demo_queue.empty();
  // The console's counters cost a few atomics per join and match; a node
  // without the console keeps none.
  auto console_counts = console_on ? std::make_shared<console_stats>(
                          std::max<size_t>(mc.max_queues, 1))
                                   : nullptr;
  auto bridge = engine_bridge::make(sys, eng, events,
                                    bridge_config{mc.client_ttl_ms, 30000,
                                                  console_counts, tracer});
  // A WebSocket that opens gets its user a link (and session) here: events
  // for the user come to this node from then on.
  events->on_attach(
    [weak = std::weak_ptr<engine_bridge>{bridge}](const std::string& user) {
      if (auto b = weak.lock())
        b->attach(user);
    });
  // ... and one that closes starts the presence check of a live join.
  events->on_detach(
    [weak = std::weak_ptr<engine_bridge>{bridge}](const std::string& user) {
      if (auto b = weak.lock())
        b->detach(user);
    });
  auto exporter = std::make_shared<metrics_exporter>(metrics, mc.node);
  // The probe's own Redis connection gives up within half a second (the
  // engine's commands wait longer, and retry): readiness must turn fast.
  auto probe_queue = eng->queue_store();
  if (ec.use_redis) {
    auto o = ec.redis;
    o.connect_timeout_ms = 500;
    o.command_timeout_ms = 500;
    o.max_attempts = 1;
    o.retry_delay_ms = 0;
    o.failover_wait_ms = 500;
    probe_queue = make_redis_store(o);
  }
  // One node per queue exports its depth (docs/matchd.md, "Metrics").
  auto lease = std::make_shared<depth_lease>(mc.node);
  auto probe = std::make_shared<readiness_probe>(
    probe_queue, eng->match_store(), events,
    std::chrono::milliseconds(mc.trim_ms),
    [lease, metrics](queue_store& store) {
      std::vector<std::string> known;
      for (auto& kv : metrics->queue_depths())
        known.push_back(kv.first);
      lease->renew(store, known);
    });
  auto ctx = std::make_shared<api_context>();
  if (!mc.secret.empty())
    ctx->tokens.secrets = {mc.secret};
  if (!mc.secret_next.empty())
    ctx->tokens.secrets.push_back(mc.secret_next);
  ctx->tokens.audience = mc.token_audience;
  ctx->tokens.issuer = mc.token_issuer;
  ctx->tokens.leeway_s = mc.token_leeway_s;
  ctx->tokens.accept_v1 = mc.accept_v1_tokens;
  ctx->tokens.accept_jwt = mc.accept_jwt_tokens;
  ctx->tokens.keys = keys;
  ctx->events = events;
  ctx->metrics_text = [exporter] { return exporter->render(); };
  ctx->ready = [probe, eng](std::string& why) {
    if (auto d = eng->down(); !d.empty()) {
      why = "core actor " + d;
      return false;
    }
    return probe->ready(why);
  };
  ctx->store_down = [probe](std::string& why) {
    return probe->queue_store_down(why);
  };
  probe->share_database_down(database_down);
  // What /readyz answers 200 to (the route adds the drain).
  auto ready_now = [ctx](std::string& why) {
    if (ctx->draining.load()) {
      why = "draining";
      return false;
    }
    return ctx->ready(why);
  };
  exporter->attach(lease, [ready_now] {
    std::string why;
    return ready_now(why);
  });
  if (!mc.open_queues) // refused at the door: no session, no link, no store
    ctx->queues.insert(mc.queues.begin(), mc.queues.end());
  if (tracer)
    exporter->attach_traces([tracer] {
      auto c = tracer->counts();
      return std::make_pair(c.exported, c.dropped);
    });
  ctx->count_request = [exporter](const std::string& route,
                                  const std::string& method, unsigned status,
                                  double seconds) {
    exporter->count_request(route, method, status, seconds);
  };
  // Set below, once the server runs: the console shows its connections.
  auto server_view = std::make_shared<std::atomic<const http_server*>>(nullptr);
  if (console_on) {
    console_settings cs;
    cs.operators = std::move(logins);
    cs.audit = audit;
    cs.hooks = console_hooks{bridge, ctx->paused, &ctx->draining};
    cs.history = std::make_shared<console_history>(
      console_counts, std::chrono::seconds(mc.console_history_s));
    cs.demo_queue = mc.demo_queue;
    cs.demo_ttl_s = mc.demo_ttl_s;
    cs.secret = mc.secret;
    cs.token_audience = mc.token_audience;
    cs.token_issuer = mc.token_issuer;
    cs.node = mc.node;
    if (!mc.open_queues)
      cs.queues = mc.queues;
    ctx->console = std::make_shared<console_routes>(
      cs, console_counts, metrics, [server_view] {
        console_node_view v;
        if (auto* srv = server_view->load()) {
          v.connections = srv->stats().open_connections.load();
          v.websockets = srv->stats().open_websockets.load();
        }
        return v;
      });
  }
  console_source->set(ctx->console);
  const bool admin_apart = !mc.admin_listen.empty();
  auto router = std::make_shared<api_router>(
    ctx, bridge, admin_apart ? api_surface::public_api : api_surface::all);
  server_limits limits;
  limits.max_body = mc.max_body;
  limits.rate = mc.rate;
  limits.idle_timeout_ms = mc.idle_timeout_ms;
  limits.max_connections = mc.max_connections;
  limits.ws_per_user = mc.max_ws_per_user;
  limits.ws_idle_timeout_ms = mc.ws_idle_timeout_ms;
  limits.ws_rate = mc.ws_rate;
  auto server = http_server::start(mc.listen_host, mc.listen_port,
                                   mc.io_threads, router, events, limits);
  if (!server) {
    lg->error("{}", server.error().detail);
    eng->stop();
    return 1;
  }
  auto& srv = *server;
  exporter->attach(srv.get());
  server_view->store(srv.get());
  // The operations on their own listener: one io thread, no WebSockets.
  std::unique_ptr<http_server> admin;
  if (admin_apart) {
    auto started = http_server::start(
      mc.admin_host, mc.admin_port, 1,
      std::make_shared<api_router>(ctx, bridge, api_surface::admin), events,
      limits);
    if (!started) {
      lg->error("--admin-listen: {}", started.error().detail);
      srv->stop();
      eng->stop();
      return 1;
    }
    admin = std::move(*started);
    lg->info("admin listener on http://{}:{} (/healthz, /readyz, /metrics, "
             "the console); not on {}:{}",
             mc.admin_host, admin->port(), mc.listen_host, srv->port());
  }
  std::string served = "any name, at most " + std::to_string(mc.max_queues)
                       + " at once";
  if (!mc.open_queues) {
    served.clear();
    for (auto& q : mc.queues)
      served += (served.empty() ? "" : ",") + q;
  }
  lg->info("node {} listening on http://{}:{} (queues: {}; queue store: {}, "
           "database: {})",
           mc.node, mc.listen_host, srv->port(), served,
           eng->queue_store()->describe(), eng->match_store()->describe());
  if (!mc.console_token.empty() || !mc.console_operators.empty())
    lg->info("web console on http://{}:{}/console/ (logins: "
             "--console-token, --console-operators)",
             mc.listen_host, srv->port());
  if (!mc.demo_queue.empty())
    lg->info("demo on http://{}:{}/console/demo.html: visitors join queue {} "
             "as demo users",
             mc.listen_host, srv->port(), mc.demo_queue);
  // Which keys and claims are in force: what an operator checks during a
  // key rollover (docs/api.md, "Key rollover"). Never the secrets.
  lg->info("tokens: {}{}; {} secret(s){}; audience {}, issuer {}, leeway {} s",
           mc.accept_v1_tokens ? "v1" : "",
           mc.accept_jwt_tokens
             ? std::string{mc.accept_v1_tokens ? " and JWT " : "JWT "}
                 + (mc.secret.empty() ? "" : "HS256")
                 + (ctx->tokens.keys
                      ? (mc.secret.empty() ? "" : ", ")
                          + std::string{"RS256/ES256 of "}
                          + (mc.jwks_url.empty() ? mc.jwks_file : mc.jwks_url)
                      : "")
             : "",
           ctx->tokens.secrets.size(),
           mc.secret_next.empty() ? "" : " (rollover: --secret-next accepted)",
           mc.token_audience.empty() ? "none" : "'" + mc.token_audience + "'",
           mc.token_issuer.empty() ? "unchecked" : "'" + mc.token_issuer + "'",
           mc.token_leeway_s);
  if (mc.cluster_port != 0)
    lg->info("node {} in a cluster: gateway on {}:{} (bound to {}, {}), {} "
             "static peer(s), membership in Redis {}",
             mc.node, mc.cluster_host, mc.cluster_port, mc.cluster_bind,
             cluster.tls() ? "mutual TLS" : "INSECURE: plaintext, loopback",
             mc.peers.size(), mc.membership ? "on" : "off");

  // systemd (Type=notify): READY=1 once ready, WATCHDOG=1 while a pulse
  // actor shows that the scheduler runs actors and timers. Nothing without
  // NOTIFY_SOCKET.
  service_notifier notifier;
  caf::actor pulse;
  if (std::getenv("NOTIFY_SOCKET") != nullptr) {
    using steady = std::chrono::steady_clock;
    auto beat = std::make_shared<std::atomic<int64_t>>(
      steady::now().time_since_epoch().count());
    pulse = sys.spawn([beat](caf::event_based_actor* self) -> caf::behavior {
      self->send(self, int32_t{0});
      return {
        [self, beat](int32_t) {
          beat->store(steady::now().time_since_epoch().count());
          self->delayed_send(self, std::chrono::milliseconds(250), int32_t{0});
        },
      };
    });
    notifier.start(ready_now, [beat] {
      auto last = steady::time_point(steady::duration(beat->load()));
      return steady::now() - last < std::chrono::seconds(3);
    });
    lg->info("systemd notification socket: READY=1 once ready{}",
             notifier.enabled() ? "" : " (not enabled)");
  }

  int sig = 0;
  sigwait(&sigs, &sig);
  auto t0 = std::chrono::steady_clock::now();
  auto deadline = t0 + std::chrono::milliseconds(mc.drain_timeout_ms);
  lg->info("{}: draining (bound {} ms)", sig == SIGTERM ? "SIGTERM" : "SIGINT",
           mc.drain_timeout_ms);
  ctx->draining = true;
  notifier.stopping();
  srv->stop_accepting();
  auto joins_done = bridge->drain(deadline);
  auto flushed = bridge->flush_events(deadline);
  // Events handed to the sessions reach the WebSocket queues moments later.
  std::this_thread::sleep_until(
    std::min(deadline, std::chrono::steady_clock::now()
                         + std::chrono::milliseconds(100)));
  auto ws_closed = srv->close_websockets(deadline);
  srv->stop();
  if (admin)
    admin->stop();
  bridge->stop();
  eng->stop();
  if (pulse)
    caf::anon_send_exit(pulse, caf::exit_reason::user_shutdown);
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
              std::chrono::steady_clock::now() - t0)
              .count();
  if (joins_done && flushed && ws_closed)
    lg->info("drained in {} ms", ms);
  else
    lg->warn("drain bound reached after {} ms (joins settled: {}, events "
             "flushed: {}, websockets closed: {})",
             ms, joins_done, flushed, ws_closed);
  if (!actors_done_by(sys, std::max(deadline, std::chrono::steady_clock::now())
                             + std::chrono::milliseconds(500))) {
    // Requests still waiting on the engine (their answers would go to
    // connections already closed) do not hold the exit past the bound;
    // what is durable is in the stores, as after a crash.
    lg->warn("{} actors still running past the drain bound; exiting now",
             sys.registry().running());
    spdlog::shutdown();
    std::fflush(nullptr);
    std::_Exit(*core_down ? 70 : 0);
  }
  if (*core_down) {
    lg->error("exiting 70: core actor {}", eng->down());
    return 70;
  }
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  matchd_config mc;
  auto parsed = parse_matchd_config(argc, argv, mc);
  if (parsed.exit_now) {
    std::fputs(parsed.output.c_str(), parsed.exit_code == 0 ? stdout : stderr);
    return parsed.exit_code;
  }
  spdlog::set_level(spdlog::level::from_str(mc.log_level));
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ [%n] %v");
  // Each connection is a descriptor; the stores and the log take ~256.
  if (auto fds = mm::raise_nofile_limit(); fds < mc.max_connections + 256ull)
    spdlog::warn("descriptor limit {} is below --max-connections {} + 256: "
                 "raise LimitNOFILE (docs/matchd.md)",
                 fds, mc.max_connections);
  return run(mc);
}
