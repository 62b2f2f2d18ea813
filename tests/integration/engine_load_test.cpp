// 10,000 users join one queue through the engine on real Redis and real
// PostgreSQL, from many concurrent clients; 10% cancel at random moments.
// A checker then verifies the invariants from the database, the Redis
// Stream and what the session actors reported — and fails on any violation.

#include <gtest/gtest.h>

#include <caf/all.hpp>

#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <unistd.h>

#include "actors/engine.hpp"
#include "core/ticket_id.hpp"
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

/// What the host saw: per user, the last state and every event id.
struct reports {
  std::mutex mtx;
  std::map<std::string, session_state> last;
  std::map<std::string, std::set<std::string>> events;
  std::map<std::string, session_state> cancel_replies;
  /// Cancels answered with an error, a timeout included: failures.
  std::map<std::string, std::string> cancel_errors;
  int64_t changes = 0;
};

constexpr int users = 10000;
constexpr int clients = 50; // concurrent driver actors

TEST(engine_load, ten_thousand_users_with_cancels_keep_every_invariant) {
  mm_config cfg;
  caf::actor_system sys{cfg};
  engine_config ecfg;
  ecfg.use_redis = true;
  ecfg.redis.port = test::redis_port();
  ecfg.use_postgres = true;
  ecfg.postgres.conninfo = test::fresh_database("mm_load");
  ecfg.relay.poll_ms = 200;
  // Waiting sessions re-scan on every heartbeat: two waiters left beside
  // each other (a requeue next to a newer arrival) pair up within a second.
  ecfg.session.heartbeat_ms = 1000;
  auto queue = test::fresh_queue("load");
  auto stream = "mm:events:" + queue;
  ecfg.relay.stream = stream;
  auto started = engine::start(sys, ecfg);
  ASSERT_TRUE(started) << started.error().detail;
  auto eng = *started;

  auto rep = std::make_shared<reports>();
  auto recorder = sys.spawn(
    [rep](subscriber_actor::pointer) -> subscriber_actor::behavior_type {
      return {
        [rep](session_state& st) {
          std::lock_guard<std::mutex> g{rep->mtx};
          rep->last[st.user] = st;
          ++rep->changes;
        },
        [](match_event&) {
          // Counted per user by the forwarders below.
        },
      };
    });
  // Each session reports through its own forwarder, so that receipts of an
  // event are counted per user.
  std::vector<session_actor> sessions;
  for (int i = 0; i < users; ++i) {
    auto user = "u" + std::to_string(i);
    auto fwd = sys.spawn([rep, recorder, user](subscriber_actor::pointer self)
                           -> subscriber_actor::behavior_type {
      return {
        [self, recorder](session_state& st) { self->send(recorder, st); },
        [rep, user](match_event& ev) {
          std::lock_guard<std::mutex> g{rep->mtx};
          rep->events[ev.event_id].insert(user);
          ++rep->changes;
        },
      };
    });
    sessions.push_back(eng->session(user, fwd));
  }

  // Many concurrent clients: each joins its share of users in a random order
  // and cancels 10% of them after a random delay.
  std::mt19937 rng{42};
  std::vector<std::vector<int>> shares(clients);
  for (int i = 0; i < users; ++i)
    shares[rng() % clients].push_back(i);
  std::set<int> cancellers;
  while (static_cast<int>(cancellers.size()) < users / 10)
    cancellers.insert(static_cast<int>(rng() % users));
  std::atomic<int> joins_done{0}, join_errors{0};
  std::vector<caf::actor> drivers;
  for (int c = 0; c < clients; ++c) {
    drivers.push_back(
      sys.spawn([&, c, seed = rng()](caf::event_based_actor* self) {
        std::mt19937 r{static_cast<uint32_t>(seed)};
        for (int i : shares[c]) {
          auto s = sessions[i];
          auto user = "u" + std::to_string(i);
          self
            ->request(s, std::chrono::seconds(60), join_atom_v,
                      join_request{queue, "t" + std::to_string(i), ""})
            .then([&](session_state&) { ++joins_done; },
                  [&](caf::error&) { ++joins_done, ++join_errors; });
          if (cancellers.count(i)) {
            auto delay = std::chrono::milliseconds(r() % 3000);
            self->delayed_send(self, delay, cancel_atom_v, s, user);
          }
        }
        return caf::behavior{
          [self, rep](cancel_atom, session_actor& s, std::string& user) {
            self->request(s, std::chrono::seconds(60), cancel_atom_v)
              .then(
                [rep, user](session_state& st) {
                  std::lock_guard<std::mutex> g{rep->mtx};
                  rep->cancel_replies[user] = st;
                },
                [rep, user](caf::error& e) {
                  // No answer within the bound (or an error) is a failure,
                  // never "not acknowledged": a cancel answers the truth.
                  std::lock_guard<std::mutex> g{rep->mtx};
                  rep->cancel_errors[user] = to_string(e);
                });
          },
        };
      }));
  }

  // Quiescence: every join answered, every cancel answered, no change for
  // a second, then the relay drains what is left.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(4);
  int64_t seen = -1;
  auto t0 = std::chrono::steady_clock::now();
  for (;;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2500));
    size_t cancels_done;
    int64_t changes;
    {
      std::lock_guard<std::mutex> g{rep->mtx};
      cancels_done = rep->cancel_replies.size() + rep->cancel_errors.size();
      changes = rep->changes;
    }
    if (joins_done == users && cancels_done == cancellers.size()
        && changes == seen)
      break;
    std::cout << "t+"
              << std::chrono::duration_cast<std::chrono::seconds>(
                   std::chrono::steady_clock::now() - t0)
                   .count()
              << "s joins " << joins_done << " cancels " << cancels_done
              << " changes " << changes << std::endl;
    seen = changes;
    ASSERT_LT(std::chrono::steady_clock::now(), deadline)
      << "no quiescence: joins " << joins_done << ", cancels " << cancels_done;
  }
  caf::scoped_actor self{sys};
  self->request(eng->relay(), std::chrono::seconds(60), flush_atom_v)
    .receive([](uint32_t) {}, [&](caf::error& e) { FAIL() << sys.render(e); });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_EQ(join_errors, 0);

  // -- the checker ----------------------------------------------------------------
  test::pg_client db{ecfg.postgres.conninfo};
  test::store_client redis{make_redis_store(ecfg.redis)->connect()};
  int violations = 0;
  auto violation = [&](const std::string& what) {
    if (++violations <= 20)
      ADD_FAILURE() << what;
  };
  // I1 of docs/design.md: nobody is a member of two sessions (none is ever closed here).
  for (auto& row : db.query("SELECT user_id, count(*) FROM session_members "
                            "GROUP BY user_id HAVING count(*) > 1"))
    violation("double booking: " + row[0] + " in " + row[1] + " sessions");
  // I5: exactly one match.created per session, delivered.
  for (auto& row :
       db.query("SELECT s.id, count(o.id) FROM match_sessions s LEFT JOIN "
                "outbox o ON o.aggregate_id = s.id AND o.type = "
                "'match.created' GROUP BY s.id HAVING count(o.id) <> 1"))
    violation("session " + row[0] + " has " + row[1] + " events");
  for (auto& row : db.query("SELECT event_id FROM outbox_pending"))
    violation("event not delivered: " + row[0]);
  std::set<std::string> in_stream;
  auto xr = redis.command({"XRANGE", stream, "-", "+"});
  for (auto& entry : xr.elements) {
    auto& fields = entry.elements.at(1).elements;
    for (size_t k = 0; k + 1 < fields.size(); k += 2)
      if (fields[k].str == "event_id")
        in_stream.insert(fields[k + 1].str);
  }
  std::map<std::string, std::string> matched_in; // user -> session
  auto sessions_rows = db.query(
    "SELECT s.id, s.user_a, s.user_b, o.event_id FROM match_sessions s JOIN "
    "outbox o ON o.aggregate_id = s.id");
  std::lock_guard<std::mutex> g{rep->mtx};
  for (auto& row : sessions_rows) {
    matched_in[row[1]] = row[0];
    matched_in[row[2]] = row[0];
    if (!in_stream.count(row[3]))
      violation("event missing from the stream: " + row[3]);
    auto& got = rep->events[row[3]];
    if (!got.count(row[1]) || !got.count(row[2]))
      violation("event " + row[3] + " not delivered to both sessions");
  }
  // Every cancel is answered within its bound, with the truth: cancelled
  // or matched (docs/api.md). An error or a timeout is a failure.
  for (auto& [user, why] : rep->cancel_errors)
    violation("cancel of " + user + " failed: " + why);
  // I3: an acknowledged cancel is never matched; "matched" names the
  // session the database has.
  int acked = 0;
  for (auto& [user, st] : rep->cancel_replies) {
    if (st.phase == session_phase::cancelled) {
      ++acked;
      if (matched_in.count(user))
        violation("cancelled user matched: " + user);
    } else if (st.phase == session_phase::matched) {
      auto m = matched_in.find(user);
      if (m == matched_in.end() || m->second != st.session_id)
        violation("cancel of " + user + " answered matched in '" + st.session_id
                  + "', the database says '"
                  + (m == matched_in.end() ? "" : m->second) + "'");
    } else {
      violation("cancel of " + user + " answered " + to_string(st.phase) + " ("
                + st.detail + ")");
    }
  }
  // I2: nobody who did not cancel is lost: matched, or waiting in the queue.
  auto waiting = redis.waiting(queue);
  std::set<std::string> waiting_users;
  for (auto& t : waiting) // store tickets name their user
    if (auto p = parse_store_ticket(t))
      waiting_users.insert(p->user);
  int lost = 0, still_waiting = 0;
  for (int i = 0; i < users; ++i) {
    auto user = "u" + std::to_string(i);
    auto c = rep->cancel_replies.find(user);
    if (c != rep->cancel_replies.end()
        && c->second.phase == session_phase::cancelled)
      continue;
    if (matched_in.count(user)) {
      if (rep->last[user].phase != session_phase::matched)
        // The detail names the path that ended the join there.
        violation(user + " matched in the database (session " + matched_in[user]
                  + "), session says " + to_string(rep->last[user].phase) + " ("
                  + rep->last[user].detail + ")");
      continue;
    }
    if (waiting_users.count(user)
        && rep->last[user].phase == session_phase::queued) {
      ++still_waiting;
      continue;
    }
    ++lost;
    violation("lost user " + user + " (" + to_string(rep->last[user].phase)
              + " " + rep->last[user].detail + ")");
  }
  EXPECT_EQ(violations, 0);
  EXPECT_EQ(lost, 0);
  EXPECT_GT(sessions_rows.size(), size_t{users / 3}); // it really matched
  EXPECT_GT(acked, 0);
  // One queue, and waiters re-scan: at most one live user can be left.
  EXPECT_LE(still_waiting, 1);
  std::cout << "matches " << sessions_rows.size() << ", acked cancels " << acked
            << ", still waiting " << still_waiting << std::endl;
  eng->stop();
  for (auto& s : sessions)
    caf::anon_send_exit(s, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(recorder, caf::exit_reason::user_shutdown);
  // The drivers' pending request timeouts would keep them (and the actor
  // system's shutdown) waiting for a minute.
  for (auto& d : drivers)
    caf::anon_send_exit(d, caf::exit_reason::kill);
}

} // namespace
