// One conformance suite for every match store: the same tests run against the
// in-memory store and against a private PostgreSQL (CTest fixture). Each test
// gets an empty data set: a new memory factory, or a new database.

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <unistd.h>

#include <libpq-fe.h>
#include <nlohmann/json.hpp>

#include "persistence/matchdb/match_store.hpp"
#include "tests/support/pg_client.hpp"
#include "tests/support/race.hpp"
#include "tests/support/test_env.hpp"

using namespace mm;
using namespace mm::test;

namespace {

#define ASSERT_OK(x) \
  ASSERT_TRUE(x) << to_string((x).error().code) << ": " << (x).error().detail

#define EXPECT_OK(x) \
  EXPECT_TRUE(x) << to_string((x).error().code) << ": " << (x).error().detail

using rows = std::vector<std::vector<std::string>>;

using pg_admin = test::pg_client;

std::string unique_name(const std::string& prefix) {
  static std::atomic<int> n{0};
  return prefix + std::to_string(getpid()) + "_" + std::to_string(n++);
}

/// Makes empty data sets of one kind and drops the databases afterwards.
class store_maker {
 public:
  explicit store_maker(std::string kind) : kind_(std::move(kind)) {}

  ~store_maker() {
    for (auto& db : dbs_) {
      try {
        admin().query("DROP DATABASE IF EXISTS " + db + " WITH (FORCE)");
      } catch (const std::exception& e) {
        ADD_FAILURE() << e.what();
      }
    }
  }

  /// A new, empty data set (no migrations applied).
  std::shared_ptr<match_store_factory> fresh(pg_options opts = {}) {
    if (kind_ == "memory")
      return make_memory_match_store();
    if (kind_ != "postgres")
      throw std::runtime_error("unknown store " + kind_);
    auto db = unique_name("mm_t");
    admin().query("CREATE DATABASE " + db);
    dbs_.push_back(db);
    last_db_ = db;
    opts.conninfo = pg_conninfo(db) + " " + opts.conninfo;
    return make_pg_match_store(opts);
  }

  /// The database of the last `fresh` (postgres only).
  const std::string& last_db() const {
    return last_db_;
  }

  pg_admin& admin() {
    if (!admin_)
      admin_ = std::make_unique<pg_admin>(pg_conninfo());
    return *admin_;
  }

 private:
  std::string kind_;
  std::vector<std::string> dbs_;
  std::string last_db_;
  std::unique_ptr<pg_admin> admin_;
};

/// A request with tickets derived from the users and `tag`.
match_request req(const std::string& q, const std::string& a,
                  const std::string& b, const std::string& tag = "1") {
  match_request r;
  r.queue = q;
  r.user_a = a;
  r.ticket_a = "t-" + a + "-" + tag;
  r.attrs_a = "{\"lang\":\"de\"}";
  r.user_b = b;
  r.ticket_b = "t-" + b + "-" + tag;
  r.attrs_b = "";
  return r;
}

/// Everything undelivered, leased for long enough to finish the test.
std::vector<outbox_event> drain(match_store& s) {
  auto evs = s.fetch_undelivered(10000, 600000);
  if (!evs)
    throw std::runtime_error("fetch failed: " + evs.error().detail);
  return *evs;
}

class match_store_conformance : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    maker_ = std::make_unique<store_maker>(GetParam());
    factory_ = maker_->fresh();
    store_ = factory_->connect();
    auto m = store_->apply_migrations();
    ASSERT_OK(m);
    EXPECT_EQ(*m, known_migrations());
  }

  void TearDown() override {
    store_.reset();
    factory_.reset();
    maker_.reset(); // drops the databases: connections must be gone
  }

  match_store& s() {
    return *store_;
  }

  /// PostgreSQL: the tables hold exactly `sessions` sessions, two members
  /// each and one outbox row each — rows of a withdrawn request would show
  /// here whatever their state. The memory store has nothing to count.
  void expect_rows(int64_t sessions) {
    if (GetParam() != "postgres")
      return;
    pg_admin db{pg_conninfo(maker_->last_db())};
    EXPECT_EQ(db.count("SELECT count(*) FROM match_sessions"), sessions);
    EXPECT_EQ(db.count("SELECT count(*) FROM session_members"), 2 * sessions);
    EXPECT_EQ(db.count("SELECT count(*) FROM outbox"), sessions);
  }

  /// Nothing of request `r` is in the store: neither user is in an active
  /// session with r's tickets, and (PostgreSQL) no session, member or
  /// outbox row names one of r's tickets, active or not.
  void expect_no_trace_of(const match_request& r) {
    for (auto* user : {&r.user_a, &r.user_b}) {
      auto a = s().active_session_of(*user);
      ASSERT_OK(a);
      if (a->has_value()) {
        EXPECT_NE((*a)->ticket_a, r.ticket_a) << *user;
        EXPECT_NE((*a)->ticket_b, r.ticket_b) << *user;
      }
    }
    if (GetParam() != "postgres")
      return;
    pg_admin db{pg_conninfo(maker_->last_db())};
    auto tickets = "('" + r.ticket_a + "', '" + r.ticket_b + "')";
    EXPECT_EQ(db.count("SELECT count(*) FROM match_sessions WHERE ticket_a IN "
                       + tickets + " OR ticket_b IN " + tickets),
              0);
    EXPECT_EQ(db.count("SELECT count(*) FROM session_members m"
                       " JOIN match_sessions s ON s.id = m.session_id"
                       " WHERE s.ticket_a IN "
                       + tickets + " OR s.ticket_b IN " + tickets),
              0);
    for (auto* t : {&r.ticket_a, &r.ticket_b})
      EXPECT_EQ(db.count("SELECT count(*) FROM outbox WHERE payload::text"
                         " LIKE '%\""
                         + *t + "\"%'"),
                0);
  }

  std::unique_ptr<store_maker> maker_;
  std::shared_ptr<match_store_factory> factory_;
  std::unique_ptr<match_store> store_;
  const std::string q_ = "voice";
};

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

// -- outbox -------------------------------------------------------------------

TEST_P(match_store_conformance, fetch_and_mark_deliver_each_event_once) {
  std::vector<match_request> batch;
  for (int i = 0; i < 10; ++i)
    batch.push_back(req(q_, "x" + std::to_string(i), "y" + std::to_string(i)));
  for (auto& r : s().commit_matches(batch))
    ASSERT_OK(r);
  auto first = s().fetch_undelivered(4, 60000);
  ASSERT_OK(first);
  ASSERT_EQ(first->size(), 4u);
  for (size_t i = 0; i < first->size(); ++i) {
    const auto& ev = (*first)[i];
    if (i > 0) {
      EXPECT_LT((*first)[i - 1].seq, ev.seq);
    }
    EXPECT_EQ(ev.attempts, 1);
    EXPECT_GE(ev.locked_until, ev.created_at + 59000);
    EXPECT_EQ(ev.delivered_at, 0);
  }
  auto rest = factory_->connect()->fetch_undelivered(100, 60000);
  ASSERT_OK(rest);
  ASSERT_EQ(rest->size(), 6u);
  EXPECT_LT(first->back().seq, rest->front().seq);
  auto none = s().fetch_undelivered(100);
  ASSERT_OK(none);
  EXPECT_TRUE(none->empty());
  std::vector<std::string> ids;
  for (auto& ev : *first)
    ids.push_back(ev.event_id);
  auto m = s().mark_delivered(ids);
  ASSERT_OK(m);
  EXPECT_EQ(*m, 4u);
  auto m2 = s().mark_delivered(ids);
  ASSERT_OK(m2);
  EXPECT_EQ(*m2, 0u);
  auto m3 = s().mark_delivered({"match.created:nope", ""});
  ASSERT_OK(m3);
  EXPECT_EQ(*m3, 0u);
  EXPECT_EQ(*s().mark_delivered({}), 0u);
  ids.clear();
  for (auto& ev : *rest)
    ids.push_back(ev.event_id);
  ids.push_back(ids.front()); // duplicates count once
  auto m4 = s().mark_delivered(ids);
  ASSERT_OK(m4);
  EXPECT_EQ(*m4, 6u);
  // Delivered events never come back, not even after a short lease.
  auto after = s().fetch_undelivered(100, 1);
  ASSERT_OK(after);
  EXPECT_TRUE(after->empty());
}

TEST_P(match_store_conformance, an_expired_lease_hands_the_event_out_again) {
  for (auto& r : s().commit_matches(
         {req(q_, "a", "b"), req(q_, "c", "d"), req(q_, "e", "f")}))
    ASSERT_OK(r);
  auto leased = s().fetch_undelivered(10, 300);
  ASSERT_OK(leased);
  ASSERT_EQ(leased->size(), 3u);
  auto held = factory_->connect()->fetch_undelivered(10, 300);
  ASSERT_OK(held);
  EXPECT_TRUE(held->empty());
  // The relay that leased them "died": after the lease they come back.
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  auto again = factory_->connect()->fetch_undelivered(10, 60000);
  ASSERT_OK(again);
  ASSERT_EQ(again->size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ((*again)[i].event_id, (*leased)[i].event_id);
    EXPECT_EQ((*again)[i].attempts, 2);
  }
  std::vector<std::string> ids;
  for (auto& ev : *again)
    ids.push_back(ev.event_id);
  auto m = s().mark_delivered(ids);
  ASSERT_OK(m);
  EXPECT_EQ(*m, 3u);
}

TEST_P(match_store_conformance, concurrent_fetchers_never_share_a_lease) {
  constexpr int n = 600;
  for (int b = 0; b < n / 100; ++b) {
    std::vector<match_request> batch;
    for (int i = 0; i < 100; ++i) {
      auto k = std::to_string(b * 100 + i);
      batch.push_back(req(q_, "l" + k, "r" + k));
    }
    for (auto& r : s().commit_matches(batch))
      ASSERT_OK(r);
  }
  auto c1 = factory_->connect();
  auto c2 = factory_->connect();
  std::map<std::string, int> seen;
  int violations = 0;
  int errors = 0;
  int rounds = 0;
  racer race;
  for (; rounds < 10000; ++rounds) {
    std::vector<outbox_event> e1, e2;
    race.run(
      [&] {
        auto r = c1->fetch_undelivered(5, 60000);
        if (r)
          e1 = *r;
        else
          ++errors;
      },
      [&] {
        auto r = c2->fetch_undelivered(5, 60000);
        if (r)
          e2 = *r;
        else
          ++errors;
      });
    if (e1.empty() && e2.empty())
      break;
    std::vector<std::string> ids;
    for (auto* batch : {&e1, &e2}) {
      for (auto& ev : *batch) {
        if (++seen[ev.event_id] > 1)
          ++violations;
        ids.push_back(ev.event_id);
      }
    }
    // Deliver every other round, so fetches also race with marks.
    if (rounds % 2 == 0) {
      auto m = s().mark_delivered(ids);
      ASSERT_OK(m);
    }
  }
  EXPECT_EQ(errors, 0);
  EXPECT_EQ(violations, 0);
  EXPECT_EQ(seen.size(), size_t{n});
  EXPECT_GT(rounds, n / 10 / 2); // both fetched, in many rounds
}

TEST_P(match_store_conformance, a_commit_wakes_a_waiting_relay) {
  auto relay = factory_->connect();
  auto first = relay->wait_for_events(0); // starts listening
  ASSERT_OK(first);
  EXPECT_FALSE(*first);
  auto idle = relay->wait_for_events(50);
  ASSERT_OK(idle);
  EXPECT_FALSE(*idle);
  std::optional<outcome<bool>> woke;
  auto t0 = std::chrono::steady_clock::now();
  std::thread waiter([&] { woke = relay->wait_for_events(10000); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_OK(s().commit_matches({req(q_, "a", "b")}).at(0));
  waiter.join();
  ASSERT_OK(*woke);
  EXPECT_TRUE(**woke);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  // A commit that creates nothing announces nothing.
  ASSERT_FALSE(s().commit_matches({req(q_, "a", "c", "2")}).at(0));
  auto quiet = relay->wait_for_events(100);
  ASSERT_OK(quiet);
  EXPECT_FALSE(*quiet);
  // A commit while nobody waits is kept for the next wait.
  ASSERT_OK(s().commit_matches({req(q_, "x", "y")}).at(0));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  auto kept = relay->wait_for_events(1000);
  ASSERT_OK(kept);
  EXPECT_TRUE(*kept);
}

// -- cancel checkpoints -------------------------------------------------------

/// A commit check that records its calls ("after_create:2") and withdraws
/// the (stage, index) pairs it was given.
class checkpoints {
 public:
  using point = std::pair<commit_stage, size_t>;

  explicit checkpoints(std::set<point> withdraw = {})
    : withdraw_(std::move(withdraw)) {}

  commit_check fn() {
    return [this](commit_stage stage, size_t i) {
      calls.push_back(std::string{to_string(stage)} + ":" + std::to_string(i));
      return withdraw_.count({stage, i}) == 0;
    };
  }

  std::vector<std::string> calls;

 private:
  std::set<point> withdraw_;
};

constexpr auto after_create = commit_stage::after_create;
constexpr auto before_commit = commit_stage::before_commit;

/// Session id → how many events name it; and every ticket in a payload.
struct event_index {
  explicit event_index(const std::vector<outbox_event>& evs) {
    for (auto& ev : evs) {
      ++per_session[ev.aggregate_id];
      // Named: a range-for over parse(...).at(...) outlives the parsed
      // document (only the reference into it is kept alive).
      auto payload = nlohmann::json::parse(ev.payload);
      for (auto& u : payload.at("users"))
        tickets.insert(u.at("ticket").get<std::string>());
    }
  }

  std::map<std::string, int> per_session;
  std::set<std::string> tickets;
};

#define EXPECT_WITHDRAWN(x, stage)                                         \
  do {                                                                     \
    ASSERT_FALSE(x);                                                       \
    EXPECT_EQ((x).error().code, errc::cancelled);                          \
    EXPECT_EQ((x).error().detail, std::string{"withdrawn at "} + (stage)); \
  } while (false)

TEST_P(match_store_conformance, withdrawn_requests_leave_no_trace) {
  std::vector<match_request> batch{
    req(q_, "self", "self"), // 0: malformed, never asked
    req(q_, "k1", "k2"),     // 1: kept
    req(q_, "w1", "w2"),     // 2: withdrawn right after its rows were written
    req(q_, "k3", "k4"),     // 3: kept
    req(q_, "w3", "w4"),     // 4: withdrawn right before COMMIT
    req(q_, "k5", "k6"),     // 5: kept
  };
  checkpoints cp{{{after_create, 2}, {before_commit, 4}}};
  auto res = s().commit_matches(batch, cp.fn());
  ASSERT_EQ(res.size(), batch.size());
  ASSERT_FALSE(res[0]);
  EXPECT_EQ(res[0].error().code, errc::invalid_argument);
  for (size_t i : {1, 3, 5}) {
    ASSERT_OK(res[i]);
    EXPECT_TRUE(res[i]->created);
    EXPECT_EQ(res[i]->ticket_a, batch[i].ticket_a);
  }
  EXPECT_WITHDRAWN(res[2], "after_create");
  EXPECT_WITHDRAWN(res[4], "before_commit");
  // The caller's indices, not the store's (the malformed one is not passed
  // on); the survivors are asked again after a round that withdrew one.
  EXPECT_EQ(cp.calls,
            (std::vector<std::string>{
              "after_create:1", "after_create:2", "after_create:3",
              "after_create:4", "after_create:5", "before_commit:1",
              "before_commit:3", "before_commit:4", "before_commit:5",
              "before_commit:1", "before_commit:3", "before_commit:5"}));
  expect_no_trace_of(batch[2]);
  expect_no_trace_of(batch[4]);
  expect_rows(3);
  event_index evs{drain(s())};
  EXPECT_EQ(evs.per_session.size(), 3u);
  for (size_t i : {1, 3, 5})
    EXPECT_EQ(evs.per_session[res[i]->session_id], 1) << i;
  for (size_t i : {2, 4}) {
    EXPECT_EQ(evs.tickets.count(batch[i].ticket_a), 0u) << i;
    EXPECT_EQ(evs.tickets.count(batch[i].ticket_b), 0u) << i;
  }
  for (auto user : {"w1", "w2", "w3", "w4"}) {
    auto a = s().active_session_of(user);
    ASSERT_OK(a);
    EXPECT_FALSE(a->has_value()) << user;
  }
  // The users are free at once, and so is the pair: the very same request
  // creates a new session rather than answering a withdrawn one.
  auto next = s().commit_matches(
    {batch[2], req(q_, "w3", "n1", "2"), req(q_, "n2", "w4", "2")});
  for (auto& r : next) {
    ASSERT_OK(r);
    EXPECT_TRUE(r->created);
  }
  expect_rows(6);
  EXPECT_EQ(drain(s()).size(), 3u);
}

// A refused request sends the batch down the one-by-one path: there a
// withdrawal rolls back to the request's own savepoint at once, so a later
// request of the batch can take a withdrawn user (as in the memory store).
TEST_P(match_store_conformance, withdrawals_in_a_batch_committed_one_by_one) {
  ASSERT_OK(s().commit_matches({req(q_, "busy", "z")}).at(0));
  std::vector<match_request> batch{
    req(q_, "busy", "c"),     // 0: refused, never asked
    req(q_, "a1", "b1"),      // 1: withdrawn after its rows were written
    req(q_, "a1", "b2", "2"), // 2: takes a1 after all, kept
    req(q_, "a3", "b3"),      // 3: withdrawn right before COMMIT
    req(q_, "a4", "b4"),      // 4: kept
  };
  checkpoints cp{{{after_create, 1}, {before_commit, 3}}};
  auto res = s().commit_matches(batch, cp.fn());
  ASSERT_EQ(res.size(), batch.size());
  ASSERT_FALSE(res[0]);
  EXPECT_EQ(res[0].error().code, errc::conflict);
  EXPECT_WITHDRAWN(res[1], "after_create");
  ASSERT_OK(res[2]);
  EXPECT_TRUE(res[2]->created);
  EXPECT_WITHDRAWN(res[3], "before_commit");
  ASSERT_OK(res[4]);
  EXPECT_TRUE(res[4]->created);
  EXPECT_EQ(cp.calls,
            (std::vector<std::string>{
              "after_create:1", "after_create:2", "after_create:3",
              "after_create:4", "before_commit:2", "before_commit:3",
              "before_commit:4", "before_commit:2", "before_commit:4"}));
  expect_no_trace_of(batch[1]);
  expect_no_trace_of(batch[3]);
  auto a1 = s().active_session_of("a1");
  ASSERT_OK(a1);
  ASSERT_TRUE(a1->has_value());
  EXPECT_EQ((*a1)->session_id, res[2]->session_id);
  expect_rows(3);
  event_index evs{drain(s())};
  EXPECT_EQ(evs.per_session.size(), 3u);
  EXPECT_EQ(evs.per_session[res[2]->session_id], 1);
  EXPECT_EQ(evs.per_session[res[4]->session_id], 1);
  auto next = s().commit_matches({req(q_, "b1", "a3", "3"), batch[3]});
  ASSERT_OK(next.at(0));
  EXPECT_FALSE(next.at(1)) << "b3 is free, a3 was just taken";
  ASSERT_OK(s().commit_matches({req(q_, "b3", "b9", "3")}).at(0));
}

TEST_P(match_store_conformance, a_duplicate_shares_the_fate_of_its_pair) {
  std::vector<match_request> batch{
    req(q_, "d1", "d2"), // 0: withdrawn after its rows were written
    req(q_, "d2", "d1"), // 1: the same pair: withdrawn with it, unasked
    req(q_, "d3", "d4"), // 2: withdrawn right before COMMIT
    req(q_, "d3", "d4"), // 3: the same pair: withdrawn with it, unasked
    req(q_, "d5", "d6"), // 4: kept
    req(q_, "d6", "d5"), // 5: the same pair: answers 4's session, unasked
  };
  checkpoints cp{{{after_create, 0}, {before_commit, 2}}};
  auto res = s().commit_matches(batch, cp.fn());
  ASSERT_EQ(res.size(), batch.size());
  EXPECT_WITHDRAWN(res[0], "after_create");
  EXPECT_WITHDRAWN(res[1], "after_create");
  EXPECT_WITHDRAWN(res[2], "before_commit");
  EXPECT_WITHDRAWN(res[3], "before_commit");
  ASSERT_OK(res[4]);
  EXPECT_TRUE(res[4]->created);
  ASSERT_OK(res[5]);
  EXPECT_FALSE(res[5]->created);
  EXPECT_EQ(res[5]->session_id, res[4]->session_id);
  EXPECT_EQ(cp.calls,
            (std::vector<std::string>{"after_create:0", "after_create:2",
                                      "after_create:4", "before_commit:2",
                                      "before_commit:4", "before_commit:4"}));
  expect_no_trace_of(batch[0]);
  expect_no_trace_of(batch[2]);
  expect_rows(1);
  EXPECT_EQ(drain(s()).size(), 1u);
}

TEST_P(match_store_conformance, a_retry_is_not_asked) {
  auto first = s().commit_matches({req(q_, "r1", "r2")});
  ASSERT_OK(first.at(0));
  // Would withdraw 0 and 2 if it were asked about them: it must not be.
  checkpoints cp{{{after_create, 0},
                  {before_commit, 0},
                  {after_create, 2},
                  {before_commit, 2}}};
  auto res = s().commit_matches(
    {req(q_, "r2", "r1"), req(q_, "r3", "r4"), req(q_, "r4", "r3")}, cp.fn());
  ASSERT_EQ(res.size(), 3u);
  ASSERT_OK(res[0]);
  EXPECT_FALSE(res[0]->created);
  EXPECT_EQ(res[0]->session_id, first[0]->session_id);
  ASSERT_OK(res[1]);
  EXPECT_TRUE(res[1]->created);
  ASSERT_OK(res[2]);
  EXPECT_FALSE(res[2]->created);
  EXPECT_EQ(res[2]->session_id, res[1]->session_id);
  EXPECT_EQ(cp.calls,
            (std::vector<std::string>{"after_create:1", "before_commit:1"}));
  expect_rows(2);
  EXPECT_EQ(drain(s()).size(), 2u);
}

TEST_P(match_store_conformance, withdrawing_everything_commits_nothing) {
  auto relay = factory_->connect();
  auto first = relay->wait_for_events(0); // starts listening
  ASSERT_OK(first);
  EXPECT_FALSE(*first);
  std::vector<match_request> batch{req(q_, "v1", "v2"), req(q_, "v3", "v4"),
                                   req(q_, "v5", "v6")};
  auto none = [](commit_stage, size_t) { return false; };
  auto late = [](commit_stage stage, size_t) {
    return stage != commit_stage::before_commit;
  };
  auto with_refused = batch;
  with_refused.push_back(req(q_, "v1", "v9", "2")); // v1 is taken before it
  std::vector<outcome<match_record>> r1, r2, r3;
  std::optional<outcome<bool>> woke;
  {
    std::thread waiter([&] { woke = relay->wait_for_events(1500); });
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    // Everything at the first checkpoint, everything at the last one, and
    // at the last one in the one-by-one path (a refused request).
    r1 = s().commit_matches(batch, none);
    r2 = s().commit_matches(batch, late);
    r3 = s().commit_matches(with_refused, late);
    waiter.join();
  }
  ASSERT_EQ(r1.size(), 3u);
  ASSERT_EQ(r2.size(), 3u);
  ASSERT_EQ(r3.size(), 4u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_WITHDRAWN(r1[i], "after_create");
    EXPECT_WITHDRAWN(r2[i], "before_commit");
    EXPECT_WITHDRAWN(r3[i], "before_commit");
  }
  ASSERT_FALSE(r3[3]);
  EXPECT_EQ(r3[3].error().code, errc::conflict);
  ASSERT_TRUE(woke.has_value());
  ASSERT_OK(*woke);
  EXPECT_FALSE(**woke) << "a commit that kept nothing woke a relay";
  for (auto& r : with_refused)
    expect_no_trace_of(r);
  expect_rows(0);
  EXPECT_TRUE(drain(s()).empty());
  // A commit that keeps something still wakes it.
  ASSERT_OK(s().commit_matches({batch[0]}).at(0));
  auto kept = relay->wait_for_events(1000);
  ASSERT_OK(kept);
  EXPECT_TRUE(*kept);
}

TEST_P(match_store_conformance, a_throwing_check_fails_the_call) {
  std::vector<match_request> batch{req(q_, "e1", "e2"), req(q_, "e3", "e4"),
                                   req(q_, "e5", "e6")};
  auto boom = [](commit_stage stage, size_t i) -> bool {
    if (i == 0)
      return false; // withdrawn before the failure: stays withdrawn
    if (stage == commit_stage::before_commit && i == 2)
      throw std::runtime_error("boom");
    return true;
  };
  auto res = s().commit_matches(batch, boom);
  ASSERT_EQ(res.size(), 3u);
  EXPECT_WITHDRAWN(res[0], "after_create");
  for (size_t i : {1, 2}) {
    ASSERT_FALSE(res[i]);
    EXPECT_EQ(res[i].error().code, errc::protocol_error);
    EXPECT_NE(res[i].error().detail.find("boom"), std::string::npos)
      << res[i].error().detail;
  }
  auto odd = [](commit_stage, size_t) -> bool { throw 42; };
  for (auto& r : s().commit_matches(batch, odd)) {
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, errc::protocol_error);
  }
  for (auto& r : batch)
    expect_no_trace_of(r);
  expect_rows(0);
  EXPECT_TRUE(drain(s()).empty());
  // The connection is fine afterwards.
  for (auto& r : s().commit_matches(batch))
    ASSERT_OK(r);
  expect_rows(3);
}

// Cancels arrive on another thread while commits run, as in the finalizer:
// whatever the interleaving, an answer and the store agree, a request
// cancelled before the call never commits, and a committed one was still
// wanted at its last checkpoint.
TEST_P(match_store_conformance, racing_cancels_never_leak_a_match) {
  constexpr int rounds = 40;
  constexpr int per_batch = 12;
  std::mutex mtx;
  std::set<std::string> cancelled; // tickets
  auto is_cancelled = [&](const std::string& ticket) {
    std::lock_guard<std::mutex> guard{mtx};
    return cancelled.count(ticket) > 0;
  };
  int committed = 0;
  int withdrawn = 0;
  std::vector<match_request> all_withdrawn;
  for (int round = 0; round < rounds; ++round) {
    std::vector<match_request> batch;
    for (int i = 0; i < per_batch; ++i) {
      auto k = std::to_string(round) + "-" + std::to_string(i);
      batch.push_back(req(q_, "ra" + k, "rb" + k));
    }
    {
      std::lock_guard<std::mutex> guard{mtx};
      cancelled.insert(batch[0].ticket_a); // before the call
    }
    std::vector<std::optional<bool>> last_before_commit(per_batch);
    auto check = [&](commit_stage stage, size_t i) {
      std::this_thread::yield(); // let the canceller in
      bool wanted = !is_cancelled(batch[i].ticket_a)
                    && !is_cancelled(batch[i].ticket_b);
      if (stage == commit_stage::before_commit)
        last_before_commit[i] = wanted;
      return wanted;
    };
    std::atomic<bool> go{false};
    std::thread canceller([&] {
      while (!go)
        std::this_thread::yield();
      for (int i = 1; i < per_batch; i += 2) {
        {
          std::lock_guard<std::mutex> guard{mtx};
          cancelled.insert(i % 4 == 1 ? batch[i].ticket_a : batch[i].ticket_b);
        }
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
    });
    go = true;
    auto res = s().commit_matches(batch, check);
    canceller.join();
    ASSERT_EQ(res.size(), batch.size());
    for (size_t i = 0; i < res.size(); ++i) {
      if (res[i]) {
        EXPECT_TRUE(res[i]->created);
        EXPECT_NE(i, 0u) << "cancelled before the call, committed anyway";
        EXPECT_TRUE(last_before_commit[i].value_or(false)) << i;
        ++committed;
      } else {
        EXPECT_EQ(res[i].error().code, errc::cancelled)
          << res[i].error().detail;
        all_withdrawn.push_back(batch[i]);
        ++withdrawn;
      }
    }
  }
  EXPECT_GE(withdrawn, rounds); // at least the ones cancelled before
  // The even ones but the first are never cancelled.
  EXPECT_GE(committed, rounds * (per_batch / 2 - 1));
  for (auto& r : all_withdrawn)
    expect_no_trace_of(r);
  expect_rows(committed);
  event_index evs{drain(s())};
  EXPECT_EQ(evs.per_session.size(), size_t(committed));
  for (auto& [sid, n] : evs.per_session)
    EXPECT_EQ(n, 1) << sid;
  for (auto& r : all_withdrawn)
    EXPECT_EQ(evs.tickets.count(r.ticket_a), 0u) << r.ticket_a;
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

// -- mutual likes (problem 6 of docs/design.md, invariant I4) -----------------------------------

/// A mutual request of the "likes" queue.
match_request mutual_req(const std::string& a, const std::string& b,
                         const std::string& tag = "1") {
  auto r = req("likes", a, b, tag);
  r.mutual = true;
  return r;
}

/// PostgreSQL: an admin connection to the test's database; null for memory.
std::unique_ptr<pg_admin> pg_of(const std::string& kind,
                                const store_maker& maker) {
  if (kind != "postgres")
    return nullptr;
  return std::make_unique<pg_admin>(pg_conninfo(maker.last_db()));
}

// The PostgreSQL store sends a batch as array literals: quotes,
// backslashes, braces, commas, blanks (also leading and trailing) and the
// word NULL must arrive as written, in every column (mutual pairs too),
// through the batch statement and through the one-by-one fallback.
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
  EXPECT_EQ(db->count("SELECT count(*) FROM outbox WHERE payload->>"
                      "'session_id' = aggregate_id AND event_id ="
                      " 'match.created:' || aggregate_id"),
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

#define EXPECT_SWIPE(x, opposite, is_matched)  \
  do {                                         \
    ASSERT_OK(x);                              \
    EXPECT_EQ((x)->opposite_like, (opposite)); \
    EXPECT_EQ((x)->matched, (is_matched));     \
  } while (false)

TEST_P(match_store_conformance, swipes_report_the_opposite_like) {
  auto db = pg_of(GetParam(), *maker_);
  auto updated = [&](const std::string& from, const std::string& to) {
    return db
      ->query("SELECT kind, updated_at::text, created_at::text"
              " FROM likes WHERE from_user = '"
              + from + "' AND to_user = '" + to + "'")
      .at(0);
  };
  auto a1 = s().record_swipe("alice", "bob", true);
  EXPECT_SWIPE(a1, false, false);
  EXPECT_TRUE(a1->session_id.empty());
  std::vector<std::string> first_like;
  if (db)
    first_like = updated("alice", "bob");
  // LIKE / LIKE: the second sees the first, and so does a repeat.
  EXPECT_SWIPE(s().record_swipe("bob", "alice", true), true, false);
  EXPECT_SWIPE(s().record_swipe("bob", "alice", true), true, false);
  EXPECT_SWIPE(s().record_swipe("alice", "bob", true), true, false);
  if (db) { // repeating the current kind changes nothing
    EXPECT_EQ(updated("alice", "bob"), first_like);
  }
  // DISLIKE after LIKE withdraws alice's like: bob no longer sees one.
  EXPECT_SWIPE(s().record_swipe("alice", "bob", false), true, false);
  EXPECT_SWIPE(s().record_swipe("bob", "alice", true), false, false);
  if (db) {
    auto row = updated("alice", "bob");
    EXPECT_EQ(row.at(0), "DISLIKE");
    EXPECT_GT(row.at(1), first_like.at(1));
    EXPECT_EQ(row.at(2), first_like.at(2)); // the row's first swipe
  }
  // LIKE after DISLIKE: a fresh like, seen by bob again.
  EXPECT_SWIPE(s().record_swipe("alice", "bob", true), true, false);
  EXPECT_SWIPE(s().record_swipe("bob", "alice", true), true, false);
  if (db) {
    auto row = updated("alice", "bob");
    EXPECT_EQ(row.at(0), "LIKE");
    EXPECT_GT(row.at(1), first_like.at(1));
  }
  // Bob withdraws; alice sees it; a third user is independent.
  EXPECT_SWIPE(s().record_swipe("bob", "alice", false), true, false);
  EXPECT_SWIPE(s().record_swipe("alice", "bob", true), false, false);
  EXPECT_SWIPE(s().record_swipe("carol", "alice", true), false, false);
  EXPECT_SWIPE(s().record_swipe("alice", "carol", false), true, false);
  EXPECT_SWIPE(s().record_swipe("carol", "alice", true), false, false);
  // Swipes create no match.
  auto m = s().mutual_match_of("alice", "bob");
  ASSERT_OK(m);
  EXPECT_FALSE(m->has_value());
  EXPECT_TRUE(drain(s()).empty());
  if (db) {
    EXPECT_EQ(db->count("SELECT count(*) FROM likes"), 4);
    EXPECT_EQ(db->count("SELECT count(*) FROM mutual_matches"), 0);
  }
}

TEST_P(match_store_conformance,
       malformed_swipes_are_refused_and_write_nothing) {
  auto self = s().record_swipe("alice", "alice", true);
  ASSERT_FALSE(self);
  EXPECT_EQ(self.error().code, errc::invalid_argument);
  EXPECT_EQ(self.error().detail, "a user cannot swipe on itself");
  const std::vector<std::pair<std::string, std::string>> bad{
    {"", "bob"},
    {"alice", ""},
    {"al\nice", "bob"},
    {"alice", "b\x7f"},
    {"bad\xff", "bob"},
    {"alice", "\xc3\x28"},
    {std::string(129, 'x'), "bob"},
    {"alice", std::string(129, 'y')},
  };
  for (auto& [from, to] : bad) {
    for (bool like : {true, false}) {
      auto r = s().record_swipe(from, to, like);
      ASSERT_FALSE(r) << from << " -> " << to;
      EXPECT_EQ(r.error().code, errc::invalid_argument);
      EXPECT_FALSE(r.error().detail.empty());
    }
    auto m = s().mutual_match_of(from, to);
    ASSERT_FALSE(m);
    EXPECT_EQ(m.error().code, errc::invalid_argument);
  }
  auto m = s().mutual_match_of("alice", "alice");
  ASSERT_FALSE(m);
  EXPECT_EQ(m.error().code, errc::invalid_argument);
  // Nothing was written: the other side sees no like.
  EXPECT_SWIPE(s().record_swipe("bob", "alice", true), false, false);
  if (auto db = pg_of(GetParam(), *maker_)) {
    EXPECT_EQ(db->count("SELECT count(*) FROM likes"), 1);
  }
}

TEST_P(match_store_conformance, a_mutual_commit_writes_session_event_and_pair) {
  auto db = pg_of(GetParam(), *maker_);
  ASSERT_OK(s().record_swipe("alice", "bob", true));
  auto seen = s().record_swipe("bob", "alice", true);
  EXPECT_SWIPE(seen, true, false);
  auto r = s().commit_matches({mutual_req("bob", "alice")});
  ASSERT_OK(r.at(0));
  const auto sid = r[0]->session_id;
  EXPECT_TRUE(r[0]->created);
  EXPECT_EQ(r[0]->queue, "likes");
  EXPECT_EQ(r[0]->user_a, "bob");
  EXPECT_EQ(r[0]->status, session_status::active);
  // Exactly one event, for that session.
  auto evs = drain(s());
  ASSERT_EQ(evs.size(), 1u);
  EXPECT_EQ(evs[0].aggregate_id, sid);
  EXPECT_EQ(evs[0].type, "match.created");
  // The pair's match, in either order; swipes now report it.
  for (auto [x, y] : {std::pair{"alice", "bob"}, std::pair{"bob", "alice"}}) {
    auto m = s().mutual_match_of(x, y);
    ASSERT_OK(m);
    ASSERT_TRUE(m->has_value());
    EXPECT_EQ((*m)->session_id, sid);
    EXPECT_FALSE((*m)->created);
    auto sw = s().record_swipe(x, y, true);
    EXPECT_SWIPE(sw, true, true);
    EXPECT_EQ(sw->session_id, sid);
  }
  auto none = s().mutual_match_of("alice", "carol");
  ASSERT_OK(none);
  EXPECT_FALSE(none->has_value());
  if (db) {
    auto row = db->query("SELECT pair_min, pair_max, session_id"
                         " FROM mutual_matches");
    ASSERT_EQ(row.size(), 1u);
    EXPECT_EQ(row[0], (std::vector<std::string>{"alice", "bob", sid}));
    EXPECT_EQ(db->count("SELECT count(*) FROM session_members"
                        " WHERE session_id = '"
                        + sid + "' AND NOT active"),
              2);
  }
  // It takes neither user's one active session: both can still be matched
  // 1:1, and a mutual match is not reported as the active session.
  for (auto user : {"alice", "bob"}) {
    auto a = s().active_session_of(user);
    ASSERT_OK(a);
    EXPECT_FALSE(a->has_value()) << user;
  }
  auto call
    = s().commit_matches({req(q_, "alice", "carol"), req(q_, "dave", "bob")});
  ASSERT_OK(call.at(0));
  ASSERT_OK(call.at(1));
  EXPECT_TRUE(call[0]->created);
  EXPECT_TRUE(call[1]->created);
  auto a = s().active_session_of("alice");
  ASSERT_OK(a);
  ASSERT_TRUE(a->has_value());
  EXPECT_EQ((*a)->session_id, call[0]->session_id);
  // ... and a user in a live call can still get more mutual matches.
  auto more = s().commit_matches(
    {mutual_req("alice", "erin"), mutual_req("frank", "alice")});
  ASSERT_OK(more.at(0));
  ASSERT_OK(more.at(1));
  EXPECT_TRUE(more[0]->created);
  EXPECT_TRUE(more[1]->created);
  EXPECT_NE(more[0]->session_id, more[1]->session_id);
  auto still = s().active_session_of("alice");
  ASSERT_OK(still);
  ASSERT_TRUE(still->has_value());
  EXPECT_EQ((*still)->session_id, call[0]->session_id);
  // A closed mutual match stays the pair's match: a pair is matched once.
  auto c = s().close_session(sid, "unmatched");
  ASSERT_OK(c);
  EXPECT_TRUE(*c);
  auto again = s().commit_matches({mutual_req("alice", "bob", "2")});
  ASSERT_OK(again.at(0));
  EXPECT_FALSE(again[0]->created);
  EXPECT_EQ(again[0]->session_id, sid);
  EXPECT_EQ(again[0]->status, session_status::closed);
  EXPECT_EQ(drain(s()).size(), 4u); // 2 calls + 2 mutual, none for `again`
  expect_rows(5);
  // Pairs are ordered by bytes, as the engine's pair key.
  auto ordered = s().commit_matches(
    {mutual_req("adam", "Zed"), mutual_req("zoe", "\xc3\xa9mile")});
  ASSERT_OK(ordered.at(0));
  ASSERT_OK(ordered.at(1));
  EXPECT_EQ(pair_bounds("adam", "Zed"),
            std::make_pair(std::string{"Zed"}, std::string{"adam"}));
  EXPECT_EQ(pair_bounds("zoe", "\xc3\xa9mile").first, "zoe");
  for (auto [x, y] :
       {std::pair{"Zed", "adam"}, std::pair{"\xc3\xa9mile", "zoe"}}) {
    auto m = s().mutual_match_of(x, y);
    ASSERT_OK(m);
    EXPECT_TRUE(m->has_value()) << x;
  }
  if (db) {
    EXPECT_EQ(db->count("SELECT count(*) FROM mutual_matches"
                        " WHERE (pair_min, pair_max) IN"
                        " (('Zed', 'adam'), ('zoe', '\xc3\xa9mile'))"),
              2);
  }
}

TEST_P(match_store_conformance, a_second_mutual_commit_answers_the_same_match) {
  auto first = s().commit_matches({mutual_req("alice", "bob", "1")});
  ASSERT_OK(first.at(0));
  EXPECT_TRUE(first[0]->created);
  // The other side, other tickets, another queue: the same match.
  auto second_req = mutual_req("bob", "alice", "2");
  second_req.queue = "likes-eu";
  auto second = factory_->connect()->commit_matches({second_req});
  ASSERT_OK(second.at(0));
  EXPECT_FALSE(second[0]->created);
  EXPECT_EQ(second[0]->session_id, first[0]->session_id);
  EXPECT_EQ(second[0]->user_a, "alice");
  EXPECT_EQ(second[0]->ticket_a, "t-alice-1");
  // Retried with the same tickets: the same.
  auto retry = s().commit_matches({mutual_req("alice", "bob", "1")});
  ASSERT_OK(retry.at(0));
  EXPECT_FALSE(retry[0]->created);
  EXPECT_EQ(retry[0]->session_id, first[0]->session_id);
  // Twice in one batch: the first creates, the second answers it.
  auto batch = s().commit_matches({mutual_req("carol", "dave", "1"),
                                   req(q_, "carol", "erin"),
                                   mutual_req("dave", "carol", "2")});
  ASSERT_EQ(batch.size(), 3u);
  ASSERT_OK(batch[0]);
  ASSERT_OK(batch[1]);
  ASSERT_OK(batch[2]);
  EXPECT_TRUE(batch[0]->created);
  EXPECT_TRUE(batch[1]->created);
  EXPECT_FALSE(batch[2]->created);
  EXPECT_EQ(batch[2]->session_id, batch[0]->session_id);
  // The same in a batch that a refused request makes commit one by one.
  ASSERT_OK(s().commit_matches({req(q_, "busy", "zoe")}).at(0));
  auto mixed = s().commit_matches(
    {req(q_, "busy", "yan"), mutual_req("gina", "hank", "1"),
     mutual_req("hank", "gina", "2"), mutual_req("bob", "alice", "3")});
  ASSERT_EQ(mixed.size(), 4u);
  ASSERT_FALSE(mixed[0]);
  EXPECT_EQ(mixed[0].error().code, errc::conflict);
  ASSERT_OK(mixed[1]);
  ASSERT_OK(mixed[2]);
  ASSERT_OK(mixed[3]);
  EXPECT_TRUE(mixed[1]->created);
  EXPECT_FALSE(mixed[2]->created);
  EXPECT_EQ(mixed[2]->session_id, mixed[1]->session_id);
  EXPECT_FALSE(mixed[3]->created);
  EXPECT_EQ(mixed[3]->session_id, first[0]->session_id);
  auto evs = drain(s());
  EXPECT_EQ(evs.size(), 5u);
  std::set<std::string> sessions;
  for (auto& ev : evs)
    sessions.insert(ev.aggregate_id);
  EXPECT_EQ(sessions.size(), 5u);
  expect_rows(5);
  if (auto db = pg_of(GetParam(), *maker_)) {
    EXPECT_EQ(db->count("SELECT count(*) FROM mutual_matches"), 3);
  }
}

TEST_P(match_store_conformance, a_withdrawn_mutual_match_leaves_the_pair_free) {
  // Both requests of the pair share the fate of the first, which is
  // withdrawn right after its rows were written.
  std::vector<match_request> batch{mutual_req("alice", "bob", "1"),
                                   mutual_req("bob", "alice", "2"),
                                   mutual_req("carol", "dave")};
  std::vector<std::pair<commit_stage, size_t>> asked;
  auto res = s().commit_matches(batch, [&](commit_stage st, size_t i) {
    asked.emplace_back(st, i);
    return i != 0;
  });
  ASSERT_EQ(res.size(), 3u);
  EXPECT_WITHDRAWN(res[0], "after_create");
  EXPECT_WITHDRAWN(res[1], "after_create");
  ASSERT_OK(res[2]);
  EXPECT_TRUE(res[2]->created);
  for (auto& [st, i] : asked)
    EXPECT_NE(i, 1u) << "a duplicate was asked";
  auto m = s().mutual_match_of("alice", "bob");
  ASSERT_OK(m);
  EXPECT_FALSE(m->has_value());
  expect_no_trace_of(batch[0]);
  expect_no_trace_of(batch[1]);
  expect_rows(1);
  if (auto db = pg_of(GetParam(), *maker_)) {
    EXPECT_EQ(db->count("SELECT count(*) FROM mutual_matches"), 1);
  }
  // Withdrawn before commit: the pair stays free as well.
  auto late = s().commit_matches({mutual_req("alice", "bob", "3")},
                                 [](commit_stage st, size_t) {
                                   return st != commit_stage::before_commit;
                                 });
  EXPECT_WITHDRAWN(late.at(0), "before_commit");
  // Then the pair can be matched.
  auto ok = s().commit_matches({mutual_req("bob", "alice", "4")});
  ASSERT_OK(ok.at(0));
  EXPECT_TRUE(ok[0]->created);
  auto evs = drain(s());
  EXPECT_EQ(evs.size(), 2u);
  expect_rows(2);
}

// Two connections commit the same pair at the same time (other order, other
// tickets), as two nodes finalizing the two likes of one mutual match would.
TEST_P(match_store_conformance, racing_mutual_commits_create_one_match) {
  constexpr int rounds = 500;
  auto c1 = factory_->connect();
  auto c2 = factory_->connect();
  racer race;
  int violations = 0;
  int first_wins = 0;
  std::set<std::string> winners;
  for (int i = 0; i < rounds; ++i) {
    auto k = std::to_string(i);
    auto a = "ma" + k;
    auto b = "mb" + k;
    std::vector<outcome<match_record>> r1, r2;
    race.run([&] { r1 = c1->commit_matches({mutual_req(a, b, "1")}); },
             [&] { r2 = c2->commit_matches({mutual_req(b, a, "2")}); });
    if (r1.size() != 1 || r2.size() != 1 || !r1[0] || !r2[0]) {
      ++violations;
      if (r1.size() == 1 && !r1[0])
        ADD_FAILURE() << to_string(r1[0].error().code) << ": "
                      << r1[0].error().detail;
      if (r2.size() == 1 && !r2[0])
        ADD_FAILURE() << to_string(r2[0].error().code) << ": "
                      << r2[0].error().detail;
      continue;
    }
    if ((r1[0]->created ? 1 : 0) + (r2[0]->created ? 1 : 0) != 1)
      ++violations; // two creators, or none
    if (r1[0]->session_id != r2[0]->session_id)
      ++violations;
    if (r1[0]->created)
      ++first_wins;
    winners.insert(r1[0]->session_id);
  }
  EXPECT_EQ(violations, 0);
  EXPECT_EQ(winners.size(), size_t{rounds});
  // One event per pair, for the pair's session.
  event_index evs{drain(s())};
  EXPECT_EQ(evs.per_session.size(), size_t{rounds});
  for (auto& [sid, n] : evs.per_session) {
    EXPECT_EQ(n, 1) << sid;
    EXPECT_EQ(winners.count(sid), 1u) << sid;
  }
  expect_rows(rounds);
  if (auto db = pg_of(GetParam(), *maker_)) {
    EXPECT_EQ(db->count("SELECT count(*) FROM mutual_matches"), rounds);
  }
  std::cout << "[ info     ] " << GetParam() << ": the first connection won "
            << first_wins << " of " << rounds << " rounds\n";
}

// A likes B while B likes A: exactly one of the two sees the other's like, so
// the mutual like is neither missed by both nor acted on by both.
TEST_P(match_store_conformance, crossing_likes_see_each_other_once) {
  constexpr int rounds = 300;
  auto c1 = factory_->connect();
  auto c2 = factory_->connect();
  racer race;
  int violations = 0;
  for (int i = 0; i < rounds; ++i) {
    auto k = std::to_string(i);
    auto a = "la" + k;
    auto b = "lb" + k;
    std::optional<outcome<swipe_record>> r1, r2;
    race.run([&] { r1 = c1->record_swipe(a, b, true); },
             [&] { r2 = c2->record_swipe(b, a, true); });
    if (!*r1 || !*r2) {
      ++violations;
      continue;
    }
    if (((*r1)->opposite_like ? 1 : 0) + ((*r2)->opposite_like ? 1 : 0) != 1)
      ++violations;
  }
  EXPECT_EQ(violations, 0);
}

// -- session lifecycle: end, expire, prune ------------------------------------

/// The events of `evs` of type `type`, by aggregate (session) id.
std::map<std::string, outbox_event>
events_of(const std::vector<outbox_event>& evs, const std::string& type) {
  std::map<std::string, outbox_event> out;
  for (const auto& ev : evs)
    if (ev.type == type)
      out.emplace(ev.aggregate_id, ev);
  return out;
}

/// Marks every event of `evs` delivered.
void deliver(match_store& s, const std::vector<outbox_event>& evs) {
  std::vector<std::string> ids;
  for (const auto& ev : evs)
    ids.push_back(ev.event_id);
  auto m = s.mark_delivered(ids);
  if (!m || *m != ids.size())
    throw std::runtime_error("mark delivered failed");
}

/// Commits `reqs`, all of which must create a session; returns their ids.
std::vector<std::string> commit_all(match_store& s,
                                    const std::vector<match_request>& reqs) {
  std::vector<std::string> ids;
  for (auto& r : s.commit_matches(reqs)) {
    if (!r || !r->created)
      throw std::runtime_error("commit failed: "
                               + (r ? "not created" : r.error().detail));
    ids.push_back(r->session_id);
  }
  return ids;
}

/// Commits `n` sessions (a<i>, b<i>) in one batch and takes their
/// match.created events out of the way; returns their ids, by i.
std::vector<std::string> commit_pairs(match_store& s, const std::string& q,
                                      const std::string& a,
                                      const std::string& b, int n) {
  std::vector<match_request> reqs;
  for (int i = 0; i < n; ++i)
    reqs.push_back(req(q, a + std::to_string(i), b + std::to_string(i)));
  auto ids = commit_all(s, reqs);
  drain(s);
  return ids;
}

/// An end that found the session ended before, by `by`, for `why`.
#define EXPECT_ENDED_BEFORE(x, by, why) \
  do {                                  \
    ASSERT_OK(x);                       \
    EXPECT_FALSE((x)->ended_now);       \
    EXPECT_EQ((x)->ended_by, (by));     \
    EXPECT_EQ((x)->reason, (why));      \
  } while (false)

/// The same final state, as a repeated end answers it.
#define EXPECT_SAME_END(x, first)                                   \
  do {                                                              \
    EXPECT_ENDED_BEFORE(x, (first).ended_by, (first).reason);       \
    EXPECT_EQ((x)->session.session_id, (first).session.session_id); \
    EXPECT_EQ((x)->session.status, session_status::closed);         \
    EXPECT_EQ((x)->session.closed_at, (first).session.closed_at);   \
    EXPECT_EQ((x)->session.close_reason, (first).reason);           \
  } while (false)

TEST_P(match_store_conformance, a_member_ends_a_session_with_one_event) {
  auto sid = commit_all(s(), {req(q_, "alice", "bob")}).at(0);
  EXPECT_EQ(drain(s()).size(), 1u); // match.created
  auto relay = factory_->connect();
  ASSERT_OK(relay->wait_for_events(1)); // starts listening
  auto e = s().end_session(sid, "bob", "hung up");
  ASSERT_OK(e);
  EXPECT_TRUE(e->ended_now);
  EXPECT_EQ(e->ended_by, "bob");
  EXPECT_EQ(e->reason, "hung up");
  EXPECT_EQ(e->session.session_id, sid);
  EXPECT_EQ(e->session.status, session_status::closed);
  EXPECT_EQ(e->session.close_reason, "hung up");
  EXPECT_EQ(e->session.user_a, "alice");
  EXPECT_EQ(e->session.ticket_b, "t-bob-1");
  EXPECT_GE(e->session.closed_at, e->session.created_at);
  auto woke = relay->wait_for_events(5000);
  ASSERT_OK(woke);
  EXPECT_TRUE(*woke) << "the end notified nobody";
  // Exactly one event, with the match.created shape plus ended_by, reason.
  auto evs = drain(s());
  ASSERT_EQ(evs.size(), 1u);
  const auto& ev = evs[0];
  EXPECT_EQ(ev.type, session_ended_type);
  EXPECT_EQ(ev.event_id, "session.ended:" + sid);
  EXPECT_EQ(ev.event_id, session_ended_event_id(sid));
  EXPECT_EQ(ev.aggregate_id, sid);
  EXPECT_EQ(ev.created_at, e->session.closed_at);
  auto j = nlohmann::json::parse(ev.payload);
  EXPECT_EQ(j.at("event_id"), ev.event_id);
  EXPECT_EQ(j.at("type"), "session.ended");
  EXPECT_EQ(j.at("session_id"), sid);
  EXPECT_EQ(j.at("queue"), q_);
  EXPECT_EQ(j.at("users"), nlohmann::json::parse(R"([
    {"user": "alice", "ticket": "t-alice-1"},
    {"user": "bob", "ticket": "t-bob-1"}])"));
  EXPECT_EQ(j.at("ended_by"), "bob");
  EXPECT_EQ(j.at("reason"), "hung up");
  EXPECT_EQ(j.size(), 7u);
  // Both are free at once.
  for (auto user : {"alice", "bob"}) {
    auto a = s().active_session_of(user);
    ASSERT_OK(a);
    EXPECT_FALSE(a->has_value()) << user;
  }
  auto next = s().commit_matches(
    {req(q_, "alice", "carol", "2"), req(q_, "bob", "dave", "2")});
  for (auto& r : next) {
    ASSERT_OK(r);
    EXPECT_TRUE(r->created);
  }
  // Ending again — the other member, another reason, another connection —
  // answers the same final state and writes nothing.
  auto again = factory_->connect()->end_session(sid, "alice", "bored");
  EXPECT_SAME_END(again, *e);
  auto third = s().end_session(sid, "bob", "hung up");
  EXPECT_SAME_END(third, *e);
  auto f = s().find_session(sid);
  ASSERT_OK(f);
  ASSERT_TRUE(f->has_value());
  EXPECT_EQ((*f)->close_reason, "hung up");
  EXPECT_EQ((*f)->closed_at, e->session.closed_at);
  auto rest = drain(s());
  EXPECT_EQ(rest.size(), 2u);
  EXPECT_TRUE(events_of(rest, session_ended_type).empty());
  // A session closed by close_session ends as nobody, with its reason.
  auto sid2 = next.at(0)->session_id;
  ASSERT_OK(s().close_session(sid2, "admin"));
  auto closed = s().end_session(sid2, "carol", "late");
  EXPECT_ENDED_BEFORE(closed, "", "admin");
  EXPECT_TRUE(drain(s()).empty());
}

TEST_P(match_store_conformance, an_end_is_refused_to_strangers_and_bad_input) {
  auto sid = commit_all(s(), {req(q_, "alice", "bob")}).at(0);
  drain(s());
  auto still_active = [&] {
    auto a = s().active_session_of("alice");
    ASSERT_OK(a);
    ASSERT_TRUE(a->has_value());
    EXPECT_EQ((*a)->session_id, sid);
    EXPECT_EQ((*a)->status, session_status::active);
  };
  auto x = s().end_session(sid, "mallory", "r");
  ASSERT_FALSE(x);
  EXPECT_EQ(x.error().code, errc::forbidden);
  EXPECT_NE(x.error().detail.find("mallory"), std::string::npos);
  still_active();
  auto unknown = s().end_session("no-such-session", "alice", "r");
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error().code, errc::not_found);
  const std::string nul{"a\0b", 3};
  const std::vector<std::vector<std::string>> bad = {
    {"", "alice", "r"},
    {sid, "", "r"},
    {sid,
     "ali\x01"
     "ce",
     "r"},
    {sid, std::string(129, 's'), "r"},
    {sid, "alice", std::string(257, 'r')},
    {sid, "alice", nul},
    {sid, "alice", "\xff"},
  };
  for (const auto& b : bad) {
    auto r = s().end_session(b[0], b[1], b[2]);
    ASSERT_FALSE(r) << b[1];
    EXPECT_EQ(r.error().code, errc::invalid_argument) << b[1];
  }
  still_active();
  const std::vector<std::pair<uint32_t, uint32_t>> bad_expiry
    = {{0, 10}, {1000, 0}, {1000, 10001}};
  for (auto [age, limit] : bad_expiry) {
    auto r = s().expire_sessions(age, limit);
    ASSERT_FALSE(r) << age << " " << limit;
    EXPECT_EQ(r.error().code, errc::invalid_argument);
  }
  for (uint32_t limit : {0u, 100001u}) {
    auto r = s().prune(1000, limit);
    ASSERT_FALSE(r) << limit;
    EXPECT_EQ(r.error().code, errc::invalid_argument);
  }
  still_active();
  EXPECT_TRUE(drain(s()).empty());
  // A closed session is still no stranger's to end.
  ASSERT_OK(s().end_session(sid, "alice", ""));
  auto late = s().end_session(sid, "mallory", "r");
  ASSERT_FALSE(late);
  EXPECT_EQ(late.error().code, errc::forbidden);
  EXPECT_EQ(drain(s()).size(), 1u);
}

TEST_P(match_store_conformance, a_batch_of_ends_answers_as_one_by_one) {
  auto ids = commit_all(s(), {req(q_, "a0", "b0"), req(q_, "a1", "b1"),
                              req(q_, "a2", "b2"), req(q_, "a3", "b3")});
  ASSERT_OK(s().end_session(ids[2], "a2", "before"));
  ASSERT_OK(s().close_session(ids[3], "admin"));
  drain(s());
  auto r = s().end_sessions({
    {ids[0], "b0", "left"},   // ends it
    {ids[0], "a0", "too"},    // ended earlier in this batch
    {ids[1], "mallory", "r"}, // a stranger: refused alone
    {"no-such-session", "a1", "r"},
    {ids[1], "", "r"},       // malformed
    {ids[1], "a1", "bye"},   // ends it
    {ids[2], "b2", "again"}, // ended before
    {ids[3], "a3", "late"},  // closed by close_session
  });
  ASSERT_EQ(r.size(), 8u);
  ASSERT_OK(r[0]);
  EXPECT_TRUE(r[0]->ended_now);
  EXPECT_EQ(r[0]->ended_by, "b0");
  EXPECT_EQ(r[0]->reason, "left");
  EXPECT_EQ(r[0]->session.status, session_status::closed);
  EXPECT_SAME_END(r[1], *r[0]);
  ASSERT_FALSE(r[2]);
  EXPECT_EQ(r[2].error().code, errc::forbidden);
  ASSERT_FALSE(r[3]);
  EXPECT_EQ(r[3].error().code, errc::not_found);
  ASSERT_FALSE(r[4]);
  EXPECT_EQ(r[4].error().code, errc::invalid_argument);
  ASSERT_OK(r[5]);
  EXPECT_TRUE(r[5]->ended_now);
  EXPECT_EQ(r[5]->ended_by, "a1");
  EXPECT_ENDED_BEFORE(r[6], "a2", "before");
  EXPECT_ENDED_BEFORE(r[7], "", "admin");
  // One event per session this batch ended, with its payload.
  auto evs = events_of(drain(s()), session_ended_type);
  ASSERT_EQ(evs.size(), 2u);
  std::set<std::string> got;
  for (auto& [key, ev] : evs) {
    got.insert(ev.aggregate_id);
    auto j = nlohmann::json::parse(ev.payload);
    EXPECT_EQ(j.at("ended_by"), ev.aggregate_id == ids[0] ? "b0" : "a1");
  }
  EXPECT_EQ(got, (std::set<std::string>{ids[0], ids[1]}));
  for (auto user : {"a0", "b0", "a1", "b1"}) {
    auto a = s().active_session_of(user);
    ASSERT_OK(a);
    EXPECT_FALSE(a->has_value()) << user;
  }
  // Repeated, the batch answers the recorded state and writes nothing.
  auto again = s().end_sessions({{ids[1], "b1", "x"}, {ids[0], "a0", "y"}});
  EXPECT_SAME_END(again.at(0), *r[5]);
  EXPECT_SAME_END(again.at(1), *r[0]);
  EXPECT_TRUE(drain(s()).empty());
  EXPECT_TRUE(s().end_sessions({}).empty());
}

TEST_P(match_store_conformance, crossing_batches_of_ends_end_each_once) {
  // Two connections end the same sessions in opposite orders, many
  // rounds: no deadlock, each session ended exactly once.
  constexpr int rounds = 100;
  constexpr int per_batch = 8;
  auto ids = commit_pairs(s(), q_, "xa", "xb", rounds * per_batch);
  drain(s());
  auto c1 = factory_->connect();
  auto c2 = factory_->connect();
  racer race;
  int violations = 0;
  for (int round = 0; round < rounds; ++round) {
    std::vector<end_request> fwd, bwd;
    for (int k = 0; k < per_batch; ++k) {
      auto i = round * per_batch + k;
      fwd.push_back({ids[i], "xa" + std::to_string(i), "fwd"});
    }
    for (int k = per_batch - 1; k >= 0; --k) {
      auto i = round * per_batch + k;
      bwd.push_back({ids[i], "xb" + std::to_string(i), "bwd"});
    }
    std::vector<outcome<end_record>> r1, r2;
    race.run([&] { r1 = c1->end_sessions(fwd); },
             [&] { r2 = c2->end_sessions(bwd); });
    for (int k = 0; k < per_batch; ++k) {
      const auto& x = r1.at(k);
      const auto& y = r2.at(per_batch - 1 - k);
      if (!x || !y || (x->ended_now ? 1 : 0) + (y->ended_now ? 1 : 0) != 1
          || x->ended_by != y->ended_by || x->reason != y->reason
          || x->session.closed_at != y->session.closed_at)
        ++violations;
    }
  }
  EXPECT_EQ(violations, 0);
  auto evs = drain(s());
  EXPECT_EQ(events_of(evs, session_ended_type).size(),
            size_t{rounds * per_batch});
}

TEST_P(match_store_conformance, a_mutual_session_ends_like_any_other) {
  auto m = s().commit_matches({mutual_req("alice", "bob")});
  ASSERT_OK(m.at(0));
  auto sid = m[0]->session_id;
  auto live = commit_all(s(), {req(q_, "alice", "carol")}).at(0);
  drain(s());
  auto e = s().end_session(sid, "alice", "unmatched");
  ASSERT_OK(e);
  EXPECT_TRUE(e->ended_now);
  EXPECT_EQ(e->session.queue, "likes");
  // alice's live 1:1 session is not touched.
  auto a = s().active_session_of("alice");
  ASSERT_OK(a);
  ASSERT_TRUE(a->has_value());
  EXPECT_EQ((*a)->session_id, live);
  auto evs = drain(s());
  ASSERT_EQ(evs.size(), 1u);
  EXPECT_EQ(evs[0].event_id, session_ended_event_id(sid));
  // The pair stays matched, once.
  auto of = s().mutual_match_of("bob", "alice");
  ASSERT_OK(of);
  ASSERT_TRUE(of->has_value());
  EXPECT_EQ((*of)->session_id, sid);
  EXPECT_EQ((*of)->status, session_status::closed);
  auto replay = s().commit_matches({mutual_req("bob", "alice", "2")});
  ASSERT_OK(replay.at(0));
  EXPECT_FALSE(replay[0]->created);
  auto again = s().end_session(sid, "bob", "x");
  EXPECT_SAME_END(again, *e);
  EXPECT_TRUE(drain(s()).empty());
}

TEST_P(match_store_conformance, expiry_ends_only_old_sessions_once) {
  std::vector<std::string> old_ids; // o<i>'s session
  for (int i = 0; i < 3; ++i)       // one call each: distinct ages
    old_ids.push_back(commit_all(s(), {req(q_, "o" + std::to_string(i),
                                           "p" + std::to_string(i))})
                        .at(0));
  const std::set<std::string> old(old_ids.begin(), old_ids.end());
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  auto young = commit_all(s(), {req(q_, "y0", "z0"), req(q_, "y1", "z1")});
  drain(s());
  auto first = s().expire_sessions(200, 2);
  ASSERT_OK(first);
  ASSERT_EQ(first->size(), 2u);
  auto second = s().expire_sessions(200, 100);
  ASSERT_OK(second);
  ASSERT_EQ(second->size(), 1u);
  std::set<std::string> ended;
  int64_t last_created = 0;
  for (auto* batch : {&*first, &*second}) {
    for (auto& e : *batch) {
      EXPECT_TRUE(e.ended_now);
      EXPECT_EQ(e.ended_by, "");
      EXPECT_EQ(e.reason, "expired");
      EXPECT_EQ(e.session.status, session_status::closed);
      EXPECT_EQ(e.session.close_reason, "expired");
      EXPECT_GE(e.session.created_at, last_created) << "oldest first";
      last_created = e.session.created_at;
      ended.insert(e.session.session_id);
    }
  }
  EXPECT_EQ(ended, old);
  auto none = s().expire_sessions(200, 100);
  ASSERT_OK(none);
  EXPECT_TRUE(none->empty());
  for (auto& sid : young) {
    auto f = s().find_session(sid);
    ASSERT_OK(f);
    EXPECT_EQ((*f)->status, session_status::active);
  }
  auto o0 = s().active_session_of("o0");
  ASSERT_OK(o0);
  EXPECT_FALSE(o0->has_value());
  auto evs = events_of(drain(s()), session_ended_type);
  ASSERT_EQ(evs.size(), 3u);
  for (auto& sid : old) {
    ASSERT_EQ(evs.count(sid), 1u);
    auto j = nlohmann::json::parse(evs.at(sid).payload);
    EXPECT_EQ(j.at("ended_by"), "");
    EXPECT_EQ(j.at("reason"), "expired");
  }
  // A member ending it later gets the recorded state.
  auto later = s().end_session(old_ids[0], "o0", "bye");
  EXPECT_ENDED_BEFORE(later, "", "expired");
  EXPECT_TRUE(drain(s()).empty());
}

TEST_P(match_store_conformance, racing_expirers_end_each_session_once) {
  constexpr int sessions = 200;
  auto ids = commit_pairs(s(), q_, "ea", "eb", sessions);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  auto c1 = factory_->connect();
  auto c2 = factory_->connect();
  std::vector<std::string> got[2];
  int failures = 0;
  std::mutex mtx;
  // Each expires in small steps until it finds nothing; one that finds the
  // rest locked by the other stops early, and the other goes on.
  auto expirer = [&](match_store& c, std::vector<std::string>& out) {
    for (;;) {
      auto r = c.expire_sessions(200, 7);
      if (!r) {
        std::lock_guard<std::mutex> guard{mtx};
        ++failures;
        ADD_FAILURE() << r.error().detail;
        return;
      }
      if (r->empty())
        return;
      for (auto& e : *r)
        out.push_back(e.session.session_id);
    }
  };
  racer race;
  race.run([&] { expirer(*c1, got[0]); }, [&] { expirer(*c2, got[1]); });
  EXPECT_EQ(failures, 0);
  std::set<std::string> all(got[0].begin(), got[0].end());
  all.insert(got[1].begin(), got[1].end());
  EXPECT_EQ(got[0].size() + got[1].size(), size_t{sessions})
    << "a session was ended twice";
  EXPECT_EQ(all, std::set<std::string>(ids.begin(), ids.end()));
  auto evs = drain(s());
  EXPECT_EQ(evs.size(), size_t{sessions});
  EXPECT_EQ(events_of(evs, session_ended_type).size(), size_t{sessions});
  std::cout << "[ info     ] " << GetParam() << ": the expirers ended "
            << got[0].size() << " and " << got[1].size() << "\n";
}

TEST_P(match_store_conformance, racing_ends_by_both_members_end_once) {
  constexpr int rounds = 500;
  auto ids = commit_pairs(s(), q_, "ma", "mb", rounds);
  auto c1 = factory_->connect();
  auto c2 = factory_->connect();
  racer race;
  int violations = 0;
  int first_wins = 0;
  for (int i = 0; i < rounds; ++i) {
    const auto& sid = ids[i];
    auto a = "ma" + std::to_string(i);
    auto b = "mb" + std::to_string(i);
    std::optional<outcome<end_record>> r1, r2;
    race.run([&] { r1 = c1->end_session(sid, a, "left-a"); },
             [&] { r2 = c2->end_session(sid, b, "left-b"); });
    if (!*r1 || !*r2) {
      ++violations;
      continue;
    }
    const auto& x = **r1;
    const auto& y = **r2;
    if ((x.ended_now ? 1 : 0) + (y.ended_now ? 1 : 0) != 1
        || x.ended_by != y.ended_by || x.reason != y.reason
        || x.session.closed_at != y.session.closed_at
        || x.reason != (x.ended_by == a ? "left-a" : "left-b"))
      ++violations;
    if (x.ended_now)
      ++first_wins;
  }
  EXPECT_EQ(violations, 0);
  auto evs = drain(s());
  EXPECT_EQ(evs.size(), size_t{rounds});
  EXPECT_EQ(events_of(evs, session_ended_type).size(), size_t{rounds});
  std::cout << "[ info     ] " << GetParam() << ": the first member won "
            << first_wins << " of " << rounds << " rounds\n";
}

TEST_P(match_store_conformance, prune_removes_only_what_is_over) {
  auto db = pg_of(GetParam(), *maker_);
  // Old: ended and delivered; ended, events undelivered; active; mutual,
  // ended; closed without an event.
  auto ids = commit_all(s(),
                        {req(q_, "alice", "bob"), req(q_, "carol", "dave"),
                         req(q_, "erin", "frank"), mutual_req("gina", "hank"),
                         req(q_, "ivan", "judy")});
  const auto& ended = ids[0];
  const auto& pending = ids[1];
  const auto& active = ids[2];
  const auto& mutual = ids[3];
  const auto& closed = ids[4];
  ASSERT_OK(s().end_session(ended, "alice", "done"));
  ASSERT_OK(s().end_session(pending, "carol", "done"));
  ASSERT_OK(s().end_session(mutual, "gina", "done"));
  ASSERT_OK(s().close_session(closed, "admin"));
  auto evs = drain(s()); // 5 created + 3 ended
  ASSERT_EQ(evs.size(), 8u);
  std::vector<outbox_event> held; // pending's, undelivered
  std::vector<outbox_event> sent;
  for (auto& ev : evs)
    (ev.aggregate_id == pending ? held : sent).push_back(ev);
  deliver(s(), sent);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  // Young: ended and delivered after the sleep.
  auto young = commit_all(s(), {req(q_, "kim", "lee")}).at(0);
  ASSERT_OK(s().end_session(young, "kim", "done"));
  deliver(s(), drain(s()));
  auto one = s().prune(200, 1);
  ASSERT_OK(one);
  EXPECT_EQ(one->outbox, 1u);
  EXPECT_EQ(one->sessions, 1u);
  auto rest = s().prune(200, 100000);
  ASSERT_OK(rest);
  // Delivered and old: ended 2, active 1, mutual 2, closed 1.
  EXPECT_EQ(one->outbox + rest->outbox, 6u);
  // Old, closed, not mutual, all delivered: ended and closed.
  EXPECT_EQ(one->sessions + rest->sessions, 2u);
  for (auto& [sid, kept] :
       std::vector<std::pair<std::string, bool>>{{ended, false},
                                                 {closed, false},
                                                 {pending, true},
                                                 {active, true},
                                                 {mutual, true},
                                                 {young, true}}) {
    auto f = s().find_session(sid);
    ASSERT_OK(f);
    EXPECT_EQ(f->has_value(), kept) << sid;
  }
  auto gone = s().end_session(ended, "alice", "again");
  ASSERT_FALSE(gone);
  EXPECT_EQ(gone.error().code, errc::not_found);
  auto of = s().mutual_match_of("gina", "hank");
  ASSERT_OK(of);
  ASSERT_TRUE(of->has_value());
  EXPECT_EQ((*of)->session_id, mutual);
  auto act = s().active_session_of("erin");
  ASSERT_OK(act);
  ASSERT_TRUE(act->has_value());
  EXPECT_EQ((*act)->session_id, active);
  if (db) {
    EXPECT_EQ(db->count("SELECT count(*) FROM session_members"
                        " WHERE session_id IN ('"
                        + ended + "', '" + closed + "')"),
              0);
    EXPECT_EQ(db->count("SELECT count(*) FROM outbox"),
              2 + 2); // pending's 2 undelivered, young's 2 delivered
  }
  // Idempotent; the undelivered events were kept and deliver as usual.
  auto again = s().prune(200, 100000);
  ASSERT_OK(again);
  EXPECT_EQ(again->outbox, 0u);
  EXPECT_EQ(again->sessions, 0u);
  auto m = s().mark_delivered({held[0].event_id, held[1].event_id});
  ASSERT_OK(m);
  EXPECT_EQ(*m, 2u);
  // Now pending's session may go (closed long ago); its events were just
  // delivered, so they stay.
  auto last = s().prune(200, 100000);
  ASSERT_OK(last);
  EXPECT_EQ(last->outbox, 0u);
  EXPECT_EQ(last->sessions, 1u);
  // A replayed commit of a pruned session's request creates a new one.
  auto replay = s().commit_matches({req(q_, "alice", "bob")});
  ASSERT_OK(replay.at(0));
  EXPECT_TRUE(replay[0]->created);
  EXPECT_NE(replay[0]->session_id, ended);
}

TEST_P(match_store_conformance, commits_racing_prune_never_fail) {
  constexpr int rounds = 150;
  constexpr int pairs = 5;
  auto pruner_conn = factory_->connect();
  std::atomic<bool> stop{false};
  std::atomic<int> prune_failures{0};
  prune_counts pruned;
  std::thread pruner([&] {
    while (!stop) {
      auto r = pruner_conn->prune(0, 20);
      if (!r) {
        ++prune_failures;
        continue;
      }
      pruned.outbox += r->outbox;
      pruned.sessions += r->sessions;
    }
  });
  int failed_commits = 0;
  int failed_other = 0;
  // The same users match again every round: their old member rows are what
  // the pruner deletes meanwhile.
  for (int round = 0; round < rounds; ++round) {
    std::vector<match_request> batch;
    for (int i = 0; i < pairs; ++i)
      batch.push_back(req(q_, "ra" + std::to_string(i),
                          "rb" + std::to_string(i), std::to_string(round)));
    std::vector<std::string> ids;
    for (auto& r : s().commit_matches(batch)) {
      if (!r || !r->created) {
        ++failed_commits;
        if (!r)
          ADD_FAILURE() << to_string(r.error().code) << ": "
                        << r.error().detail;
        continue;
      }
      ids.push_back(r->session_id);
    }
    for (size_t i = 0; i < ids.size(); ++i)
      if (!s().end_session(ids[i], "ra" + std::to_string(i), "next"))
        ++failed_other;
    auto evs = s().fetch_undelivered(1000, 60000);
    if (!evs || !s().mark_delivered([&] {
          std::vector<std::string> out;
          for (auto& ev : *evs)
            out.push_back(ev.event_id);
          return out;
        }()))
      ++failed_other;
  }
  stop = true;
  pruner.join();
  EXPECT_EQ(failed_commits, 0);
  EXPECT_EQ(failed_other, 0);
  EXPECT_EQ(prune_failures.load(), 0);
  std::cout << "[ info     ] " << GetParam() << ": the pruner deleted "
            << pruned.sessions << " sessions and " << pruned.outbox
            << " events while the commits ran\n";
  // Whatever the pruner left, a last pass takes: everything is over (after
  // a pause: a retention of 0 still wants the clock to move on).
  for (;;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    auto r = s().prune(0, 100000);
    ASSERT_OK(r);
    pruned.outbox += r->outbox;
    pruned.sessions += r->sessions;
    if (r->outbox == 0 && r->sessions == 0)
      break;
  }
  EXPECT_EQ(pruned.sessions, size_t{rounds * pairs});
  EXPECT_EQ(pruned.outbox, size_t{2 * rounds * pairs});
  if (auto db = pg_of(GetParam(), *maker_)) {
    EXPECT_EQ(db->count("SELECT count(*) FROM all_sessions"), 0);
    EXPECT_EQ(db->count("SELECT count(*) FROM session_members"), 0);
    EXPECT_EQ(db->count("SELECT count(*) FROM outbox"), 0);
  }
}

INSTANTIATE_TEST_SUITE_P(stores, match_store_conformance,
                         ::testing::Values("memory", "postgres"),
                         [](const auto& info) { return info.param; });

// -- PostgreSQL only: what the in-memory store cannot lose --------------------

class pg_match_store_test : public ::testing::Test {
 protected:
  void TearDown() override {
    maker_.reset();
  }

  std::unique_ptr<store_maker> maker_
    = std::make_unique<store_maker>("postgres");
};

/// The backend pids of connections named `app`, optionally only those that
/// wait for a lock.
std::vector<std::string> backends(pg_admin& admin, const std::string& app,
                                  bool waiting_for_lock) {
  auto sql = "SELECT pid FROM pg_stat_activity WHERE application_name = '" + app
             + "'";
  if (waiting_for_lock)
    sql += " AND wait_event_type = 'Lock'";
  std::vector<std::string> out;
  for (auto& row : admin.query(sql))
    out.push_back(row.at(0));
  return out;
}

TEST_F(pg_match_store_test, reconnects_after_the_backend_was_killed) {
  auto app = unique_name("mm_victim");
  pg_options o;
  o.conninfo = "application_name=" + app;
  auto f = maker_->fresh(o);
  auto st = f->connect();
  ASSERT_OK(st->apply_migrations());
  ASSERT_OK(st->commit_matches({req("q", "a", "b")}).at(0));
  auto pids = backends(maker_->admin(), app, false);
  ASSERT_EQ(pids.size(), 1u);
  maker_->admin().query("SELECT pg_terminate_backend(" + pids[0] + ")");
  auto r = st->commit_matches({req("q", "c", "d")});
  ASSERT_OK(r.at(0));
  EXPECT_TRUE(r[0]->created);
  maker_->admin().query("SELECT pg_terminate_backend(pid) FROM "
                        "pg_stat_activity WHERE application_name = '"
                        + app + "'");
  auto fetched = st->fetch_undelivered(10);
  ASSERT_OK(fetched);
  EXPECT_EQ(fetched->size(), 2u);
}

TEST_F(pg_match_store_test, an_unreachable_database_fails_every_entry) {
  // A loopback port that nobody listens on.
  pg_options o;
  o.conninfo = "host=127.0.0.1 port=1 user=postgres dbname=postgres";
  auto st = make_pg_match_store(o)->connect();
  auto t0 = std::chrono::steady_clock::now();
  auto res = st->commit_matches(
    {req("q", "a", "b"), req("q", "c", "c"), req("q", "d", "e")});
  ASSERT_EQ(res.size(), 3u);
  EXPECT_EQ(res[0].error().code, errc::store_unavailable);
  EXPECT_EQ(res[1].error().code, errc::invalid_argument);
  EXPECT_EQ(res[2].error().code, errc::store_unavailable);
  EXPECT_EQ(st->apply_migrations().error().code, errc::store_unavailable);
  EXPECT_EQ(st->active_session_of("a").error().code, errc::store_unavailable);
  EXPECT_EQ(st->close_session("s", "r").error().code, errc::store_unavailable);
  EXPECT_EQ(st->fetch_undelivered(1).error().code, errc::store_unavailable);
  EXPECT_EQ(st->mark_delivered({"e"}).error().code, errc::store_unavailable);
  EXPECT_EQ(st->wait_for_events(10).error().code, errc::store_unavailable);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
}

TEST_F(pg_match_store_test, a_connection_lost_mid_transaction_writes_nothing) {
  auto app = unique_name("mm_victim");
  pg_options o;
  o.conninfo = "application_name=" + app;
  o.statement_timeout_ms = 60000; // the kills below end the waits, not this
  auto f = maker_->fresh(o);
  auto st = f->connect();
  ASSERT_OK(st->apply_migrations());
  // An uncommitted session of user z makes the batch wait on the unique
  // index in the middle of its transaction, after it wrote p1–p2.
  pg_admin blocker{pg_conninfo(maker_->last_db())};
  blocker.query("BEGIN");
  blocker.query("INSERT INTO match_sessions (id, match_key, queue, user_a,"
                " ticket_a, user_b, ticket_b)"
                " VALUES ('blocker', 'k', 'q', 'z', 'tz', 'w', 'tw')");
  blocker.query("INSERT INTO session_members (session_id, user_id)"
                " VALUES ('blocker', 'z')");
  std::vector<outcome<match_record>> res;
  std::thread committer([&] {
    res = st->commit_matches({req("q", "p1", "p2"), req("q", "z", "p3")});
  });
  // Kill the waiting backend twice: the first loss is retried on a new
  // connection, the second one fails the call.
  std::set<std::string> killed;
  for (int kill = 0; kill < 2; ++kill) {
    std::string victim;
    for (int i = 0; i < 1000 && victim.empty(); ++i) {
      for (auto& pid : backends(maker_->admin(), app, true))
        if (killed.count(pid) == 0)
          victim = pid;
      if (victim.empty())
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (victim.empty()) {
      blocker.query("ROLLBACK");
      committer.join();
      FAIL() << "the commit never waited on the blocker (kill " << kill << ")";
    }
    killed.insert(victim);
    maker_->admin().query("SELECT pg_terminate_backend(" + victim + ")");
  }
  committer.join();
  blocker.query("ROLLBACK");
  ASSERT_EQ(res.size(), 2u);
  for (auto& r : res) {
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, errc::store_unavailable) << r.error().detail;
  }
  pg_admin db{pg_conninfo(maker_->last_db())};
  EXPECT_EQ(db.count("SELECT count(*) FROM match_sessions"), 0);
  EXPECT_EQ(db.count("SELECT count(*) FROM session_members"), 0);
  EXPECT_EQ(db.count("SELECT count(*) FROM outbox"), 0);
  // The same store works again, and the retried batch commits whole.
  auto again = st->commit_matches({req("q", "p1", "p2"), req("q", "z", "p3")});
  ASSERT_OK(again.at(0));
  ASSERT_OK(again.at(1));
  EXPECT_EQ(db.count("SELECT count(*) FROM outbox"), 2);
}

// The pair of a mutual request is taken by a transaction that has not ended:
// the commit waits for it, then answers its session when it committed, or
// creates the match when it rolled back — never a second match.
TEST_F(pg_match_store_test, a_mutual_commit_waits_for_a_concurrent_pair) {
  auto app = unique_name("mm_waiter");
  pg_options o;
  o.conninfo = "application_name=" + app;
  o.statement_timeout_ms = 60000;
  auto f = maker_->fresh(o);
  auto st = f->connect();
  ASSERT_OK(st->apply_migrations());
  pg_admin other{pg_conninfo(maker_->last_db())};
  for (bool other_commits : {true, false}) {
    std::string a = other_commits ? "alice" : "carol";
    std::string b = other_commits ? "bob" : "dave";
    std::string sid = "other-" + a;
    other.query("BEGIN");
    other.query("INSERT INTO match_sessions (id, match_key, queue, user_a,"
                " ticket_a, user_b, ticket_b) VALUES ('"
                + sid + "', 'k-" + a + "', 'likes', '" + a + "', 'ta', '" + b
                + "', 'tb')");
    other.query("INSERT INTO mutual_matches (pair_min, pair_max, session_id)"
                " VALUES ('"
                + a + "', '" + b + "', '" + sid + "')");
    std::vector<outcome<match_record>> res;
    std::thread committer(
      [&] { res = st->commit_matches({mutual_req(b, a, "mine")}); });
    bool waited = false;
    for (int i = 0; i < 1000 && !waited; ++i) {
      waited = !backends(maker_->admin(), app, true).empty();
      if (!waited)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    other.query(other_commits ? "COMMIT" : "ROLLBACK");
    committer.join();
    EXPECT_TRUE(waited) << "the commit never waited for the pair";
    ASSERT_EQ(res.size(), 1u);
    ASSERT_OK(res[0]);
    if (other_commits) {
      EXPECT_FALSE(res[0]->created);
      EXPECT_EQ(res[0]->session_id, sid);
    } else {
      EXPECT_TRUE(res[0]->created);
      EXPECT_NE(res[0]->session_id, sid);
      EXPECT_EQ(res[0]->ticket_a, "t-" + b + "-mine");
    }
    auto m = st->mutual_match_of(a, b);
    ASSERT_OK(m);
    ASSERT_TRUE(m->has_value());
    EXPECT_EQ((*m)->session_id, res[0]->session_id);
  }
  pg_admin db{pg_conninfo(maker_->last_db())};
  EXPECT_EQ(db.count("SELECT count(*) FROM mutual_matches"), 2);
  EXPECT_EQ(db.count("SELECT count(*) FROM outbox"), 1); // ours only
}

TEST_F(pg_match_store_test, a_changed_migration_is_refused) {
  auto f = maker_->fresh();
  auto st = f->connect();
  ASSERT_OK(st->apply_migrations());
  pg_admin db{pg_conninfo(maker_->last_db())};
  db.query("UPDATE schema_migrations SET checksum = 'edited'"
           " WHERE version = 1");
  auto r = st->apply_migrations();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, errc::protocol_error);
  EXPECT_NE(r.error().detail.find("0001_init"), std::string::npos);
}

TEST_F(pg_match_store_test, the_index_refuses_double_booking_behind_the_store) {
  auto f = maker_->fresh();
  auto st = f->connect();
  ASSERT_OK(st->apply_migrations());
  auto r = st->commit_matches({req("q", "a", "b")});
  ASSERT_OK(r.at(0));
  pg_admin db{pg_conninfo(maker_->last_db())};
  db.query("INSERT INTO match_sessions (id, match_key, queue, user_a,"
           " ticket_a, user_b, ticket_b)"
           " VALUES ('manual', 'k', 'q', 'a', 'ta', 'c', 'tc')");
  EXPECT_THROW(db.query("INSERT INTO session_members (session_id, user_id)"
                        " VALUES ('manual', 'a')"),
               std::runtime_error);
  EXPECT_EQ(db.count("SELECT count(*) FROM schema_migrations"),
            static_cast<int64_t>(known_migrations().size()));
}

} // namespace
