// Queues are declared, not invented (issue 12, item 3), against real matchd
// processes: a node serves the queues its configuration names (the one
// queue `default` when it names none); a join of any other queue is a
// named 404 that creates nothing; open mode (`--queues '*'`) exists only
// explicitly and stays bounded.

#include <atomic>
#include <chrono>
#include <cstdio>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "app/common/token.hpp"
#include "tests/support/api_client.hpp"
#include "tests/support/matchd_process.hpp"
#include "tests/support/pg_client.hpp"
#include "tests/support/test_env.hpp"

using namespace mm;
using namespace mm::test;
using namespace std::chrono_literals;

namespace {

const std::string secret = "queues-e2e-secret-0123456789";

std::string token(const std::string& user) {
  auto now = std::chrono::duration_cast<std::chrono::seconds>(
               std::chrono::system_clock::now().time_since_epoch())
               .count();
  return sign_token(secret, user, now + 3600);
}

std::string unique(const std::string& prefix) {
  static std::mt19937_64 rng{std::random_device{}()};
  return prefix + std::to_string(rng() % 1000000000);
}

std::string log_path(const std::string& name) {
  return std::string{::testing::TempDir()} + "matchd_queues_" + name + ".log";
}

http_answer join(http_conn& c, const std::string& user,
                 const std::string& queue, const std::string& ticket) {
  json body{{"queue", queue}, {"ticket", ticket}};
  return c.request(http::verb::post, "/v1/users/" + user + "/tickets",
                   token(user), body.dump());
}

/// A metric's value in the /metrics text; -1 if absent.
double metric(const std::string& text, const std::string& name) {
  return metric_in(text, name);
}

/// How many keys of the private Redis match `pattern` (SCAN, not KEYS);
/// -1 when redis-cli failed.
int redis_keys(const std::string& pattern) {
  auto cmd = "redis-cli -p " + std::to_string(redis_port())
             + " --scan --pattern '" + pattern + "'";
  auto* f = ::popen(cmd.c_str(), "r");
  if (f == nullptr)
    return -1;
  int lines = 0;
  char buf[512];
  while (::fgets(buf, sizeof buf, f))
    ++lines;
  return ::pclose(f) == 0 ? lines : -1;
}

/// The series (name and labels) of `after` that `before` lacks, one a line.
std::string new_series(const std::string& before, const std::string& after) {
  auto names = [](const std::string& text) {
    std::set<std::string> out;
    std::istringstream in{text};
    for (std::string line; std::getline(in, line);)
      if (!line.empty() && line[0] != '#')
        out.insert(line.substr(0, line.rfind(' ')));
    return out;
  };
  auto had = names(before);
  std::string out;
  for (auto& s : names(after))
    if (had.count(s) == 0)
      out += s + "\n";
  return out;
}

/// The acceptance case: a node with the default configuration on Redis +
/// PostgreSQL; 10,000 joins of invented queue names by 10,000 users, over
/// four keep-alive connections at once, are all refused 404 unknown_queue
/// and change nothing: no queue becomes known, no depth label appears, no
/// session actor or client link is made, /metrics keeps its size, Redis
/// holds no key of those queues. A pair in `default` still matches after.
TEST(queues_e2e, invented_queue_names_are_refused_and_change_nothing) {
  matchd_process node{{"--secret", secret, "--log-level", "warn", "--rate",
                       "100000", "--redis",
                       "127.0.0.1:" + std::to_string(redis_port()),
                       "--postgres", fresh_database("queues_e2e")},
                      log_path("invented")};
  http_conn c{node.port()};
  auto metrics = [&] { return c.request(http::verb::get, "/metrics").body; };
  auto tag = unique("inv");
  // One refused join and one scrape first: the request series of both
  // routes (a histogram per route and status) then exist, and only growth
  // per invented name is left to see.
  ASSERT_EQ(join(c, tag + "-warm", tag + "-warm", "t-warm").status, 404u);
  metrics();
  // Let the first sweep run, so the figures below are steady ones.
  std::this_thread::sleep_for(1200ms);
  auto before = metrics();
  constexpr int joins = 10000, conns = 4;
  std::atomic<int> refused{0}, other{0};
  std::string first_other;
  std::vector<std::thread> threads;
  for (int t = 0; t < conns; ++t)
    threads.emplace_back([&, t] {
      http_conn own{node.port()};
      for (int i = t; i < joins; i += conns) {
        auto n = std::to_string(i);
        auto a = join(own, tag + "-u" + n, tag + "-q" + n, "t-" + n);
        if (a.status == 404 && a.error() == "unknown_queue") {
          ++refused;
        } else if (other++ == 0) {
          first_other = std::to_string(a.status) + " " + a.body;
        }
      }
    });
  for (auto& th : threads)
    th.join();
  EXPECT_EQ(refused.load(), joins) << "first other answer: " << first_other;
  EXPECT_EQ(other.load(), 0);
  // A sweep later (the broker refreshes the depths every second).
  std::this_thread::sleep_for(1500ms);
  auto after = metrics();
  EXPECT_EQ(after.find(tag), std::string::npos)
    << "an invented queue shows in /metrics";
  EXPECT_LE(metric(after, "mm_queues_known"), 1);
  EXPECT_EQ(metric(after, "mm_sessions_live"), 0);
  EXPECT_EQ(metric(after, "mm_client_links"), 0);
  EXPECT_EQ(metric(after, "mm_directory_users"), 0);
  // Counters grow by digits and a status label; nothing per queue or user.
  EXPECT_LE(after.size(), before.size() + 1024)
    << before.size() << " -> " << after.size() << " bytes; new series:\n"
    << new_series(before, after);
  EXPECT_EQ(redis_keys("mm:{" + tag + "*"), 0);
  EXPECT_EQ(redis_keys("*" + tag + "*"), 0);
  // The declared queue still serves: a pair in `default` matches.
  auto ann = unique("ann"), ben = unique("ben");
  auto ja = join(c, ann, "default", "t-a");
  ASSERT_EQ(ja.status, 200u) << ja.body;
  ASSERT_EQ(join(c, ben, "default", "t-b").status, 200u);
  http_answer sa, sb;
  EXPECT_TRUE(eventually(
    [&] {
      sa = c.request(http::verb::get, "/v1/users/" + ann + "/tickets/t-a",
                     token(ann));
      sb = c.request(http::verb::get, "/v1/users/" + ben + "/tickets/t-b",
                     token(ben));
      return sa.as_json()["state"] == "matched"
             && sb.as_json()["state"] == "matched";
    },
    5s))
    << sa.body << " " << sb.body;
  EXPECT_EQ(sa.as_json()["session_id"], sb.as_json()["session_id"]);
  // The scan above can see keys: the served queue's are there once used.
  EXPECT_GT(redis_keys("mm:{default}:*"), 0);
}

/// A declared list: exactly those queues, others 404 (also on the embedded
/// stores, where the engine's own allow-list is behind the door's).
TEST(queues_e2e, a_declared_list_is_exactly_what_is_served) {
  matchd_process listed{{"--secret", secret, "--queues", "voice,games",
                         "--log-level", "error"},
                        log_path("listed")};
  http_conn l{listed.port()};
  auto eve = unique("eve");
  for (auto q : {"chess", "default"}) {
    auto unknown = join(l, eve, q, "t-1");
    EXPECT_EQ(unknown.status, 404u) << q << ": " << unknown.body;
    EXPECT_EQ(unknown.error(), "unknown_queue") << q;
  }
  EXPECT_EQ(join(l, eve, "voice", "t-1").status, 200u);
  auto fay = unique("fay");
  EXPECT_EQ(join(l, fay, "games", "t-1").status, 200u);
}

/// Open mode, only when asked for (`--queues '*'`): bounded by a maximum
/// count of queues known at once, of which idle empty ones are forgotten
/// (docs/engine.md).
TEST(queues_e2e, open_mode_is_bounded_and_idle_queues_forgotten) {
  matchd_process node{{"--secret", secret, "--queues", "*", "--max-queues", "2",
                       "--queue-idle", "1000", "--log-level", "error"},
                      log_path("open")};
  http_conn c{node.port()};
  auto metric_now = [&](const std::string& name) {
    return metric(c.request(http::verb::get, "/metrics").body, name);
  };
  auto qa = unique("qa"), qb = unique("qb"), qc = unique("qc");
  auto ann = unique("ann"), ben = unique("ben"), cid = unique("cid");
  ASSERT_EQ(join(c, ann, qa, "t-" + ann).status, 200u);
  ASSERT_EQ(join(c, ben, qb, "t-" + ben).status, 200u);
  // One queue more is refused, named, and changes nothing.
  auto refused = join(c, cid, qc, "t-" + cid);
  EXPECT_EQ(refused.status, 409u) << refused.body;
  EXPECT_EQ(refused.error(), "too_many_queues");
  auto none = c.request(http::verb::get,
                        "/v1/users/" + cid + "/tickets/t-" + cid, token(cid));
  EXPECT_EQ(none.status, 404u) << none.body;
  EXPECT_EQ(metric_now("mm_queues_known"), 2);
  // A queue emptied (ann cancels) is forgotten after --queue-idle: its
  // depth label goes, its place takes the new queue.
  auto cancel = c.request(http::verb::delete_,
                          "/v1/users/" + ann + "/tickets/t-" + ann, token(ann));
  ASSERT_EQ(cancel.status, 200u) << cancel.body;
  bool forgotten = false;
  for (int i = 0; i < 60 && !forgotten; ++i) {
    std::this_thread::sleep_for(100ms);
    auto text = c.request(http::verb::get, "/metrics").body;
    forgotten = text.find("queue=\"" + qa + "\"") == std::string::npos
                && text.find("queue=\"" + qb + "\"") != std::string::npos;
  }
  EXPECT_TRUE(forgotten) << c.request(http::verb::get, "/metrics").body;
  EXPECT_EQ(metric_now("mm_queues_known"), 1);
  auto now_ok = join(c, cid, qc, "t-" + cid);
  EXPECT_EQ(now_ok.status, 200u) << now_ok.body;
  // A queue with a waiter (ben) is never forgotten: still full.
  auto dan = unique("dan");
  EXPECT_EQ(join(c, dan, unique("qd"), "t-" + dan).error(), "too_many_queues");
}

} // namespace
