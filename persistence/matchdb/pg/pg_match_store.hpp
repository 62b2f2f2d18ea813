#pragma once

// The PostgreSQL match store's connection class. Its members are defined by
// family: pg_match_store.cpp (connection, statements, transactions),
// pg_commit.cpp, pg_groups.cpp, pg_backfill.cpp, pg_sessions.cpp,
// pg_lifecycle.cpp, pg_swipes.cpp, pg_outbox.cpp, pg_migrate.cpp,
// pg_partitions.cpp.
//
// One synchronous libpq connection per match_store. Statements are prepared
// lazily, once per connection (a fresh database has no tables to prepare
// against until the migrations ran). A call that finds the connection broken
// reconnects and runs again, once; then it fails with `store_unavailable`.
// Running a call again is safe: every call is one transaction, and commits
// are idempotent per request.

#include <array>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <initializer_list>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <libpq-fe.h>
#include <spdlog/spdlog.h>

#include "core/log_limit.hpp"
#include "persistence/matchdb/match_store.hpp"
#include "persistence/matchdb/pg/pg_statements.hpp"
#include "persistence/matchdb/pg/pg_util.hpp"

namespace mm::pg {

/// One request of a batch (pg_commit.cpp).
struct pending;

class pg_match_store final : public match_store {
 public:
  /// Connects once, eagerly; a store that cannot connect yet tries again on
  /// each call.
  pg_match_store(pg_options opts, std::string where);

  // The calls of match_store (contracts there), each a note on how.

  /// Each migration in its transaction under `pg_advisory_xact_lock`, its
  /// text checked by md5 (pg_migrate.cpp).
  outcome<std::vector<std::string>> apply_migrations() override;

  /// The batch as one statement in a savepoint; when that is refused, one
  /// savepoint per request (pg_commit.cpp). Withdrawals survive a second
  /// attempt after a lost connection.
  std::vector<outcome<match_record>>
  do_commit_matches(const std::vector<match_request>& requests,
                    const commit_check& check) override;

  /// One transaction: one statement writes the session, every member and
  /// the event (`mm_commit_group`); a busy member refuses it, and a read
  /// after the rollback names every busy one (pg_groups.cpp).
  outcome<match_record> do_commit_group(const group_match_request& req,
                                        const commit_check& check) override;

  /// Locks the live row as `do_end_session` does (else reads the history);
  /// a group's leave and, when too few stay, its end in one transaction; a
  /// pair's leave is its end (pg_groups.cpp).
  outcome<leave_record> do_leave_session(const std::string& session_id,
                                         const std::string& user,
                                         const std::string& reason) override;

  /// One transaction: lock the live row (as `do_leave_session`), read its
  /// roster, decide (`check_fill`), one statement for the members and the
  /// event (`mm_add_members`), the checkpoints, COMMIT; a member busy
  /// elsewhere refuses it as in `do_commit_group` (pg_backfill.cpp).
  outcome<backfill_record> do_add_members(const backfill_request& req,
                                          const commit_check& check) override;

  /// One statement (`mm_close`); an ended session, found in the history,
  /// answers false (pg_sessions.cpp).
  outcome<bool> do_close_session(const std::string& session_id,
                                 const std::string& reason) override;

  /// Locks the live row, else reads the history; one transaction, NOTIFY
  /// with the COMMIT (pg_lifecycle.cpp).
  outcome<end_record> do_end_session(const std::string& session_id,
                                     const std::string& user,
                                     const std::string& reason) override;

  /// One transaction: the sessions locked in id order, ended by one
  /// statement. A failed transaction fails every entry.
  std::vector<outcome<end_record>>
  do_end_sessions(const std::vector<end_request>& requests) override;

  /// Picks with FOR UPDATE SKIP LOCKED, ends like `do_end_sessions`.
  outcome<std::vector<end_record>> do_expire_sessions(uint32_t max_age_ms,
                                                      uint32_t limit) override;

  /// Three statements, each its own transaction: the outbox's default
  /// partition, the closed sessions left in `match_sessions`, then the
  /// history's default partition (at most `limit` sessions in all).
  outcome<prune_counts> do_prune(uint32_t retention_ms,
                                 uint32_t limit) override;

  /// Under a session advisory lock, each DDL with a lock timeout
  /// (pg_partitions.cpp).
  outcome<partition_report> do_maintain_partitions(uint32_t width_s,
                                                   uint32_t retention_s,
                                                   uint32_t ahead) override;

  /// One look-up by the one-active index.
  outcome<std::optional<match_record>>
  do_active_session_of(const std::string& user) override;

  /// One statement for all `users`; a failed call fails every entry.
  std::vector<outcome<std::optional<match_record>>>
  do_active_sessions_of(const std::vector<std::string>& users) override;

  /// Live or ended, in one statement (one snapshot).
  outcome<std::optional<match_record>>
  do_find_session(const std::string& session_id) override;

  /// Under the pair's transaction-scoped advisory lock, taken in a
  /// statement of its own (pg_swipes.cpp).
  outcome<swipe_record> do_record_swipe(const std::string& from,
                                        const std::string& to,
                                        bool like) override;

  /// The pair's row of `mutual_matches` and its session.
  outcome<std::optional<match_record>>
  do_mutual_match_of(const std::string& a, const std::string& b) override;

  /// One statement picks (SKIP LOCKED) and leases, committed without
  /// waiting for the WAL flush (pg_outbox.cpp); answered in `seq` order.
  outcome<std::vector<outbox_event>>
  do_fetch_undelivered(uint32_t limit, uint32_t lease_ms) override;

  /// One statement by event id, committed without waiting for the WAL flush.
  outcome<size_t>
  mark_delivered(const std::vector<std::string>& event_ids) override;

  /// LISTEN on first use, then waits on the connection's socket.
  outcome<bool> wait_for_events(uint32_t timeout_ms) override;

  /// True: libpq blocks.
  bool blocking() const noexcept override {
    return true;
  }

 private:
  // -- connection management --------------------------------------------------

  /// Opens a fresh connection with keepalive and the statement timeout. On
  /// failure leaves the store disconnected with `last_error_`.
  bool connect_now();

  /// Runs `body` as one call: connects if needed, and after a lost
  /// connection reconnects and runs it again, once. Exceptions never leave.
  template <class T, class F>
  outcome<T> run(const char* what, F&& body);

  /// Ends an open transaction after a refusal; drops a connection that
  /// cannot even do that.
  void rollback_quietly() noexcept;

  // -- statements -------------------------------------------------------------

  /// Throws `connection_lost` when `r` shows a broken connection; returns
  /// `r` otherwise, refused or not.
  result_ptr checked(result_ptr r);

  /// Runs `sql` (one or more statements) through `checked`.
  result_ptr exec(const std::string& sql);

  /// Runs `sql` unprepared with text `params` ($1, ...) through `checked`.
  result_ptr exec_params(const char* sql,
                         std::initializer_list<std::string> params);

  /// Runs the statement `s` through `checked`, preparing it on its first use
  /// on this connection (a refused prepare throws `db_refusal`). Bit i of
  /// `binary` sends parameter i in binary format (binary_text_array); the
  /// others go as text.
  result_ptr exec_prepared(stmt s,
                           std::initializer_list<const std::string*> params,
                           uint32_t binary = 0);

  /// The same with the parameters in a vector.
  result_ptr exec_prepared(stmt s, const std::vector<std::string>& params,
                           uint32_t binary = 0);

  /// What both exec_prepared send: `n` parameters in libpq's arrays.
  result_ptr send_prepared(stmt s, int n, const char* const* values,
                           const int* lengths, const int* formats);

  /// Throws `db_refusal` when the database refused `r`.
  static void must(const result_ptr& r, const std::string& what);

  /// Commits; with `notify`, sends the outbox notification in the same
  /// round trip (it is delivered on commit only). Throws `db_refusal` when
  /// the transaction had failed (the COMMIT rolled it back).
  void commit(bool notify = false);

  /// The session in the first row of `r`, if any (pg_sessions.cpp).
  outcome<std::optional<match_record>> one_session(result_ptr r,
                                                   const char* what);

  // -- session lifecycle (pg_lifecycle.cpp) -----------------------------------

  /// Ends the sessions `todo` (locked by this transaction while active; each
  /// with its ended_by and reason set) and writes their events; fills in
  /// the final state. Throws `db_refusal` when one was not ended.
  void end_locked(std::vector<end_record>& todo);

  /// A member's call found no live row of `session_id` under its lock:
  /// ends the open transaction and answers the session as the history has
  /// it (`not_found` when it has none, `forbidden` when `user` was never a
  /// member of it).
  outcome<end_record> ended_state(const std::string& session_id,
                                  const std::string& user);

  // -- groups (pg_groups.cpp) -------------------------------------------------

  /// Reads the members of the group sessions among `sessions` that have
  /// none yet (read with `MM_LOCKED_COLS`), in one statement after their
  /// lock; a pair costs nothing (no statement when there is no group).
  /// Throws `db_refusal` when a group's roster is missing.
  void load_rosters(const std::vector<match_record*>& sessions);

  /// Names the `members` that are in an active session, worded like the
  /// in-memory store, in their order; empty if none.
  std::string busy_detail(const std::vector<session_member>& members);

  // -- backfill (pg_backfill.cpp) ---------------------------------------------

  /// A fill's session was not found live under the lock: ends the open
  /// transaction and answers `not_found`, "ended" when the history has it.
  failure fill_target_gone(const std::string& session_id);

  // -- group commit (pg_commit.cpp) -------------------------------------------

  /// What one transaction attempt of a batch knows, by todo index.
  struct batch_state;

  /// One transaction attempt for the whole batch `todo`.
  std::vector<outcome<match_record>>
  commit_batch(const std::vector<match_request>& requests,
               const std::vector<pending>& todo, const commit_check& check,
               std::vector<std::optional<failure>>& withdrawn);

  /// Runs request `k` alone in a savepoint of its own, and asks the
  /// `after_create` checkpoint before releasing it. `lease`: the events'
  /// lease in ms, as text (set_commit_lease).
  void commit_one(const match_request& req, const std::vector<pending>& todo,
                  size_t k, const commit_check& check, batch_state& b,
                  std::vector<std::optional<failure>>& withdrawn,
                  const std::string& lease);

  /// Marks request `k` withdrawn at `stage`, and with it every other request
  /// of the batch with the same fate key (same claimed pair; for mutual
  /// requests the same pair of users) that has no answer yet or answers k's
  /// session (duplicates). Its rows are still there unless the caller rolled
  /// them back: see `remove_withdrawn`.
  static void withdraw(const std::vector<pending>& todo, size_t k,
                       commit_stage stage, batch_state& b,
                       std::vector<std::optional<failure>>& withdrawn);

  /// Deletes the rows that this transaction wrote for the withdrawn requests
  /// `gone`; the rest of the transaction stays as it is.
  void remove_withdrawn(const std::vector<pending>& todo,
                        const std::vector<size_t>& gone);

  /// Names the users of `req` that are in an active session; empty if none.
  /// In request order, worded like the in-memory store.
  std::string conflict_detail(const match_request& req);

  /// Records the sessions that the commit statement inserted; `sent`: the
  /// todo indexes of the statement's requests, in its order.
  void take_inserted(const PGresult* r, const std::vector<pending>& todo,
                     const std::vector<size_t>& sent, batch_state& b);

  /// Answers the requests that inserted nothing with the session that holds
  /// their key: committed by an earlier call (a retry), earlier in this
  /// batch, or — for a mutual request, whose pair comes first — by a
  /// concurrent transaction that this one waited for.
  void take_retried(const std::vector<pending>& todo, batch_state& b);

  pg_options opts_;
  std::string where_; ///< for logs, without secrets
  conn_ptr conn_;     ///< null while disconnected
  std::string last_error_;
  std::array<bool, st_count> prepared_{};
  bool listening_ = false;
  /// Time windows (by name) whose rows are in their table's default
  /// partition: not created again by this connection (pg_partitions.cpp).
  std::set<std::string> refused_windows_;
};

/// One limiter for the "unavailable" lines of every call of every
/// connection (not one per instantiation of `run`).
inline log_limit& unavailable_log_limit() {
  static log_limit limit{5, std::chrono::seconds(10)};
  return limit;
}

template <class T, class F>
outcome<T> pg_match_store::run(const char* what, F&& body) {
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
  // The log names the server and libpq's reason; the error, which may
  // reach a client, names neither (no internal addresses). Rate-limited:
  // while the database is down every call of every connection ends here.
  uint64_t suppressed = 0;
  if (unavailable_log_limit().admit(suppressed)) {
    if (suppressed > 0)
      store_logger()->error("{} similar database failures not logged",
                            suppressed);
    store_logger()->error("{} unavailable ({}): {}", where_, what, last_error_);
  }
  return outcome<T>{errc::store_unavailable,
                    std::string{"the database is unavailable ("} + what + ")"};
}

} // namespace mm::pg
