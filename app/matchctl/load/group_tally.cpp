// The group checker of `matchctl load` (group_run.hpp).

#include <algorithm>
#include <climits>

#include "app/matchctl/load/checker.hpp"
#include "app/matchctl/load/group_run.hpp"

namespace mm::group_run {

namespace {

/// One proposal leaked (`what`: an example for the report).
void leak(group_check& c, std::string what) {
  ++c.proposals_leaked;
  if (c.leaked_examples.size() < 5)
    c.leaked_examples.push_back(std::move(what));
}

/// The team `m` is in by its own match event ("" none): with fills a
/// session's first observer may not have seen every member.
std::string team_of(const member& m) {
  if (m.teams.is_array())
    for (size_t k = 0; k < m.teams.size(); ++k)
      if (m.teams[k].is_array())
        for (auto& u : m.teams[k])
          if (u.is_string() && u.get<std::string>() == m.user)
            return m.session + "/" + std::to_string(k);
  return {};
}

} // namespace

group_check check_group_run(const std::vector<member>& users,
                            const std::vector<party_run>& parties,
                            const group_load_options& g,
                            const group_tallies& t) {
  group_check c;
  c.users = users.size();
  c.parties = parties.size();
  c.errors = t.errors;
  // Each session as its first observer saw it.
  std::map<std::string, const member*> first;
  for (auto& m : users) {
    c.double_bookings += m.extra_sessions;
    if (m.session.empty())
      continue;
    ++c.matched_users;
    auto [it, added] = first.emplace(m.session, &m);
    // (With backfill a session's roster changes: a fill's members see
    // it after the fill; fill_check.hpp checks the fills instead.)
    if (!added && g.leave_rate <= 0
        && (it->second->roster != m.roster || it->second->teams != m.teams))
      ++c.double_bookings; // observers disagree on the session
  }
  c.sessions = first.size();
  std::map<std::string, const member*> by_user;
  std::map<const member*, const party_run*> party_of;
  for (auto& m : users)
    by_user[m.user] = &m;
  for (auto& pr : parties)
    for (auto i : pr.members)
      party_of[&users[i]] = &pr;
  for (auto& [sid, m] : first) {
    auto n = m->roster.size();
    if (n < g.min_players || n > g.max_players)
      ++c.partial_matches;
    if (n > g.max_players)
      ++c.over_capacity;
    if (g.teams > 0) {
      size_t in_teams = 0, lo = SIZE_MAX, hi = 0;
      if (m->teams.is_array())
        for (size_t k = 0; k < m->teams.size(); ++k) {
          const auto& t = m->teams[k];
          lo = std::min(lo, t.size());
          hi = std::max(hi, t.size());
          in_teams += t.size();
        }
      if (g.leave_rate <= 0
          && (!m->teams.is_array() || m->teams.size() != g.teams
              || in_teams != n || hi != lo || hi > g.max_players / g.teams))
        ++c.partial_matches;
    }
    std::set<size_t> nodes;
    for (auto& u : m->roster)
      if (auto it = by_user.find(u); it != by_user.end())
        nodes.insert(it->second->node);
    c.cross_node_sessions += nodes.size() > 1 ? 1 : 0;
    for (auto& u : m->roster) {
      auto it = by_user.find(u);
      if (it == by_user.end()) {
        ++c.partial_matches; // a user this run does not know
        continue;
      }
      if (it->second->session == sid)
        continue;
      if (party_of[it->second]->gave_up) {
        ++c.unobserved; // it had stopped listening
      } else {
        ++c.undelivered_events;
        if (c.undelivered_examples.size() < 5)
          c.undelivered_examples.push_back(u + " " + sid + " heard "
                                           + it->second->session);
      }
    }
  }
  std::vector<uint32_t> left; // the sizes of the parties still waiting
  for (auto& pr : parties) {
    std::set<std::string> where, teams;
    size_t matched = 0;
    for (auto i : pr.members) {
      auto& m = users[i];
      if (m.session.empty())
        continue;
      ++matched;
      where.insert(m.session);
      if (g.teams > 0)
        teams.insert(team_of(m));
    }
    // Only some members heard: a split if they all kept listening (the
    // others' missing events are counted above as well).
    bool some = matched != 0 && matched != pr.members.size();
    if ((some && !pr.gave_up) || where.size() > 1 || teams.size() > 1)
      ++c.split_parties;
    std::set<size_t> nodes;
    for (auto i : pr.members)
      nodes.insert(users[i].node);
    c.cross_node_parties += nodes.size() > 1 ? 1 : 0;
    c.removed_parties += pr.removed ? 1 : 0;
    // How each proposal a member heard ended for it. The ticket is in
    // one proposal at a time: a later one ends the earlier; at the end
    // a party back in the queue (not `finalizing`: held) is in none.
    uint64_t last_seq = 0;
    for (auto i : pr.members)
      for (auto& [id, h] : users[i].proposed)
        last_seq = std::max(last_seq, h.seq);
    bool back = pr.waiting
                && (pr.final_phase == "queued" || pr.final_phase == "claiming");
    for (auto i : pr.members) {
      auto& m = users[i];
      if (pr.gave_up)
        continue; // stopped listening: what it missed is unobserved
      bool leaked = false;
      for (auto& [id, h] : m.proposed) {
        auto how = proposal_end(m.ended, id, h, !m.session.empty(), last_seq,
                                back);
        tally_end(c.holders[h.holder], how);
        if (how == "leaked")
          leak(c, m.user + " " + id + " " + h.holder + " " + pr.final_phase);
        leaked = leaked || how == "leaked";
      }
      // Still held in a group at the end, after the quiet: stuck in a
      // proposal, whether or not it ever heard of it.
      if (!leaked && t.proposals_heard > 0 && pr.waiting && !back)
        leak(c, m.user + " - - " + pr.final_phase + " (heard "
                  + std::to_string(m.proposed.size()) + ")");
      // Its proposals ended without removing it (told `requeued`, or
      // silently by a lapsed lease): it must end matched or waiting.
      if (!m.proposed.empty() && matched == 0 && !pr.waiting && !pr.removed) {
        ++c.requeued_lost;
        if (c.lost_examples.size() < 5) {
          auto x = m.user + " " + pr.final_phase + pr.final_note + " heard "
                   + std::to_string(m.proposed.size());
          for (auto& [id, h] : m.proposed) {
            auto e = m.ended.find(id);
            x += " " + id + ":" + (e == m.ended.end() ? "-" : e->second);
          }
          c.lost_examples.push_back(std::move(x));
        }
      }
    }
    if (matched == 0 && pr.queued && !pr.removed) {
      if (pr.waiting) {
        c.waiting += pr.members.size();
        left.push_back(static_cast<uint32_t>(pr.members.size()));
      } else if (pr.gave_up) {
        c.unobserved += pr.members.size();
      } else {
        c.lost_users += pr.members.size();
      }
    }
  }
  auto fc = t.fills->count(g.max_players, [&](const std::string& u) {
    auto it = by_user.find(u);
    return it != by_user.end() && !party_of[it->second]->gave_up;
  });
  c.leaves = t.leaves;
  c.fills = fc.fills;
  c.seats_filled = fc.seats;
  c.over_capacity += fc.over_capacity;
  c.undelivered_events += fc.untold;
  for (auto& x : fc.untold_examples)
    if (c.undelivered_examples.size() < 5)
      c.undelivered_examples.push_back(x + " (a fill)");
  // On a ready-check queue every session is a proposal every member
  // accepted: the latest one the member heard with the session's users.
  if (t.proposals_heard > 0)
    for (auto& m : users)
      if (!m.session.empty() && !accepted_session(m.proposed, m.roster))
        ++c.unaccepted_sessions;
  for (auto& [holder, ms] : *t.last_removed_ms)
    c.holders[holder].last_removed_ms = ms;
  c.proposals = t.proposals_heard;
  c.declines = t.declines;
  c.ignores = t.ignores;
  c.matches_left = full_matches_of(std::move(left), g.teams, g.max_players);
  return c;
}

} // namespace mm::group_run
