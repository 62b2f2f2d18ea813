#pragma once

// The actor system config of the project's CAF tests: every engine type
// registered, as on every node.

#include <caf/actor_system_config.hpp>

#include "messages/type_ids.hpp"

namespace mm::test {

struct caf_config : caf::actor_system_config {
  caf_config() {
    register_types(*this);
  }
};

} // namespace mm::test
