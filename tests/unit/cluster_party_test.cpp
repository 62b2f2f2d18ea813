// A party whose members are on two nodes (docs/groups.md, "Parties across
// nodes"), simulated deterministically (tests/unit/cluster_fixture.hpp):
// the party lives on n1, a member on n2 joins, leaves and asks through
// n2's hub and the gateways; its events reach it on n2, n2's registry
// follows it, and the party's match commits with members of both nodes.
// A party event that does not come from its party's node is refused.

#define CAF_SUITE cluster_party
#define FAIL(msg) CAF_FAIL(msg) // Debian's dsl.hpp calls an undefined FAIL
#include <caf/test/io_dsl.hpp>

#include "tests/unit/cluster_fixture.hpp"

#include <nlohmann/json.hpp>

namespace {

/// 2 vs 2 on queue "duo", parties of up to 2.
std::shared_ptr<const rule_book> duo_rules() {
  auto book = parse_rule_book(R"({"duo": {
    "shape": {"players": {"min": 4, "max": 4},
              "teams": {"count": 2, "size": 2}, "party_max": 2}}})");
  if (!book)
    throw std::runtime_error(book.error().detail);
  return std::make_shared<const rule_book>(std::move(*book));
}

struct party_fixture : fixture {
  void start_both() {
    auto c1 = node_config("n1", port_n1);
    auto c2 = node_config("n2", port_n2);
    c1.rules = c2.rules = duo_rules();
    start(c1, c2);
    advance(1100); // both see each other as members
  }

  /// `xs...` to the party hub of node 1 or 2, from that planet.
  template <class... Ts>
  caf::expected<party_info> hub(int node, Ts&&... xs) {
    auto& p = node == 1 ? earth : mars;
    auto h = (node == 1 ? n1 : n2)->parties();
    auto rh = p.self->request(h, caf::infinite, std::forward<Ts>(xs)...);
    advance(50);
    caf::expected<party_info> out{caf::sec::request_timeout};
    rh.receive([&](party_info& x) { out = std::move(x); },
               [&](caf::error& e) { out = std::move(e); });
    return out;
  }

  caf::expected<party_info>
  queue(int node, const std::string& user, const std::string& party,
        const std::string& ticket, std::vector<std::string> members) {
    party_queue_request r;
    r.user = user;
    r.party = party;
    r.queue = "duo";
    r.ticket = ticket;
    for (auto& m : members)
      r.attrs[m] = "{}";
    return hub(node, join_atom_v, std::move(r));
  }

  std::string session_of(const std::string& u) {
    auto a = db->connect()->active_session_of(u);
    CAF_REQUIRE(a);
    return a->has_value() ? (*a)->session_id : "";
  }

  /// The `members` of the last party.updated `u` got on node 2.
  std::vector<std::string> members_seen_on_2(const std::string& u) {
    std::vector<std::string> out;
    for (auto& ev : events(seen2, u))
      if (ev.type == party_updated_event)
        out = nlohmann::json::parse(ev.payload)["members"]
                .get<std::vector<std::string>>();
    return out;
  }

  size_t matches_seen(const record_ptr& r, const std::string& u) {
    size_t n = 0;
    for (auto& ev : events(r, u))
      n += ev.type == "match.created" ? 1 : 0;
    return n;
  }
};

errc code_of(const caf::error& err) {
  return static_cast<errc>(err.code());
}

} // namespace

CAF_TEST_FIXTURE_SCOPE(cluster_party_tests, party_fixture)

CAF_TEST(a party plays with a member on another node) {
  start_both();
  session(1, "alice");
  session(2, "bob");
  session(1, "carol");
  session(2, "dave");
  auto p = hub(1, create_atom_v, std::string{"alice"});
  CAF_REQUIRE(p);
  CAF_CHECK_EQUAL(party_node(p->party), "n1");
  // bob, on n2, joins the party n1 holds: n2 hands it over.
  auto j = hub(2, join_atom_v, std::string{"bob"}, p->party, p->code);
  if (!j)
    CAF_FAIL("join through n2: " << mars.sys.render(j.error()));
  CAF_CHECK_EQUAL(j->members, (std::vector<std::string>{"alice", "bob"}));
  CAF_CHECK_EQUAL(n2->party_members()->party_of("bob"), p->party);
  CAF_CHECK_EQUAL(n1->party_members()->party_of("bob"), p->party);
  // Its events reach bob on n2.
  CAF_CHECK_EQUAL(members_seen_on_2("bob"),
                  (std::vector<std::string>{"alice", "bob"}));
  // A wrong code through n2 is refused there and changes nothing.
  auto bad = hub(2, join_atom_v, std::string{"dave"}, p->party,
                 std::string{"wrongcode0"});
  CAF_REQUIRE(!bad);
  CAF_CHECK_EQUAL(code_of(bad.error()), errc::forbidden);
  CAF_CHECK_EQUAL(n2->party_members()->party_of("dave"), "");
  // bob, in a party, cannot make one of his own on n2.
  auto own = hub(2, create_atom_v, std::string{"bob"});
  CAF_REQUIRE(!own);
  CAF_CHECK_EQUAL(code_of(own.error()), errc::in_party);
  // Only the leader queues (asked from n2: refused by the party on n1).
  auto not_leader = queue(2, "bob", p->party, "pt", {"alice", "bob"});
  CAF_REQUIRE(!not_leader);
  auto q = queue(1, "alice", p->party, "pt", {"alice", "bob"});
  CAF_REQUIRE(q);
  // Two singles, one per node, complete the 2-vs-2.
  CAF_REQUIRE(queue(1, "carol", "", "tc", {"carol"}));
  CAF_REQUIRE(queue(2, "dave", "", "td", {"dave"}));
  advance(500);
  auto sid = session_of("alice");
  CAF_REQUIRE(!sid.empty());
  for (auto u : {"bob", "carol", "dave"})
    CAF_CHECK_EQUAL(session_of(u), sid);
  CAF_CHECK_EQUAL(matches_seen(seen2, "bob"), 1u);
  CAF_CHECK_EQUAL(matches_seen(seen1, "alice"), 1u);
  // bob asks through n2: the party plays.
  auto st = hub(2, state_atom_v, std::string{"bob"}, p->party);
  CAF_REQUIRE(st);
  CAF_CHECK_EQUAL(st->phase, party_phase::matched);
  CAF_CHECK_EQUAL(st->session_id, sid);
  // bob leaves through n2: out of the party on both nodes.
  auto left = hub(2, leave_atom_v, std::string{"bob"}, p->party);
  CAF_REQUIRE(left);
  CAF_CHECK_EQUAL(left->members, (std::vector<std::string>{"alice"}));
  CAF_CHECK_EQUAL(n2->party_members()->party_of("bob"), "");
  CAF_CHECK_EQUAL(n1->party_members()->party_of("bob"), "");
  auto gone = hub(2, state_atom_v, std::string{"bob"}, p->party);
  CAF_REQUIRE(!gone);
  CAF_CHECK_EQUAL(code_of(gone.error()), errc::forbidden);
}

CAF_TEST(the member node follows the party and drops what its node forgot) {
  start_both();
  session(1, "alice");
  session(2, "bob");
  auto p = hub(1, create_atom_v, std::string{"alice"});
  CAF_REQUIRE(p);
  CAF_REQUIRE(hub(2, join_atom_v, std::string{"bob"}, p->party, p->code));
  CAF_REQUIRE_EQUAL(n2->party_members()->party_of("bob"), p->party);
  // bob's leave reaches n1 another way (a request to n1): the party's
  // event tells n2, which takes bob out there too.
  CAF_REQUIRE(hub(1, leave_atom_v, std::string{"bob"}, p->party));
  CAF_CHECK_EQUAL(members_seen_on_2("bob"),
                  (std::vector<std::string>{"alice"}));
  CAF_CHECK_EQUAL(n2->party_members()->party_of("bob"), "");
  // An entry on n2 for a party n1 does not hold (as after n1 restarted)
  // does not keep bob out of parties: dropped at his next create.
  auto ghost = "p00000000000000aa@n1";
  CAF_REQUIRE(n2->party_members()->enter("bob", ghost));
  auto own = hub(2, create_atom_v, std::string{"bob"});
  CAF_REQUIRE(own);
  CAF_CHECK_EQUAL(party_node(own->party), "n2");
  CAF_CHECK_EQUAL(n2->party_members()->party_of("bob"), own->party);
}

CAF_TEST(a party event that does not come from its node is refused) {
  start_both();
  session(2, "bob");
  settle();
  match_event ev;
  ev.type = party_updated_event;
  ev.user_a = "bob";
  // Sent from earth (n1's planet), for a party n3 would hold.
  ev.event_id = "party:p0123456789abcdef@n3:1";
  ev.payload = R"({"party": "p0123456789abcdef@n3", "members": ["bob"]})";
  deliver_from_earth("bob", ev);
  CAF_CHECK(events(seen2, "bob").empty());
  CAF_CHECK_EQUAL(n2->party_members()->party_of("bob"), "");
  // Naming n1, from n1's node: taken (the link's handle says so).
  ev.event_id = "party:p0123456789abcdef@n1:1";
  ev.payload = R"({"party": "p0123456789abcdef@n1", "members": ["bob"]})";
  deliver_from_earth("bob", ev);
  CAF_CHECK_EQUAL(events(seen2, "bob").size(), 1u);
  CAF_CHECK_EQUAL(n2->party_members()->party_of("bob"), "p0123456789abcdef@n1");
}

CAF_TEST_FIXTURE_SCOPE_END()
