// The invariant checker of `matchctl load` (app/matchctl/load/checker.hpp):
// which sessions the records name, and who is in two, missed one, or is
// lost; with --cycles from the records' counters and the ledger's open
// sessions.

#include "app/matchctl/load/checker.hpp"

#include <algorithm>
#include <functional>
#include <map>
#include <unordered_map>

namespace mm {

namespace {

using uf = user_record::flag;

/// A few offending users per kind of violation, for the report.
class example_list {
 public:
  explicit example_list(checker_result& res) : res_(res) {}

  void operator()(const char* kind, int32_t u) {
    if (u >= 0 && shown_[kind]++ < 5)
      res_.examples.emplace_back(kind, static_cast<uint32_t>(u));
  }

 private:
  checker_result& res_;
  std::map<std::string, std::size_t> shown_;
};

/// User `u` was matched but got no match event: undelivered, unless its
/// WebSocket had failed (or it never joined).
void count_unheard(checker_result& res, example_list& example,
                   const user_record& r, int32_t u) {
  // Only a user who kept listening can be expected to have heard.
  if (r.has(uf::ws_failed) || !r.has(uf::join_ok)) {
    res.unobserved++;
  } else {
    res.undelivered_events++;
    example("undelivered_event", u);
  }
}

/// Joined, not told cancelled/failed/shutting down, and at the end neither
/// matched nor waiting: lost.
void count_if_lost(checker_result& res, example_list& example,
                   const user_record& r, int32_t u, bool matched,
                   bool told_off) {
  if (r.has(uf::join_ok) && !told_off && !r.has(uf::shutdown_notice) && !matched
      && !r.has(uf::final_waiting)) {
    res.lost_users++;
    res.lost.push_back(static_cast<uint32_t>(u));
    example("lost_user", u);
  }
}

} // namespace

checker_result check_records(const std::vector<user_record>& users,
                             const std::vector<extra_event>& extras) {
  checker_result res;
  struct session_info {
    int32_t a = -3; ///< the pair as the first observer reported it
    int32_t b = -3;
    bool conflict = false;
  };
  std::unordered_map<std::string, session_info> sessions;
  std::vector<const std::string*> first_session(users.size(), nullptr);
  std::vector<uint8_t> in_two(users.size(), 0);
  std::vector<uint8_t> missed(users.size(), 0); // a session lacks its event

  auto associate = [&](int32_t u, const std::string& sid) {
    if (u < 0 || static_cast<std::size_t>(u) >= users.size() || sid.empty())
      return;
    auto*& first = first_session[u];
    if (first == nullptr)
      first = &sid;
    else if (*first != sid)
      in_two[u] = 1;
  };
  auto observe = [&](uint32_t u, int32_t partner, bool bad,
                     const std::string& sid) {
    if (sid.empty())
      return;
    auto& s = sessions[sid];
    int32_t lo = std::min<int32_t>(static_cast<int32_t>(u), partner);
    int32_t hi = std::max<int32_t>(static_cast<int32_t>(u), partner);
    if (bad)
      s.conflict = true;
    if (s.a == -3) {
      s.a = lo;
      s.b = hi;
    } else if (s.a != lo || s.b != hi) {
      s.conflict = true; // the two sides disagree about who is in it
    }
    associate(static_cast<int32_t>(u), sid);
    associate(partner, sid);
  };

  for (std::size_t u = 0; u < users.size(); ++u) {
    auto& r = users[u];
    if (r.has(uf::got_event))
      observe(static_cast<uint32_t>(u), r.partner, r.has(uf::bad_event),
              r.session);
    if (!r.told_session.empty())
      associate(static_cast<int32_t>(u), r.told_session);
  }
  for (auto& e : extras)
    observe(e.user, e.partner, e.bad, e.session);

  // Every side of every session must have heard of it on its WebSocket.
  auto got = [&](int32_t u, const std::string& sid) {
    auto& r = users[u];
    if (r.has(uf::got_event) && r.session == sid)
      return true;
    for (auto& e : extras)
      if (e.user == static_cast<uint32_t>(u) && e.session == sid)
        return true;
    return false;
  };
  example_list example{res};
  for (auto& [sid, s] : sessions) {
    if (s.conflict) {
      res.double_bookings++;
      example("double_booking", s.a >= 0 ? s.a : s.b);
    }
    for (auto u : {s.a, s.b})
      if (u >= 0 && !got(u, sid))
        missed[u] = 1;
  }

  for (std::size_t u = 0; u < users.size(); ++u) {
    auto& r = users[u];
    auto ui = static_cast<int32_t>(u);
    if (in_two[u] || r.has(uf::multi_session)) {
      res.double_bookings++;
      example("double_booking", ui);
    }
    bool told_matched = r.has(uf::told_matched) && !r.has(uf::got_event);
    bool matched = r.has(uf::got_event) || r.has(uf::told_matched) || missed[u];
    bool told_off = r.has(uf::cancel_acked) || r.has(uf::ended);
    if (told_off && matched) {
      // Told "cancelled" (or failed), yet matched after all.
      res.cancelled_but_matched++;
      example("cancelled_but_matched", ui);
    } else if ((missed[u] || told_matched) && !in_two[u]) {
      // (A user in two sessions misses one of them: that is counted as the
      // double booking it is.)
      count_unheard(res, example, r, ui);
    }
    count_if_lost(res, example, r, ui, matched, told_off);
  }
  return res;
}

checker_result check_cycles(const std::vector<user_record>& users,
                            const session_ledger& ledger, int64_t end_us,
                            int64_t grace_us) {
  checker_result res;
  example_list example{res};
  res.double_bookings += ledger.conflicts();
  for (auto u : ledger.conflict_examples())
    example("double_booking", u);

  // Sessions that some user of theirs did not see begin or end.
  for (auto& s : ledger.open_sessions()) {
    bool end_known = s.end_known && s.end_known_us <= end_us - grace_us;
    for (int k = 0; k < 2; ++k) {
      auto u = s.users[k];
      if (u < 0 || static_cast<std::size_t>(u) >= users.size())
        continue;
      auto& r = users[u];
      auto& ticket = s.tickets[k];
      // Only a user who kept listening can be expected to have heard.
      bool listening = !r.has(uf::ws_failed) && r.counts.joins_ok > 0;
      // A join answered "matched" without its event is counted below.
      bool told_only = same_join(ticket, r.ticket) && r.has(uf::told_matched)
                       && !r.has(uf::got_event);
      if (!s.created[k] && told_only) {
        // (counted with the current cycle)
      } else if (!s.created[k]) {
        if (!listening) {
          res.unobserved++;
        } else if (!ticket.empty()
                   && (same_join(ticket, r.cancelled_ticket)
                       || (same_join(ticket, r.ticket)
                           && (r.has(uf::cancel_acked) || r.has(uf::ended))))) {
          res.cancelled_but_matched++;
          example("cancelled_but_matched", u);
        } else if (same_join(ticket, r.ticket) && r.has(uf::got_event)
                   && r.session != s.id) {
          res.double_bookings++; // its join is in another session too
          example("double_booking", u);
        } else {
          res.undelivered_events++;
          example("undelivered_event", u);
        }
      } else if (end_known && !s.ended[k]) {
        if (!listening) {
          res.unobserved++;
        } else {
          res.missing_session_ended++;
          example("missing_session_ended", u);
        }
      }
    }
  }

  for (std::size_t u = 0; u < users.size(); ++u) {
    auto& r = users[u];
    auto ui = static_cast<int32_t>(u);
    auto& c = r.counts;
    auto add = [&](std::size_t& total, uint32_t n, const char* kind) {
      total += n;
      if (n > 0)
        example(kind, ui);
    };
    add(res.overlapping_sessions, c.overlapping, "overlapping_sessions");
    add(res.in_session_after_end, c.in_session_after_end,
        "in_session_after_end");
    add(res.end_mismatches, c.end_mismatches, "end_mismatch");
    add(res.cancelled_but_matched, c.cancelled_but_matched,
        "cancelled_but_matched");
    if (r.has(uf::multi_session)) {
      res.double_bookings++;
      example("double_booking", ui);
    }
    // The current (last) cycle, as without --cycles. (A stale "matched"
    // answer is counted as in_session_after_end, not again as lost.)
    bool matched = r.has(uf::got_event) || r.has(uf::told_matched);
    bool explained = matched || r.has(uf::told_stale);
    bool told_off = r.has(uf::cancel_acked) || r.has(uf::ended);
    if (r.has(uf::ended) && matched) {
      // Told "cancelled" (or failed) by the server, yet matched.
      res.cancelled_but_matched++;
      example("cancelled_but_matched", ui);
    } else if (r.has(uf::told_matched) && !r.has(uf::got_event)
               && !r.has(uf::cancel_acked)) {
      count_unheard(res, example, r, ui);
    }
    count_if_lost(res, example, r, ui, explained, told_off);
  }
  return res;
}

namespace {

/// Takes from `count` (parties by size) one full match of `teams` teams of
/// `size` players (one lobby: teams 1); false, `count` unchanged, if none.
/// Each team is filled with sizes not larger than the last one taken.
bool take_match(std::vector<size_t>& count, uint32_t teams, uint32_t size) {
  std::function<bool(uint32_t, uint32_t, uint32_t)> fill
    = [&](uint32_t team, uint32_t room, uint32_t largest) -> bool {
    if (room == 0)
      return team + 1 == teams || fill(team + 1, size, count.size() - 1);
    for (uint32_t k = std::min<uint32_t>(largest, room); k >= 1; --k) {
      if (count[k] == 0)
        continue;
      --count[k];
      if (fill(team, room - k, k))
        return true;
      ++count[k];
    }
    return false;
  };
  return fill(0, size, count.size() - 1);
}

} // namespace

std::size_t full_matches_of(std::vector<uint32_t> sizes, uint32_t teams,
                            uint32_t max_players) {
  teams = std::max<uint32_t>(teams, 1);
  uint32_t size = max_players / teams;
  if (size == 0)
    return 0;
  std::vector<size_t> count(size + 1, 0);
  for (auto n : sizes)
    if (n >= 1 && n <= size)
      ++count[n];
  std::size_t made = 0;
  while (take_match(count, teams, size))
    ++made;
  return made;
}

} // namespace mm
