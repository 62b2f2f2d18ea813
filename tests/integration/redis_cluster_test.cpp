// The queue store on a real Redis Cluster of 3 primaries + 3 replicas
// (tests/support/redis_cluster.sh, CTest fixture redis_cluster): the slot
// rule agrees with the server, queues land on every shard, a slot moved
// under running claims (MOVED, ASK, TRYAGAIN) costs no call an error and
// books nobody twice, a SIGKILLed primary's replica takes over and calls
// resume, and AUTH on every node is honoured. The conformance suite runs on
// the same cluster (queue_conformance_cluster_test).

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "persistence/queue/redis_slots.hpp"
#include "tests/support/store_harness.hpp"

using namespace mm;
using namespace mm::test;
using namespace std::chrono_literals;

namespace {

struct node_info {
  std::string id;
  uint16_t port = 0;
  bool primary = false;
  std::string primary_id; ///< a replica's primary
};

class redis_cluster_test : public ::testing::Test {
 protected:
  void SetUp() override {
    seeds_ = redis_cluster_seeds();
    std::ifstream in(redis_cluster_dir() + "/ports");
    for (int p; in >> p;)
      ports_.push_back(static_cast<uint16_t>(p));
    ASSERT_EQ(ports_.size(), 6u);
    wait_healthy();
  }

  redis_options cluster_options() const {
    redis_options o;
    o.cluster = true;
    o.host = "127.0.0.1";
    o.port = ports_.front();
    o.seeds = seeds_;
    return o;
  }

  std::unique_ptr<queue_store> connect() {
    return make_redis_store(cluster_options())->connect();
  }

  /// A plain one-node connection, for administration.
  store_value admin(uint16_t port, store_command cmd,
                    const std::string& password = "") {
    redis_options o;
    o.port = port;
    o.max_attempts = 1;
    o.password = password;
    auto r = make_redis_store(o)->connect()->execute({std::move(cmd)}).at(0);
    if (r.code != errc::none)
      throw std::runtime_error("admin command failed: " + r.detail);
    return r.value;
  }

  std::vector<node_info> nodes(uint16_t via) {
    std::vector<node_info> out;
    std::istringstream lines(admin(via, {"CLUSTER", "NODES"}).str);
    for (std::string line; std::getline(lines, line);) {
      std::istringstream f(line);
      std::string id, addr, flags, primary;
      f >> id >> addr >> flags >> primary;
      if (flags.find("fail") != std::string::npos
          || flags.find("noaddr") != std::string::npos)
        continue;
      node_info n;
      n.id = id;
      n.port = static_cast<uint16_t>(
        std::stoi(addr.substr(addr.find(':') + 1, addr.find('@'))));
      n.primary = flags.find("master") != std::string::npos;
      n.primary_id = primary;
      out.push_back(n);
    }
    return out;
  }

  /// Waits until every node answers and sees state ok with 3 primaries,
  /// each with a replica in sync (a test before may have failed one over).
  void wait_healthy() {
    auto deadline = std::chrono::steady_clock::now() + 30s;
    while (std::chrono::steady_clock::now() < deadline) {
      bool ok = true;
      try {
        for (auto p : ports_) {
          auto info = admin(p, {"CLUSTER", "INFO"}).str;
          ok = ok && info.find("cluster_state:ok") != std::string::npos;
        }
        auto ns = nodes(ports_.front());
        int primaries = 0, replicas = 0;
        for (auto& n : ns) {
          (n.primary ? primaries : replicas)++;
          // A replica that has not finished its sync cannot take over.
          if (!n.primary)
            ok = ok
                 && admin(n.port, {"INFO", "replication"})
                        .str.find("master_link_status:up")
                      != std::string::npos;
        }
        ok = ok && primaries == 3 && replicas == 3;
      } catch (const std::exception&) {
        ok = false;
      }
      if (ok)
        return;
      std::this_thread::sleep_for(100ms);
    }
    FAIL() << "the test cluster is not healthy";
  }

  /// The primary of `slot` as the first node that answers sees it.
  uint16_t owner_port(uint16_t slot) {
    for (auto p : ports_) {
      try {
        redis_slots::slot_map m;
        if (m.assign(admin(p, {"CLUSTER", "SLOTS"})))
          return m.node_of(slot)->port;
      } catch (const std::exception&) {
        // a killed node: ask the next
      }
    }
    throw std::runtime_error("no node of the cluster answers CLUSTER SLOTS");
  }

  std::string id_of(uint16_t port) {
    return admin(port, {"CLUSTER", "MYID"}).str;
  }

  /// Moves `slot` from `from` to `to` as redis-cli --cluster reshard does:
  /// IMPORTING/MIGRATING, MIGRATE key by key in batches, SETSLOT NODE
  /// everywhere. Returns the keys moved.
  size_t move_slot(uint16_t slot, uint16_t from, uint16_t to) {
    auto s = std::to_string(slot);
    auto from_id = id_of(from), to_id = id_of(to);
    admin(to, {"CLUSTER", "SETSLOT", s, "IMPORTING", from_id});
    admin(from, {"CLUSTER", "SETSLOT", s, "MIGRATING", to_id});
    size_t moved = 0;
    for (;;) {
      auto keys = admin(from, {"CLUSTER", "GETKEYSINSLOT", s, "2"});
      if (keys.elements.empty())
        break;
      store_command mig{"MIGRATE", "127.0.0.1", std::to_string(to), "", "0",
                        "5000",    "KEYS"};
      for (auto& k : keys.elements)
        mig.push_back(k.str);
      auto r = admin(from, mig);
      if (r.type == store_value::kind::error)
        throw std::runtime_error("MIGRATE: " + r.str);
      moved += keys.elements.size();
      std::this_thread::sleep_for(20ms); // claims run between the batches
    }
    admin(to, {"CLUSTER", "SETSLOT", s, "NODE", to_id});
    admin(from, {"CLUSTER", "SETSLOT", s, "NODE", to_id});
    for (auto p : ports_)
      if (p != to && p != from)
        try {
          admin(p, {"CLUSTER", "SETSLOT", s, "NODE", to_id});
        } catch (const std::exception&) {
          // a replica refuses; the epoch spreads it anyway
        }
    return moved;
  }

  std::vector<std::string> seeds_;
  std::vector<uint16_t> ports_;
};

/// Claims in a loop on one queue from `threads` connections; check() then
/// reads the pairs: nobody matched twice, nobody paired who was not
/// answered queued first, every call answered without an error.
struct claim_load {
  struct answer {
    std::string user;
    claim_outcome outcome;
    std::string partner;
  };
  std::atomic<bool> stop{false};
  std::atomic<int64_t> calls{0}, errors{0};
  std::mutex mu;
  std::vector<answer> answers;
  std::string first_error;
  std::vector<std::thread> workers;

  void start(std::function<std::unique_ptr<queue_store>()> connect,
             std::string queue, int threads) {
    for (int w = 0; w < threads; ++w)
      workers.emplace_back([this, connect, queue, w] {
        store_client c{connect()};
        for (int i = 0; !stop.load(); ++i) {
          auto user = "u" + std::to_string(w) + "-" + std::to_string(i);
          auto r = c.claim(spec(queue, user, "t-" + user));
          ++calls;
          if (!r) {
            std::lock_guard<std::mutex> g{mu};
            if (first_error.empty())
              first_error = to_string(r.error().code) + std::string{": "}
                            + r.error().detail;
            ++errors;
            continue;
          }
          if (r->outcome == claim_outcome::matched)
            c.release(queue, r->partner.ticket);
          std::lock_guard<std::mutex> g{mu};
          answers.push_back({user, r->outcome, r->partner.user});
        }
      });
  }

  void join() {
    stop = true;
    for (auto& t : workers)
      t.join();
    workers.clear();
  }

  ~claim_load() {
    join(); // also when a failed assertion leaves the test early
  }

  /// Double bookings; fills `waiting` with the users queued and not paired.
  int64_t doubles(std::set<std::string>& waiting, int64_t& matches) const {
    std::set<std::string> queued, paired;
    int64_t bad = 0;
    matches = 0;
    for (const auto& a : answers)
      if (a.outcome == claim_outcome::queued)
        queued.insert(a.user);
    for (const auto& a : answers) {
      if (a.outcome != claim_outcome::matched)
        continue;
      ++matches;
      if (!paired.insert(a.partner).second || !paired.insert(a.user).second
          || queued.count(a.partner) == 0 || queued.count(a.user) != 0)
        ++bad;
    }
    for (const auto& u : queued)
      if (paired.count(u) == 0)
        waiting.insert(u);
    return bad;
  }
};

} // namespace

TEST_F(redis_cluster_test, slots_agree_with_cluster_keyslot) {
  std::mt19937 rng{42};
  const std::string alphabet = "ab{}:xyz-_01";
  auto conn = connect();
  int disagree = 0;
  std::vector<std::string> keys;
  for (int i = 0; i < 2000; ++i) {
    std::string k;
    auto len = 1 + rng() % 12;
    for (size_t j = 0; j < len; ++j)
      k += alphabet[rng() % alphabet.size()];
    keys.push_back(k);
  }
  for (const auto& q : {"default", "eu", "q-1"})
    for (const auto& k : codec::queue_keys(q))
      keys.push_back(k);
  std::vector<store_command> cmds;
  for (const auto& k : keys)
    cmds.push_back({"CLUSTER", "KEYSLOT", k});
  auto replies = conn->execute(cmds);
  ASSERT_EQ(replies.size(), keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    ASSERT_EQ(replies[i].code, errc::none) << replies[i].detail;
    if (replies[i].value.integer != redis_slots::key_slot(keys[i]))
      ++disagree;
  }
  EXPECT_EQ(disagree, 0);
}

TEST_F(redis_cluster_test, queues_land_on_every_primary_and_match_there) {
  store_client c{connect()};
  std::set<uint16_t> owners;
  int matched = 0;
  for (int i = 0; i < 30; ++i) {
    auto q = fresh_queue("spread");
    owners.insert(owner_port(redis_slots::key_slot(codec::queue_keys(q)[0])));
    auto a = c.claim(spec(q, "a", "ta"));
    auto b = c.claim(spec(q, "b", "tb"));
    ASSERT_TRUE(a && b);
    matched += a->outcome == claim_outcome::queued
               && b->outcome == claim_outcome::matched
               && b->partner.user == "a";
  }
  EXPECT_EQ(owners.size(), 3u);
  EXPECT_EQ(matched, 30);
}

TEST_F(redis_cluster_test, a_slot_moved_under_claims_costs_no_error) {
  auto q = fresh_queue("reshard");
  auto slot = redis_slots::key_slot(codec::queue_keys(q)[0]);
  claim_load load;
  load.start([this] { return connect(); }, q, 3);
  std::this_thread::sleep_for(300ms);
  auto from = owner_port(slot);
  uint16_t to = 0;
  for (auto& n : nodes(from))
    if (n.primary && n.port != from)
      to = n.port;
  ASSERT_NE(to, 0);
  // There and back again, twice, while the claims run.
  size_t moved = 0;
  for (int round = 0; round < 2; ++round) {
    auto before = load.calls.load();
    moved += move_slot(slot, from, to);
    EXPECT_EQ(owner_port(slot), to);
    std::this_thread::sleep_for(200ms);
    EXPECT_GT(load.calls.load(), before) << "no claim ran during the move";
    moved += move_slot(slot, to, from);
    EXPECT_EQ(owner_port(slot), from);
    std::this_thread::sleep_for(200ms);
  }
  load.join();
  EXPECT_GT(moved, 4u) << "the queue's keys were not migrated";
  std::set<std::string> waiting;
  int64_t matches = 0;
  EXPECT_EQ(load.doubles(waiting, matches), 0);
  EXPECT_GT(matches, 100);
  EXPECT_EQ(load.errors.load(), 0) << load.first_error;
  // Nobody lost: every user answered queued and not paired is still waiting.
  store_client c{connect()};
  EXPECT_EQ(c.waiting(q).size(), waiting.size());
}

TEST_F(redis_cluster_test, a_killed_primary_is_replaced_and_calls_resume) {
  auto q = fresh_queue("failover");
  auto slot = redis_slots::key_slot(codec::queue_keys(q)[0]);
  auto victim = owner_port(slot);
  size_t victim_index = 0;
  for (size_t i = 0; i < ports_.size(); ++i)
    if (ports_[i] == victim)
      victim_index = i + 1;
  ASSERT_NE(victim_index, 0u);
  claim_load load;
  load.start([this] { return connect(); }, q, 2);
  std::this_thread::sleep_for(500ms);
  auto before = load.calls.load();
  std::ifstream pidf(redis_cluster_dir() + "/n" + std::to_string(victim_index)
                     + "/redis.pid");
  pid_t pid = 0;
  ASSERT_TRUE(pidf >> pid);
  auto killed_at = std::chrono::steady_clock::now();
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  // Calls block while the replica is promoted, then go on.
  auto resumed = std::chrono::steady_clock::time_point{};
  while (std::chrono::steady_clock::now() - killed_at < 20s) {
    auto now_calls = load.calls.load();
    std::this_thread::sleep_for(50ms);
    if (load.calls.load() > now_calls + 5 && owner_port(slot) != victim) {
      resumed = std::chrono::steady_clock::now();
      break;
    }
  }
  std::this_thread::sleep_for(500ms);
  load.join();
  ASSERT_NE(resumed, std::chrono::steady_clock::time_point{})
    << "calls did not resume within 20 s";
  auto took
    = std::chrono::duration_cast<std::chrono::milliseconds>(resumed - killed_at)
        .count();
  std::cout << "failover: calls resumed " << took << " ms after the SIGKILL ("
            << load.calls.load() - before << " calls since)" << std::endl;
  EXPECT_LT(took, 8000);
  EXPECT_EQ(load.errors.load(), 0) << load.first_error;
  std::set<std::string> waiting;
  int64_t matches = 0;
  EXPECT_EQ(load.doubles(waiting, matches), 0);
  EXPECT_GT(matches, 10);
  // The old primary comes back as a replica of the new one.
  auto script = std::string{MM_SOURCE_DIR} + "/tests/support/redis_cluster.sh";
  ASSERT_EQ(std::system((script + " restart " + redis_cluster_dir() + " "
                         + std::to_string(victim_index))
                          .c_str()),
            0);
  wait_healthy();
}

TEST_F(redis_cluster_test, auth_on_every_node_is_honoured) {
  const std::string pw = "cluster-secret-7f3a";
  for (auto p : ports_) {
    admin(p, {"CONFIG", "SET", "masterauth", pw});
    admin(p, {"CONFIG", "SET", "requirepass", pw});
  }
  auto cleanup = [&] {
    for (auto p : ports_) {
      admin(p, {"CONFIG", "SET", "requirepass", ""}, pw);
      admin(p, {"CONFIG", "SET", "masterauth", ""});
    }
  };
  auto o = cluster_options();
  auto none = probe_redis(o);
  o.password = "wrong";
  auto wrong = probe_redis(o);
  o.password = pw;
  auto right = probe_redis(o);
  int matched = 0;
  {
    store_client c{make_redis_store(o)->connect()};
    for (int i = 0; i < 10; ++i) {
      auto q = fresh_queue("auth");
      auto a = c.claim(spec(q, "a", "ta"));
      auto b = c.claim(spec(q, "b", "tb"));
      matched += a && b && b->outcome == claim_outcome::matched;
    }
  }
  cleanup();
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().code, errc::store_auth_failed) << none.error().detail;
  ASSERT_FALSE(wrong);
  EXPECT_EQ(wrong.error().code, errc::store_auth_failed);
  EXPECT_EQ(wrong.error().detail.find("wrong"), std::string::npos)
    << "the password is in the error: " << wrong.error().detail;
  ASSERT_TRUE(right) << right.error().detail;
  EXPECT_TRUE(right->cluster);
  EXPECT_EQ(right->primaries, 3u);
  EXPECT_EQ(matched, 10);
}
