// Shared pieces of the PostgreSQL match store: the logger, error mapping and
// readers for results and error fields.

#include "persistence/matchdb/pg/pg_util.hpp"

#include <cstdlib>
#include <utility>

#include "core/logger.hpp"

namespace mm::pg {

std::shared_ptr<spdlog::logger> store_logger() {
  return logger("match_store");
}

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

} // namespace mm::pg
