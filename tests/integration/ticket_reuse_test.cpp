// Ticket ids belong to their user (issue 11, item 3): every user of a round
// calls its ticket `t-1`, and one of the first two cancels while its pair may
// be in flight. 1,000 rounds through the engine, on the embedded stores and
// on real Redis + PostgreSQL. The checker asks the database: nobody told
// `cancelled` is in a session, nobody told `matched` is outside the session
// named, every cancel and join is answered within its bound, and every
// session's members end up knowing it.

#include <gtest/gtest.h>

#include <caf/all.hpp>

#include <atomic>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "actors/engine.hpp"
#include "persistence/matchdb/match_store.hpp"
#include "tests/support/pg_client.hpp"
#include "tests/support/store_harness.hpp"

using namespace mm;

namespace {

struct mm_config : caf::actor_system_config {
  mm_config() {
    register_types(*this);
    set("scheduler.max-threads", 2);
  }
};

constexpr int rounds = 1000;
constexpr int rounds_per_batch = 50;
constexpr int users_per_round = 4;
constexpr auto bound = std::chrono::seconds(40); // of every join and cancel

/// What the driver heard, per user.
struct answers {
  std::mutex mtx;
  std::map<std::string, session_state> cancel; // the cancel's answer
  std::map<std::string, std::string> errors;   // join/cancel errors
  std::atomic<int> pending{0};
};

std::string user_of(int round, int k) {
  return "r" + std::to_string(round) + "-u" + std::to_string(k);
}

session_state ask_state(caf::actor_system& sys, const session_actor& s) {
  caf::scoped_actor self{sys};
  session_state out;
  self->request(s, bound, state_atom_v)
    .receive([&](session_state& st) { out = std::move(st); },
             [&](caf::error& e) { out.detail = sys.render(e); });
  return out;
}

bool settled(session_phase p) {
  return p != session_phase::claiming && p != session_phase::finalizing;
}

/// Runs every round against `eng`; returns the number of violations.
int run_rounds(caf::actor_system& sys, const std::shared_ptr<engine>& eng,
               const std::string& queue) {
  auto db = eng->match_store()->connect();
  int violations = 0;
  int told_cancelled = 0, told_matched = 0;
  auto violation = [&](const std::string& what) {
    if (++violations <= 20)
      ADD_FAILURE() << what;
  };
  std::mt19937 rng{7};
  for (int first = 0; first < rounds; first += rounds_per_batch) {
    auto ans = std::make_shared<answers>();
    std::vector<std::string> users;
    std::vector<session_actor> sessions;
    for (int r = first; r < first + rounds_per_batch; ++r)
      for (int k = 0; k < users_per_round; ++k) {
        users.push_back(user_of(r, k));
        sessions.push_back(eng->session(users.back()));
      }
    // Joins of a round in a random order; user 0 or 1 cancels 0..4 ms after
    // its join, when a claim of it is likely in flight.
    std::vector<size_t> order(users.size());
    for (size_t i = 0; i < order.size(); ++i)
      order[i] = i;
    std::shuffle(order.begin(), order.end(), rng);
    std::map<size_t, int> cancel_after_ms;
    for (int r = 0; r < rounds_per_batch; ++r)
      cancel_after_ms[static_cast<size_t>(r * users_per_round) + rng() % 2]
        = static_cast<int>(rng() % 5);
    ans->pending = static_cast<int>(users.size() + cancel_after_ms.size());
    auto driver = sys.spawn([=](caf::event_based_actor* self) {
      auto on_cancel = [self, ans](const std::string& user,
                                   const session_actor& s) {
        self->request(s, bound, cancel_atom_v)
          .then(
            [ans, user](session_state& st) {
              std::lock_guard<std::mutex> g{ans->mtx};
              ans->cancel[user] = st;
              --ans->pending;
            },
            [ans, user](caf::error& e) {
              std::lock_guard<std::mutex> g{ans->mtx};
              ans->errors[user] = "cancel: " + to_string(e);
              --ans->pending;
            });
      };
      for (auto i : order) {
        auto user = users[i];
        auto s = sessions[i];
        self->request(s, bound, join_atom_v, join_request{queue, "t-1", ""})
          .then([ans](session_state&) { --ans->pending; },
                [ans, user](caf::error& e) {
                  std::lock_guard<std::mutex> g{ans->mtx};
                  ans->errors[user] = "join: " + to_string(e);
                  --ans->pending;
                });
        if (auto c = cancel_after_ms.find(i); c != cancel_after_ms.end())
          self->delayed_send(self, std::chrono::milliseconds(c->second),
                             cancel_atom_v, user, s);
      }
      return caf::behavior{
        [on_cancel](cancel_atom, const std::string& user,
                    const session_actor& s) { on_cancel(user, s); },
      };
    });
    auto deadline = std::chrono::steady_clock::now() + bound
                    + std::chrono::seconds(5);
    while (ans->pending > 0 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    caf::anon_send_exit(driver, caf::exit_reason::user_shutdown);
    if (ans->pending > 0) {
      violation("a join or cancel was not answered within its bound");
      return violations;
    }
    for (auto& [user, what] : ans->errors)
      violation(user + ": " + what);
    // The rest of the batch: whoever still waits leaves; every session
    // settles and every match event arrives.
    std::map<std::string, session_state> last;
    for (size_t i = 0; i < users.size(); ++i) {
      auto st = ask_state(sys, sessions[i]);
      for (int n = 0; n < 2000 && !settled(st.phase); ++n) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        st = ask_state(sys, sessions[i]);
      }
      if (st.phase == session_phase::queued) {
        caf::scoped_actor self{sys};
        self->request(sessions[i], bound, cancel_atom_v)
          .receive([&](session_state& x) { st = x; },
                   [&](caf::error& e) {
                     violation(users[i] + ": cleanup cancel: " + to_string(e));
                   });
      }
      last[users[i]] = st;
    }
    for (size_t i = 0; i < users.size(); ++i) {
      auto& user = users[i];
      auto in_db = db->active_session_of(user);
      if (!in_db) {
        violation("database: " + in_db.error().detail);
        continue;
      }
      std::string sid = in_db->has_value() ? (*in_db)->session_id : "";
      if (auto c = ans->cancel.find(user); c != ans->cancel.end()) {
        auto& told = c->second;
        told_cancelled += told.phase == session_phase::cancelled;
        told_matched += told.phase == session_phase::matched;
        if (told.phase == session_phase::cancelled && !sid.empty())
          violation(user + " told cancelled but matched in " + sid);
        if (told.phase == session_phase::matched && told.session_id != sid)
          violation(user + " told matched in '" + told.session_id
                    + "', database says '" + sid + "'");
        if (told.phase != session_phase::cancelled
            && told.phase != session_phase::matched)
          violation(user + ": cancel answered " + to_string(told.phase) + " "
                    + told.detail);
      }
      // A matched member learns it (from the event, which may take a
      // relay round): wait for it.
      auto st = last[user];
      for (int n = 0;
           n < 2000 && !sid.empty() && st.phase != session_phase::matched;
           ++n) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        st = ask_state(sys, sessions[i]);
      }
      if (!sid.empty() && st.session_id != sid)
        violation(user + " is in " + sid + " but its session says "
                  + to_string(st.phase) + " '" + st.session_id + "'");
      if (sid.empty() && st.phase == session_phase::matched)
        violation(user + " says matched in " + st.session_id
                  + " but the database has no session");
    }
    for (auto& u : users)
      eng->release(u);
    if (violations > 0)
      return violations;
  }
  // The race was run: cancels came both before and after their pair's
  // commit (otherwise the test could not see a wrong answer).
  EXPECT_GT(told_cancelled, 0);
  EXPECT_GT(told_matched, 0);
  return violations;
}

TEST(ticket_reuse, same_ticket_ids_with_cancels_in_flight_embedded) {
  mm_config cfg;
  caf::actor_system sys{cfg};
  engine_config ecfg;
  ecfg.relay.poll_ms = 20;
  ecfg.finalizer.cancel_wait_ms = 2000;
  auto started = engine::start(sys, ecfg);
  ASSERT_TRUE(started) << started.error().detail;
  auto eng = *started;
  EXPECT_EQ(run_rounds(sys, eng, "reuse"), 0);
  eng->stop();
}

TEST(ticket_reuse, same_ticket_ids_with_cancels_in_flight_redis_postgres) {
  mm_config cfg;
  caf::actor_system sys{cfg};
  engine_config ecfg;
  ecfg.use_redis = true;
  ecfg.redis.port = test::redis_port();
  ecfg.use_postgres = true;
  ecfg.postgres.conninfo = test::fresh_database("mm_reuse");
  ecfg.relay.poll_ms = 20;
  ecfg.finalizer.cancel_wait_ms = 2000;
  auto started = engine::start(sys, ecfg);
  ASSERT_TRUE(started) << started.error().detail;
  auto eng = *started;
  EXPECT_EQ(run_rounds(sys, eng, test::fresh_queue("reuse")), 0);
  eng->stop();
}

} // namespace
