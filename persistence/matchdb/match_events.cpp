// The outbox events' ids and payloads, shared by both match stores so
// that they describe matches identically (match_store.hpp declares them).

#include "persistence/matchdb/match_store.hpp"

#include <algorithm>
#include <string_view>

#include <nlohmann/json.hpp>

namespace mm {

namespace {

/// The users of a session as its events name them.
nlohmann::json
users_json(const std::string& user_a, const std::string& ticket_a,
           const std::string& user_b, const std::string& ticket_b) {
  return nlohmann::json::array({
    {{"user", user_a}, {"ticket", ticket_a}},
    {{"user", user_b}, {"ticket", ticket_b}},
  });
}

/// The members of a session as its events name them: a group's every
/// member with its team (and, when asked, whether it is still in), else
/// the pair.
nlohmann::json session_users_json(const match_record& s, bool with_active) {
  if (s.members.empty())
    return users_json(s.user_a, s.ticket_a, s.user_b, s.ticket_b);
  auto out = nlohmann::json::array();
  for (const auto& m : s.members) {
    nlohmann::json j{{"user", m.user}, {"ticket", m.ticket}, {"team", m.team}};
    if (with_active)
      j["active"] = m.active;
    out.push_back(std::move(j));
  }
  return out;
}

/// A group's `users` [{user, ticket, team}] and `teams` [[user, ...]] (a
/// lobby is one team) into `j`, of `members` (`active_only`: those still
/// in). Answers how many it listed.
size_t roster_json(const std::vector<session_member>& members, bool active_only,
                   nlohmann::json& j) {
  auto users = nlohmann::json::array();
  uint32_t teams = 1;
  for (const auto& m : members)
    if (m.active || !active_only) {
      users.push_back(
        {{"user", m.user}, {"ticket", m.ticket}, {"team", m.team}});
      teams = std::max(teams, m.team + 1);
    }
  auto by_team = nlohmann::json::array();
  for (uint32_t t = 0; t < teams; ++t) {
    auto team = nlohmann::json::array();
    for (const auto& m : members)
      if ((m.active || !active_only) && m.team == t)
        team.push_back(m.user);
    by_team.push_back(std::move(team));
  }
  auto n = users.size();
  j["users"] = std::move(users);
  j["teams"] = std::move(by_team);
  return n;
}

/// Appends `v` to `out` as a JSON string, escaped as nlohmann::json dumps
/// it (ids are valid UTF-8: bytes past ASCII pass through).
void append_json_string(std::string& out, std::string_view v) {
  static constexpr char hex[] = "0123456789abcdef";
  out += '"';
  size_t from = 0; // the runs that need no escape go in whole
  for (size_t i = 0; i < v.size(); ++i) {
    auto c = static_cast<unsigned char>(v[i]);
    if (c >= 0x20 && c != '"' && c != '\\')
      continue;
    out.append(v.data() + from, i - from);
    from = i + 1;
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        out += "\\u00";
        out += hex[c >> 4];
        out += hex[c & 0xF];
    }
  }
  out.append(v.data() + from, v.size() - from);
  out += '"';
}

} // namespace

std::string match_created_event_id(const std::string& session_id) {
  // Derived from the session: a session can never get a second event id.
  return std::string{match_created_type} + ":" + session_id;
}

std::string match_created_payload(const std::string& session_id,
                                  const match_request& req) {
  // Written out, not built as a JSON document: one per match, on the
  // commit's path. The keys in nlohmann::json's order (sorted), so the
  // text is what the document would dump (match_events_test).
  std::string out;
  out.reserve(160 + 2 * session_id.size() + req.queue.size() + req.user_a.size()
              + req.ticket_a.size() + req.user_b.size() + req.ticket_b.size());
  out += "{\"event_id\":";
  append_json_string(out, match_created_event_id(session_id));
  out += ",\"queue\":";
  append_json_string(out, req.queue);
  out += ",\"session_id\":";
  append_json_string(out, session_id);
  out += ",\"type\":";
  append_json_string(out, match_created_type);
  out += ",\"users\":[{\"ticket\":";
  append_json_string(out, req.ticket_a);
  out += ",\"user\":";
  append_json_string(out, req.user_a);
  out += "},{\"ticket\":";
  append_json_string(out, req.ticket_b);
  out += ",\"user\":";
  append_json_string(out, req.user_b);
  out += "}]}";
  return out;
}

std::string group_created_payload(const std::string& session_id,
                                  const group_match_request& req) {
  nlohmann::json j;
  j["event_id"] = match_created_event_id(session_id);
  j["type"] = match_created_type;
  j["session_id"] = session_id;
  j["queue"] = req.queue;
  j["group"] = req.group;
  roster_json(req.members, false, j);
  return j.dump();
}

std::string member_left_event_id(const std::string& session_id,
                                 const std::string& user) {
  // One per member and session: a leave is told once.
  return std::string{member_left_type} + ":" + session_id + ":" + user;
}

std::string member_left_payload(const match_record& session,
                                const std::string& user,
                                const std::string& reason) {
  nlohmann::json j;
  j["event_id"] = member_left_event_id(session.session_id, user);
  j["type"] = member_left_type;
  j["session_id"] = session.session_id;
  j["queue"] = session.queue;
  j["user"] = user;
  j["reason"] = reason;
  uint32_t remaining = 0;
  for (const auto& m : session.members)
    remaining += m.active ? 1 : 0;
  j["remaining"] = remaining;
  j["users"] = session_users_json(session, true);
  return j.dump();
}

std::string members_changed_event_id(const std::string& session_id,
                                     const std::string& group) {
  // One per fill: a retry of the fill can never tell it twice.
  return std::string{members_changed_type} + ":" + session_id + ":" + group;
}

std::string members_changed_payload(const match_record& session,
                                    const backfill_request& req) {
  nlohmann::json j;
  j["event_id"] = members_changed_event_id(session.session_id, req.group);
  j["type"] = members_changed_type;
  j["session_id"] = session.session_id;
  j["queue"] = session.queue;
  j["group"] = req.group;
  auto added = nlohmann::json::array();
  for (const auto& m : req.members)
    added.push_back({{"user", m.user}, {"ticket", m.ticket}, {"team", m.team}});
  j["added"] = std::move(added);
  // The relay delivers to `users` (the first two as the pair): the active
  // members only, so a leaver is not told of seats it no longer shares.
  j["remaining"] = roster_json(session.members, true, j);
  j["members"] = session_users_json(session, true);
  return j.dump();
}

std::string session_ended_event_id(const std::string& session_id) {
  // Derived from the session: a session can never get a second one.
  return std::string{session_ended_type} + ":" + session_id;
}

std::string session_ended_payload(const match_record& session,
                                  const std::string& ended_by,
                                  const std::string& reason) {
  nlohmann::json j;
  j["event_id"] = session_ended_event_id(session.session_id);
  j["type"] = session_ended_type;
  j["session_id"] = session.session_id;
  j["queue"] = session.queue;
  j["users"] = session_users_json(session, false);
  j["ended_by"] = ended_by;
  j["reason"] = reason;
  return j.dump();
}

} // namespace mm
