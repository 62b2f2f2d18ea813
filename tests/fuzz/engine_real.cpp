// The fuzz targets' engine: matchd's, in one actor system for the process.

#include <memory>

#include <caf/all.hpp>

#include "actors/engine.hpp"
#include "app/matchd/engine_bridge.hpp"
#include "app/matchd/hub.hpp"
#include "messages/type_ids.hpp"
#include "tests/fuzz/api_fixture.hpp"

namespace mm::fuzz {

std::shared_ptr<engine_port>
make_port(const std::shared_ptr<api_context>& ctx) {
  // Never destroyed: the targets leave with exit() while its threads run.
  auto* cfg = new caf::actor_system_config;
  register_types(*cfg);
  cfg->set("scheduler.max-threads", size_t{2});
  cfg->set("logger.verbosity", caf::atom("quiet"));
  auto* sys = new caf::actor_system(*cfg);
  engine_config ec;
  ec.broker.queues = {"default", "voice"};
  // Sessions end by themselves soon, so the corpus's users can match again.
  ec.lifecycle.max_session_s = 1;
  auto started = engine::start(*sys, ec);
  if (!started)
    fail("engine::start: " + started.error().detail, "");
  auto events = std::make_shared<hub>();
  ctx->events = events;
  return engine_bridge::make(*sys, *started, events, bridge_config{});
}

} // namespace mm::fuzz
