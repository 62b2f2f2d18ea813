// The PostgreSQL match store's session calls: closing a session and looking
// one up by id or by an active member (one or many at once).

#include "persistence/matchdb/pg/pg_match_store.hpp"

#include <unordered_map>

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
    return one_session(exec_prepared(st_active_of, {&user}), "active session");
  });
}

std::vector<outcome<std::optional<match_record>>>
pg_match_store::do_active_sessions_of(const std::vector<std::string>& users) {
  using found = std::vector<std::optional<match_record>>;
  auto arg = binary_array(users);
  auto r = run<found>("active sessions", [&] {
    auto res = exec_prepared(st_active_of_many, {&arg}, 1);
    must(res, "active sessions");
    std::unordered_map<std::string, match_record> by_user;
    for (int i = 0; i < PQntuples(res.get()); ++i)
      by_user.emplace(text(res.get(), i, session_cols),
                      read_session(res.get(), i));
    found out;
    for (auto& u : users) {
      auto i = by_user.find(u);
      if (i == by_user.end())
        out.emplace_back();
      else
        out.emplace_back(i->second);
    }
    return outcome<found>{std::move(out)};
  });
  std::vector<outcome<std::optional<match_record>>> out;
  for (size_t i = 0; i < users.size(); ++i) {
    if (r)
      out.emplace_back(std::move((*r)[i]));
    else
      out.emplace_back(r.error());
  }
  return out;
}

outcome<std::optional<match_record>>
pg_match_store::do_find_session(const std::string& session_id) {
  return run<std::optional<match_record>>("find session", [&] {
    return one_session(exec_prepared(st_by_id, {&session_id}), "find session");
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
