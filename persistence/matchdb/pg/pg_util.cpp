// Shared pieces of the PostgreSQL match store: the logger, error mapping and
// readers for results and error fields.

#include "persistence/matchdb/pg/pg_util.hpp"

#include <cstdlib>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

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

void append_element(std::string& lit, std::string_view v) {
  lit += lit.size() > 1 ? ",\"" : "\"";
  // The runs between quotes and backslashes go in whole.
  size_t from = 0;
  for (size_t i = v.find_first_of("\"\\"); i != std::string_view::npos;
       i = v.find_first_of("\"\\", i + 1)) {
    lit.append(v.data() + from, i - from);
    lit += '\\';
    from = i;
  }
  lit.append(v.data() + from, v.size() - from);
  lit += '"';
}

std::string text_array(const std::vector<std::string>& values) {
  std::string lit = "{";
  for (const auto& v : values)
    append_element(lit, v);
  lit += '}';
  return lit;
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
  // Column 10 is the match key, which no record shows.
  rec.group = text(r, row, 11);
  rec.min_players = static_cast<uint32_t>(int_of(r, row, 12));
  read_roster(r, row, 13, rec);
  return rec;
}

end_record read_ended(const PGresult* r, int row) {
  end_record out;
  out.session = read_session(r, row);
  out.ended_by = text(r, row, session_cols);
  out.reason = out.session.close_reason;
  return out;
}

void read_roster(const PGresult* r, int row, int col, match_record& rec) {
  if (PQgetisnull(r, row, col) != 0)
    return;
  try {
    auto roster = nlohmann::json::parse(PQgetvalue(r, row, col));
    std::vector<session_member> members;
    members.reserve(roster.size());
    for (const auto& m : roster) {
      session_member x;
      x.user = m.at("user").get<std::string>();
      // A group's member rows carry all of them; NULL reads as empty.
      x.ticket = m.at("ticket").is_null() ? "" : m["ticket"].get<std::string>();
      x.attrs = m.at("attrs").is_null() ? "" : m["attrs"].get<std::string>();
      x.team = m.at("team").is_null() ? 0 : m["team"].get<uint32_t>();
      x.active = m.at("active").get<bool>();
      members.push_back(std::move(x));
    }
    rec.members = std::move(members);
  } catch (const nlohmann::json::exception& e) {
    throw db_refusal{
      failure{errc::protocol_error, "malformed roster of session "
                                      + rec.session_id + ": " + e.what()}};
  }
}

} // namespace mm::pg
