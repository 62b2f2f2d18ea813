#pragma once

// The shared part of the match store conformance suite: one binary,
// match_store_conformance_test, whose cases are split by feature over the
// match_store_*_test.cpp files next to this one. The same tests run against
// the in-memory store and against a private PostgreSQL (CTest fixture). Each
// test gets an empty data set: a new memory factory, or a new database.
// The parameter instantiation is in match_store_fixture.cpp, once.

#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <unistd.h>

#include <libpq-fe.h>
#include <nlohmann/json.hpp>

#include "persistence/matchdb/match_store.hpp"
#include "tests/support/pg_client.hpp"
#include "tests/support/test_env.hpp"

// A named namespace (not an anonymous one): every file of the binary must
// see the same fixture type, or GoogleTest refuses the suite.
namespace mm::test::store_conformance {

#define ASSERT_OK(x) \
  ASSERT_TRUE(x) << to_string((x).error().code) << ": " << (x).error().detail

#define EXPECT_OK(x) \
  EXPECT_TRUE(x) << to_string((x).error().code) << ": " << (x).error().detail

using rows = std::vector<std::vector<std::string>>;

using pg_admin = test::pg_client;

inline std::string unique_name(const std::string& prefix) {
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
inline match_request req(const std::string& q, const std::string& a,
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
inline std::vector<outbox_event> drain(match_store& s) {
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

inline constexpr auto after_create = commit_stage::after_create;
inline constexpr auto before_commit = commit_stage::before_commit;

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

// -- mutual likes -------------------------------------------------------------

/// A mutual request of the "likes" queue.
inline match_request mutual_req(const std::string& a, const std::string& b,
                                const std::string& tag = "1") {
  auto r = req("likes", a, b, tag);
  r.mutual = true;
  return r;
}

/// PostgreSQL: an admin connection to the test's database; null for memory.
inline std::unique_ptr<pg_admin> pg_of(const std::string& kind,
                                       const store_maker& maker) {
  if (kind != "postgres")
    return nullptr;
  return std::make_unique<pg_admin>(pg_conninfo(maker.last_db()));
}

} // namespace mm::test::store_conformance
