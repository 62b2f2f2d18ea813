#include "core/errc.hpp"

namespace mm {

namespace {

constexpr const char* names[] = {
  "none",
  "invalid_argument",
  "duplicate_ticket",
  "not_found",
  "stale_token",
  "in_flight",
  "store_unavailable",
  "conflict",
  "protocol_error",
  "cancelled",
  "shutting_down",
  "forbidden",
  "in_session",
  "timed_out",
  "unknown_queue",
  "too_many_queues",
  "invalid_attribute",
  "invalid_rules",
  "store_auth_failed",
  "in_party",
  "party_too_large",
};

} // namespace

const char* to_string(errc x) noexcept {
  auto i = static_cast<size_t>(x);
  return i < sizeof(names) / sizeof(names[0]) ? names[i] : "unknown";
}

errc errc_from_string(const std::string& name) noexcept {
  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); ++i)
    if (name == names[i])
      return static_cast<errc>(i);
  return errc::none;
}

} // namespace mm
