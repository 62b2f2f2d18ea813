// Match store conformance: committing matches. Migrations, group commit
// (one event per match, refusals, lookups, idempotent retries), closing a
// session frees its users, racing commits book a user once, and text of
// every kind arrives byte for byte through both commit paths.

#include <algorithm>
#include <chrono>
#include <iostream>
#include <optional>

#include "tests/conformance/match_store_fixture.hpp"
#include "tests/support/race.hpp"

using namespace mm;
using namespace mm::test;
using namespace mm::test::store_conformance;

namespace {

// -- migrations ---------------------------------------------------------------

TEST_P(match_store_conformance, migrations_are_idempotent) {
  EXPECT_FALSE(known_migrations().empty());
  auto again = s().apply_migrations();
  ASSERT_OK(again);
  EXPECT_TRUE(again->empty());
  auto other = factory_->connect()->apply_migrations();
  ASSERT_OK(other);
  EXPECT_TRUE(other->empty());
  // The schema works after a second run.
  auto r = s().commit_matches({req(q_, "alice", "bob")});
  ASSERT_OK(r.at(0));
}

TEST_P(match_store_conformance, concurrent_starters_apply_each_migration_once) {
  racer race;
  for (int round = 0; round < 3; ++round) {
    auto f = maker_->fresh();
    auto c1 = f->connect();
    auto c2 = f->connect();
    std::optional<outcome<std::vector<std::string>>> r1, r2;
    race.run([&] { r1 = c1->apply_migrations(); },
             [&] { r2 = c2->apply_migrations(); });
    ASSERT_OK(*r1);
    ASSERT_OK(*r2);
    std::vector<std::string> all = **r1;
    all.insert(all.end(), (*r2)->begin(), (*r2)->end());
    std::sort(all.begin(), all.end());
    EXPECT_EQ(all, known_migrations()) << "round " << round;
  }
}

// -- group commit -------------------------------------------------------------

TEST_P(match_store_conformance, group_commit_writes_one_event_per_match) {
  constexpr int n = 100;
  std::vector<match_request> batch;
  for (int i = 0; i < n; ++i)
    batch.push_back(req(q_, "a" + std::to_string(i), "b" + std::to_string(i)));
  auto res = s().commit_matches(batch);
  ASSERT_EQ(res.size(), batch.size());
  std::map<std::string, size_t> session_of_request;
  for (size_t i = 0; i < res.size(); ++i) {
    ASSERT_OK(res[i]);
    EXPECT_TRUE(res[i]->created);
    EXPECT_EQ(res[i]->status, session_status::active);
    EXPECT_EQ(res[i]->user_a, batch[i].user_a);
    EXPECT_EQ(res[i]->ticket_b, batch[i].ticket_b);
    EXPECT_GT(res[i]->created_at, 0);
    EXPECT_EQ(res[i]->session_id.size(), 36u);
    session_of_request.emplace(res[i]->session_id, i);
  }
  ASSERT_EQ(session_of_request.size(), size_t{n}) << "session ids not unique";
  auto evs = drain(s());
  ASSERT_EQ(evs.size(), size_t{n});
  std::map<std::string, int> events_per_session;
  std::set<std::string> event_ids;
  for (auto& ev : evs) {
    ++events_per_session[ev.aggregate_id];
    event_ids.insert(ev.event_id);
    EXPECT_EQ(ev.type, "match.created");
    EXPECT_EQ(ev.event_id, match_created_event_id(ev.aggregate_id));
    EXPECT_EQ(ev.delivered_at, 0);
    auto i = session_of_request.find(ev.aggregate_id);
    ASSERT_NE(i, session_of_request.end());
    const auto& rq = batch[i->second];
    auto j = nlohmann::json::parse(ev.payload);
    EXPECT_EQ(j.at("event_id"), ev.event_id);
    EXPECT_EQ(j.at("type"), "match.created");
    EXPECT_EQ(j.at("session_id"), ev.aggregate_id);
    EXPECT_EQ(j.at("queue"), q_);
    ASSERT_EQ(j.at("users").size(), 2u);
    EXPECT_EQ(j.at("users")[0].at("user"), rq.user_a);
    EXPECT_EQ(j.at("users")[0].at("ticket"), rq.ticket_a);
    EXPECT_EQ(j.at("users")[1].at("user"), rq.user_b);
    EXPECT_EQ(j.at("users")[1].at("ticket"), rq.ticket_b);
  }
  EXPECT_EQ(event_ids.size(), size_t{n});
  for (auto& [sid, count] : events_per_session)
    EXPECT_EQ(count, 1) << sid;
  for (size_t i = 0; i < batch.size(); i += 17) {
    for (auto* user : {&batch[i].user_a, &batch[i].user_b}) {
      auto a = s().active_session_of(*user);
      ASSERT_OK(a);
      ASSERT_TRUE(a->has_value()) << *user;
      EXPECT_EQ((*a)->session_id, res[i]->session_id);
      EXPECT_FALSE((*a)->created);
    }
    auto f = s().find_session(res[i]->session_id);
    ASSERT_OK(f);
    ASSERT_TRUE(f->has_value());
    EXPECT_EQ((*f)->created_at, res[i]->created_at);
    EXPECT_EQ((*f)->queue, q_);
  }
  EXPECT_TRUE(s().commit_matches({}).empty());
}

TEST_P(match_store_conformance, an_active_user_is_refused_the_rest_commits) {
  ASSERT_OK(s().commit_matches({req(q_, "u1", "u2")}).at(0));
  std::vector<match_request> batch{
    req(q_, "u3", "u4"), // fine
    req(q_, "u1", "u5"), // u1 is active since the earlier commit
    req(q_, "u6", "u7"), // fine
    req(q_, "u5", "u8"), // u5 is free: its request above was refused
    req(q_, "u9", "u6"), // u6 became active earlier in this batch
  };
  auto res = s().commit_matches(batch);
  ASSERT_EQ(res.size(), 5u);
  ASSERT_OK(res[0]);
  ASSERT_FALSE(res[1]);
  EXPECT_EQ(res[1].error().code, errc::conflict);
  EXPECT_NE(res[1].error().detail.find("'u1'"), std::string::npos)
    << res[1].error().detail;
  EXPECT_EQ(res[1].error().detail.find("'u5'"), std::string::npos);
  ASSERT_OK(res[2]);
  ASSERT_OK(res[3]);
  ASSERT_FALSE(res[4]);
  EXPECT_EQ(res[4].error().code, errc::conflict);
  EXPECT_NE(res[4].error().detail.find("'u6'"), std::string::npos)
    << res[4].error().detail;
  EXPECT_NE(res[4].error().detail.find(res[2]->session_id), std::string::npos);
  auto u5 = s().active_session_of("u5");
  ASSERT_OK(u5);
  ASSERT_TRUE(u5->has_value());
  EXPECT_EQ((*u5)->session_id, res[3]->session_id);
  auto u9 = s().active_session_of("u9");
  ASSERT_OK(u9);
  EXPECT_FALSE(u9->has_value());
  // One event per committed match: the first commit and three of the batch.
  auto evs = drain(s());
  EXPECT_EQ(evs.size(), 4u);
  std::set<std::string> sessions;
  for (auto& ev : evs)
    sessions.insert(ev.aggregate_id);
  EXPECT_EQ(sessions.size(), 4u);
  EXPECT_EQ(sessions.count(res[0]->session_id), 1u);
  EXPECT_EQ(sessions.count(res[2]->session_id), 1u);
  EXPECT_EQ(sessions.count(res[3]->session_id), 1u);
}

TEST_P(match_store_conformance, many_users_are_looked_up_at_once) {
  auto a = s().commit_matches({req(q_, "u1", "u2"), req(q_, "u3", "u4")});
  ASSERT_EQ(a.size(), 2u);
  ASSERT_OK(a[0]);
  ASSERT_OK(a[1]);
  ASSERT_OK(s().close_session(a[1]->session_id, "done"));
  // In order, a user asked twice answered twice, a bad id failing alone.
  std::vector<std::string> users{"u1", "nobody", "u4", "", "u2", "u1"};
  auto res = s().active_sessions_of(users);
  ASSERT_EQ(res.size(), users.size());
  ASSERT_OK(res[0]);
  ASSERT_TRUE(res[0]->has_value());
  EXPECT_EQ((*res[0])->session_id, a[0]->session_id);
  ASSERT_OK(res[1]);
  EXPECT_FALSE(res[1]->has_value());
  ASSERT_OK(res[2]);
  EXPECT_FALSE(res[2]->has_value()) << "a closed session is not active";
  ASSERT_FALSE(res[3]);
  EXPECT_EQ(res[3].error().code, errc::invalid_argument);
  ASSERT_OK(res[4]);
  ASSERT_TRUE(res[4]->has_value());
  EXPECT_EQ((*res[4])->session_id, a[0]->session_id);
  EXPECT_EQ((*res[4])->user_b, "u2");
  ASSERT_OK(res[5]);
  ASSERT_TRUE(res[5]->has_value());
  EXPECT_EQ((*res[5])->session_id, a[0]->session_id);
  // The same as one at a time.
  for (size_t i = 0; i < users.size(); ++i) {
    auto one = s().active_session_of(users[i]);
    ASSERT_EQ(static_cast<bool>(one), static_cast<bool>(res[i])) << users[i];
    if (one) {
      EXPECT_EQ(one->has_value(), res[i]->has_value()) << users[i];
    }
  }
  EXPECT_TRUE(s().active_sessions_of({}).empty());
}

TEST_P(match_store_conformance, malformed_requests_are_refused_alone) {
  std::vector<match_request> batch;
  batch.push_back(req(q_, "self", "self"));
  batch.push_back(req("", "p1", "p2"));
  batch.push_back(req(q_, "ok1", "ok2"));
  auto nul = req(q_, "n1", "n2");
  nul.attrs_a = std::string{"x\0y", 3};
  batch.push_back(nul);
  batch.push_back(req(q_, "bad\xff", "n3"));
  batch.push_back(req(q_, "ctl\n", "n4"));
  auto long_user = req(q_, std::string(129, 'x'), "n5");
  batch.push_back(long_user);
  auto no_ticket = req(q_, "n6", "n7");
  no_ticket.ticket_b.clear();
  batch.push_back(no_ticket);
  auto res = s().commit_matches(batch);
  ASSERT_EQ(res.size(), batch.size());
  for (size_t i = 0; i < res.size(); ++i) {
    if (i == 2) {
      ASSERT_OK(res[i]);
      continue;
    }
    ASSERT_FALSE(res[i]) << i;
    EXPECT_EQ(res[i].error().code, errc::invalid_argument) << i;
    EXPECT_FALSE(res[i].error().detail.empty());
  }
  EXPECT_EQ(drain(s()).size(), 1u);
  EXPECT_EQ(s().active_session_of("").error().code, errc::invalid_argument);
  EXPECT_EQ(s().close_session("x", std::string(257, 'r')).error().code,
            errc::invalid_argument);
  EXPECT_EQ(s().fetch_undelivered(0).error().code, errc::invalid_argument);
  EXPECT_EQ(s().fetch_undelivered(10, 0).error().code, errc::invalid_argument);
}

TEST_P(match_store_conformance, a_commit_is_idempotent_per_request) {
  auto first = s().commit_matches({req(q_, "alice", "bob")});
  ASSERT_OK(first.at(0));
  EXPECT_TRUE(first[0]->created);
  // A retry (e.g. after a lost acknowledgement), also with the sides
  // swapped, and twice within one batch.
  auto swapped = req(q_, "bob", "alice");
  auto again
    = s().commit_matches({req(q_, "alice", "bob"), swapped,
                          req(q_, "carol", "dave"), req(q_, "dave", "carol")});
  ASSERT_EQ(again.size(), 4u);
  for (int i = 0; i < 2; ++i) {
    ASSERT_OK(again[i]);
    EXPECT_FALSE(again[i]->created);
    EXPECT_EQ(again[i]->session_id, first[0]->session_id);
    EXPECT_EQ(again[i]->user_a, "alice");
  }
  ASSERT_OK(again[2]);
  EXPECT_TRUE(again[2]->created);
  ASSERT_OK(again[3]);
  EXPECT_FALSE(again[3]->created);
  EXPECT_EQ(again[3]->session_id, again[2]->session_id);
  EXPECT_EQ(drain(s()).size(), 2u);
}

// -- close --------------------------------------------------------------------

TEST_P(match_store_conformance, a_closed_session_frees_its_users) {
  auto first = s().commit_matches({req(q_, "alice", "bob")});
  ASSERT_OK(first.at(0));
  auto sid = first[0]->session_id;
  auto busy = s().commit_matches({req(q_, "alice", "carol", "2")});
  ASSERT_FALSE(busy.at(0));
  EXPECT_EQ(busy[0].error().code, errc::conflict);
  auto c = s().close_session(sid, "cancelled");
  ASSERT_OK(c);
  EXPECT_TRUE(*c);
  auto c2 = factory_->connect()->close_session(sid, "again");
  ASSERT_OK(c2);
  EXPECT_FALSE(*c2);
  auto f = s().find_session(sid);
  ASSERT_OK(f);
  ASSERT_TRUE(f->has_value());
  EXPECT_EQ((*f)->status, session_status::closed);
  EXPECT_EQ((*f)->close_reason, "cancelled");
  EXPECT_GE((*f)->closed_at, (*f)->created_at);
  for (auto user : {"alice", "bob"}) {
    auto a = s().active_session_of(user);
    ASSERT_OK(a);
    EXPECT_FALSE(a->has_value()) << user;
  }
  auto unknown = s().close_session("no-such-session", "x");
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error().code, errc::not_found);
  auto missing = s().find_session("no-such-session");
  ASSERT_OK(missing);
  EXPECT_FALSE(missing->has_value());
  // A retry of the closed pair does not revive it.
  auto replay = s().commit_matches({req(q_, "alice", "bob")});
  ASSERT_OK(replay.at(0));
  EXPECT_FALSE(replay[0]->created);
  EXPECT_EQ(replay[0]->status, session_status::closed);
  auto bob = s().active_session_of("bob");
  ASSERT_OK(bob);
  EXPECT_FALSE(bob->has_value());
  // Both can be matched again, with new tickets.
  auto next = s().commit_matches(
    {req(q_, "alice", "carol", "2"), req(q_, "bob", "dave", "2")});
  ASSERT_OK(next.at(0));
  ASSERT_OK(next.at(1));
  EXPECT_TRUE(next[0]->created);
  EXPECT_NE(next[0]->session_id, sid);
  auto a = s().active_session_of("alice");
  ASSERT_OK(a);
  ASSERT_TRUE(a->has_value());
  EXPECT_EQ((*a)->session_id, next[0]->session_id);
  // The close wrote no event: one per created session only.
  auto evs = drain(s());
  EXPECT_EQ(evs.size(), 3u);
  for (auto& ev : evs)
    EXPECT_EQ(ev.type, "match.created");
}

// -- races --------------------------------------------------------------------

TEST_P(match_store_conformance, racing_commits_book_a_shared_user_once) {
  constexpr int rounds = 1000;
  auto c1 = factory_->connect();
  auto c2 = factory_->connect();
  racer race;
  int violations = 0;
  int first_wins = 0;
  for (int i = 0; i < rounds; ++i) {
    auto k = std::to_string(i);
    auto x = "x" + k; // wanted by both
    std::vector<match_request> b1{req(q_, "p" + k, "q" + k),
                                  req(q_, x, "a" + k)};
    std::vector<match_request> b2{req(q_, "b" + k, x),
                                  req(q_, "r" + k, "s" + k)};
    std::vector<outcome<match_record>> r1, r2;
    race.run([&] { r1 = c1->commit_matches(b1); },
             [&] { r2 = c2->commit_matches(b2); });
    if (r1.size() != 2 || r2.size() != 2 || !r1[0] || !r2[1]) {
      ++violations; // the unshared matches must always commit
      continue;
    }
    int wins = (r1[1] ? 1 : 0) + (r2[0] ? 1 : 0);
    if (wins != 1) {
      ++violations;
      continue;
    }
    const auto& loser = r1[1] ? r2[0] : r1[1];
    if (loser.error().code != errc::conflict
        || loser.error().detail.find("'" + x + "'") == std::string::npos)
      ++violations;
    if (r1[1])
      ++first_wins;
  }
  EXPECT_EQ(violations, 0);
  // Every shared user is in exactly one active session, and there is one
  // event per committed match: 3 per round.
  auto evs = drain(s());
  EXPECT_EQ(evs.size(), size_t{3 * rounds});
  std::set<std::string> sessions;
  for (auto& ev : evs)
    sessions.insert(ev.aggregate_id);
  EXPECT_EQ(sessions.size(), evs.size());
  for (int i = 0; i < rounds; i += 97) {
    auto a = s().active_session_of("x" + std::to_string(i));
    ASSERT_OK(a);
    EXPECT_TRUE(a->has_value());
  }
  std::cout << "[ info     ] " << GetParam() << ": the first connection won "
            << first_wins << " of " << rounds << " rounds\n";
}

// Two batches that both have a refused request (so both go one by one) and
// want two shared users in opposite order: the worst case for lock order.
TEST_P(match_store_conformance, crossing_batches_book_each_user_once) {
  constexpr int rounds = 3; // a deadlock costs PostgreSQL's deadlock_timeout
  auto c1 = factory_->connect();
  auto c2 = factory_->connect();
  racer race;
  int violations = 0;
  int contended = 0;
  for (int i = 0; i < rounds; ++i) {
    auto k = std::to_string(i);
    auto x = "x" + k;
    auto y = "y" + k;
    for (auto& r : s().commit_matches({req(q_, "busy1-" + k, "z1-" + k),
                                       req(q_, "busy2-" + k, "z2-" + k)}))
      ASSERT_OK(r);
    std::vector<match_request> b1{req(q_, "busy1-" + k, "e" + k),
                                  req(q_, x, "a" + k), req(q_, y, "b" + k)};
    std::vector<match_request> b2{req(q_, "busy2-" + k, "f" + k),
                                  req(q_, y, "c" + k), req(q_, x, "d" + k)};
    std::vector<outcome<match_record>> r1, r2;
    race.run([&] { r1 = c1->commit_matches(b1); },
             [&] { r2 = c2->commit_matches(b2); });
    ASSERT_EQ(r1.size(), 3u);
    ASSERT_EQ(r2.size(), 3u);
    for (auto* rs : {&r1, &r2}) {
      for (auto& r : *rs) {
        if (!r && r.error().code != errc::conflict) {
          ++violations;
          ADD_FAILURE() << to_string(r.error().code) << ": "
                        << r.error().detail;
        }
        if (!r && r.error().detail.find("concurrent") != std::string::npos)
          ++contended;
      }
    }
    if (r1[0] || r2[0])
      ++violations; // busy users stay refused
    // x: b1[1] or b2[2]; y: b1[2] or b2[1] — each booked exactly once.
    if ((r1[1] ? 1 : 0) + (r2[2] ? 1 : 0) != 1)
      ++violations;
    if ((r1[2] ? 1 : 0) + (r2[1] ? 1 : 0) != 1)
      ++violations;
    for (auto* user : {&x, &y}) {
      auto a = s().active_session_of(*user);
      ASSERT_OK(a);
      if (!a->has_value())
        ++violations;
    }
  }
  EXPECT_EQ(violations, 0);
  std::cout << "[ info     ] " << GetParam() << ": " << contended
            << " request(s) refused after a deadlock\n";
  // Events: 2 pre-commits + 2 per batch pair (x and y) per round.
  EXPECT_EQ(drain(s()).size(), size_t{4 * rounds});
}

TEST_P(match_store_conformance, group_commit_throughput) {
  constexpr int batches = 50;
  constexpr int per_batch = 100;
  auto t0 = std::chrono::steady_clock::now();
  int created = 0;
  for (int b = 0; b < batches; ++b) {
    std::vector<match_request> batch;
    for (int i = 0; i < per_batch; ++i) {
      auto k = std::to_string(b * per_batch + i);
      batch.push_back(req(q_, "g" + k, "h" + k));
    }
    for (auto& r : s().commit_matches(batch)) {
      ASSERT_OK(r);
      created += r->created ? 1 : 0;
    }
  }
  auto secs
    = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
        .count();
  EXPECT_EQ(created, batches * per_batch);
  EXPECT_EQ(drain(s()).size(), size_t{batches * per_batch});
  auto per_s = created / secs;
  // A match writes 4 rows: session, two members, one outbox event.
  std::cout << "[ info     ] " << GetParam() << ": " << batches
            << " batches of " << per_batch << ": "
            << static_cast<int64_t>(per_s) << " matches/s ("
            << static_cast<int64_t>(4 * per_s) << " rows/s)\n";
  RecordProperty("matches_per_second", static_cast<int>(per_s));
}

// The PostgreSQL store sends a batch as binary arrays (literals before):
// quotes, backslashes, braces, commas, blanks (also leading and trailing)
// and the word NULL must arrive as written, in every column (mutual pairs
// too), through the batch statement and through the one-by-one fallback.
TEST_P(match_store_conformance, text_arrives_byte_for_byte) {
  const std::string odd = "a\"b\\c{d},e NULL \\\" }{ \u00e9";
  // Requests with odd text everywhere; `tag` keeps the rounds apart.
  auto odd_batch = [&](const std::string& tag) {
    std::vector<match_request> b;
    b.push_back(req(q_, tag + "q\"1", tag + "q\\2"));
    b.back().attrs_a = odd;
    b.back().attrs_b = "NULL";
    b.push_back(req(q_ + ",{x}", " " + tag + "q3 ", tag + "q 4", " t{1} "));
    b.back().attrs_a = "";
    b.back().attrs_b = odd + odd;
    b.push_back(mutual_req(tag + "m\"1,", tag + "m\\2}"));
    return b;
  };
  std::vector<match_request> all;
  // Round 1: the batch statement. Round 2: a request of a user already
  // in a session makes the database refuse the batch, and every request
  // goes through the fallback, one element per array.
  auto blocker = s().commit_matches({req(q_, "busy", "busy2")});
  ASSERT_OK(blocker[0]);
  for (int round = 1; round <= 2; ++round) {
    auto batch = odd_batch("r" + std::to_string(round));
    if (round == 2)
      batch.insert(batch.begin() + 1, req(q_, "busy", "free1"));
    auto res = s().commit_matches(batch);
    ASSERT_EQ(res.size(), batch.size());
    for (size_t i = 0; i < res.size(); ++i) {
      if (batch[i].user_a == "busy") {
        ASSERT_FALSE(res[i]);
        EXPECT_EQ(res[i].error().code, errc::conflict);
        continue;
      }
      ASSERT_OK(res[i]);
      EXPECT_TRUE(res[i]->created) << i;
      all.push_back(batch[i]);
    }
  }
  ASSERT_EQ(all.size(), 6u);
  EXPECT_EQ(drain(s()).size(), 7u); // with the blocker's
  auto db = pg_of(GetParam(), *maker_);
  if (!db)
    return;
  // Read back what the server stored, compared with what was sent.
  std::set<std::vector<std::string>> want;
  std::set<std::vector<std::string>> want_pairs;
  for (const auto& r : all) {
    want.insert({r.queue, r.user_a, r.ticket_a, r.attrs_a, r.user_b, r.ticket_b,
                 r.attrs_b, match_key(r)});
    if (r.mutual) {
      auto p = pair_bounds(r.user_a, r.user_b);
      want_pairs.insert({p.first, p.second});
    }
  }
  auto rows = db->query("SELECT queue, user_a, ticket_a, attrs_a, user_b,"
                        " ticket_b, attrs_b, match_key FROM match_sessions"
                        " WHERE user_a <> 'busy'");
  EXPECT_EQ(std::set<std::vector<std::string>>(rows.begin(), rows.end()), want);
  auto pairs = db->query("SELECT pair_min, pair_max FROM mutual_matches");
  EXPECT_EQ(std::set<std::vector<std::string>>(pairs.begin(), pairs.end()),
            want_pairs);
  // Stored as written, no jsonb parsed (0008_text_payloads.sql).
  EXPECT_EQ(db->count("SELECT count(*) FROM outbox WHERE payload IS NULL"
                      " AND payload_text::jsonb->>'session_id' = aggregate_id"
                      " AND event_id = 'match.created:' || aggregate_id"),
            7);
  // Members as sent: the pair's users, inactive for the mutual ones.
  EXPECT_EQ(db->count("SELECT count(*) FROM session_members m JOIN"
                      " match_sessions s ON s.id = m.session_id WHERE"
                      " m.user_id IN (s.user_a, s.user_b)"),
            14);
  EXPECT_EQ(db->count("SELECT count(*) FROM session_members WHERE"
                      " user_id IN ('r1m\"1,', 'r1m\\2}', 'r2m\"1,',"
                      " 'r2m\\2}') AND NOT active"),
            4);
}

} // namespace
