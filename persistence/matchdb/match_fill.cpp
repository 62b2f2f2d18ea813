// The rule by which both match stores decide a fill (backfill, problem 16
// of docs/design.md) on the session they locked: the same answers, in the
// same order, with the same words.

#include "persistence/matchdb/match_store.hpp"

#include <algorithm>
#include <string>
#include <vector>

namespace mm {

outcome<bool> check_fill(const match_record& session,
                         const backfill_request& req) {
  const auto& id = session.session_id;
  if (session.status != session_status::active)
    return failure{errc::not_found, "session " + id + " has ended"};
  if (session.group.empty())
    return failure{errc::invalid_argument,
                   "session " + id + " is a pair's: it takes no members"};
  if (session.queue != req.queue)
    return failure{errc::invalid_argument, "session " + id + " is of queue '"
                                             + session.queue + "', not '"
                                             + req.queue + "'"};
  auto in_roster = [&](const std::string& user) -> const session_member* {
    for (const auto& m : session.members)
      if (m.user == user)
        return &m;
    return nullptr;
  };
  bool retry = true;
  std::string detail;
  for (const auto& m : req.members) {
    const auto* x = in_roster(m.user);
    retry = retry && x != nullptr && x->active && x->ticket == m.ticket;
    if (x == nullptr)
      continue;
    if (!detail.empty())
      detail += "; ";
    // A leaver is not taken back: its member row stays, inactive.
    detail += x->active
                ? "user '" + m.user + "' is already in active session " + id
                : "user '" + m.user + "' was a member of session " + id
                    + " and left";
  }
  if (retry)
    return true;
  if (!detail.empty())
    return failure{errc::conflict, std::move(detail)};
  // Capacity counts active members only: who left freed a seat.
  std::vector<uint32_t> per_team(max_group_members, 0);
  uint32_t active = 0;
  for (const auto& m : session.members)
    if (m.active) {
      ++active;
      ++per_team[std::min<size_t>(m.team, max_group_members - 1)];
    }
  const auto n = static_cast<uint32_t>(req.members.size());
  if (active + n > req.max_players)
    return failure{errc::conflict, "over capacity: session " + id + " holds "
                                     + std::to_string(active) + " of "
                                     + std::to_string(req.max_players)
                                     + " players, " + std::to_string(n)
                                     + " more do not fit"};
  if (req.team_size > 0) {
    std::vector<uint32_t> adds(max_group_members, 0);
    for (const auto& m : req.members)
      ++adds[m.team]; // below max_players / team_size: checked
    for (size_t t = 0; t < adds.size(); ++t)
      if (adds[t] > 0 && per_team[t] + adds[t] > req.team_size)
        return failure{errc::conflict,
                       "over capacity: team " + std::to_string(t)
                         + " of session " + id + " holds "
                         + std::to_string(per_team[t]) + " of "
                         + std::to_string(req.team_size) + " players, "
                         + std::to_string(adds[t]) + " more do not fit"};
  }
  return false;
}

} // namespace mm
