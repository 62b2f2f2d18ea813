#include "actors/core_watch.hpp"

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "core/logger.hpp"

namespace mm {

std::string core_health::down() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return down_;
}

bool core_health::record(const std::string& what) {
  std::lock_guard<std::mutex> guard{mtx_};
  if (stopping_ || !down_.empty())
    return false;
  down_ = what;
  return true;
}

void core_health::stopping() {
  std::lock_guard<std::mutex> guard{mtx_};
  stopping_ = true;
}

namespace {

struct watch_state {
  std::vector<std::pair<std::string, caf::actor_addr>> core;
  static inline const char* name = "core_watch";
};

caf::behavior core_watch(caf::stateful_actor<watch_state>* self,
                         std::vector<std::pair<std::string, caf::actor>> core,
                         std::shared_ptr<core_health> health,
                         core_down_fn on_down) {
  for (auto& [name, h] : core) {
    if (!h)
      continue; // not running on this engine (e.g. no relay)
    self->monitor(h);
    self->state.core.emplace_back(name, h.address());
  }
  self->set_down_handler([self, health, on_down](caf::down_msg& m) {
    std::string name = "an unknown actor";
    for (auto& [n, addr] : self->state.core)
      if (addr == m.source)
        name = n;
    auto what = name + " stopped: " + self->system().render(m.reason);
    if (!health->record(what))
      return;
    logger("engine")->critical("core actor {}; the node cannot serve", what);
    if (on_down)
      on_down(what);
  });
  return {
    [](int32_t) {
      // Only down messages matter; a behavior keeps the actor alive.
    },
  };
}

} // namespace

caf::actor
spawn_core_watch(caf::actor_system& sys,
                 std::vector<std::pair<std::string, caf::actor>> core,
                 std::shared_ptr<core_health> health, core_down_fn on_down) {
  return sys.spawn(core_watch, std::move(core), std::move(health),
                   std::move(on_down));
}

} // namespace mm
