#include "app/matchd/server_core.hpp"

#include <spdlog/spdlog.h>

#include "core/logger.hpp"

namespace mm {

void server_core::log_handler_error(const char* where, const char* what) {
  ++stats.handler_errors;
  uint64_t suppressed = 0;
  if (!error_log_.admit(suppressed))
    return;
  static auto lg = logger("http");
  if (suppressed > 0)
    lg->error("{} similar handler errors suppressed", suppressed);
  lg->error("{}: exception caught at the handler boundary: {}", where, what);
}

bool server_core::reserve_ws(const std::string& user) {
  std::lock_guard<std::mutex> guard{mtx_};
  auto& n = ws_per_user_[user];
  if (n >= limits.ws_per_user) {
    if (n == 0)
      ws_per_user_.erase(user);
    return false;
  }
  ++n;
  return true;
}

void server_core::release_ws(const std::string& user) {
  std::lock_guard<std::mutex> guard{mtx_};
  auto i = ws_per_user_.find(user);
  if (i == ws_per_user_.end())
    return;
  if (--i->second == 0)
    ws_per_user_.erase(i);
}

} // namespace mm
