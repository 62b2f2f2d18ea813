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

namespace {

/// The header of a one-dimensional text[] (array_recv): ndim, flags (no
/// nulls), the element type's OID, then the dimension's length and lower
/// bound; all big-endian 32-bit.
constexpr size_t array_header = 20;
constexpr size_t array_length_at = 12;
constexpr uint32_t text_oid = 25;

void put_u32(std::string& out, uint32_t v) {
  char b[4] = {static_cast<char>(v >> 24), static_cast<char>(v >> 16),
               static_cast<char>(v >> 8), static_cast<char>(v)};
  out.append(b, 4);
}

} // namespace

binary_text_array::binary_text_array(size_t bytes) {
  buf_.reserve(array_header + bytes);
}

void binary_text_array::add(std::string_view v) {
  if (buf_.empty()) {
    put_u32(buf_, 1);
    put_u32(buf_, 0);
    put_u32(buf_, text_oid);
    put_u32(buf_, 0); // the length, set by take()
    put_u32(buf_, 1);
  }
  put_u32(buf_, static_cast<uint32_t>(v.size()));
  buf_.append(v.data(), v.size());
  ++n_;
}

std::string binary_text_array::take() {
  if (buf_.empty()) {
    // No element: no dimension at all, as PostgreSQL writes '{}'.
    put_u32(buf_, 0);
    put_u32(buf_, 0);
    put_u32(buf_, text_oid);
  } else {
    std::string len;
    put_u32(len, n_);
    buf_.replace(array_length_at, 4, len);
  }
  n_ = 0;
  return std::exchange(buf_, std::string{});
}

std::string binary_array(const std::vector<std::string>& values) {
  size_t bytes = 0;
  for (const auto& v : values)
    bytes += 4 + v.size();
  binary_text_array a{bytes};
  for (const auto& v : values)
    a.add(v);
  return a.take();
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
