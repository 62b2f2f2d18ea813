#include "core/logger.hpp"

#include <mutex>

#include <spdlog/spdlog.h>

namespace mm {

std::shared_ptr<spdlog::logger> logger(const std::string& name) {
  static std::mutex mtx; // get-or-register must not race with itself
  std::lock_guard<std::mutex> guard{mtx};
  if (auto lg = spdlog::get(name))
    return lg;
  auto lg = spdlog::default_logger()->clone(name);
  try {
    spdlog::register_logger(lg);
  } catch (const spdlog::spdlog_ex&) {
    // The application registered one meanwhile: use that.
    if (auto registered = spdlog::get(name))
      return registered;
  }
  return lg;
}

} // namespace mm
