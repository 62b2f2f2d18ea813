// The waiting tickets the queue broker re-scans (actors/waiter_roster.hpp).

#include "actors/waiter_roster.hpp"

#include <algorithm>

namespace mm {

int64_t next_look_ms(uint32_t period_ms, uint32_t align_ms,
                     int64_t next_change_ms, int64_t now_ms) {
  auto ms = static_cast<int64_t>(period_ms);
  if (next_change_ms > 0 && next_change_ms < ms)
    return next_change_ms; // a widening: exact
  if (align_ms > 0) {
    int64_t align = align_ms;
    ms += (align - (now_ms + ms) % align) % align;
  }
  return ms;
}

int64_t waiter_roster::ms_of(time_point now) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
           now.time_since_epoch())
    .count();
}

waiter_roster::time_point
waiter_roster::look_at(uint32_t period_ms, uint32_t align_ms,
                       int64_t next_change_ms, time_point now) {
  using std::chrono::milliseconds;
  auto now_ms = ms_of(now);
  auto ms = next_look_ms(period_ms, align_ms, next_change_ms, now_ms);
  auto whole = time_point{milliseconds(now_ms + ms)};
  bool widening = next_change_ms > 0 && next_change_ms < period_ms;
  if (align_ms > 0 && !widening)
    return whole; // the grid point itself
  // Exact looks: the next whole millisecond, never earlier than asked.
  return whole >= now + milliseconds(ms) ? whole : whole + milliseconds(1);
}

void waiter_roster::drop_slot(uint64_t id, entry& e) {
  if (!e.slot)
    return;
  if (auto i = due_.find(*e.slot); i != due_.end()) {
    auto& ids = i->second;
    if (auto j = std::find(ids.begin(), ids.end(), id); j != ids.end()) {
      *j = ids.back();
      ids.pop_back();
    }
    if (ids.empty())
      due_.erase(i);
  }
  e.slot.reset();
}

void waiter_roster::arm(uint64_t id, entry& e, time_point due) {
  drop_slot(id, e);
  e.in_flight = false;
  e.slot = due;
  due_[due].push_back(id);
}

bool waiter_roster::watch(uint64_t id, waiter w, time_point due) {
  auto [i, added] = waiters_.try_emplace(id);
  i->second.w = std::move(w);
  arm(id, i->second, due);
  return added;
}

caf::strong_actor_ptr waiter_roster::unwatch(uint64_t id) {
  auto i = waiters_.find(id);
  if (i == waiters_.end())
    return nullptr;
  drop_slot(id, i->second);
  auto session = std::move(i->second.w.session);
  waiters_.erase(i);
  return session;
}

std::vector<waiter_roster::scan> waiter_roster::take_due(time_point now) {
  std::vector<scan> out;
  while (!due_.empty() && due_.begin()->first <= now) {
    for (auto id : due_.begin()->second) {
      auto i = waiters_.find(id);
      if (i == waiters_.end() || i->second.in_flight)
        continue; // never: a leaving waiter leaves its moment too
      i->second.slot.reset();
      i->second.in_flight = true;
      out.push_back(scan{id, i->second.w.gen, i->second.w.spec});
    }
    due_.erase(due_.begin());
  }
  return out;
}

std::vector<std::vector<waiter_roster::scan>>
waiter_roster::take_due_by_queue(time_point now, size_t max) {
  auto due = take_due(now);
  std::stable_sort(due.begin(), due.end(), [](const scan& x, const scan& y) {
    return x.spec->queue < y.spec->queue;
  });
  std::vector<std::vector<scan>> out;
  for (auto& s : due) {
    if (out.empty() || out.back().size() >= max
        || out.back().front().spec->queue != s.spec->queue)
      out.emplace_back();
    out.back().push_back(std::move(s));
  }
  return out;
}

waiter_roster::verdict waiter_roster::settle(uint64_t id, uint64_t gen,
                                             const claim_result* r,
                                             time_point now) {
  verdict v;
  auto i = waiters_.find(id);
  if (i == waiters_.end() || i->second.w.gen != gen || !i->second.in_flight)
    return v;
  auto& e = i->second;
  auto again = [&](int64_t next_change_ms) {
    arm(id, e, look_at(e.w.period_ms, e.w.align_ms, next_change_ms, now));
  };
  if (r == nullptr) {
    again(-1); // store trouble: keep beating
    v.keep = true;
    return v;
  }
  v.session = e.w.session;
  if (r->outcome == claim_outcome::queued) {
    v.tell = r->windows != e.w.windows;
    e.w.windows = r->windows;
    again(e.w.spec->rules.empty() ? -1 : r->next_change_ms);
    v.keep = true;
  } else if (r->outcome == claim_outcome::claimed_by_other
             && !r->partner.user.empty()) {
    // Held by a claimer being finalized: it looks again until that ends.
    v.tell = true;
    again(-1);
    v.keep = true;
  } else {
    // Matched by this re-scan, or our record is gone: the session takes
    // it from here.
    v.tell = true;
    waiters_.erase(i);
  }
  if (!v.tell && v.keep)
    v.session = nullptr;
  return v;
}

std::optional<waiter_roster::time_point> waiter_roster::next_due() const {
  if (due_.empty())
    return std::nullopt;
  return due_.begin()->first;
}

} // namespace mm
