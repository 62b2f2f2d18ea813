// Definitions of bench_pg.hpp.

#include "bench/bench_pg.hpp"

#include <libpq-fe.h>

#include <algorithm>
#include <cstdlib>
#include <stdexcept>

#include "bench/bench_common.hpp"

namespace mm::bench {

pg_conn::pg_conn(const std::string& conninfo) {
  c_ = PQconnectdb(conninfo.c_str());
  if (PQstatus(c_) != CONNECTION_OK) {
    std::string msg = PQerrorMessage(c_);
    PQfinish(c_);
    c_ = nullptr;
    throw std::runtime_error("connect (" + conninfo + "): " + msg);
  }
  // "database ... does not exist, skipping" and the like are expected.
  PQsetNoticeProcessor(
    c_, [](void*, const char*) {}, nullptr);
}

pg_conn::~pg_conn() {
  if (c_ != nullptr)
    PQfinish(c_);
}

std::vector<std::vector<std::string>> pg_conn::query(const std::string& sql) {
  PGresult* r = PQexec(c_, sql.c_str());
  auto st = PQresultStatus(r);
  if (st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK) {
    std::string msg = PQresultErrorMessage(r);
    PQclear(r);
    throw std::runtime_error(sql + ": " + msg);
  }
  std::vector<std::vector<std::string>> rows;
  for (int i = 0; i < PQntuples(r); ++i) {
    std::vector<std::string> row;
    for (int j = 0; j < PQnfields(r); ++j)
      row.emplace_back(PQgetvalue(r, i, j));
    rows.push_back(std::move(row));
  }
  PQclear(r);
  return rows;
}

std::string pg_conn::scalar(const std::string& sql) {
  auto rows = query(sql);
  if (rows.empty() || rows[0].empty())
    throw std::runtime_error(sql + ": no value");
  return rows[0][0];
}

uint64_t pg_conn::count(const std::string& sql) {
  return std::stoull(scalar(sql));
}

std::string with_dbname(const std::string& conninfo, const std::string& db) {
  return conninfo + " dbname=" + db;
}

void create_database(pg_conn& admin, const std::string& db) {
  drop_database(admin, db);
  admin.query("CREATE DATABASE " + db);
}

void drop_database(pg_conn& admin, const std::string& db) {
  admin.query("DROP DATABASE IF EXISTS " + db + " WITH (FORCE)");
}

int postmaster_of(pg_conn& admin) {
  int backend = std::atoi(admin.scalar("SELECT pg_backend_pid()").c_str());
  int postmaster = 0;
  uint64_t ignored = 0;
  if (!proc_stat(backend, postmaster, ignored))
    return 0;
  return postmaster;
}

const char* const backend_state_sql
  = "CASE WHEN state = 'active' THEN coalesce(wait_event_type || ':' || "
    "wait_event, 'on cpu') ELSE state END";

void sample_until(pg_conn& admin, const std::string& sql, double deadline,
                  const std::function<void(std::vector<std::string>&)>& each) {
  while (now_s() < deadline) {
    for (auto& row : admin.query(sql))
      each(row);
    auto left = deadline - now_s();
    if (left > 0)
      sleep_s(std::min(left, 0.02));
  }
}

} // namespace mm::bench
