// The steps that the in-memory match store's calls share: events, session
// rows and the indexes that stand in for PostgreSQL's (memory_state.hpp;
// the calls are in memory_match_store.cpp).

#include "persistence/matchdb/memory_state.hpp"

#include "core/clock.hpp"

namespace mm::memory_detail {

int64_t now_ms() {
  return wall_clock_ms();
}

void add_event(shared_state& st, const std::string& aggregate_id,
               std::string event_id, const char* type, std::string payload,
               int64_t now, uint32_t lease_ms) {
  outbox_event ev;
  ev.seq = st.next_seq++; // a withdrawn event leaves a gap, like a sequence
  ev.event_id = std::move(event_id);
  ev.aggregate_id = aggregate_id;
  ev.type = type;
  ev.payload = std::move(payload);
  ev.created_at = now;
  if (lease_ms > 0) { // the committer's to deliver (set_commit_lease)
    ev.locked_until = now + lease_ms;
    ev.attempts = 1;
  }
  st.event_seq.emplace(ev.event_id, ev.seq);
  st.undelivered.insert(ev.seq);
  st.outbox.emplace(ev.seq, std::move(ev));
}

void remove_event(shared_state& st, const std::string& event_id) {
  auto i = st.event_seq.find(event_id);
  if (i == st.event_seq.end())
    return;
  auto j = st.outbox.find(i->second);
  if (j != st.outbox.end()) {
    st.undelivered.erase(j->first);
    st.delivered_by_age.erase({j->second.created_at, j->first});
    st.outbox.erase(j);
  }
  st.event_seq.erase(i);
}

bool is_mutual(const shared_state& st, const match_record& rec) {
  auto i = st.mutual.find(pair_bounds(rec.user_a, rec.user_b));
  return i != st.mutual.end() && i->second == rec.session_id;
}

bool has_undelivered(const shared_state& st, const std::string& id) {
  std::vector<std::string> ids{match_created_event_id(id),
                               session_ended_event_id(id)};
  if (auto s = st.sessions.find(id); s != st.sessions.end())
    for (const auto& m : s->second.members)
      if (!m.active)
        ids.push_back(member_left_event_id(id, m.user));
  if (auto f = st.fills.find(id); f != st.fills.end())
    for (const auto& group : f->second)
      ids.push_back(members_changed_event_id(id, group));
  for (const auto& ev_id : ids) {
    auto i = st.event_seq.find(ev_id);
    if (i != st.event_seq.end() && st.undelivered.count(i->second) > 0)
      return true;
  }
  return false;
}

void free_user(shared_state& st, const std::string& user,
               const std::string& id) {
  auto j = st.active.find(user);
  if (j != st.active.end() && j->second == id)
    st.active.erase(j);
}

void free_members(shared_state& st, const match_record& rec) {
  free_user(st, rec.user_a, rec.session_id);
  free_user(st, rec.user_b, rec.session_id);
  for (const auto& m : rec.members)
    free_user(st, m.user, rec.session_id);
}

void close_record(shared_state& st, match_record& rec,
                  const std::string& reason, int64_t now) {
  st.active_by_age.erase({rec.created_at, rec.session_id});
  rec.status = session_status::closed;
  rec.closed_at = now;
  rec.close_reason = reason;
  free_members(st, rec);
  if (!is_mutual(st, rec))
    st.closed_by_age.emplace(rec.closed_at, rec.session_id);
}

end_record end_active(shared_state& st, match_record& rec,
                      const std::string& ended_by, const std::string& reason,
                      int64_t now) {
  close_record(st, rec, reason, now);
  // An ended session frees its key: the same users may be matched again
  // with the same tickets (a closed, never-ended session keeps it, so a
  // retry does not revive it).
  if (auto j = st.by_key.find(key_of(rec));
      j != st.by_key.end() && j->second == rec.session_id)
    st.by_key.erase(j);
  if (!ended_by.empty())
    st.ended_by[rec.session_id] = ended_by;
  add_event(st, rec.session_id, session_ended_event_id(rec.session_id),
            session_ended_type, session_ended_payload(rec, ended_by, reason),
            now);
  end_record out;
  out.session = rec;
  out.session.created = false;
  out.ended_by = ended_by;
  out.reason = reason;
  out.ended_now = true;
  return out;
}

match_record create_session(shared_state& st, const match_request& req,
                            const std::string& key, int64_t now,
                            uint32_t lease_ms) {
  match_record rec;
  rec.session_id = new_session_id();
  rec.queue = req.queue;
  rec.user_a = req.user_a;
  rec.ticket_a = req.ticket_a;
  rec.user_b = req.user_b;
  rec.ticket_b = req.ticket_b;
  rec.status = session_status::active;
  rec.created_at = now;
  st.sessions.emplace(rec.session_id, rec);
  st.by_key.emplace(key, rec.session_id);
  st.active_by_age.emplace(now, rec.session_id);
  if (req.mutual) {
    st.mutual.emplace(pair_bounds(req.user_a, req.user_b), rec.session_id);
  } else {
    st.active.emplace(req.user_a, rec.session_id);
    st.active.emplace(req.user_b, rec.session_id);
  }
  add_event(st, rec.session_id, match_created_event_id(rec.session_id),
            match_created_type, match_created_payload(rec.session_id, req), now,
            lease_ms);
  rec.created = true;
  return rec;
}

match_record
create_group_session(shared_state& st, const group_match_request& req,
                     const std::string& key, int64_t now, uint32_t lease_ms) {
  match_record rec;
  rec.session_id = new_session_id();
  rec.queue = req.queue;
  rec.user_a = req.members[0].user;
  rec.ticket_a = req.members[0].ticket;
  rec.user_b = req.members[1].user;
  rec.ticket_b = req.members[1].ticket;
  rec.status = session_status::active;
  rec.created_at = now;
  rec.group = req.group;
  rec.min_players = req.min_players;
  rec.members = req.members;
  for (auto& m : rec.members)
    m.active = true;
  st.sessions.emplace(rec.session_id, rec);
  st.by_key.emplace(key, rec.session_id);
  st.active_by_age.emplace(now, rec.session_id);
  for (const auto& m : rec.members)
    st.active.emplace(m.user, rec.session_id);
  add_event(st, rec.session_id, match_created_event_id(rec.session_id),
            match_created_type, group_created_payload(rec.session_id, req), now,
            lease_ms);
  rec.created = true;
  return rec;
}

void remove_session(shared_state& st, const std::string& id,
                    const std::string& key) {
  auto i = st.sessions.find(id);
  if (i == st.sessions.end())
    return;
  free_members(st, i->second);
  st.active_by_age.erase({i->second.created_at, id});
  if (auto j = st.by_key.find(key); j != st.by_key.end() && j->second == id)
    st.by_key.erase(j);
  if (auto j = st.mutual.find(pair_bounds(i->second.user_a, i->second.user_b));
      j != st.mutual.end() && j->second == id)
    st.mutual.erase(j);
  remove_event(st, match_created_event_id(id));
  st.sessions.erase(i);
}

match_record* session_row(shared_state& st, const std::string& id) {
  auto i = st.sessions.find(id);
  return i != st.sessions.end() ? &i->second : nullptr;
}

std::string busy_detail(const shared_state& st,
                        const std::vector<session_member>& members) {
  std::string detail;
  for (const auto& m : members) {
    if (auto i = st.active.find(m.user); i != st.active.end()) {
      if (!detail.empty())
        detail += "; ";
      detail += "user '" + m.user + "' is already in active session "
                + i->second;
    }
  }
  return detail;
}

failure no_session(const std::string& id) {
  return failure{errc::not_found, "no session " + id};
}

std::string key_of(const match_record& rec) {
  if (!rec.group.empty()) {
    group_match_request g;
    g.queue = rec.queue;
    g.group = rec.group;
    return group_key(g);
  }
  match_request req;
  req.queue = rec.queue;
  req.user_a = rec.user_a;
  req.ticket_a = rec.ticket_a;
  req.user_b = rec.user_b;
  req.ticket_b = rec.ticket_b;
  return match_key(req);
}

void prune_session(shared_state& st, const std::string& id) {
  auto i = st.sessions.find(id);
  if (i == st.sessions.end())
    return;
  if (auto j = st.by_key.find(key_of(i->second));
      j != st.by_key.end() && j->second == id)
    st.by_key.erase(j);
  st.ended_by.erase(id);
  st.fills.erase(id);
  st.sessions.erase(i);
}

} // namespace mm::memory_detail
