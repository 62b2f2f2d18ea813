// The LISTEN worker of the outbox relay (actors/relay_workers.hpp).

#include "actors/relay_workers.hpp"

#include <chrono>
#include <thread>

#include <spdlog/spdlog.h>

#include "core/log_limit.hpp"
#include "core/logger.hpp"
#include "persistence/matchdb/match_store.hpp"

namespace mm::relay_detail {

listen_worker_actor::behavior_type
listen_worker(listen_worker_actor::pointer self,
              std::shared_ptr<match_store_factory> factory,
              outbox_relay_actor relay, uint32_t wait_ms) {
  static auto log = logger("relay");
  std::shared_ptr<match_store> store = factory->connect();
  auto failing = std::make_shared<bool>(false);
  self->send(self, tick_atom_v);
  return {
    [=](tick_atom) {
      auto got = store->wait_for_events(wait_ms);
      if (got) {
        if (*failing)
          log->info("outbox notifications are back");
        *failing = false;
        if (*got)
          self->send(relay, tick_atom_v);
      } else {
        // The polling timer covers the gap; wait instead of spinning on a
        // dead connection.
        if (!*failing)
          MM_LOG_LIMITED(log, warn, "outbox LISTEN failed, polling only: {}",
                         got.error().detail);
        *failing = true;
        std::this_thread::sleep_for(std::chrono::milliseconds(wait_ms));
      }
      self->send(self, tick_atom_v);
    },
  };
}

} // namespace mm::relay_detail
