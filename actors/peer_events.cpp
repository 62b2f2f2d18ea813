// Match events as the database has them (interface in
// actors/peer_events.hpp).

#include "actors/peer_events.hpp"

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
    g.members = m.members;
    for (size_t i = 2; i < m.members.size(); ++i)
      ev.others.push_back(m.members[i].user);
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

std::optional<match_event> as_recorded(const std::string& user,
                                       const match_event& ev,
                                       const match_record& rec) {
  if (check_member(rec, user).code != errc::none)
    return std::nullopt;
  if (ev.type == "match.created"
      && ev.event_id == match_created_event_id(rec.session_id))
    return event_of(rec);
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
  return std::nullopt;
}

} // namespace mm
