// The session's part in match rules (docs/rules.md): what a join tells
// the store about its rules, when a waiting ticket looks again, what the
// claim said about its windows, and the partners the avoid rule needs.

#include <algorithm>
#include <chrono>

#include <caf/all.hpp>

#include "actors/session_data.hpp"
#include "actors/waiter_roster.hpp"

namespace mm::session_detail {

ticket_spec spec_of(const session_data& d) {
  ticket_spec s;
  s.queue = d.st.queue;
  s.user = d.st.user;
  s.ticket = d.store_ticket;
  s.node = d.cfg.node;
  s.attrs = d.attrs;
  s.ttl_ms = d.cfg.ttl_ms;
  if (d.rules != nullptr) {
    s.rules = d.rules->spec;
    s.rk = d.rk;
    auto n = std::min<size_t>(d.rules->avoid_last(), d.recent.size());
    std::vector<std::string> last(d.recent.end() - n, d.recent.end());
    s.avoid = avoid_arg(last);
  }
  return s;
}

/// When a waiting ticket looks again first (the broker then keeps its
/// times, actors/waiter_roster.hpp): every heartbeat, and on a queue with
/// rules also at the moment its windows widen (docs/rules.md), so that
/// widening pairs users without a new arrival.
int64_t next_look_at_ms(const session_data& d,
                        caf::actor_clock::time_point now) {
  return waiter_roster::ms_of(waiter_roster::look_at(
    d.cfg.heartbeat_ms, d.cfg.heartbeat_align_ms, d.next_change_ms, now));
}

/// Keeps what a claim or re-scan answered about our windows.
void note_windows(session_data& d, const claim_result& r) {
  if (d.rules == nullptr)
    return;
  d.next_change_ms = r.outcome == claim_outcome::queued ? r.next_change_ms : -1;
  d.st.windows = r.outcome == claim_outcome::queued && !r.windows.empty()
                   ? windows_json(*d.rules, r.windows)
                   : std::string{};
}

/// A partner of ours: the avoid rule keeps the newest ones.
void note_partner(session_data& d, const std::string& partner) {
  if (partner.empty() || partner == d.st.user)
    return;
  d.recent.erase(std::remove(d.recent.begin(), d.recent.end(), partner),
                 d.recent.end());
  d.recent.push_back(partner);
  if (d.recent.size() > 32)
    d.recent.erase(d.recent.begin(), d.recent.end() - 32);
}

} // namespace mm::session_detail
