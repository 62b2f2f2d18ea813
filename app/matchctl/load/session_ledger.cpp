// The sessions in flight of `matchctl load --cycles`
// (app/matchctl/load/session_ledger.hpp).

#include "app/matchctl/load/session_ledger.hpp"

#include <algorithm>

namespace mm {

namespace {

/// How many users of conflicting sessions the report shows.
constexpr std::size_t max_examples = 5;

} // namespace

session_ledger::entry& session_ledger::observe(const std::string& id,
                                               const session_sighting& s,
                                               int& side) {
  auto self = static_cast<int32_t>(s.self);
  auto lo = std::min(self, s.partner);
  auto hi = std::max(self, s.partner);
  auto [it, fresh] = open_.try_emplace(id);
  auto& e = it->second;
  if (fresh) {
    sessions_++;
    e.s.id = id;
    e.s.users[0] = lo;
    e.s.users[1] = hi;
    int mine = lo == self ? 0 : 1;
    e.s.tickets[mine] = s.self_ticket;
    e.s.tickets[1 - mine] = s.partner_ticket;
  } else if (e.s.users[0] != lo || e.s.users[1] != hi) {
    flag_conflict(e, self); // the two sides disagree about who is in it
  }
  if (s.bad || lo == hi)
    flag_conflict(e, self);
  side = e.s.users[0] == self ? 0 : e.s.users[1] == self ? 1 : -1;
  return e;
}

void session_ledger::flag_conflict(entry& e, int32_t user) {
  if (e.conflict)
    return;
  e.conflict = true; // kept: the checker counts it once
  conflicts_++;
  if (conflict_examples_.size() < max_examples)
    conflict_examples_.push_back(user);
}

void session_ledger::settle(entry& e, int64_t now_us) {
  if (e.s.end_known)
    return;
  e.s.end_known = true;
  e.s.end_known_us = now_us;
  ended_++;
}

void session_ledger::maybe_erase(const std::string& id) {
  auto it = open_.find(id);
  if (it == open_.end() || it->second.conflict)
    return;
  auto& s = it->second.s;
  for (int k = 0; k < 2; ++k)
    if (s.users[k] >= 0 && !(s.created[k] && s.ended[k]))
      return;
  open_.erase(it);
}

void session_ledger::created(const std::string& id, const session_sighting& s) {
  std::lock_guard<std::mutex> guard{mtx_};
  int side = -1;
  auto& e = observe(id, s, side);
  if (side >= 0)
    e.s.created[side] = true;
  maybe_erase(id);
}

void session_ledger::ended(const std::string& id, const session_sighting& s,
                           int64_t now_us) {
  std::lock_guard<std::mutex> guard{mtx_};
  int side = -1;
  auto& e = observe(id, s, side);
  if (side >= 0)
    e.s.ended[side] = true;
  settle(e, now_us);
  maybe_erase(id);
}

void session_ledger::end_answered(const std::string& id, int64_t now_us) {
  std::lock_guard<std::mutex> guard{mtx_};
  // Gone means both users saw it end already.
  auto it = open_.find(id);
  if (it != open_.end())
    settle(it->second, now_us);
}

uint64_t session_ledger::sessions() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return sessions_;
}

uint64_t session_ledger::sessions_ended() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return ended_;
}

uint64_t session_ledger::conflicts() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return conflicts_;
}

std::vector<int32_t> session_ledger::conflict_examples() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return conflict_examples_;
}

std::vector<session_ledger::open_session>
session_ledger::open_sessions() const {
  std::lock_guard<std::mutex> guard{mtx_};
  std::vector<open_session> out;
  out.reserve(open_.size());
  for (auto& [id, e] : open_)
    out.push_back(e.s);
  return out;
}

} // namespace mm
