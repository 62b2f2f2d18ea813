#pragma once

// Two engines as two nodes of one cluster under CAF's io test DSL (earth =
// node n1, mars = node n2), sharing one embedded queue store and one
// in-memory match store; their gateways talk through the simulated
// middleman. Shared by the cluster suites (cluster_dsl_test.cpp,
// cluster_party_test.cpp); include after <caf/test/io_dsl.hpp>.

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "actors/engine.hpp"
#include "actors/simulation.hpp"
#include "persistence/matchdb/match_store.hpp"
#include "persistence/queue/queue_store.hpp"

using namespace mm;

namespace {

/// Every node: the engine's types and the io middleman.
struct cluster_cfg : caf::actor_system_config {
  cluster_cfg() {
    register_types(*this);
    load<caf::io::middleman>();
  }
};

/// What the sessions of one node reported to their subscriber.
struct record {
  std::map<std::string, session_state> last;              ///< by user
  std::map<std::string, std::vector<match_event>> events; ///< by user
};

using record_ptr = std::shared_ptr<record>;

/// The subscriber of one session (of `user`) on one node.
subscriber_actor::behavior_type recorder(subscriber_actor::pointer,
                                         record_ptr r, std::string user) {
  return {
    [r](session_state& st) { r->last[st.user] = st; },
    [r, user](match_event& ev) { r->events[user].push_back(ev); },
  };
}

constexpr uint16_t port_n1 = 4241; ///< advertised only
constexpr uint16_t port_n2 = 4242; ///< mars publishes its gateway here

using planet_base = test_coordinator_fixture<cluster_cfg>;

struct fixture : point_to_point_fixture<planet_base> {
  std::shared_ptr<std::atomic<int64_t>> clock_ms
    = std::make_shared<std::atomic<int64_t>>(1'700'000'000'000);
  std::shared_ptr<queue_store_factory> queues;
  std::shared_ptr<match_store_factory> db;
  std::shared_ptr<engine> n1;                    ///< on earth
  std::shared_ptr<engine> n2;                    ///< on mars
  record_ptr seen1 = std::make_shared<record>(); ///< sessions on n1
  record_ptr seen2 = std::make_shared<record>(); ///< sessions on n2
  std::vector<subscriber_actor> recorders;

  fixture() {
    auto c = clock_ms;
    embedded_options opts;
    opts.clock = [c] { return c->load(); };
    queues = make_embedded_store(opts);
    db = make_memory_match_store();
    prepare_connection(mars, earth, "mars", port_n2);
  }

  ~fixture() {
    // The published gateway (and every other engine actor) must be gone
    // before the base fixtures run their `exec_all`.
    if (n1)
      n1->stop();
    if (n2)
      n2->stop();
    for (auto& r : recorders)
      caf::anon_send_exit(r, caf::exit_reason::user_shutdown);
    settle();
    // Timers of stopped actors fire into nothing.
    while (earth.sched.trigger_timeout() || mars.sched.trigger_timeout())
      settle();
  }

  /// Runs every message and all network traffic on both planets, without
  /// firing timeouts. Idempotent once nothing is left.
  void settle() {
    auto step = [](planet_type& p) {
      return p.sched.try_run_once() || p.mpx.read_data()
             || p.mpx.try_exec_runnable() || p.mpx.try_accept_connection();
    };
    while (step(earth) || step(mars))
      ; // repeat
  }

  /// Moves the shared store clock and both planets' clocks by `ms`, 10 ms at
  /// a time, settling after each step.
  void advance(int64_t ms) {
    for (int64_t done = 0; done < ms;) {
      auto step = std::min<int64_t>(10, ms - done);
      *clock_ms += step;
      earth.sched.clock().advance_time(std::chrono::milliseconds(step));
      mars.sched.clock().advance_time(std::chrono::milliseconds(step));
      settle();
      done += step;
    }
  }

  /// Engine settings of node `id`: short timers, the shared stores, and a
  /// cluster whose connections the test makes itself.
  engine_config node_config(const std::string& id, uint16_t port) {
    auto cfg = sim::default_engine_config();
    cfg.node = id;
    cfg.cluster.port = port;
    cfg.cluster.host = id == "n1" ? "earth" : "mars";
    cfg.cluster.auto_connect = false; // publish / remote_actor: see start()
    cfg.queue_factory = queues;
    cfg.match_factory = db;
    return cfg;
  }

  /// Starts both engines, publishes n2's gateway on mars, connects earth
  /// to it and introduces it to n1's gateway (which greets it back, so one
  /// connection serves both directions).
  void start(engine_config c1, engine_config c2) {
    auto e1 = engine::start(earth.sys, std::move(c1));
    CAF_REQUIRE(e1);
    n1 = *e1;
    auto e2 = engine::start(mars.sys, std::move(c2));
    CAF_REQUIRE(e2);
    n2 = *e2;
    settle();
    CAF_REQUIRE_EQUAL(mars.publish(n2->gateway(), port_n2), port_n2);
    // earth.remote_actor() would run exec_all (timeouts forever): the same
    // steps, settling instead.
    earth.sched.inline_next_enqueue();
    earth.sched.after_next_enqueue([this] { settle(); });
    auto gw2 = earth.mm.remote_actor<node_gateway_actor>("mars", port_n2);
    CAF_REQUIRE(gw2);
    gw2_ = *gw2;
    // From an actor of earth: the gateway takes handles from its own node
    // only.
    earth.self->send(n1->gateway(), peer_atom_v, std::string{"n2"},
                     caf::actor_cast<caf::actor>(*gw2));
    settle();
  }

  /// n2's gateway as seen from earth: what a rogue client of mars's cluster
  /// port holds.
  node_gateway_actor gw2_;

  /// `deliver_atom, user, ev` to n2's gateway from an actor on earth, as a
  /// peer (or a rogue client of the cluster port) sends it. (Its report is
  /// not looked at: a response to an actor the test spawns on earth does
  /// not come back through the simulated network; the effects are checked.)
  void deliver_from_earth(const std::string& user, const match_event& ev) {
    earth.self->send(gw2_, deliver_atom_v, user, ev);
    settle();
  }

  /// The session of `user` on node n1 (1) or n2 (2), with its own
  /// recorder.
  session_actor session(int node, const std::string& user) {
    auto& p = node == 1 ? earth : mars;
    auto rec = p.sys.spawn(recorder, node == 1 ? seen1 : seen2, user);
    recorders.push_back(rec);
    auto s = (node == 1 ? n1 : n2)->session(user, rec);
    settle();
    return s;
  }

  std::string phase(const record_ptr& r, const std::string& user) {
    auto i = r->last.find(user);
    return i == r->last.end() ? "none" : to_string(i->second.phase);
  }

  session_state last(const record_ptr& r, const std::string& user) {
    auto i = r->last.find(user);
    return i == r->last.end() ? session_state{} : i->second;
  }

  const std::vector<match_event>& events(const record_ptr& r,
                                         const std::string& user) {
    static const std::vector<match_event> none;
    auto i = r->events.find(user);
    return i == r->events.end() ? none : i->second;
  }

  /// The peers that `gw` knows, by node id.
  std::map<std::string, peer_info> peers_of(planet_type& p,
                                            const node_gateway_actor& gw) {
    auto rh = p.self->request(gw, caf::infinite, peers_atom_v);
    settle();
    std::map<std::string, peer_info> out;
    rh.receive(
      [&](std::vector<peer_info>& xs) {
        for (auto& x : xs)
          out[x.node] = x;
      },
      [&](caf::error& e) { CAF_FAIL("peers: " << p.sys.render(e)); });
    return out;
  }

  /// Asks `relay` to deliver what is pending; answers how many it marked.
  uint32_t flush(planet_type& p, const outbox_relay_actor& relay) {
    auto rh = p.self->request(relay, caf::infinite, flush_atom_v);
    settle();
    uint32_t n = 0;
    rh.receive([&](uint32_t x) { n = x; },
               [&](caf::error& e) { CAF_FAIL("flush: " << p.sys.render(e)); });
    return n;
  }

  /// Events nobody has marked delivered and nobody holds a lease on.
  std::vector<outbox_event> undelivered() {
    auto evs = db->connect()->fetch_undelivered(100, 1);
    CAF_REQUIRE(evs);
    return *evs;
  }

  /// Runs one cluster script on the shared store.
  void script(script_id id, std::vector<std::string> keys,
              std::vector<std::string> args) {
    std::vector<script_call> calls{
      script_call{id, std::move(keys), std::move(args)}};
    auto r = queues->connect()->run(calls).at(0);
    CAF_REQUIRE(r.code == errc::none);
    CAF_REQUIRE(r.value.type == store_value::kind::array);
  }

  /// Commits a match of (a, b) directly in the shared database.
  std::string commit(const std::string& a, const std::string& b) {
    match_request req;
    req.queue = "voice";
    req.user_a = a;
    req.ticket_a = "t-" + a;
    req.user_b = b;
    req.ticket_b = "t-" + b;
    auto res = db->connect()->commit_matches({req});
    CAF_REQUIRE(res.at(0));
    return res.at(0)->session_id;
  }
};

} // namespace
