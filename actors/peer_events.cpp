// Match events as the database has them (interface in
// actors/peer_events.hpp).

#include "actors/peer_events.hpp"

#include <set>

#include <nlohmann/json.hpp>

#include "persistence/matchdb/match_store.hpp"

namespace mm {

match_event event_of(const match_record& m) {
  match_event ev;
  ev.event_id = match_created_event_id(m.session_id);
  ev.session_id = m.session_id;
  ev.queue = m.queue;
  ev.user_a = m.user_a;
  ev.ticket_a = m.ticket_a;
  ev.user_b = m.user_b;
  ev.ticket_b = m.ticket_b;
  if (!m.members.empty()) { // a group session
    group_match_request g;
    g.queue = m.queue;
    g.group = m.group;
    g.min_players = m.min_players;
    // Its members now (a replay comes after leaves and fills): one who
    // left is in this session no more, and must not be told it again.
    for (auto& x : m.members)
      if (x.active)
        g.members.push_back(x);
    if (g.members.size() >= 2) {
      ev.user_a = g.members[0].user;
      ev.ticket_a = g.members[0].ticket;
      ev.user_b = g.members[1].user;
      ev.ticket_b = g.members[1].ticket;
    }
    for (size_t i = 2; i < g.members.size(); ++i)
      ev.others.push_back(g.members[i].user);
    ev.payload = group_created_payload(m.session_id, g);
    return ev;
  }
  match_request req;
  req.queue = m.queue;
  req.user_a = m.user_a;
  req.ticket_a = m.ticket_a;
  req.user_b = m.user_b;
  req.ticket_b = m.ticket_b;
  ev.payload = match_created_payload(m.session_id, req);
  return ev;
}

match_event members_changed_event(const match_record& s,
                                  const backfill_request& req) {
  match_event ev;
  ev.type = members_changed_type;
  ev.event_id = members_changed_event_id(s.session_id, req.group);
  ev.session_id = s.session_id;
  ev.queue = s.queue;
  ev.payload = members_changed_payload(s, req);
  std::vector<const session_member*> active;
  for (auto& m : s.members)
    if (m.active)
      active.push_back(&m);
  // The payload's `users` order (the relay's reading of the outbox row).
  for (size_t i = 0; i < active.size(); ++i) {
    if (i == 0) {
      ev.user_a = active[i]->user;
      ev.ticket_a = active[i]->ticket;
    } else if (i == 1) {
      ev.user_b = active[i]->user;
      ev.ticket_b = active[i]->ticket;
    } else {
      ev.others.push_back(active[i]->user);
    }
  }
  return ev;
}

std::optional<match_event> as_recorded(const std::string& user,
                                       const match_event& ev,
                                       const match_record& rec) {
  if (check_member(rec, user).code != errc::none)
    return std::nullopt;
  if (ev.type == "match.created"
      && ev.event_id == match_created_event_id(rec.session_id)) {
    if (rec.members.empty())
      return event_of(rec);
    // A group's roster may have changed since (leaves, fills): the peer's
    // event keeps the roster it was made with, every one of its users a
    // member of `rec`.
    std::set<std::string> roster;
    for (auto& m : rec.members)
      roster.insert(m.user);
    auto j = nlohmann::json::parse(ev.payload, nullptr, false);
    if (!j.is_object() || !j.contains("users") || !j["users"].is_array())
      return std::nullopt;
    for (auto& u : j["users"])
      if (!u.is_object() || !roster.count(u.value("user", std::string{})))
        return std::nullopt;
    for (auto* u : {&ev.user_a, &ev.user_b})
      if (!roster.count(*u))
        return std::nullopt;
    for (auto& u : ev.others)
      if (!roster.count(u))
        return std::nullopt;
    auto out = ev;
    out.queue = rec.queue;
    return out;
  }
  if (ev.type == "session.ended"
      && ev.event_id == session_ended_event_id(rec.session_id)
      && rec.status == session_status::closed) {
    auto out = ev; // who ended it, and why, is only in the payload
    out.queue = rec.queue;
    out.user_a = rec.user_a;
    out.ticket_a = rec.ticket_a;
    out.user_b = rec.user_b;
    out.ticket_b = rec.ticket_b;
    out.others.clear();
    for (size_t i = 2; i < rec.members.size(); ++i)
      out.others.push_back(rec.members[i].user);
    return out;
  }
  // A fill of the session, or a member's leave (to a member of it, checked
  // above, active or not: the session may have ended, or the member left,
  // since; a leaver hears its own leave). What changed is only in the
  // payload.
  for (const char* type : {members_changed_type, member_left_type})
    if (ev.type == type
        && ev.event_id.rfind(std::string{type} + ":" + rec.session_id + ":", 0)
             == 0) {
      auto out = ev;
      out.queue = rec.queue;
      return out;
    }
  return std::nullopt;
}

} // namespace mm
