// Two engines as two nodes of one cluster, simulated deterministically by
// CAF's io test DSL: each planet (earth = node n1, mars = node n2) has its own
// actor system, test coordinator and simulated network; both engines share
// ONE embedded queue store and ONE in-memory match store (one factory each,
// passed to both), so they share queues, membership and database like nodes
// sharing Redis and PostgreSQL. Their gateways talk through the simulated
// middleman (BASP), exactly as across processes.
//
// The stock io_dsl helpers run `exec_all`, which fires timeouts until nothing
// happens anymore; an engine re-arms periodic timers (relay polling, sweeps,
// heartbeats), so this suite moves both clocks itself (`advance`) and runs
// messages and network traffic without firing timeouts (`settle`).

#define CAF_SUITE cluster
#define FAIL(msg) CAF_FAIL(msg) // Debian's dsl.hpp calls an undefined FAIL
#include <caf/test/io_dsl.hpp>

#include "tests/unit/cluster_fixture.hpp"

CAF_TEST_FIXTURE_SCOPE(cluster_tests, fixture)

CAF_TEST(the nodes see each other through membership and one connection) {
  start(node_config("n1", port_n1), node_config("n2", port_n2));
  // n1 beat before n2 started: it sees n2 at its next heartbeat.
  advance(1100);
  auto at1 = peers_of(earth, n1->gateway());
  CAF_REQUIRE_EQUAL(at1.count("n2"), 1u);
  CAF_CHECK(at1["n2"].member);
  CAF_CHECK(at1["n2"].connected);
  CAF_CHECK_EQUAL(at1["n2"].address, "mars:4242");
  // n2 learned n1's gateway from its greeting, over earth's connection.
  auto at2 = peers_of(mars, n2->gateway());
  CAF_REQUIRE_EQUAL(at2.count("n1"), 1u);
  CAF_CHECK(at2["n1"].member);
  CAF_CHECK(at2["n1"].connected);
  CAF_CHECK_EQUAL(at2["n1"].address, "earth:4241");
}

CAF_TEST(a match across two nodes reaches both sessions) {
  auto c1 = node_config("n1", port_n1);
  auto c2 = node_config("n2", port_n2);
  c2.run_relay = false; // n1's relay delivers bob's event through n2
  start(c1, c2);
  auto alice = session(1, "alice");
  auto bob = session(2, "bob");
  settle();
  caf::anon_send(alice, join_atom_v, join_request{"voice", "ta", ""});
  settle();
  CAF_CHECK_EQUAL(phase(seen1, "alice"), "queued");
  caf::anon_send(bob, join_atom_v, join_request{"voice", "tb", ""});
  // bob (n2) claims alice (n1); n2's finalizer commits the pair; n1's relay
  // leases the event: alice is local there, bob is routed to n2.
  advance(200);
  CAF_CHECK_EQUAL(phase(seen2, "bob"), "matched");
  CAF_CHECK_EQUAL(phase(seen1, "alice"), "matched");
  auto sid = last(seen2, "bob").session_id;
  CAF_CHECK(!sid.empty());
  CAF_CHECK_EQUAL(last(seen1, "alice").session_id, sid);
  CAF_REQUIRE_EQUAL(events(seen1, "alice").size(), 1u);
  CAF_REQUIRE_EQUAL(events(seen2, "bob").size(), 1u);
  auto& ev_a = events(seen1, "alice").front();
  auto& ev_b = events(seen2, "bob").front();
  CAF_CHECK_EQUAL(ev_a.event_id, match_created_event_id(sid));
  CAF_CHECK_EQUAL(ev_b.event_id, ev_a.event_id);
  CAF_CHECK_EQUAL(ev_b.session_id, sid);
  // Both users got it: marked delivered.
  CAF_CHECK(undelivered().empty());
  CAF_CHECK_EQUAL(n1->metrics()->events_delivered.load(), 1u);
  CAF_CHECK_EQUAL(n2->metrics()->matches.load(), 1u);
  // alice moves to n2 (her app reconnects there): the new session gets her
  // active match replayed — same event id, so the client dedupes it.
  auto alice2 = session(2, "alice");
  settle();
  CAF_REQUIRE_EQUAL(events(seen2, "alice").size(), 1u);
  CAF_CHECK_EQUAL(events(seen2, "alice").front().event_id, ev_a.event_id);
  CAF_CHECK_EQUAL(events(seen2, "alice").front().session_id, sid);
  CAF_CHECK_EQUAL(phase(seen2, "alice"), "none"); // no join: no state change
  CAF_CHECK(alice2 != alice);
}

CAF_TEST(a peer cannot deliver an event the database does not have) {
  start(node_config("n1", port_n1), node_config("n2", port_n2));
  auto bob = session(2, "bob");
  caf::anon_send(bob, join_atom_v, join_request{"voice", "tb", ""});
  settle();
  CAF_REQUIRE_EQUAL(phase(seen2, "bob"), "queued");
  // A forged match for waiting bob, sent to n2's gateway from another node
  // (earth: any client of the cluster port), and bob's event of a real
  // session he is not part of.
  match_event forged;
  forged.session_id = "00000000-0000-4000-8000-000000000000";
  forged.event_id = match_created_event_id(forged.session_id);
  forged.queue = "voice";
  forged.user_a = "bob";
  forged.ticket_a = "tb";
  forged.user_b = "mallory";
  forged.ticket_b = "tm";
  forged.payload = "{}";
  auto other = commit("carol", "dave");
  match_event foreign = forged;
  foreign.session_id = other;
  foreign.event_id = match_created_event_id(other);
  for (auto& ev : {forged, foreign})
    deliver_from_earth("bob", ev);
  CAF_CHECK(events(seen2, "bob").empty());
  CAF_CHECK_EQUAL(phase(seen2, "bob"), "queued");
  // carol's own event is delivered, as the database has it (the payload
  // sent is replaced by the recorded one).
  auto carol = session(2, "carol");
  match_event real = foreign;
  real.user_a = "carol";
  real.ticket_a = "t-carol";
  real.user_b = "dave";
  real.ticket_b = "t-dave";
  deliver_from_earth("carol", real);
  CAF_REQUIRE_EQUAL(events(seen2, "carol").size(), 1u);
  CAF_CHECK_NOT_EQUAL(events(seen2, "carol").front().payload, "{}");
  CAF_CHECK_EQUAL(events(seen2, "carol").front().session_id, other);
}

CAF_TEST(a peer cannot introduce or replace the handle of a node) {
  start(node_config("n1", port_n1), node_config("n2", port_n2));
  advance(1100);
  CAF_REQUIRE(peers_of(mars, n2->gateway())["n1"].connected);
  // A rogue actor on earth announces itself to n2 as node n1 and as a new
  // node n3; adopted, it would be greeted (and get n1's users' events).
  auto greeted = std::make_shared<int>(0);
  auto rogue = earth.sys.spawn([greeted](caf::event_based_actor* self) {
    self->set_default_handler(caf::drop);
    return caf::behavior{[greeted](hello_atom, std::string&) { ++*greeted; }};
  });
  for (auto node : {"n1", "n3"})
    earth.self->send(gw2_, peer_atom_v, std::string{node}, rogue);
  settle();
  CAF_CHECK_EQUAL(*greeted, 0);
  CAF_CHECK_EQUAL(peers_of(mars, n2->gateway()).count("n3"), 0u);
  // Nor may another node register its users here.
  earth.self->send(gw2_, register_atom_v, std::string{"mallory"});
  settle();
  auto route = queues->connect()->run({script_call{
    script_id::cluster_route,
    {cluster_keys::users, cluster_keys::nodes, cluster_keys::beats},
    {"mallory"}}});
  CAF_REQUIRE(route.at(0).value.elements.size() >= 2);
  CAF_CHECK_EQUAL(route.at(0).value.elements[1].str, "");
  caf::anon_send_exit(rogue, caf::exit_reason::user_shutdown);
  settle();
}

CAF_TEST(a cluster with TLS needs the OpenSSL module in the actor system) {
  auto c = node_config("n1", port_n1);
  c.cluster.tls_cert = "n1.crt";
  c.cluster.tls_key = "n1.key";
  c.cluster.tls_ca = "ca.crt";
  auto e = engine::start(earth.sys, c);
  CAF_REQUIRE(!e);
  CAF_CHECK_EQUAL(e.error().code, errc::invalid_argument);
  CAF_CHECK_NOT_EQUAL(e.error().detail.find("OpenSSL module"),
                      std::string::npos);
  c.cluster.tls_ca.clear(); // two of three
  auto e2 = engine::start(earth.sys, c);
  CAF_REQUIRE(!e2);
  CAF_CHECK_NOT_EQUAL(e2.error().detail.find("all three"), std::string::npos);
}

CAF_TEST(a cancel of a ticket claimed from another node is decided there) {
  auto c1 = node_config("n1", port_n1);
  auto c2 = node_config("n2", port_n2);
  // The pair waits 500 ms for its group commit on n2: the cancel comes first.
  c1.finalizer.batch_delay_ms = 500;
  c2.finalizer.batch_delay_ms = 500;
  start(c1, c2);
  auto alice = session(1, "alice");
  auto bob = session(2, "bob");
  settle();
  caf::anon_send(alice, join_atom_v, join_request{"voice", "ta", ""});
  settle();
  caf::anon_send(bob, join_atom_v, join_request{"voice", "tb", ""});
  settle();
  CAF_CHECK_EQUAL(phase(seen2, "bob"), "finalizing");
  CAF_CHECK_EQUAL(phase(seen1, "alice"), "queued"); // she does not know yet
  // alice's ticket is claimed by bob: in flight, owned by n2's finalizer.
  // Her local finalizer (n1) never sees the pair; asked there, it would
  // wait its cancel_wait_ms (15 s) while n2 commits the match (I3 of docs/design.md broken).
  auto rh = earth.self->request(alice, caf::infinite, cancel_atom_v);
  settle();
  advance(600);
  rh.receive(
    [&](session_state& st) {
      CAF_CHECK_EQUAL(to_string(st.phase), std::string{"cancelled"});
    },
    [&](caf::error& e) { CAF_FAIL("cancel: " << earth.sys.render(e)); });
  CAF_CHECK_EQUAL(phase(seen1, "alice"), "cancelled");
  // n2 honoured it at its first checkpoint: no match, no event; bob claimed
  // again as a new arrival and waits.
  CAF_CHECK_EQUAL(phase(seen2, "bob"), "queued");
  CAF_CHECK_EQUAL(n2->metrics()->matches.load(), 0u);
  CAF_CHECK(undelivered().empty());
  auto active = db->connect()->active_session_of("alice");
  CAF_REQUIRE(active);
  CAF_CHECK(!active->has_value());
  CAF_CHECK(events(seen1, "alice").empty());
  // Later arrivals never get alice.
  auto carol = session(1, "carol");
  settle();
  caf::anon_send(carol, join_atom_v, join_request{"voice", "tc", ""});
  advance(600);
  CAF_CHECK_EQUAL(phase(seen1, "carol"), "matched");
  CAF_CHECK_EQUAL(phase(seen2, "bob"), "matched");
  CAF_CHECK_EQUAL(phase(seen1, "alice"), "cancelled");
  CAF_CHECK_EQUAL(last(seen1, "carol").session_id,
                  last(seen2, "bob").session_id);
}

// Redis may forget (issue 15): a Redis restarted empty loses the user map,
// and every event for a user on another node would find no node and be
// marked as for a user connected nowhere. The node whose beat finds its own
// record gone maps its users again.
CAF_TEST(a node maps its users again when the store forgot them) {
  start(node_config("n1", port_n1), node_config("n2", port_n2));
  advance(1100);
  auto bob = session(2, "bob");
  settle();
  auto node_of = [this](const std::string& user) {
    auto r = queues->connect()->execute({{"HGET", cluster_keys::users, user}});
    return r.at(0).value.str;
  };
  CAF_REQUIRE_EQUAL(node_of("bob"), "n2");
  // The store forgets the cluster's records (as a Redis restarted empty).
  queues->connect()->execute(
    {{"DEL", cluster_keys::users, cluster_keys::nodes, cluster_keys::beats}});
  CAF_REQUIRE_EQUAL(node_of("bob"), "");
  advance(1100); // each node's next beat finds its own record gone
  CAF_CHECK_EQUAL(node_of("bob"), "n2");
  // What n1's router asks for an event of bob's: his node, its address,
  // live. (Before, no node: the event was marked as for a user connected
  // nowhere, and bob, connected to n2 all along, never got it.)
  std::vector<script_call> calls{
    script_call{script_id::cluster_route,
                {cluster_keys::users, cluster_keys::nodes, cluster_keys::beats},
                {"bob"}}};
  auto r = queues->connect()->run(calls).at(0);
  CAF_REQUIRE_EQUAL(r.value.elements.size(), 4u);
  CAF_CHECK_EQUAL(r.value.elements[1].str, "n2");
  CAF_CHECK_EQUAL(r.value.elements[2].str, "mars:4242");
  CAF_CHECK_EQUAL(r.value.elements[3].str, "1");
}

// Between a Redis restart and the next heartbeats nobody's node is known
// (the test above: each node maps its users again at its next beat). An
// event routed in that window is not marked as if its users were connected
// nowhere: it is delivered again after its lease, when the map is back;
// only a second delivery without a route marks it (then the user is
// connected nowhere, and a session that starts later gets it replayed).
CAF_TEST(an event for a user without a known node is delivered once more) {
  auto c1 = node_config("n1", port_n1);
  // Real time: an unmarked event is due again 50 ms later (1 ms made the
  // flush's own second fetch race the lapse: 2 of 30 runs failed).
  c1.relay.lease_ms = 50;
  auto c2 = node_config("n2", port_n2);
  c2.run_relay = false;
  start(c1, c2);
  advance(1100);
  auto alice = session(1, "alice");
  settle();
  // zed: no node in the map (forgotten, or never connected).
  auto sid = commit("alice", "zed");
  flush(earth, n1->relay());
  CAF_REQUIRE_EQUAL(events(seen1, "alice").size(), 1u);
  CAF_CHECK_EQUAL(events(seen1, "alice").front().session_id, sid);
  // Not marked (before, it was at once).
  CAF_CHECK_EQUAL(n1->metrics()->events_delivered.load(), 0u);
  std::this_thread::sleep_for(std::chrono::milliseconds(60)); // lease lapses
  flush(earth, n1->relay());
  CAF_CHECK_EQUAL(n1->metrics()->events_delivered.load(), 1u);
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  CAF_CHECK(undelivered().empty());
  CAF_CHECK_EQUAL(events(seen1, "alice").size(), 1u); // deduped by event id
  CAF_CHECK(alice != nullptr);
}

CAF_TEST(an event stays undelivered while a live node cannot be reached) {
  start(node_config("n1", port_n1), node_config("n2", port_n2));
  auto erin = session(1, "erin");
  auto alice = session(1, "alice");
  settle();
  // n3 is a live member nobody can connect to (auto_connect is off and no
  // handle was introduced); carol's session is there. n9 is no member at
  // all (crashed long ago); dave was last seen there.
  script(script_id::cluster_beat, {cluster_keys::nodes, cluster_keys::beats},
         {"n3", "nowhere:1", "60000"});
  script(script_id::cluster_user, {cluster_keys::users},
         {"set", "carol", "n3"});
  script(script_id::cluster_user, {cluster_keys::users}, {"set", "dave", "n9"});
  // dave is connected nowhere: kept for his reconnect, and marked.
  auto sid_ed = commit("erin", "dave");
  flush(earth, n1->relay());
  CAF_REQUIRE_EQUAL(events(seen1, "erin").size(), 1u);
  CAF_CHECK_EQUAL(events(seen1, "erin").front().session_id, sid_ed);
  CAF_CHECK(undelivered().empty());
  CAF_CHECK_EQUAL(n1->metrics()->events_delivered.load(), 1u);
  // carol's node is live but unreachable: alice gets it, the event is not
  // marked (delivered again once its lease lapses).
  auto sid_ac = commit("alice", "carol");
  flush(earth, n1->relay());
  CAF_REQUIRE_EQUAL(events(seen1, "alice").size(), 1u);
  CAF_CHECK_EQUAL(events(seen1, "alice").front().session_id, sid_ac);
  CAF_CHECK_EQUAL(n1->metrics()->events_delivered.load(), 1u);
  // The relay's lease (30 s of real time) hides it from other fetches.
  CAF_CHECK(undelivered().empty());
  // dave reconnects on n2: his active match is replayed there.
  auto dave = session(2, "dave");
  settle();
  CAF_REQUIRE_EQUAL(events(seen2, "dave").size(), 1u);
  CAF_CHECK_EQUAL(events(seen2, "dave").front().session_id, sid_ed);
  CAF_CHECK(erin != alice && dave != erin);
}

CAF_TEST(a node that stops leaves the membership at once) {
  start(node_config("n1", port_n1), node_config("n2", port_n2));
  advance(1100);
  auto at1 = peers_of(earth, n1->gateway());
  CAF_CHECK(at1["n2"].member);
  CAF_CHECK(at1["n2"].connected);
  // n2 stops: its record is taken out at once (not after member_ttl_ms),
  // and n1 forgets it at its next heartbeat.
  n2->stop();
  n2 = nullptr;
  advance(1100);
  CAF_CHECK_EQUAL(peers_of(earth, n1->gateway()).count("n2"), 0u);
}

CAF_TEST(a crashed node lapses and its users count as connected nowhere) {
  auto c1 = node_config("n1", port_n1);
  auto c2 = node_config("n2", port_n2);
  // Real time: an unmarked event is due again 50 ms later (1 ms made the
  // flush's own second fetch race the lapse: 2 of 30 runs failed).
  c1.relay.lease_ms = 50;
  c2.run_relay = false;
  start(c1, c2);
  advance(1100);
  auto alice = session(1, "alice");
  auto bob = session(2, "bob");
  // n2's gateway dies without leaving: its record lives until its deadline.
  // (The simulated connection stays up, so n1 notices the dead gateway when
  // it next calls it — a real crash drops the connection and n1's handle
  // at once.)
  caf::anon_send_exit(n2->gateway(), caf::exit_reason::kill);
  settle();
  CAF_CHECK(peers_of(earth, n1->gateway())["n2"].member);
  // A match of alice (n1) and bob (n2, live but unreachable): alice gets
  // it, the event is not marked.
  auto sid = commit("alice", "bob");
  flush(earth, n1->relay());
  CAF_REQUIRE_EQUAL(events(seen1, "alice").size(), 1u);
  CAF_CHECK_EQUAL(events(seen1, "alice").front().session_id, sid);
  CAF_CHECK_EQUAL(n1->metrics()->events_delivered.load(), 0u);
  CAF_CHECK(!peers_of(earth, n1->gateway())["n2"].connected);
  // Past n2's deadline (member_ttl_ms = 5 s) n1 forgets it; bob counts as
  // connected nowhere: the next delivery keeps the event for his reconnect
  // and marks it.
  advance(6000);
  CAF_CHECK_EQUAL(peers_of(earth, n1->gateway()).count("n2"), 0u);
  std::this_thread::sleep_for(std::chrono::milliseconds(60)); // lease lapses
  flush(earth, n1->relay());
  CAF_CHECK_EQUAL(n1->metrics()->events_delivered.load(), 1u);
  CAF_CHECK(n1->metrics()->relay_retries.load() >= 1u);
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  CAF_CHECK(undelivered().empty());
  CAF_CHECK_EQUAL(events(seen1, "alice").size(), 1u); // deduped by event id
  CAF_CHECK(alice != nullptr && bob != nullptr);
}

CAF_TEST(
  a cancel whose owner node died after its commit agrees with the database) {
  auto c1 = node_config("n1", port_n1);
  auto c2 = node_config("n2", port_n2);
  c1.session.route_timeout_ms = 2000;
  // Nobody hears of the match before the cancel: no relay runs (n1's would
  // deliver the event from the shared outbox).
  c1.run_relay = false;
  c2.run_relay = false;
  c2.finalizer.batch_delay_ms = 500;
  start(c1, c2);
  auto alice = session(1, "alice");
  auto bob = session(2, "bob");
  settle();
  caf::anon_send(alice, join_atom_v, join_request{"voice", "ta", ""});
  settle();
  caf::anon_send(bob, join_atom_v, join_request{"voice", "tb", ""});
  settle();
  CAF_REQUIRE_EQUAL(phase(seen2, "bob"), "finalizing");
  // n2 commits the pair, cannot settle it in the queue (its broker is gone)
  // and then dies altogether: alice's ticket stays "claimed by n2".
  caf::anon_send_exit(n2->broker(), caf::exit_reason::kill);
  settle();
  advance(600);
  auto active = db->connect()->active_session_of("alice");
  CAF_REQUIRE(active && active->has_value());
  auto sid = (*active)->session_id;
  caf::anon_send_exit(n2->finalizer(), caf::exit_reason::kill);
  caf::anon_send_exit(n2->gateway(), caf::exit_reason::kill);
  settle();
  // Alice cancels on n1. The queue names n2 as the owner; n2 cannot answer;
  // the database can: she is matched (once: `failed`, a non-answer).
  auto rh = earth.self->request(alice, caf::infinite, cancel_atom_v);
  settle();
  advance(2500);
  rh.receive(
    [&](session_state& st) {
      CAF_CHECK_EQUAL(to_string(st.phase), std::string{"matched"});
      CAF_CHECK_EQUAL(st.session_id, sid);
    },
    [&](caf::error& e) { CAF_FAIL("cancel: " << earth.sys.render(e)); });
  CAF_CHECK(events(seen1, "alice").empty()); // it was the database's word
  CAF_CHECK(bob != nullptr);
}

CAF_TEST(a cancel whose owner node died before its commit is honoured once the
           claim can no longer commit) {
  auto c1 = node_config("n1", port_n1);
  auto c2 = node_config("n2", port_n2);
  c1.session.route_timeout_ms = 2000;
  c1.run_relay = false;
  c2.run_relay = false;
  // The pair waits for its group commit on n2, and n2 dies before it.
  c2.finalizer.batch_delay_ms = 500;
  start(c1, c2);
  // The bounds the answer rests on: n2's claim window ends before the
  // claim hold (2 s in simulations), the in-memory store's commit bound is
  // 0.
  CAF_REQUIRE_EQUAL(n2->config().finalizer.claim_window_ms, 1600u);
  CAF_REQUIRE_EQUAL(n1->config().session.commit_bound_ms, 0u);
  auto alice = session(1, "alice");
  auto bob = session(2, "bob");
  settle();
  caf::anon_send(alice, join_atom_v, join_request{"voice", "ta", ""});
  settle();
  caf::anon_send(bob, join_atom_v, join_request{"voice", "tb", ""});
  settle();
  CAF_REQUIRE_EQUAL(phase(seen2, "bob"), "finalizing");
  // n2 dies with the pair uncommitted: alice's ticket stays "claimed by
  // n2" until its hold lapses.
  caf::anon_send_exit(n2->finalizer(), caf::exit_reason::kill);
  caf::anon_send_exit(n2->broker(), caf::exit_reason::kill);
  caf::anon_send_exit(n2->gateway(), caf::exit_reason::kill);
  settle();
  // Alice cancels on n1 at once. n2 cannot answer and the database shows
  // no match, but the claim is still held: no answer yet (main answered
  // `failed` here, a non-answer).
  auto rh = earth.self->request(alice, caf::infinite, cancel_atom_v);
  settle();
  advance(1000);
  CAF_CHECK_EQUAL(phase(seen1, "alice"), "queued");
  // The hold lapses 2 s after the claim, a sweep (or alice's own look)
  // removes the record, and the next look answers from the database.
  advance(3000);
  rh.receive(
    [&](session_state& st) {
      CAF_CHECK_EQUAL(to_string(st.phase), std::string{"cancelled"});
    },
    [&](caf::error& e) { CAF_FAIL("cancel: " << earth.sys.render(e)); });
  CAF_CHECK_EQUAL(phase(seen1, "alice"), "cancelled");
  auto active = db->connect()->active_session_of("alice");
  CAF_REQUIRE(active);
  CAF_CHECK(!active->has_value());
  CAF_CHECK(undelivered().empty());
  // Later arrivals never get alice.
  auto carol = session(1, "carol");
  settle();
  caf::anon_send(carol, join_atom_v, join_request{"voice", "tc", ""});
  advance(600);
  CAF_CHECK_EQUAL(phase(seen1, "carol"), "queued");
  CAF_CHECK_EQUAL(phase(seen1, "alice"), "cancelled");
  CAF_CHECK(bob != nullptr);
}

CAF_TEST(a cancel whose owner cannot be asked waits while its database cannot
           answer either) {
  auto c1 = node_config("n1", port_n1);
  auto c2 = node_config("n2", port_n2);
  c1.session.route_timeout_ms = 2000;
  c1.session.owner_wait_ms = 6000;
  c1.run_relay = false;
  c2.run_relay = false;
  c2.finalizer.batch_delay_ms = 500;
  start(c1, c2);
  auto alice = session(1, "alice");
  auto bob = session(2, "bob");
  settle();
  caf::anon_send(alice, join_atom_v, join_request{"voice", "ta", ""});
  settle();
  caf::anon_send(bob, join_atom_v, join_request{"voice", "tb", ""});
  settle();
  CAF_REQUIRE_EQUAL(phase(seen2, "bob"), "finalizing");
  caf::anon_send_exit(n2->finalizer(), caf::exit_reason::kill);
  caf::anon_send_exit(n2->broker(), caf::exit_reason::kill);
  caf::anon_send_exit(n2->gateway(), caf::exit_reason::kill);
  // n1's lifecycle actor (its way to the database) is gone too.
  caf::anon_send_exit(n1->lifecycle(), caf::exit_reason::kill);
  settle();
  auto rh = earth.self->request(alice, caf::infinite, cancel_atom_v);
  settle();
  // Long past the hold: still no answer, the database was never read.
  advance(4000);
  CAF_CHECK_EQUAL(phase(seen1, "alice"), "queued");
  // Past owner_wait_ms (and the ask of the owner under way then, at most
  // 2 * owner_recheck_ms): `failed`, naming why (never `cancelled`).
  advance(5000);
  rh.receive(
    [&](session_state& st) {
      CAF_CHECK_EQUAL(to_string(st.phase), std::string{"failed"});
      CAF_CHECK_NOT_EQUAL(st.detail.find("the database could not be asked"),
                          std::string::npos);
      CAF_MESSAGE("detail: " << st.detail);
    },
    [&](caf::error& e) { CAF_FAIL("cancel: " << earth.sys.render(e)); });
  CAF_CHECK(bob != nullptr);
}

CAF_TEST_FIXTURE_SCOPE_END()
