// The PostgreSQL match store's session calls: closing a session and looking
// one up by id or by an active member.

#include "persistence/matchdb/pg/pg_match_store.hpp"

namespace mm::pg {

outcome<bool> pg_match_store::do_close_session(const std::string& session_id,
                                               const std::string& reason) {
  return run<bool>("close session", [&]() -> outcome<bool> {
    auto r = exec_prepared(st_close, {&session_id, &reason});
    must(r, "close session");
    if (text(r.get(), 0, 1) != "t")
      return outcome<bool>{errc::not_found, "no session " + session_id};
    return int_of(r.get(), 0, 0) > 0;
  });
}

outcome<std::optional<match_record>>
pg_match_store::do_active_session_of(const std::string& user) {
  return run<std::optional<match_record>>("active session", [&] {
    return one_session(exec_prepared(st_active_of, {&user}),
                       "active session");
  });
}

outcome<std::optional<match_record>>
pg_match_store::do_find_session(const std::string& session_id) {
  return run<std::optional<match_record>>("find session", [&] {
    return one_session(exec_prepared(st_by_id, {&session_id}),
                       "find session");
  });
}

outcome<std::optional<match_record>>
pg_match_store::one_session(result_ptr r, const char* what) {
  must(r, what);
  if (PQntuples(r.get()) == 0)
    return std::optional<match_record>{};
  return std::optional<match_record>{read_session(r.get(), 0)};
}

} // namespace mm::pg
