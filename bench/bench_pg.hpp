#pragma once

// libpq for the benches on PostgreSQL (finalize_bench, swipe_bench): an
// admin/verification connection, a fresh database per variant, the
// postmaster's pid, pg_stat_activity sampling. Defined in bench_pg.cpp.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

typedef struct pg_conn PGconn;

namespace mm::bench {

/// One libpq connection; notices ("... does not exist, skipping") dropped.
class pg_conn {
 public:
  explicit pg_conn(const std::string& conninfo);

  pg_conn(const pg_conn&) = delete;
  pg_conn& operator=(const pg_conn&) = delete;

  ~pg_conn();

  /// Runs `sql`; returns all rows of the result as text (NULL as "").
  std::vector<std::vector<std::string>> query(const std::string& sql);

  /// The first value of the first row; throws when there is none.
  std::string scalar(const std::string& sql);

  uint64_t count(const std::string& sql);

 private:
  PGconn* c_ = nullptr;
};

/// `conninfo` with dbname=`db` (libpq: a later keyword overrides).
std::string with_dbname(const std::string& conninfo, const std::string& db);

/// DROP DATABASE IF EXISTS `db` (forced), then CREATE DATABASE `db`.
void create_database(pg_conn& admin, const std::string& db);

/// DROP DATABASE IF EXISTS `db` (forced).
void drop_database(pg_conn& admin, const std::string& db);

/// The postmaster's pid (the parent of the admin connection's backend);
/// 0 when the server does not run on this machine.
int postmaster_of(pg_conn& admin);

/// A client backend's state for pg_stat_activity: its wait event, "on cpu"
/// when active without one, or its state ("idle", ...).
extern const char* const backend_state_sql;

/// Runs `sql` on `admin` every 20 ms until `deadline` (now_s()), handing
/// every row to `each`.
void sample_until(pg_conn& admin, const std::string& sql, double deadline,
                  const std::function<void(std::vector<std::string>&)>& each);

} // namespace mm::bench
