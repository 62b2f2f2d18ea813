#pragma once

// The party actor's state and the steps its files share (actors/party.cpp:
// members, events and the states; actors/party_ticket.cpp: the ticket's
// claim, commit, cancel and queueing). Internal: include only from those.

#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <caf/actor_clock.hpp>
#include <caf/typed_response_promise.hpp>

#include "actors/party.hpp"
#include "core/seen_ids.hpp"

namespace spdlog {
class logger;
} // namespace spdlog

namespace mm::party_detail {

/// The parties' logger ("party").
std::shared_ptr<spdlog::logger> party_log();

using info_promise = caf::typed_response_promise<party_info>;

struct party_data {
  std::string id;
  std::string code;
  bool solo = false;
  std::vector<std::string> members; // the leader first
  party_links links;
  party_config cfg;
  party_phase phase = party_phase::open;
  // The current or last ticket.
  std::string queue;
  std::string ticket; // the client's
  std::string store_ticket;
  std::string token;
  std::string session_id;
  std::string detail;
  const rule_set* rs = nullptr;
  std::vector<party_member> spec_members;
  uint64_t version = 0;
  uint64_t gen = 0;       // timers of an older state are ignored
  uint64_t ticket_no = 0; // the give-up timer belongs to one ticket
  uint32_t backoff_ms = 0;
  bool rescan = false;      // the pending claim is a re-scan
  bool gone_waited = false; // the ticket was found gone and waited once
  bool cancelling = false;  // a member's cancel (or the give-up) is on
  std::string cancelled_by;
  bool giving_up = false;
  std::vector<info_promise> queue_waiters;
  std::vector<info_promise> cancel_waiters;
  std::vector<std::pair<std::string, info_promise>> leave_waiters;
  seen_ids seen{256}; // event ids
  caf::actor_clock::time_point last_touch;
  bool idle_armed = false;
  static inline const char* name = "party";
};

using party_ptr = party_actor::stateful_pointer<party_data>;
using behavior = party_actor::behavior_type;

/// True for the phases of a live ticket.
bool live(party_phase p);

bool is_member(const party_data& d, const std::string& user);

/// The party as its members see it.
party_info info_of(const party_data& d);

/// A request or a change restarts the idle time of an open party.
void touch(party_ptr self);

/// Tells every member (and `also`, e.g. one who just left) the party as it
/// is now: one `party.updated` event, routed like a match's.
void publish(party_ptr self, const std::vector<std::string>& also = {});

/// The party closes: every member leaves the registry and is told.
void close(party_ptr self, const std::string& why);

/// Enters `phase` (and its behavior) and answers who waited on it.
void enter(party_ptr self, party_phase phase, std::string detail);

/// The bound of a request to another actor.
caf::timespan bound(const party_data& d);

/// Claims (or, with `rescan`, re-scans) the party's ticket.
void claim(party_ptr self, bool rescan);

/// Cancels the ticket at the queue (see actors/party_ticket.cpp).
void cancel_at_queue(party_ptr self);

/// A member's cancel (or the give-up time): decided truthfully.
void start_cancel(party_ptr self, const std::string& by);

/// The leader's queue request: checks, the members' in-session checks,
/// then the claim. A refusal changes nothing.
void queue_party(party_ptr self, party_queue_request& r, info_promise rp);

/// The states (actors/party.cpp).
behavior open_b(party_ptr self);
behavior live_b(party_ptr self);
behavior matched_b(party_ptr self);

} // namespace mm::party_detail
