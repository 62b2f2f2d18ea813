#include "app/matchd/ws_registry.hpp"

#include <limits>

#include "app/matchd/ws_session.hpp"

namespace mm {

struct ws_registry::chunk {
  chunk() {
    for (auto& h : heard)
      h.store(0, std::memory_order_relaxed);
  }
  moment heard[chunk_size];
  std::weak_ptr<ws_session> who[chunk_size];
};

ws_registry::ws_registry() = default;

ws_registry::~ws_registry() = default;

ws_registry::place ws_registry::add(const std::shared_ptr<ws_session>& s,
                                    int64_t now_ms) {
  std::lock_guard<std::mutex> guard{mtx_};
  uint32_t i;
  if (!free_.empty()) {
    i = free_.back();
    free_.pop_back();
  } else {
    i = used_++;
    if (i / chunk_size >= chunks_.size())
      chunks_.push_back(std::make_unique<chunk>());
  }
  auto& c = *chunks_[i / chunk_size];
  c.who[i % chunk_size] = s;
  c.heard[i % chunk_size].store(now_ms, std::memory_order_relaxed);
  return place{i, &c.heard[i % chunk_size]};
}

void ws_registry::remove(const place& p) {
  if (p.heard == nullptr)
    return;
  std::lock_guard<std::mutex> guard{mtx_};
  free_slot(p.index);
}

void ws_registry::free_slot(uint32_t index) {
  auto& c = *chunks_[index / chunk_size];
  auto& h = c.heard[index % chunk_size];
  if (h.load(std::memory_order_relaxed) == 0)
    return; // free already
  h.store(0, std::memory_order_relaxed);
  c.who[index % chunk_size].reset();
  free_.push_back(index);
}

void ws_registry::visit_quiet(
  int64_t quiet_since_ms,
  const std::function<void(ws_session&, int64_t heard_ms)>& f) {
  std::lock_guard<std::mutex> guard{mtx_};
  for (uint32_t i = 0; i < used_; ++i) {
    auto& c = *chunks_[i / chunk_size];
    auto at = c.heard[i % chunk_size].load(std::memory_order_relaxed);
    if (at == 0 || at > quiet_since_ms)
      continue; // free, or heard lately: the common case, one load
    if (auto s = c.who[i % chunk_size].lock())
      f(*s, at);
    else
      free_slot(i); // destroyed without finishing (the server stopped)
  }
}

std::vector<std::shared_ptr<ws_session>> ws_registry::all() {
  std::vector<std::shared_ptr<ws_session>> out;
  // Every live socket was heard at or before now.
  visit_quiet(std::numeric_limits<int64_t>::max(),
              [&out](ws_session& s, int64_t) {
                out.push_back(s.shared_from_this());
              });
  return out;
}

} // namespace mm
