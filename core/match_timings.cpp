#include "core/match_timings.hpp"

#include <chrono>

namespace mm {

match_timings::match_timings(size_t capacity)
  : capacity_(capacity == 0 ? 1 : capacity) {
  // nop
}

void match_timings::put(const std::string& session, const match_timing& t) {
  std::lock_guard<std::mutex> guard{mtx_};
  auto [i, added] = by_session_.insert_or_assign(session, t);
  (void)i;
  if (!added)
    return;
  order_.push_back(session);
  while (order_.size() > capacity_) {
    by_session_.erase(order_.front());
    order_.pop_front();
  }
}

std::optional<match_timing>
match_timings::get(const std::string& session) const {
  std::lock_guard<std::mutex> guard{mtx_};
  auto i = by_session_.find(session);
  if (i == by_session_.end())
    return std::nullopt;
  return i->second;
}

int64_t match_timings::now_ns() {
  using namespace std::chrono;
  return duration_cast<nanoseconds>(system_clock::now().time_since_epoch())
    .count();
}

int64_t match_timings::wall_ns_of_steady(int64_t steady_ns) {
  using namespace std::chrono;
  auto steady_now
    = duration_cast<nanoseconds>(steady_clock::now().time_since_epoch())
        .count();
  return now_ns() - (steady_now - steady_ns);
}

} // namespace mm
