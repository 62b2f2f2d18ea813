#pragma once

#include <memory>
#include <string>

namespace spdlog {
class logger;
} // namespace spdlog

namespace mm {

/// The logger of one subsystem ("broker", "session", "queue_store", ...):
/// the one the application registered under `name`, else a clone of the
/// default logger, registered under `name` on first use. Thread-safe.
/// Idempotent.
std::shared_ptr<spdlog::logger> logger(const std::string& name);

} // namespace mm
