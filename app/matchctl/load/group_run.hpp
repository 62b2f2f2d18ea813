#pragma once

// What `matchctl load` with groups keeps of each member and party while it
// runs (group_load.cpp drives them), and the checker that reads it at the
// end (group_tally.cpp; its counters: group_load.hpp).

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/common/http_client.hpp"
#include "app/matchctl/load/fill_check.hpp"
#include "app/matchctl/load/group_load.hpp"
#include "app/matchctl/load/proposal_check.hpp"

namespace mm::group_run {

using json = nlohmann::json;
using reply_fn = std::function<void(unsigned, const json&)>;

struct member {
  std::string user;
  std::string auth;
  int skill = 0;
  size_t node = 0; ///< the URL its party talks to
  std::shared_ptr<ws_client> ws;
  bool open = false;
  bool done = false; ///< matched, or given up: the socket may close
  uint32_t next_id = 0;
  std::map<uint32_t, reply_fn> calls;
  std::string session; ///< from its first match.created
  std::set<std::string> roster;
  json teams;
  size_t extra_sessions = 0; ///< match.created of another session
  std::map<std::string, heard_proposal> proposed; ///< proposals heard
  /// ... and how each ended for it (as group_holder_tally names them)
  std::map<std::string, std::string> ended;
  bool left = false; ///< left its session (--backfill)
};

struct party_run {
  std::vector<size_t> members; // indices into `users`, the leader first
  std::string id;              // at the hub ('' for a party of one)
  std::string ticket;
  size_t opened = 0;
  size_t matched = 0;
  bool queued = false;  // the queue request was answered 2xx
  bool waiting = false; // the final look found it still waiting
  bool finished = false;
  /// Given up before every member heard its match (a socket ended early,
  /// a call failed): its members stopped listening, so what they did not
  /// hear is unobserved, not undelivered or lost.
  bool gave_up = false;
  /// Removed by a ready check (declined, timed out) and told so.
  bool removed = false;
  std::string final_phase; ///< the final look's answer, if asked
  /// Its session id and detail, if any: named with a lost member.
  std::string final_note;
};

/// The runner's own counts the checker reports.
struct group_tallies {
  std::size_t errors = 0;
  std::size_t proposals_heard = 0; ///< by every member, each once
  std::size_t declines = 0;
  std::size_t ignores = 0;
  std::size_t leaves = 0;
  const fill_ledger* fills = nullptr;
  /// By holder: Unix ms of the last removal a party told after a lapse.
  const std::map<std::string, int64_t>* last_removed_ms = nullptr;
};

/// The checker's counters over what `users` of `parties` observed
/// (group_load.hpp says what each counts). Idempotent (reads only).
group_check check_group_run(const std::vector<member>& users,
                            const std::vector<party_run>& parties,
                            const group_load_options& g,
                            const group_tallies& t);

} // namespace mm::group_run
