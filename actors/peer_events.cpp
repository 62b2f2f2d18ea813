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
  if (user != rec.user_a && user != rec.user_b)
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
    return out;
  }
  return std::nullopt;
}

} // namespace mm
