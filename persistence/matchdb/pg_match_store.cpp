// The PostgreSQL match store: one synchronous libpq connection per
// match_store. Statements are prepared lazily, once per connection (a fresh
// database has no tables to prepare against until the migrations ran). A
// call that finds the connection broken reconnects and runs again, once;
// then it fails with `store_unavailable`. Running a call again is safe:
// every call is one transaction, and commits are idempotent per request.
//
// Group commit (STACK-NOTES: one multi-row statement per batch is ~15x
// faster than a statement per row): a batch runs as ONE statement — sessions,
// members and outbox rows of every request in data-modifying CTEs — inside a
// batch savepoint. Only when that statement is refused (a user already
// active: the unique partial index) does the batch roll back to the
// savepoint and run each request in a savepoint of its own, so the refused
// ones fail alone and the rest still commit in the same transaction.
//
// Cancel checkpoints (problem 5 of docs/design.md): after the rows are written (after the
// batch statement, or after each request's own statement in the fallback)
// the caller's check is asked `after_create`; right before COMMIT it is
// asked `before_commit` for the survivors, again after every round that
// withdrew some. A request withdrawn in the fallback rolls back to its own
// savepoint; otherwise its rows are deleted inside the transaction (the
// survivors keep their rows and locks, so no competitor can take their
// users in between, as it could after a rollback and re-insert). Rows that
// were inserted and deleted by one transaction are never visible to anyone.
//
// Mutual likes (problem 6): the commit statement first inserts the pair rows
// of the batch's mutual requests into `mutual_matches` (ON CONFLICT DO
// NOTHING, in pair order) and writes a mutual request's session, members
// (inactive: no one-active-session guard) and event only when its pair row
// went in. A pair committed concurrently by another connection makes the
// insert wait for that transaction; when it committed, the insert does
// nothing and the next statement (READ COMMITTED: a new snapshot) reads its
// session, so two connections never create two matches or two events for a
// pair. Swipes of one pair are serialized by a transaction-scoped advisory
// lock taken in the statement before the upsert-and-read, so the read's
// snapshot sees every swipe committed before this one.

#include "core/logger.hpp"
#include "persistence/matchdb/match_store.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <poll.h>

#include <libpq-fe.h>
#include <nlohmann/json.hpp>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "mm_migrations.hpp" // generated from persistence/matchdb/migrations/

namespace mm {

namespace {

// -- RAII for libpq objects ---------------------------------------------------

struct conn_deleter {
  void operator()(PGconn* c) const noexcept {
    if (c != nullptr)
      PQfinish(c);
  }
};
using conn_ptr = std::unique_ptr<PGconn, conn_deleter>;

struct result_deleter {
  void operator()(PGresult* r) const noexcept {
    if (r != nullptr)
      PQclear(r);
  }
};
using result_ptr = std::unique_ptr<PGresult, result_deleter>;

struct notify_deleter {
  void operator()(PGnotify* n) const noexcept {
    if (n != nullptr)
      PQfreemem(n);
  }
};
using notify_ptr = std::unique_ptr<PGnotify, notify_deleter>;

// -- helpers ------------------------------------------------------------------

/// The shared logger "match_store"; created on first use when the
/// application has not registered one.
std::shared_ptr<spdlog::logger> store_logger() {
  return logger("match_store");
}

/// Thrown inside a call when the connection is gone; `run` reconnects once.
struct connection_lost {
  std::string detail;
};

/// Thrown inside a call when the database refused a statement.
struct db_refusal {
  failure why;
};

/// Key of the advisory lock that serializes migrations ("mm-migra").
constexpr int64_t migration_lock_key = 0x6d6d2d6d69677261;

/// First key of the two-key advisory locks that serialize the swipes of one
/// pair ("mmlk"); the second is a hash of the pair. (Two-int4 keys and the
/// one-int8 key of the migrations never collide: separate key spaces.)
constexpr int32_t swipe_lock_class = 0x6d6d6c6b;

/// The second key of a pair's swipe lock: FNV-1a of "min\nmax". A collision
/// only makes two pairs wait for each other now and then.
int32_t swipe_lock_key(const std::pair<std::string, std::string>& pair) {
  uint32_t h = 2166136261u;
  auto mix = [&h](const std::string& x) {
    for (auto ch : x) {
      h ^= static_cast<unsigned char>(ch);
      h *= 16777619u;
    }
  };
  mix(pair.first);
  mix("\n");
  mix(pair.second);
  return static_cast<int32_t>(h);
}

/// The unique partial index that refuses a second active membership.
constexpr const char* one_active_index = "session_members_one_active";

/// How often one request is tried inside a batch when a deadlock or a
/// conflicting session that closed meanwhile refused it. A deadlock can only
/// happen between two batches that both fell back to one-by-one (the batch
/// statement inserts members in one global order); a second try helps when
/// the cycle ran through this request's own rows, otherwise the request is
/// refused as a conflict rather than waiting out the deadlock timeout again.
constexpr int max_request_tries = 2;

std::string sqlstate_of(const PGresult* r) {
  const char* s = r != nullptr ? PQresultErrorField(r, PG_DIAG_SQLSTATE)
                               : nullptr;
  return s != nullptr ? s : "";
}

std::string field_of(const PGresult* r, int field) {
  const char* s = r != nullptr ? PQresultErrorField(r, field) : nullptr;
  return s != nullptr ? s : "";
}

std::string trimmed(const char* s) {
  std::string out = s != nullptr ? s : "";
  while (!out.empty() && (out.back() == '\n' || out.back() == ' '))
    out.pop_back();
  return out;
}

bool ok(const PGresult* r) {
  auto st = PQresultStatus(r);
  return st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK;
}

/// Maps a statement the database refused to the project's error codes.
failure to_failure(const PGresult* r, const std::string& what) {
  auto state = sqlstate_of(r);
  auto msg = what + ": " + trimmed(PQresultErrorMessage(r));
  if (state == "57014" || state == "55P03") // statement / lock timeout
    return failure{errc::store_unavailable, std::move(msg)};
  if (state.compare(0, 2, "22") == 0 || state.compare(0, 2, "23") == 0)
    return failure{errc::invalid_argument, std::move(msg)};
  return failure{errc::protocol_error, std::move(msg)};
}

std::string text(const PGresult* r, int row, int col) {
  return std::string{PQgetvalue(r, row, col),
                     static_cast<size_t>(PQgetlength(r, row, col))};
}

int64_t int_of(const PGresult* r, int row, int col) {
  return PQgetisnull(r, row, col) != 0
           ? 0
           : std::strtoll(PQgetvalue(r, row, col), nullptr, 10);
}

/// ms since the epoch of a timestamptz column, 0 for NULL.
#define MM_MS(col)                                                             \
  "coalesce(floor(extract(epoch FROM " col ") * 1000)::int8, 0)"

/// The columns that `read_session` parses, for a table aliased `s`.
#define MM_SESSION_COLS                                                        \
  "s.id, s.queue, s.user_a, s.ticket_a, s.user_b, s.ticket_b, s.status, "     \
  MM_MS("s.created_at") ", " MM_MS("s.closed_at")                             \
  ", coalesce(s.close_reason, ''), s.match_key"

match_record read_session(const PGresult* r, int row) {
  match_record rec;
  rec.session_id = text(r, row, 0);
  rec.queue = text(r, row, 1);
  rec.user_a = text(r, row, 2);
  rec.ticket_a = text(r, row, 3);
  rec.user_b = text(r, row, 4);
  rec.ticket_b = text(r, row, 5);
  rec.status = text(r, row, 6) == "active" ? session_status::active
                                           : session_status::closed;
  rec.created_at = int_of(r, row, 7);
  rec.closed_at = int_of(r, row, 8);
  rec.close_reason = text(r, row, 9);
  return rec;
}

// -- prepared statements ------------------------------------------------------

enum stmt : size_t {
  st_commit,
  st_withdraw,
  st_by_key,
  st_by_pair,
  st_swipe,
  st_mutual_of,
  st_conflicts,
  st_close,
  st_active_of,
  st_by_id,
  st_fetch,
  st_mark,
  st_count,
};

struct statement {
  const char* name;
  const char* sql;
};

const statement statements[st_count] = {
  // $1: JSON array of requests. One statement writes the whole batch. Members
  // are inserted in user-id order, so concurrent batches wait for each other
  // on the unique index in one global order and cannot deadlock; pair rows
  // of mutual requests likewise in pair order. A mutual request writes its
  // session only when its pair row went in (the pair had no match yet; of
  // two requests of one pair in a batch, the first); its members are
  // inactive. The pair row names the session before the session exists in
  // this statement: the foreign key is checked at the end of the statement.
  {"mm_commit",
   "WITH req AS ("
   "  SELECT * FROM jsonb_to_recordset($1::jsonb) AS r("
   "    idx int, id text, event_id text, match_key text, queue text,"
   "    user_a text, ticket_a text, attrs_a text,"
   "    user_b text, ticket_b text, attrs_b text, payload text,"
   "    mutual boolean, pair_min text, pair_max text)"
   "), mm AS ("
   "  INSERT INTO mutual_matches (pair_min, pair_max, session_id)"
   "  SELECT pair_min, pair_max, id FROM req"
   "  WHERE mutual AND NOT EXISTS ("
   "    SELECT 1 FROM match_sessions x WHERE x.match_key = req.match_key)"
   "  ORDER BY pair_min COLLATE \"C\", pair_max COLLATE \"C\", idx"
   "  ON CONFLICT (pair_min, pair_max) DO NOTHING"
   "  RETURNING session_id"
   "), s AS ("
   "  INSERT INTO match_sessions (id, match_key, queue, user_a, ticket_a,"
   "                              attrs_a, user_b, ticket_b, attrs_b)"
   "  SELECT id, match_key, queue, user_a, ticket_a, attrs_a, user_b,"
   "         ticket_b, attrs_b"
   "  FROM req WHERE NOT mutual OR id IN (SELECT session_id FROM mm)"
   "  ORDER BY idx"
   "  ON CONFLICT (match_key) DO NOTHING"
   "  RETURNING id, created_at"
   "), m AS ("
   "  INSERT INTO session_members (session_id, user_id, active)"
   "  SELECT s.id, u.user_id, NOT req.mutual"
   "  FROM s JOIN req ON req.id = s.id"
   "  CROSS JOIN LATERAL (VALUES (req.user_a), (req.user_b)) AS u (user_id)"
   "  ORDER BY u.user_id COLLATE \"C\""
   "), o AS ("
   "  INSERT INTO outbox (event_id, aggregate_id, type, payload, created_at)"
   "  SELECT req.event_id, s.id, 'match.created', req.payload::jsonb,"
   "         s.created_at"
   "  FROM s JOIN req ON req.id = s.id ORDER BY req.idx"
   ")"
   " SELECT req.idx, s.id, " MM_MS("s.created_at")
   " FROM s JOIN req ON req.id = s.id"},
  // $1: JSON array of session ids that this transaction inserted and the
  // caller withdrew: removes their outbox rows, members, pair rows and
  // sessions before anybody saw them. Answers how many sessions it removed.
  {"mm_withdraw",
   "WITH ids AS ("
   "  SELECT jsonb_array_elements_text($1::jsonb) AS id"
   "), p AS ("
   "  DELETE FROM mutual_matches WHERE session_id IN (SELECT id FROM ids)"
   "), o AS ("
   "  DELETE FROM outbox WHERE aggregate_id IN (SELECT id FROM ids)"
   "), m AS ("
   "  DELETE FROM session_members WHERE session_id IN (SELECT id FROM ids)"
   "), s AS ("
   "  DELETE FROM match_sessions WHERE id IN (SELECT id FROM ids)"
   "  RETURNING id"
   ")"
   " SELECT count(*) FROM s"},
  // $1: JSON array of match keys (sessions committed before: retries).
  {"mm_by_key",
   "SELECT " MM_SESSION_COLS " FROM match_sessions s"
   " WHERE s.match_key IN (SELECT jsonb_array_elements_text($1::jsonb))"},
  // $1: JSON array of [pair_min, pair_max] (mutual requests that inserted
  // nothing: their pair has its match).
  {"mm_by_pair",
   "SELECT " MM_SESSION_COLS ", p.pair_min, p.pair_max"
   " FROM mutual_matches p JOIN match_sessions s ON s.id = p.session_id"
   " WHERE (p.pair_min, p.pair_max) IN ("
   "   SELECT x->>0, x->>1 FROM jsonb_array_elements($1::jsonb) AS x)"},
  // $1 from, $2 to, $3 'LIKE' | 'DISLIKE', $4/$5 the pair. Runs after the
  // pair's advisory lock was taken, so its snapshot holds every swipe of the
  // pair committed before. The main query reads the snapshot from the
  // statement's start: it sees the other direction, not this write (which it
  // does not need). Repeating the current kind changes nothing.
  {"mm_swipe",
   "WITH w AS ("
   "  INSERT INTO likes AS l (from_user, to_user, kind) VALUES ($1, $2, $3)"
   "  ON CONFLICT (from_user, to_user) DO UPDATE"
   "  SET kind = excluded.kind, updated_at = now()"
   "  WHERE l.kind <> excluded.kind"
   "  RETURNING 1"
   ")"
   " SELECT EXISTS (SELECT 1 FROM likes"
   "                WHERE from_user = $2 AND to_user = $1 AND kind = 'LIKE'),"
   "        (SELECT session_id FROM mutual_matches"
   "         WHERE pair_min = $4 AND pair_max = $5),"
   "        (SELECT count(*) FROM w)"},
  {"mm_mutual_of",
   "SELECT " MM_SESSION_COLS
   " FROM mutual_matches p JOIN match_sessions s ON s.id = p.session_id"
   " WHERE p.pair_min = $1 AND p.pair_max = $2"},
  {"mm_conflicts",
   "SELECT user_id, session_id FROM session_members"
   " WHERE active AND user_id IN ($1, $2)"},
  // Closes once; the second close finds the row closed (after waiting for
  // a concurrent closer's row lock) and changes nothing.
  {"mm_close",
   "WITH s AS ("
   "  UPDATE match_sessions SET status = 'closed', closed_at = now(),"
   "                            close_reason = $2"
   "  WHERE id = $1 AND status = 'active' RETURNING id"
   "), m AS ("
   "  UPDATE session_members SET active = false"
   "  WHERE session_id IN (SELECT id FROM s) AND active"
   ")"
   " SELECT (SELECT count(*) FROM s),"
   "        EXISTS (SELECT 1 FROM match_sessions WHERE id = $1)"},
  {"mm_active_of",
   "SELECT " MM_SESSION_COLS
   " FROM session_members m JOIN match_sessions s ON s.id = m.session_id"
   " WHERE m.user_id = $1 AND m.active"},
  {"mm_by_id", "SELECT " MM_SESSION_COLS " FROM match_sessions s"
               " WHERE s.id = $1"},
  // Lease, not an open transaction: the rows are picked with FOR UPDATE
  // SKIP LOCKED (a concurrent fetcher skips what this one is taking) and
  // leased in the same statement, which commits at once. A row whose lease
  // was just taken by a concurrent fetcher fails the recheck of the WHERE
  // clause on its new version, so it is skipped too.
  {"mm_fetch",
   "WITH c AS ("
   "  SELECT id FROM outbox"
   "  WHERE delivered_at IS NULL"
   "    AND (locked_until IS NULL OR locked_until <= now())"
   "  ORDER BY id LIMIT $1"
   "  FOR UPDATE SKIP LOCKED"
   ")"
   " UPDATE outbox o"
   " SET locked_until = now() + $2::int8 * interval '1 millisecond',"
   "     attempts = o.attempts + 1"
   " FROM c WHERE o.id = c.id"
   " RETURNING o.id, o.event_id, o.aggregate_id, o.type, o.payload::text, "
   MM_MS("o.created_at") ", " MM_MS("o.delivered_at") ", "
   MM_MS("o.locked_until") ", o.attempts"},
  {"mm_mark",
   "UPDATE outbox SET delivered_at = now(), locked_until = NULL"
   " WHERE event_id IN (SELECT jsonb_array_elements_text($1::jsonb))"
   "   AND delivered_at IS NULL"},
};

#undef MM_SESSION_COLS
#undef MM_MS

/// libpq prints server notices ("relation already exists, skipping") to
/// stderr by default; they are expected here.
void quiet_notices(void*, const char*) {
  // nop
}

/// One request of a batch, prepared before the transaction starts so that
/// a second attempt reuses its session id.
struct pending {
  size_t index = 0; ///< position in the caller's vector
  std::string id;
  std::string key;
  /// Requests of a batch with the same fate key share a withdrawal: the
  /// pair for mutual requests, the match key otherwise.
  std::string fate;
  bool mutual = false;
  std::pair<std::string, std::string> pair; ///< (min, max) of the users
  nlohmann::json row; ///< the request as the commit statement reads it
};

// -- the connection -----------------------------------------------------------

class pg_match_store final : public match_store {
public:
  pg_match_store(pg_options opts, std::string where)
    : opts_(std::move(opts)), where_(std::move(where)) {
    // One eager attempt; when the database is down the store stays
    // disconnected and tries again on each call.
    if (!connect_now())
      store_logger()->debug("{} not reachable yet ({}); will retry on use",
                            where_, last_error_);
  }

  outcome<std::vector<std::string>> apply_migrations() override {
    return run<std::vector<std::string>>("apply migrations", [this] {
      std::vector<std::string> applied;
      auto lock_key = std::to_string(migration_lock_key);
      for (const auto& m : migration_sources) {
        must(exec("BEGIN"), "BEGIN");
        // Serializes concurrent starters until this transaction ends.
        must(exec_params("SELECT pg_advisory_xact_lock($1::int8)", {lock_key}),
             "advisory lock");
        must(exec("CREATE TABLE IF NOT EXISTS schema_migrations ("
                  " version int PRIMARY KEY, name text NOT NULL,"
                  " checksum text NOT NULL,"
                  " applied_at timestamptz NOT NULL DEFAULT now())"),
             "create schema_migrations");
        auto version = std::to_string(m.version);
        auto seen = exec_params(
          "SELECT checksum = md5($2), name FROM schema_migrations"
          " WHERE version = $1::int",
          {version, m.sql});
        must(seen, "read schema_migrations");
        if (PQntuples(seen.get()) > 0) {
          must(exec("COMMIT"), "COMMIT");
          if (text(seen.get(), 0, 0) != "t")
            throw db_refusal{failure{
              errc::protocol_error,
              std::string{"migration "} + m.name
                + " was changed after it was applied: add a new migration "
                  "instead"}};
          continue;
        }
        must(exec(m.sql), std::string{"migration "} + m.name);
        must(exec_params("INSERT INTO schema_migrations (version, name,"
                         " checksum) VALUES ($1::int, $2, md5($3))",
                         {version, m.name, m.sql}),
             "record migration");
        commit();
        store_logger()->info("{}: applied migration {}", where_, m.name);
        applied.emplace_back(m.name);
      }
      return outcome<std::vector<std::string>>{std::move(applied)};
    });
  }

  std::vector<outcome<match_record>>
  do_commit_matches(const std::vector<match_request>& requests,
                    const commit_check& check) override {
    std::vector<outcome<match_record>> out;
    out.reserve(requests.size());
    std::vector<pending> todo;
    for (size_t i = 0; i < requests.size(); ++i) {
      const auto& req = requests[i];
      // Placeholder until the transaction answers.
      out.emplace_back(errc::store_unavailable, "not committed");
      pending p;
      p.index = i;
      p.id = new_session_id();
      p.key = match_key(req);
      p.mutual = req.mutual;
      p.pair = pair_bounds(req.user_a, req.user_b);
      p.fate = req.mutual ? "m\n" + p.pair.first + "\n" + p.pair.second
                          : "k\n" + p.key;
      p.row = {
        {"idx", static_cast<int64_t>(i)},
        {"id", p.id},
        {"event_id", match_created_event_id(p.id)},
        {"match_key", p.key},
        {"queue", req.queue},
        {"user_a", req.user_a},
        {"ticket_a", req.ticket_a},
        {"attrs_a", req.attrs_a},
        {"user_b", req.user_b},
        {"ticket_b", req.ticket_b},
        {"attrs_b", req.attrs_b},
        {"payload", match_created_payload(p.id, req)},
        {"mutual", req.mutual},
        {"pair_min", p.pair.first},
        {"pair_max", p.pair.second},
      };
      todo.push_back(std::move(p));
    }
    if (todo.empty())
      return out;
    // Outlives a lost connection: a withdrawn request is not written again
    // when `run` repeats the transaction, and answers `cancelled` whatever
    // becomes of the transaction.
    std::vector<std::optional<failure>> withdrawn(todo.size());
    auto res = run<std::vector<outcome<match_record>>>(
      "commit matches",
      [&] { return commit_batch(requests, todo, check, withdrawn); });
    for (size_t k = 0; k < todo.size(); ++k) {
      if (res)
        out[todo[k].index] = std::move((*res)[k]);
      else if (withdrawn[k])
        out[todo[k].index] = *withdrawn[k];
      else
        out[todo[k].index] = res.error();
    }
    return out;
  }

  outcome<bool> do_close_session(const std::string& session_id,
                                 const std::string& reason) override {
    return run<bool>("close session", [&]() -> outcome<bool> {
      auto r = exec_prepared(st_close, {&session_id, &reason});
      must(r, "close session");
      if (text(r.get(), 0, 1) != "t")
        return outcome<bool>{errc::not_found, "no session " + session_id};
      return int_of(r.get(), 0, 0) > 0;
    });
  }

  outcome<std::optional<match_record>>
  do_active_session_of(const std::string& user) override {
    return run<std::optional<match_record>>("active session", [&] {
      return one_session(exec_prepared(st_active_of, {&user}),
                         "active session");
    });
  }

  outcome<std::optional<match_record>>
  do_find_session(const std::string& session_id) override {
    return run<std::optional<match_record>>("find session", [&] {
      return one_session(exec_prepared(st_by_id, {&session_id}),
                         "find session");
    });
  }

  outcome<swipe_record> do_record_swipe(const std::string& from,
                                        const std::string& to,
                                        bool like) override {
    auto pair = pair_bounds(from, to);
    const std::string kind = like ? "LIKE" : "DISLIKE";
    // The lock is taken in its own statement, before the one that reads:
    // a READ COMMITTED statement reads the snapshot of its start, so a
    // statement that waited for the lock itself would miss the swipe that
    // the lock holder committed meanwhile.
    const auto lock = "BEGIN; SELECT pg_advisory_xact_lock("
                      + std::to_string(swipe_lock_class) + ", "
                      + std::to_string(swipe_lock_key(pair)) + ")";
    return run<swipe_record>("record swipe", [&] {
      must(exec(lock), "lock pair");
      auto r = exec_prepared(st_swipe,
                             {&from, &to, &kind, &pair.first, &pair.second});
      must(r, "record swipe");
      swipe_record out;
      out.opposite_like = text(r.get(), 0, 0) == "t";
      out.matched = PQgetisnull(r.get(), 0, 1) == 0;
      if (out.matched)
        out.session_id = text(r.get(), 0, 1);
      commit();
      return outcome<swipe_record>{std::move(out)};
    });
  }

  outcome<std::optional<match_record>>
  do_mutual_match_of(const std::string& a, const std::string& b) override {
    auto pair = pair_bounds(a, b);
    return run<std::optional<match_record>>("mutual match", [&] {
      return one_session(
        exec_prepared(st_mutual_of, {&pair.first, &pair.second}),
        "mutual match");
    });
  }

  outcome<std::vector<outbox_event>>
  do_fetch_undelivered(uint32_t limit, uint32_t lease_ms) override {
    auto lim = std::to_string(limit);
    auto lease = std::to_string(lease_ms);
    return run<std::vector<outbox_event>>("fetch undelivered", [&] {
      auto r = exec_prepared(st_fetch, {&lim, &lease});
      must(r, "fetch undelivered");
      std::vector<outbox_event> out;
      const int n = PQntuples(r.get());
      out.reserve(static_cast<size_t>(n));
      for (int i = 0; i < n; ++i) {
        outbox_event ev;
        ev.seq = int_of(r.get(), i, 0);
        ev.event_id = text(r.get(), i, 1);
        ev.aggregate_id = text(r.get(), i, 2);
        ev.type = text(r.get(), i, 3);
        ev.payload = text(r.get(), i, 4);
        ev.created_at = int_of(r.get(), i, 5);
        ev.delivered_at = int_of(r.get(), i, 6);
        ev.locked_until = int_of(r.get(), i, 7);
        ev.attempts = static_cast<int32_t>(int_of(r.get(), i, 8));
        out.push_back(std::move(ev));
      }
      // RETURNING has no order.
      std::sort(out.begin(), out.end(),
                [](const auto& x, const auto& y) { return x.seq < y.seq; });
      return outcome<std::vector<outbox_event>>{std::move(out)};
    });
  }

  outcome<size_t>
  mark_delivered(const std::vector<std::string>& event_ids) override {
    // An id the database cannot even hold names no event: skip it.
    auto ids = nlohmann::json::array();
    for (const auto& id : event_ids)
      if (check_id("event id", id).code == errc::none)
        ids.push_back(id);
    if (ids.empty())
      return size_t{0};
    auto arg = ids.dump();
    return run<size_t>("mark delivered", [&] {
      auto r = exec_prepared(st_mark, {&arg});
      must(r, "mark delivered");
      return outcome<size_t>{
        static_cast<size_t>(std::strtoull(PQcmdTuples(r.get()), nullptr, 10))};
    });
  }

  outcome<bool> wait_for_events(uint32_t timeout_ms) override {
    return run<bool>("wait for events", [&] {
      if (!listening_) {
        must(exec(std::string{"LISTEN "} + outbox_channel), "LISTEN");
        listening_ = true;
      }
      using clock = std::chrono::steady_clock;
      auto deadline = clock::now() + std::chrono::milliseconds(timeout_ms);
      for (;;) {
        if (PQconsumeInput(conn_.get()) == 0)
          throw connection_lost{trimmed(PQerrorMessage(conn_.get()))};
        bool got = false;
        while (notify_ptr n{PQnotifies(conn_.get())})
          got = true;
        if (got)
          return outcome<bool>{true};
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                      deadline - clock::now())
                      .count();
        if (left <= 0)
          return outcome<bool>{false};
        pollfd pfd{PQsocket(conn_.get()), POLLIN, 0};
        if (pfd.fd < 0)
          throw connection_lost{"no socket"};
        ::poll(&pfd, 1, static_cast<int>(left));
      }
    });
  }

  bool blocking() const noexcept override {
    return true;
  }

private:
  // -- connection management --------------------------------------------------

  /// Opens a fresh connection with keepalive and the statement timeout. On
  /// failure leaves the store disconnected with `last_error_`.
  bool connect_now() {
    conn_.reset();
    prepared_.fill(false);
    listening_ = false;
    // libpq: whole seconds, and values below 2 are raised to 2 anyway.
    auto timeout = std::to_string(
      std::max<uint32_t>(2, (opts_.connect_timeout_ms + 999) / 1000));
    // The conninfo comes last: its own settings win (expand_dbname = 1).
    const char* keys[] = {"connect_timeout", "keepalives", "keepalives_idle",
                          "keepalives_interval", "keepalives_count",
                          "dbname", nullptr};
    const char* values[] = {timeout.c_str(), "1", "10", "5", "3",
                            opts_.conninfo.c_str(), nullptr};
    conn_ptr c{PQconnectdbParams(keys, values, 1)};
    if (!c) {
      last_error_ = "cannot allocate a libpq connection";
      return false;
    }
    if (PQstatus(c.get()) != CONNECTION_OK) {
      last_error_ = trimmed(PQerrorMessage(c.get()));
      return false;
    }
    PQsetNoticeProcessor(c.get(), quiet_notices, nullptr);
    // READ COMMITTED whatever the server's default: after waiting on the
    // unique index for a concurrent commit, the next statement must see it,
    // and SKIP LOCKED must not raise serialization failures.
    std::string set = "SET default_transaction_isolation = 'read committed'";
    if (opts_.statement_timeout_ms > 0)
      set += "; SET statement_timeout = "
             + std::to_string(opts_.statement_timeout_ms);
    result_ptr r{PQexec(c.get(), set.c_str())};
    if (!r || !ok(r.get())) {
      last_error_ = r ? trimmed(PQresultErrorMessage(r.get()))
                      : trimmed(PQerrorMessage(c.get()));
      return false;
    }
    conn_ = std::move(c);
    return true;
  }

  /// Runs `body` as one call: connects if needed, and after a lost
  /// connection reconnects and runs it again, once. Exceptions never leave.
  template <class T, class F>
  outcome<T> run(const char* what, F&& body) {
    for (int attempt = 0; attempt < 2; ++attempt) {
      if (!conn_ || PQstatus(conn_.get()) != CONNECTION_OK) {
        if (!connect_now())
          continue;
      }
      try {
        if (PQtransactionStatus(conn_.get()) != PQTRANS_IDLE)
          must(exec("ROLLBACK"), "ROLLBACK leftover transaction");
        outcome<T> res = body();
        return res;
      } catch (const connection_lost& e) {
        last_error_ = e.detail;
        store_logger()->debug("{}: {}: connection lost: {}", where_, what,
                              e.detail);
        conn_.reset();
      } catch (const db_refusal& e) {
        rollback_quietly();
        if (e.why.code != errc::invalid_argument)
          store_logger()->error("{}: {}: {}", where_, what, e.why.detail);
        return e.why;
      } catch (const std::exception& e) {
        rollback_quietly();
        auto detail = std::string{what} + ": " + e.what();
        store_logger()->error("{}: {}", where_, detail);
        return outcome<T>{errc::protocol_error, std::move(detail)};
      }
    }
    auto detail = where_ + " unavailable (" + what + "): " + last_error_;
    store_logger()->error("{}", detail);
    return outcome<T>{errc::store_unavailable, std::move(detail)};
  }

  /// Ends an open transaction after a refusal; drops a connection that
  /// cannot even do that.
  void rollback_quietly() noexcept {
    if (!conn_ || PQtransactionStatus(conn_.get()) == PQTRANS_IDLE)
      return;
    result_ptr r{PQexec(conn_.get(), "ROLLBACK")};
    if (!r || !ok(r.get()))
      conn_.reset();
  }

  // -- statements -------------------------------------------------------------

  /// Throws `connection_lost` when `r` shows a broken connection; returns
  /// `r` otherwise, refused or not.
  result_ptr checked(result_ptr r) {
    if (!r || PQstatus(conn_.get()) != CONNECTION_OK)
      throw connection_lost{trimmed(PQerrorMessage(conn_.get()))};
    if (PQresultStatus(r.get()) == PGRES_FATAL_ERROR) {
      auto state = sqlstate_of(r.get());
      // No SQLSTATE: libpq's own failure, i.e. the connection broke.
      if (state.empty() || state.compare(0, 2, "08") == 0
          || state == "57P01" || state == "57P02" || state == "57P03")
        throw connection_lost{trimmed(PQresultErrorMessage(r.get()))};
    }
    return r;
  }

  result_ptr exec(const std::string& sql) {
    return checked(result_ptr{PQexec(conn_.get(), sql.c_str())});
  }

  result_ptr exec_params(const char* sql,
                         std::initializer_list<std::string> params) {
    std::vector<const char*> values;
    for (const auto& p : params)
      values.push_back(p.c_str());
    return checked(result_ptr{PQexecParams(
      conn_.get(), sql, static_cast<int>(values.size()), nullptr,
      values.data(), nullptr, nullptr, 0)});
  }

  result_ptr exec_prepared(stmt s,
                           std::initializer_list<const std::string*> params) {
    if (!prepared_[s]) {
      auto r = checked(result_ptr{
        PQprepare(conn_.get(), statements[s].name, statements[s].sql,
                  static_cast<int>(params.size()), nullptr)});
      must(r, std::string{"prepare "} + statements[s].name);
      prepared_[s] = true;
    }
    std::vector<const char*> values;
    for (const auto* p : params)
      values.push_back(p->c_str());
    return checked(result_ptr{PQexecPrepared(
      conn_.get(), statements[s].name, static_cast<int>(values.size()),
      values.data(), nullptr, nullptr, 0)});
  }

  /// Throws `db_refusal` when the database refused `r`.
  static void must(const result_ptr& r, const std::string& what) {
    if (!ok(r.get()))
      throw db_refusal{to_failure(r.get(), what)};
  }

  /// Commits; with `notify`, sends the outbox notification in the same
  /// round trip (it is delivered on commit only).
  void commit(bool notify = false) {
    auto r = exec(notify ? std::string{"NOTIFY "} + outbox_channel + "; COMMIT"
                         : std::string{"COMMIT"});
    must(r, "COMMIT");
    // COMMIT of a failed transaction "succeeds" as ROLLBACK.
    if (std::strcmp(PQcmdStatus(r.get()), "COMMIT") != 0)
      throw db_refusal{failure{errc::protocol_error,
                               "the transaction was rolled back"}};
  }

  outcome<std::optional<match_record>> one_session(result_ptr r,
                                                   const char* what) {
    must(r, what);
    if (PQntuples(r.get()) == 0)
      return std::optional<match_record>{};
    return std::optional<match_record>{read_session(r.get(), 0)};
  }

  // -- group commit -----------------------------------------------------------

  /// What one transaction attempt of a batch knows, by todo index.
  struct batch_state {
    explicit batch_state(size_t n) : res(n), fresh(n, false) {
    }

    std::vector<std::optional<outcome<match_record>>> res;
    /// Rows written by this transaction and not withdrawn: the requests the
    /// checkpoints ask about.
    std::vector<bool> fresh;
  };

  std::vector<outcome<match_record>>
  commit_batch(const std::vector<match_request>& requests,
               const std::vector<pending>& todo, const commit_check& check,
               std::vector<std::optional<failure>>& withdrawn) {
    batch_state b{todo.size()};
    std::unordered_map<size_t, size_t> slot; // caller index → todo index
    for (size_t k = 0; k < todo.size(); ++k)
      slot.emplace(todo[k].index, k);
    auto all = nlohmann::json::array();
    for (size_t k = 0; k < todo.size(); ++k) {
      if (withdrawn[k])
        b.res[k].emplace(*withdrawn[k]); // by an earlier attempt
      else
        all.push_back(todo[k].row);
    }
    must(exec("BEGIN; SAVEPOINT mm_batch"), "BEGIN");
    if (!all.empty()) {
      auto arg = all.dump();
      auto r = exec_prepared(st_commit, {&arg});
      auto state = sqlstate_of(r.get());
      if (ok(r.get())) {
        take_inserted(r.get(), todo, slot, b);
        if (check) {
          std::vector<size_t> gone;
          for (size_t k = 0; k < todo.size(); ++k) {
            if (b.fresh[k] && !check(commit_stage::after_create, k)) {
              withdraw(todo, k, commit_stage::after_create, b, withdrawn);
              gone.push_back(k);
            }
          }
          remove_withdrawn(todo, gone);
        }
      } else if (state.compare(0, 2, "22") != 0
                 && state.compare(0, 2, "23") != 0
                 && state.compare(0, 2, "40") != 0) {
        must(r, "commit matches"); // not about one request: fail the batch
      } else {
        // Somebody in the batch was refused: go one by one.
        store_logger()->debug("{}: batch of {} refused ({}); committing one "
                              "by one",
                              where_, all.size(),
                              trimmed(PQresultErrorMessage(r.get())));
        must(exec("ROLLBACK TO SAVEPOINT mm_batch"), "ROLLBACK TO SAVEPOINT");
        for (size_t k = 0; k < todo.size(); ++k)
          if (!b.res[k]) // not withdrawn, also not as a duplicate
            commit_one(requests[todo[k].index], todo, k, slot, check, b,
                       withdrawn);
      }
    }
    take_retried(todo, b);
    // The last checkpoint, repeated until a round withdraws nobody: each
    // round that withdraws removes one request at least, so this ends.
    while (check) {
      std::vector<size_t> gone;
      for (size_t k = 0; k < todo.size(); ++k) {
        if (b.fresh[k] && !check(commit_stage::before_commit, k)) {
          withdraw(todo, k, commit_stage::before_commit, b, withdrawn);
          gone.push_back(k);
        }
      }
      if (gone.empty())
        break;
      remove_withdrawn(todo, gone);
    }
    if (std::find(b.fresh.begin(), b.fresh.end(), true) != b.fresh.end()) {
      commit(true); // NOTIFY + COMMIT in one round trip
    } else {
      // Nothing to keep (all refused, withdrawn or retries): no NOTIFY.
      must(exec("ROLLBACK"), "ROLLBACK");
    }
    std::vector<outcome<match_record>> out;
    out.reserve(b.res.size());
    for (auto& x : b.res)
      out.push_back(std::move(*x));
    return out;
  }

  /// Runs request `k` alone in a savepoint of its own, and asks the
  /// `after_create` checkpoint before releasing it.
  void commit_one(const match_request& req, const std::vector<pending>& todo,
                  size_t k, const std::unordered_map<size_t, size_t>& slot,
                  const commit_check& check, batch_state& b,
                  std::vector<std::optional<failure>>& withdrawn) {
    auto one = nlohmann::json::array({todo[k].row}).dump();
    for (int tries = 1;; ++tries) {
      must(exec("SAVEPOINT mm_req"), "SAVEPOINT");
      auto r = exec_prepared(st_commit, {&one});
      if (ok(r.get())) {
        // No row: committed before, `take_retried` reads it.
        if (PQntuples(r.get()) > 0 && check
            && !check(commit_stage::after_create, k)) {
          must(exec("ROLLBACK TO SAVEPOINT mm_req; RELEASE SAVEPOINT mm_req"),
               "ROLLBACK TO SAVEPOINT");
          withdraw(todo, k, commit_stage::after_create, b, withdrawn);
          return;
        }
        must(exec("RELEASE SAVEPOINT mm_req"), "RELEASE SAVEPOINT");
        take_inserted(r.get(), todo, slot, b);
        return;
      }
      auto state = sqlstate_of(r.get());
      auto constraint = field_of(r.get(), PG_DIAG_CONSTRAINT_NAME);
      auto why = to_failure(r.get(), "commit match");
      must(exec("ROLLBACK TO SAVEPOINT mm_req; RELEASE SAVEPOINT mm_req"),
           "ROLLBACK TO SAVEPOINT");
      if (state == "23505" && constraint == one_active_index) {
        auto detail = conflict_detail(req);
        if (!detail.empty()) {
          b.res[k].emplace(errc::conflict, std::move(detail));
          return;
        }
        // The other session closed meanwhile: the request may fit now.
        why = failure{errc::conflict, "a user of the pair was in an active "
                                      "session that closed meanwhile"};
      } else if (state == "40P01" || state == "40001") {
        why = failure{errc::conflict, "contended by a concurrent commit: "
                                        + why.detail};
      } else {
        b.res[k].emplace(std::move(why));
        return;
      }
      if (tries >= max_request_tries) {
        b.res[k].emplace(std::move(why));
        return;
      }
    }
  }

  /// Marks request `k` withdrawn at `stage`, and with it every other request
  /// of the batch with the same fate key (same claimed pair; for mutual
  /// requests the same pair of users) that has no answer yet or answers k's
  /// session (duplicates). Its rows are still there unless the caller rolled
  /// them back: see `remove_withdrawn`.
  static void withdraw(const std::vector<pending>& todo, size_t k,
                       commit_stage stage, batch_state& b,
                       std::vector<std::optional<failure>>& withdrawn) {
    failure f{errc::cancelled,
              std::string{"withdrawn at "} + to_string(stage)};
    for (size_t j = 0; j < todo.size(); ++j) {
      if (j == k || todo[j].fate != todo[k].fate || withdrawn[j])
        continue;
      auto& x = b.res[j];
      if (!x || (*x && !(*x)->created)) {
        x.emplace(f);
        withdrawn[j] = f;
      }
    }
    b.fresh[k] = false;
    withdrawn[k] = f;
    b.res[k].emplace(std::move(f));
  }

  /// Deletes the rows that this transaction wrote for the withdrawn requests
  /// `gone`; the rest of the transaction stays as it is.
  void remove_withdrawn(const std::vector<pending>& todo,
                        const std::vector<size_t>& gone) {
    if (gone.empty())
      return;
    auto ids = nlohmann::json::array();
    for (auto k : gone)
      ids.push_back(todo[k].id);
    auto arg = ids.dump();
    auto r = exec_prepared(st_withdraw, {&arg});
    must(r, "withdraw matches");
    auto removed = static_cast<size_t>(int_of(r.get(), 0, 0));
    if (removed != gone.size())
      throw db_refusal{failure{
        errc::protocol_error, "withdrawing " + std::to_string(gone.size())
                                + " match(es) removed "
                                + std::to_string(removed) + " session(s)"}};
  }

  /// Names the users of `req` that are in an active session; empty if none.
  /// In request order, worded like the in-memory store.
  std::string conflict_detail(const match_request& req) {
    auto r = exec_prepared(st_conflicts, {&req.user_a, &req.user_b});
    must(r, "read conflicts");
    std::string detail;
    for (const auto* user : {&req.user_a, &req.user_b}) {
      for (int i = 0; i < PQntuples(r.get()); ++i) {
        if (text(r.get(), i, 0) != *user)
          continue;
        if (!detail.empty())
          detail += "; ";
        detail += "user '" + *user + "' is already in active session "
                  + text(r.get(), i, 1);
      }
    }
    return detail;
  }

  /// Records the sessions that the commit statement inserted.
  void take_inserted(const PGresult* r, const std::vector<pending>& todo,
                     const std::unordered_map<size_t, size_t>& slot,
                     batch_state& b) {
    for (int i = 0; i < PQntuples(r); ++i) {
      auto k = slot.at(static_cast<size_t>(int_of(r, i, 0)));
      const auto& req = todo[k].row;
      match_record rec;
      rec.session_id = text(r, i, 1);
      rec.queue = req["queue"].get<std::string>();
      rec.user_a = req["user_a"].get<std::string>();
      rec.ticket_a = req["ticket_a"].get<std::string>();
      rec.user_b = req["user_b"].get<std::string>();
      rec.ticket_b = req["ticket_b"].get<std::string>();
      rec.status = session_status::active;
      rec.created_at = int_of(r, i, 2);
      rec.created = true;
      b.res[k].emplace(std::move(rec));
      b.fresh[k] = true;
    }
  }

  /// Answers the requests that inserted nothing with the session that holds
  /// their key: committed by an earlier call (a retry), earlier in this
  /// batch, or — for a mutual request, whose pair comes first — by a
  /// concurrent transaction that this one waited for.
  void take_retried(const std::vector<pending>& todo, batch_state& b) {
    auto keys = nlohmann::json::array();
    auto pairs = nlohmann::json::array();
    for (size_t k = 0; k < todo.size(); ++k) {
      if (b.res[k])
        continue;
      keys.push_back(todo[k].key);
      if (todo[k].mutual)
        pairs.push_back({todo[k].pair.first, todo[k].pair.second});
    }
    if (keys.empty())
      return;
    auto arg = keys.dump();
    auto r = exec_prepared(st_by_key, {&arg});
    must(r, "read committed sessions");
    std::unordered_map<std::string, match_record> found;
    for (int i = 0; i < PQntuples(r.get()); ++i)
      found.emplace(text(r.get(), i, 10), read_session(r.get(), i));
    std::unordered_map<std::string, match_record> by_pair; // by fate key
    if (!pairs.empty()) {
      auto parg = pairs.dump();
      auto pr = exec_prepared(st_by_pair, {&parg});
      must(pr, "read mutual matches");
      for (int i = 0; i < PQntuples(pr.get()); ++i)
        by_pair.emplace("m\n" + text(pr.get(), i, 11) + "\n"
                          + text(pr.get(), i, 12),
                        read_session(pr.get(), i));
    }
    for (size_t k = 0; k < todo.size(); ++k) {
      if (b.res[k])
        continue;
      const match_record* hit = nullptr;
      if (todo[k].mutual)
        if (auto i = by_pair.find(todo[k].fate); i != by_pair.end())
          hit = &i->second;
      if (hit == nullptr)
        if (auto i = found.find(todo[k].key); i != found.end())
          hit = &i->second;
      if (hit == nullptr) {
        b.res[k].emplace(errc::protocol_error,
                         "commit inserted nothing and found no session for "
                         "the request");
        continue;
      }
      auto rec = *hit;
      // Our own id: an earlier attempt of this very call committed it (its
      // checkpoints were asked then; it is not fresh: never withdrawn now).
      rec.created = rec.session_id == todo[k].id;
      b.res[k].emplace(std::move(rec));
    }
  }

  pg_options opts_;
  std::string where_; ///< for logs, without secrets
  conn_ptr conn_;     ///< null while disconnected
  std::string last_error_;
  std::array<bool, st_count> prepared_{};
  bool listening_ = false;
};

class pg_factory final : public match_store_factory {
public:
  explicit pg_factory(pg_options opts) : opts_(std::move(opts)) {
    where_ = "postgres";
    // Describe the target without a password.
    char* err = nullptr;
    if (PQconninfoOption* o = PQconninfoParse(opts_.conninfo.c_str(), &err)) {
      for (auto* i = o; i->keyword != nullptr; ++i)
        if (i->val != nullptr && *i->val != '\0'
            && (std::strcmp(i->keyword, "host") == 0
                || std::strcmp(i->keyword, "hostaddr") == 0
                || std::strcmp(i->keyword, "port") == 0
                || std::strcmp(i->keyword, "dbname") == 0
                || std::strcmp(i->keyword, "user") == 0))
          where_ += std::string{" "} + i->keyword + "=" + i->val;
      PQconninfoFree(o);
    }
    if (err != nullptr)
      PQfreemem(err);
  }

  std::unique_ptr<match_store> connect() override {
    return std::make_unique<pg_match_store>(opts_, where_);
  }

  std::string describe() const override {
    return where_;
  }

private:
  pg_options opts_;
  std::string where_;
};

} // namespace

std::shared_ptr<match_store_factory> make_pg_match_store(pg_options opts) {
  return std::make_shared<pg_factory>(std::move(opts));
}

} // namespace mm
