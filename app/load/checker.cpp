// The invariant checker of `matchctl load` (app/load/checker.hpp): which
// sessions the records name, and who is in two, missed one, or is lost.

#include "app/load/checker.hpp"

#include <algorithm>
#include <map>
#include <unordered_map>

namespace mm {

namespace {

using uf = user_record::flag;

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
  std::map<std::string, std::size_t> shown;
  auto example = [&](const char* kind, int32_t u) {
    if (u >= 0 && shown[kind]++ < 5)
      res.examples.emplace_back(kind, static_cast<uint32_t>(u));
  };
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
    bool matched = r.has(uf::got_event) || r.has(uf::told_matched)
                   || missed[u];
    bool told_off = r.has(uf::cancel_acked) || r.has(uf::ended);
    if (told_off && matched) {
      // Told "cancelled" (or failed), yet matched after all.
      res.cancelled_but_matched++;
      example("cancelled_but_matched", ui);
    } else if ((missed[u] || told_matched) && !in_two[u]) {
      // (A user in two sessions misses one of them: that is counted as the
      // double booking it is.)
      // Only a user who kept listening can be expected to have heard.
      if (r.has(uf::ws_failed) || !r.has(uf::join_ok)) {
        res.unobserved++;
      } else {
        res.undelivered_events++;
        example("undelivered_event", ui);
      }
    }
    if (r.has(uf::join_ok) && !told_off && !r.has(uf::shutdown_notice)
        && !matched && !r.has(uf::final_waiting)) {
      res.lost_users++;
      example("lost_user", ui);
    }
  }
  return res;
}

} // namespace mm
