// engine (persistence/queue/embedded_dataset.hpp): one dataset and the Lua
// runtime bound to it; every call reads the clock once, then runs.

#include "persistence/queue/embedded_dataset.hpp"

#include <memory>
#include <utility>

#include "persistence/queue/embedded/dataset.hpp"
#include "persistence/queue/embedded/reply_sink.hpp"
#include "persistence/queue/embedded/script_lua.hpp"

namespace mm::embedded {

struct engine::impl {
  explicit impl(store_clock clock) : data(std::move(clock)), lua(data) {}
  dataset data;
  lua_runtime lua;
};

engine::engine(store_clock clock)
  : impl_(std::make_unique<impl>(std::move(clock))) {}

engine::~engine() = default;

store_value engine::execute(const store_command& command) {
  if (command.empty()) {
    store_value result;
    result.type = store_value::kind::error;
    result.str = "ERR empty command";
    return result;
  }
  impl_->data.tick();
  value_sink sink;
  impl_->data.exec(command.data(), command.size(), sink);
  return sink.take();
}

store_value engine::run(const script_call& call) {
  impl_->data.tick();
  return impl_->lua.run(call);
}

store_value engine::eval(const std::string& source,
                         const std::vector<std::string>& keys,
                         const std::vector<std::string>& args) {
  impl_->data.tick();
  return impl_->lua.eval(source, keys, args);
}

} // namespace mm::embedded
