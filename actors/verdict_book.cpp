#include "actors/verdict_book.hpp"

namespace mm {

verdict_book::verdict_book(std::chrono::milliseconds decided_ttl,
                           std::chrono::milliseconds requeued_ttl)
  : decided_ttl_(decided_ttl), requeued_ttl_(requeued_ttl) {
  // nop
}

void verdict_book::enter(const std::string& key, bool claimed_again) {
  if (claimed_again) {
    decided_.erase(key);
    requeued_.erase(key);
  }
  ++in_flight_[key];
}

void verdict_book::leave(const std::string& key) {
  auto i = in_flight_.find(key);
  if (i != in_flight_.end() && --i->second <= 0)
    in_flight_.erase(i);
}

bool verdict_book::in_flight(const std::string& key) const {
  return in_flight_.count(key) > 0;
}

void verdict_book::record(const std::string& key, const cancel_verdict& v,
                          steady_time now) {
  if (!v.honoured && v.session_id.empty()) {
    // Back in the queue: a cancel on its way here is sent back there.
    forget_requeued(now);
    if (!in_flight(key) && requeued_.emplace(key, now).second)
      requeued_order_.emplace_back(now, key);
    return;
  }
  forget_decided(now);
  if (decided_.emplace(key, v).second)
    decided_order_.emplace_back(now, key);
  else
    decided_[key] = v;
}

const cancel_verdict* verdict_book::final_verdict(const std::string& key,
                                                  steady_time now) {
  forget_decided(now);
  auto i = decided_.find(key);
  return i == decided_.end() ? nullptr : &i->second;
}

bool verdict_book::take_requeued(const std::string& key, steady_time now) {
  forget_requeued(now);
  return !in_flight(key) && requeued_.erase(key) > 0;
}

namespace {

/// Drops the entries of `map` older than `ttl`, and the oldest beyond
/// `max`, in `order`'s order. A key recorded again meanwhile may leave a
/// stale entry in the order: erasing it early only sends a late cancel to
/// the database (a verdict) or lets it wait for the database like any
/// other (a requeue mark).
template <class Map, class Order, class Time>
void prune(Map& map, Order& order, std::chrono::milliseconds ttl, Time now,
           size_t max) {
  while (!order.empty()
         && (order.size() >= max || now - order.front().first >= ttl)) {
    map.erase(order.front().second);
    order.pop_front();
  }
}

} // namespace

void verdict_book::forget_decided(steady_time now) {
  prune(decided_, decided_order_, decided_ttl_, now, max_kept);
}

void verdict_book::forget_requeued(steady_time now) {
  prune(requeued_, requeued_order_, requeued_ttl_, now, max_kept);
}

} // namespace mm
