#include "messages/engine_types.hpp"
#include "messages/party_types.hpp"

namespace mm {

const char* to_string(session_phase x) noexcept {
  switch (x) {
    case session_phase::idle:
      return "idle";
    case session_phase::claiming:
      return "claiming";
    case session_phase::queued:
      return "queued";
    case session_phase::finalizing:
      return "finalizing";
    case session_phase::matched:
      return "matched";
    case session_phase::cancelled:
      return "cancelled";
    case session_phase::timed_out:
      return "timed_out";
    default:
      return "failed";
  }
}

const char* to_string(finalize_outcome x) noexcept {
  switch (x) {
    case finalize_outcome::committed:
      return "committed";
    case finalize_outcome::retry:
      return "retry";
    case finalize_outcome::cancelled:
      return "cancelled";
    default:
      return "refused";
  }
}

const char* to_string(party_phase x) noexcept {
  switch (x) {
    case party_phase::open:
      return "open";
    case party_phase::claiming:
      return "claiming";
    case party_phase::queued:
      return "queued";
    case party_phase::finalizing:
      return "finalizing";
    default:
      return "matched";
  }
}

std::string party_id_on(const std::string& nonce, const std::string& node) {
  return "p" + nonce + "@" + node;
}

std::string party_node(const std::string& id) {
  // The nonce is hex: the first '@' starts the node (which may hold '@').
  auto at = id.find('@');
  return at == std::string::npos ? std::string{} : id.substr(at + 1);
}

} // namespace mm
