// floor_bench: the floor of `bench/run e2e` (issue 16) — the least work any
// correct matcher on Redis + PostgreSQL does per match, with no actors, no
// relay and no client: two atomic claims of the minimal claim script
// (bench/lua/minimal_claim.lua; the first files a waiter, the second takes
// it), pipelined over one hiredis connection, and the match's rows — one
// session, two members, one outbox row — written by libpq in multi-row
// INSERTs of --batch matches per transaction, on a second thread while the
// claims go on. Tables with their primary keys only (no guard index: the
// floor is cheaper than a matcher that also keeps I1 of docs/design.md in
// the database).
//
// With `--rows product` the same claims are followed by the PostgreSQL work
// the engine does per match, through its own match store and no actor: the
// in-session lookup of both users (as the joins ask it, one statement per
// batch), the group commit of the batch (the engine's schema and statement:
// the guard index of I1, the retry key, the outbox and its indexes) and the
// delivery mark of its events (as the relay marks them). What that costs
// against the floor bounds what any engine on this schema can reach
// (docs/benchmarks.md, "What the floor leaves out").
//
// Prints the matches per second and the CPU per match of this process, of
// Redis (INFO cpu) and of PostgreSQL (the postmaster and its children, from
// /proc), the script's server time per call (INFO commandstats), and as
// last line: floor_matches_per_s=N floor_cpu_us_per_match=X.
//
//   floor_bench --port P --conninfo "host=... dbname=..." --script FILE
//               [--matches N] [--pipeline PAIRS] [--batch MATCHES]
//               [--rows floor|product]

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <fstream>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <hiredis/hiredis.h>

#include "bench/bench_common.hpp"
#include "bench/bench_pg.hpp"
#include "persistence/matchdb/match_store.hpp"

namespace {

using namespace mm::bench;

struct options {
  uint16_t port = 6379;
  std::string conninfo;
  std::string script;
  uint64_t matches = 100000;
  uint32_t pipeline = 128; ///< pairs (two claims each) per round trip
  uint32_t batch = 100;    ///< matches per transaction
  /// floor: tables with primary keys only; product: the engine's schema,
  /// through its match store.
  std::string rows = "floor";
};

/// One hiredis connection; throws on any error.
class redis_conn {
 public:
  explicit redis_conn(uint16_t port) : c_(redisConnect("127.0.0.1", port)) {
    if (c_ == nullptr || c_->err != 0)
      throw std::runtime_error("redis connect failed");
  }
  ~redis_conn() {
    redisFree(c_);
  }
  redis_conn(const redis_conn&) = delete;
  redis_conn& operator=(const redis_conn&) = delete;

  /// Runs one command; its reply as text (status, string or integer).
  std::string run(const std::vector<std::string>& argv) {
    append(argv);
    return read();
  }

  void append(const std::vector<std::string>& argv) {
    std::vector<const char*> p;
    std::vector<size_t> n;
    for (auto& a : argv) {
      p.push_back(a.data());
      n.push_back(a.size());
    }
    if (redisAppendCommandArgv(c_, static_cast<int>(p.size()), p.data(),
                               n.data())
        != REDIS_OK)
      throw std::runtime_error("redis append failed");
  }

  /// The next reply: its text, or for an array its first element.
  std::string read() {
    void* raw = nullptr;
    if (redisGetReply(c_, &raw) != REDIS_OK || raw == nullptr)
      throw std::runtime_error("redis read failed");
    auto* r = static_cast<redisReply*>(raw);
    std::string out;
    if (r->type == REDIS_REPLY_ERROR) {
      out = std::string(r->str, r->len);
      freeReplyObject(r);
      throw std::runtime_error("redis: " + out);
    }
    if (r->type == REDIS_REPLY_ARRAY && r->elements > 0
        && r->element[0]->type == REDIS_REPLY_STRING)
      out.assign(r->element[0]->str, r->element[0]->len);
    else if (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS)
      out.assign(r->str, r->len);
    else if (r->type == REDIS_REPLY_INTEGER)
      out = std::to_string(r->integer);
    freeReplyObject(r);
    return out;
  }

 private:
  redisContext* c_;
};

/// A "name:value" field of INFO `section`.
double info_field(redis_conn& c, const char* section, const std::string& key) {
  std::istringstream in(c.run({"INFO", section}));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key + ":", 0) == 0)
      return std::stod(line.substr(key.size() + 1));
  }
  return 0;
}

uint64_t redis_cpu(redis_conn& c) {
  return static_cast<uint64_t>((info_field(c, "cpu", "used_cpu_user")
                                + info_field(c, "cpu", "used_cpu_sys"))
                               * 1e9);
}

/// EVALSHA calls and usec from INFO commandstats.
std::pair<double, double> evalsha_stats(redis_conn& c) {
  auto st = parse_commandstats(c.run({"INFO", "commandstats"}))["evalsha"];
  return {static_cast<double>(st.calls), static_cast<double>(st.usec)};
}

/// Matched pairs from the Redis thread to the PostgreSQL thread.
struct pair_queue {
  std::mutex mtx;
  std::condition_variable cv;
  std::deque<uint64_t> pairs; ///< pair k: users fa<k> and fb<k>
  bool done = false;
};

void claim_loop(const options& o, const std::string& sha, pair_queue& q,
                std::atomic<uint64_t>& refused) {
  redis_conn c{o.port};
  const std::vector<std::string> keys{"mm:{floor}:waiting", "mm:{floor}:seq",
                                      "mm:{floor}:users"};
  for (uint64_t base = 0; base < o.matches; base += o.pipeline) {
    auto end = std::min<uint64_t>(o.matches, base + o.pipeline);
    for (auto k = base; k < end; ++k) {
      for (const char* side : {"fa", "fb"})
        c.append({"EVALSHA", sha, "3", keys[0], keys[1], keys[2],
                  side + std::to_string(k), "30000"});
    }
    std::vector<uint64_t> matched;
    for (auto k = base; k < end; ++k) {
      auto first = c.read();
      auto second = c.read();
      if (first == "queued" && second == "matched")
        matched.push_back(k);
      else
        ++refused;
    }
    std::lock_guard<std::mutex> guard{q.mtx};
    q.pairs.insert(q.pairs.end(), matched.begin(), matched.end());
    q.cv.notify_one();
  }
  std::lock_guard<std::mutex> guard{q.mtx};
  q.done = true;
  q.cv.notify_one();
}

/// One transaction: the sessions, members and outbox rows of `pairs`.
std::string batch_sql(const std::vector<uint64_t>& pairs) {
  std::string s = "BEGIN;INSERT INTO floor_sessions(id,user_a,user_b) VALUES ";
  std::string m = ";INSERT INTO floor_members(session_id,user_id) VALUES ";
  std::string x = ";INSERT INTO floor_outbox(session_id,payload) VALUES ";
  bool first = true;
  for (auto k : pairs) {
    auto n = std::to_string(k);
    auto id = "'s" + n + "'";
    auto a = "'fa" + n + "'";
    auto b = "'fb" + n + "'";
    auto sep = first ? "" : ",";
    s += sep + ("(" + id + "," + a + "," + b + ")");
    m += sep + ("(" + id + "," + a + "),(" + id + "," + b + ")");
    x += sep
         + ("(" + id + ",'{\"type\":\"match.created\",\"users\":[\"fa" + n
            + "\",\"fb" + n + "\"]}')");
    first = false;
  }
  return s + m + x + ";COMMIT";
}

/// The engine's PostgreSQL work for the matches `pairs`: lookups, group
/// commit, delivery mark. Throws unless every match was committed and
/// marked.
void product_batch(mm::match_store& st, const std::vector<uint64_t>& pairs) {
  std::vector<std::string> users;
  std::vector<mm::match_request> reqs;
  for (auto k : pairs) {
    auto n = std::to_string(k);
    mm::match_request r;
    r.queue = "floor";
    r.user_a = "fa" + n;
    r.ticket_a = "ta" + n;
    r.user_b = "fb" + n;
    r.ticket_b = "tb" + n;
    users.push_back(r.user_a);
    users.push_back(r.user_b);
    reqs.push_back(std::move(r));
  }
  for (auto& in : st.active_sessions_of(users))
    if (!in || in->has_value())
      throw std::runtime_error("in-session lookup: a user is taken or the "
                               "lookup failed");
  std::vector<std::string> events;
  for (auto& res : st.commit_matches(reqs)) {
    if (!res || !res->created)
      throw std::runtime_error("group commit: "
                               + (res ? "not created" : res.error().detail));
    events.push_back(mm::match_created_event_id(res->session_id));
  }
  auto marked = st.mark_delivered(events);
  if (!marked || *marked != events.size())
    throw std::runtime_error("delivery mark failed");
}

uint64_t write_loop(const options& o, pair_queue& q) {
  std::unique_ptr<mm::match_store> st;
  std::unique_ptr<mm::bench::pg_conn> db;
  if (o.rows == "product") {
    mm::pg_options po;
    po.conninfo = o.conninfo;
    st = mm::make_pg_match_store(po)->connect();
    // As the engine's finalizer: the events leased to the node that
    // committed them, for its relay to push and mark.
    st->set_commit_lease(30000);
  } else {
    db = std::make_unique<mm::bench::pg_conn>(o.conninfo);
  }
  uint64_t written = 0;
  for (;;) {
    std::vector<uint64_t> batch;
    {
      std::unique_lock<std::mutex> guard{q.mtx};
      q.cv.wait(guard, [&] { return q.pairs.size() >= o.batch || q.done; });
      while (!q.pairs.empty() && batch.size() < o.batch) {
        batch.push_back(q.pairs.front());
        q.pairs.pop_front();
      }
      if (batch.empty() && q.done)
        return written;
    }
    if (batch.empty())
      continue;
    if (st)
      product_batch(*st, batch);
    else
      db->query(batch_sql(batch));
    written += batch.size();
  }
}

} // namespace

int main(int argc, char** argv) {
  options o;
  CLI::App app{"floor_bench: the least work per match on Redis + PostgreSQL "
               "(bench/run e2e)"};
  app.add_option("--port", o.port, "Redis port on 127.0.0.1")->required();
  app
    .add_option("--conninfo", o.conninfo, "libpq conninfo of an empty database")
    ->required();
  app.add_option("--script", o.script, "the minimal claim script (Lua)")
    ->required();
  app.add_option("--matches", o.matches, "matches to make")
    ->capture_default_str();
  app.add_option("--pipeline", o.pipeline, "pairs per Redis round trip")
    ->capture_default_str()
    ->check(CLI::Range(1, 10000));
  app.add_option("--batch", o.batch, "matches per transaction")
    ->capture_default_str()
    ->check(CLI::Range(1, 10000));
  app
    .add_option("--rows", o.rows,
                "floor: the rows with primary keys only; product: the "
                "engine's lookups, group commit and marks (its schema)")
    ->capture_default_str()
    ->check(CLI::IsMember({"floor", "product"}));
  CLI11_PARSE(app, argc, argv);
  try {
    std::ifstream in(o.script);
    std::stringstream text;
    text << in.rdbuf();
    if (text.str().empty())
      throw std::runtime_error("empty script " + o.script);
    redis_conn admin{o.port};
    auto sha = admin.run({"SCRIPT", "LOAD", text.str()});
    admin.run(
      {"UNLINK", "mm:{floor}:waiting", "mm:{floor}:seq", "mm:{floor}:users"});
    mm::bench::pg_conn db{o.conninfo};
    if (o.rows == "product") {
      mm::pg_options po;
      po.conninfo = o.conninfo;
      auto applied = mm::make_pg_match_store(po)->connect()->apply_migrations();
      if (!applied)
        throw std::runtime_error("migrations: " + applied.error().detail);
      if (db.count("SELECT count(*) FROM match_sessions") != 0)
        throw std::runtime_error("--rows product needs an empty database");
    }
    db.query("DROP TABLE IF EXISTS floor_sessions, floor_members, floor_outbox;"
             "CREATE TABLE floor_sessions(id text PRIMARY KEY, user_a text NOT "
             "NULL, user_b text NOT NULL, created_at timestamptz NOT NULL "
             "DEFAULT now());"
             "CREATE TABLE floor_members(session_id text, user_id text, "
             "PRIMARY KEY (session_id, user_id));"
             "CREATE TABLE floor_outbox(id bigserial PRIMARY KEY, session_id "
             "text NOT NULL, payload text NOT NULL, created_at timestamptz NOT "
             "NULL DEFAULT now())");
    int postmaster = postmaster_of(db);
    auto r0 = redis_cpu(admin);
    auto e0 = evalsha_stats(admin);
    auto p0 = server_cpu_ns(postmaster);
    auto s0 = process_cpu_ns();
    auto m0 = machine_busy_ns();
    auto t0 = now_s();
    pair_queue q;
    std::atomic<uint64_t> refused{0};
    uint64_t written = 0;
    std::string write_error;
    std::thread writer([&] {
      try {
        written = write_loop(o, q);
      } catch (const std::exception& e) {
        write_error = e.what();
      }
    });
    claim_loop(o, sha, q, refused);
    writer.join();
    if (!write_error.empty())
      throw std::runtime_error("writing the rows: "
                               + write_error.substr(0, 300));
    auto dt = now_s() - t0;
    auto self = process_cpu_ns() - s0;
    auto pg = server_cpu_ns(postmaster) - p0;
    auto machine = machine_busy_ns() - m0;
    auto redis = redis_cpu(admin) - r0;
    auto e1 = evalsha_stats(admin);
    auto rows = db.count(o.rows == "product"
                           ? "SELECT count(*) FROM match_sessions"
                           : "SELECT count(*) FROM floor_sessions");
    auto n = static_cast<double>(written);
    if (written == 0 || refused.load() != 0 || rows != written) {
      std::fprintf(
        stderr, "floor_bench: VIOLATION written=%llu refused=%llu rows=%llu\n",
        static_cast<unsigned long long>(written),
        static_cast<unsigned long long>(refused.load()),
        static_cast<unsigned long long>(rows));
      return 1;
    }
    auto us = [&](uint64_t ns) { return static_cast<double>(ns) / 1e3 / n; };
    auto total = self + redis + pg;
    auto other = machine > total ? machine - total : 0;
    std::printf("floor: %llu matches in %.2f s: %.0f matches/s | CPU per match "
                "%.1f us (bench %.1f, redis %.1f, postgres %.1f; other "
                "processes %.1f) | claim script %.2f us per call (server), "
                "%.2f calls per match | %u pairs per round trip, %u matches "
                "per transaction, %s rows\n",
                static_cast<unsigned long long>(written), dt, n / dt, us(total),
                us(self), us(redis), us(pg), us(other),
                (e1.second - e0.second) / std::max(1.0, e1.first - e0.first),
                (e1.first - e0.first) / n, o.pipeline, o.batch, o.rows.c_str());
    std::printf("floor_matches_per_s=%.0f floor_cpu_us_per_match=%.1f\n",
                n / dt, us(total));
    db.query("DROP TABLE floor_sessions, floor_members, floor_outbox");
    admin.run(
      {"UNLINK", "mm:{floor}:waiting", "mm:{floor}:seq", "mm:{floor}:users"});
  } catch (const std::exception& e) {
    std::fprintf(stderr, "floor_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
