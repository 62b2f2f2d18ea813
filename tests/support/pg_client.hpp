#pragma once

// A tiny libpq client for tests: create a fresh database, run checker
// queries. (Tests only; the engine's own access lives in persistence/.)

#include <libpq-fe.h>

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "tests/support/test_env.hpp"

namespace mm::test {

class pg_client {
 public:
  explicit pg_client(const std::string& conninfo)
    : conn_(PQconnectdb(conninfo.c_str()), &PQfinish) {
    if (PQstatus(conn_.get()) != CONNECTION_OK)
      throw std::runtime_error(std::string{"postgres: "}
                               + PQerrorMessage(conn_.get()));
  }

  /// Runs `sql`; returns the rows as text (NULL as "").
  std::vector<std::vector<std::string>> query(const std::string& sql) {
    std::unique_ptr<PGresult, decltype(&PQclear)> r(
      PQexec(conn_.get(), sql.c_str()), &PQclear);
    auto st = PQresultStatus(r.get());
    if (st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK)
      throw std::runtime_error("postgres: " + sql + ": "
                               + PQerrorMessage(conn_.get()));
    std::vector<std::vector<std::string>> rows;
    for (int i = 0; i < PQntuples(r.get()); ++i) {
      std::vector<std::string> row;
      for (int j = 0; j < PQnfields(r.get()); ++j)
        row.emplace_back(PQgetvalue(r.get(), i, j));
      rows.push_back(std::move(row));
    }
    return rows;
  }

  /// Runs a query that answers one number (e.g. SELECT count(*) ...).
  int64_t count(const std::string& sql) {
    auto rows = query(sql);
    if (rows.size() != 1 || rows[0].size() != 1)
      throw std::runtime_error("postgres: " + sql + ": not one value");
    return std::stoll(rows[0][0]);
  }

 private:
  std::unique_ptr<PGconn, decltype(&PQfinish)> conn_;
};

/// Creates a fresh database on the private server; returns its conninfo.
inline std::string fresh_database(const std::string& prefix) {
  static int n = 0;
  auto name = prefix + "_" + std::to_string(::getpid()) + "_"
              + std::to_string(n++);
  pg_client admin{pg_conninfo()};
  admin.query("DROP DATABASE IF EXISTS " + name);
  admin.query("CREATE DATABASE " + name);
  return pg_conninfo(name);
}

} // namespace mm::test
