#include "app/matchd/depth_lease.hpp"

namespace mm {

depth_lease::depth_lease(std::string node, std::chrono::milliseconds ttl)
  : node_(std::move(node)), ttl_(ttl) {
  // nop
}

std::string depth_lease::key(const std::string& queue) {
  return "mm:{" + queue + "}:reporter"; // the queue's hash tag (one slot)
}

void depth_lease::renew(queue_store& store,
                        const std::vector<std::string>& queues) {
  auto asked = clock::now();
  std::vector<script_call> calls;
  calls.reserve(queues.size());
  for (auto& q : queues)
    calls.push_back({script_id::depth_lease,
                     {key(q)},
                     {node_, std::to_string(ttl_.count())}});
  auto replies = calls.empty() ? std::vector<store_reply>{} : store.run(calls);
  // The store measures the lease from when it ran the script, after
  // `asked`; a margin covers clocks that run at slightly different rates.
  auto valid = asked + ttl_ - ttl_ / 6;
  std::lock_guard<std::mutex> guard{mtx_};
  std::map<std::string, clock::time_point> next;
  for (size_t i = 0; i < queues.size(); ++i) {
    bool answered = i < replies.size() && replies[i].code == errc::none
                    && replies[i].value.type == store_value::kind::array
                    && !replies[i].value.elements.empty();
    if (!answered) {
      // Unknown: keep what we had, it runs out by itself.
      if (auto j = until_.find(queues[i]); j != until_.end())
        next.emplace(*j);
      continue;
    }
    if (replies[i].value.elements[0].str == "held")
      next[queues[i]] = valid;
  }
  until_ = std::move(next);
}

bool depth_lease::holds(const std::string& queue) const {
  std::lock_guard<std::mutex> guard{mtx_};
  auto i = until_.find(queue);
  return i != until_.end() && clock::now() < i->second;
}

} // namespace mm
