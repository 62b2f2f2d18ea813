#pragma once

// Shared pieces of the PostgreSQL match store: RAII for libpq objects, the
// two failures a call throws, and readers for results and error fields.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <libpq-fe.h>

#include "core/errc.hpp"
#include "persistence/matchdb/match_types.hpp"

namespace spdlog {
class logger;
} // namespace spdlog

namespace mm::pg {

// -- RAII for libpq objects ---------------------------------------------------

struct conn_deleter {
  /// Closes a connection (PQfinish); null is fine.
  void operator()(PGconn* c) const noexcept {
    if (c != nullptr)
      PQfinish(c);
  }
};
using conn_ptr = std::unique_ptr<PGconn, conn_deleter>;

struct result_deleter {
  /// Frees a result (PQclear); null is fine.
  void operator()(PGresult* r) const noexcept {
    if (r != nullptr)
      PQclear(r);
  }
};
using result_ptr = std::unique_ptr<PGresult, result_deleter>;

struct notify_deleter {
  /// Frees a notification (PQfreemem); null is fine.
  void operator()(PGnotify* n) const noexcept {
    if (n != nullptr)
      PQfreemem(n);
  }
};
using notify_ptr = std::unique_ptr<PGnotify, notify_deleter>;

// -- failures -----------------------------------------------------------------

/// The unique partial index that refuses a second active membership
/// (0001_init.sql): the constraint name of a busy user's refusal.
constexpr const char* one_active_index = "session_members_one_active";

/// The shared logger "match_store"; created on first use when the
/// application has not registered one.
std::shared_ptr<spdlog::logger> store_logger();

/// Thrown inside a call when the connection is gone; `run` reconnects once.
struct connection_lost {
  std::string detail;
};

/// Thrown inside a call when the database refused a statement.
struct db_refusal {
  failure why;
};

/// Maps a statement's refusal by the database to the project's error codes:
/// statement or lock timeout -> `store_unavailable`, data and constraint
/// errors (SQLSTATE 22, 23) -> `invalid_argument`, anything else ->
/// `protocol_error`; the detail is `what` and the server's message.
failure to_failure(const PGresult* r, const std::string& what);

// -- reading results ----------------------------------------------------------

/// The SQLSTATE of a refused statement; empty without one.
std::string sqlstate_of(const PGresult* r);

/// One error field of `r` (`PG_DIAG_...`); empty when absent.
std::string field_of(const PGresult* r, int field);

/// `s` without trailing newlines and blanks; empty for null.
std::string trimmed(const char* s);

/// True when `r` is a success with or without rows.
bool ok(const PGresult* r);

/// A one-dimensional text[] in PostgreSQL's binary format (what array_recv
/// reads), for a parameter sent in binary: each element is copied behind
/// its length, with no quoting here and no parsing on the server, where an
/// array literal cost both (docs/benchmarks.md, "Binary arrays and text
/// payloads"). Statements take lists as text arrays: cheaper to build and
/// to read than a JSON document (docs/benchmarks-history.md, "Group
/// commit").
class binary_text_array {
 public:
  /// An empty array with room for `bytes` of elements.
  explicit binary_text_array(size_t bytes = 0);

  /// Appends `v` as the next element.
  void add(std::string_view v);

  /// The array as it is sent; the builder is empty again after.
  std::string take();

 private:
  std::string buf_;
  uint32_t n_ = 0;
};

/// `values` in PostgreSQL's binary text[] format (binary_text_array).
std::string binary_array(const std::vector<std::string>& values);

/// The value at (`row`, `col`) as text.
std::string text(const PGresult* r, int row, int col);

/// The value at (`row`, `col`) as an integer; 0 for NULL.
int64_t int_of(const PGresult* r, int row, int col);

/// How many columns `MM_SESSION_COLS` (pg_statements.cpp) has: a
/// statement's own columns after them start at this index.
constexpr int session_cols = 14;

/// The session in `row`, from the columns of `MM_SESSION_COLS`
/// (pg_statements.cpp) in their order: a group's with its group id,
/// min_players and its members when the roster column holds them (see
/// `read_roster`).
match_record read_session(const PGresult* r, int row);

/// The session in `row` of a result with the columns of `MM_ENDED_COLS`
/// (pg_statements.cpp), as it is now (not ended by this call): who ended
/// it ('' for nobody) and why.
end_record read_ended(const PGresult* r, int row);

/// Fills `rec.members` from a roster as the statements write it (a JSON
/// array of {user, ticket, attrs, team, active}, in request order) in
/// column `col`; a NULL one (a pair's) leaves them empty. Throws
/// `db_refusal` on a malformed one.
void read_roster(const PGresult* r, int row, int col, match_record& rec);

} // namespace mm::pg
