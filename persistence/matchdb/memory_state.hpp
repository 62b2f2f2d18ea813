#pragma once

// The in-memory match store's data set and the steps its calls share
// (memory_match_store.cpp has the calls, memory_state.cpp these steps).
// Internal to the store: nothing outside persistence/matchdb includes it.

#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "persistence/matchdb/match_store.hpp"

namespace mm::memory_detail {

/// Now in ms since the epoch: the store's clock (as the database server's
/// is PostgreSQL's).
int64_t now_ms();

/// What all connections of one factory share.
struct shared_state {
  std::mutex mtx;
  std::condition_variable notified;
  uint64_t notify_seq = 0; ///< counts commits that created events
  std::set<std::string> migrations;
  std::unordered_map<std::string, match_record> sessions; ///< by id
  /// The member that ended a session (absent: nobody, or still active).
  std::unordered_map<std::string, std::string> ended_by;
  /// (created_at, id) of the active sessions: the order of expiry.
  std::set<std::pair<int64_t, std::string>> active_by_age;
  /// (closed_at, id) of the closed sessions that prune may delete: all but
  /// mutual matches' sessions.
  std::set<std::pair<int64_t, std::string>> closed_by_age;
  std::unordered_map<std::string, std::string> by_key; ///< match key → id
  std::unordered_map<std::string, std::string> active; ///< user → id
  /// mutual_matches: (pair_min, pair_max) → session id.
  std::map<std::pair<std::string, std::string>, std::string> mutual;
  /// likes: (from, to) → true for LIKE, false for DISLIKE.
  std::map<std::pair<std::string, std::string>, bool> likes;
  std::map<int64_t, outbox_event> outbox; ///< by seq
  /// Seqs of the events not delivered yet: a fetch looks at these only, not
  /// at the whole history.
  std::set<int64_t> undelivered;
  /// (created_at, seq) of the delivered events: the order of pruning.
  std::set<std::pair<int64_t, int64_t>> delivered_by_age;
  std::unordered_map<std::string, int64_t> event_seq; ///< event id → seq
  /// Session id → the groups of its fills (their events name it).
  std::unordered_map<std::string, std::vector<std::string>> fills;
  int64_t next_seq = 1;
};

/// Appends an undelivered event about session `aggregate_id`.
void add_event(shared_state& st, const std::string& aggregate_id,
               std::string event_id, const char* type, std::string payload,
               int64_t now, uint32_t lease_ms = 0);

/// Removes the event `event_id`, delivered or not, if it exists.
void remove_event(shared_state& st, const std::string& event_id);

/// True when `rec` is the session of its pair's mutual match.
bool is_mutual(const shared_state& st, const match_record& rec);

/// True when an event of session `id` waits for delivery.
bool has_undelivered(const shared_state& st, const std::string& id);

/// Takes `user` out of the one-active-session map if it is there for
/// session `id`.
void free_user(shared_state& st, const std::string& user,
               const std::string& id);

/// Takes an active session's users out of the one-active-session map.
void free_members(shared_state& st, const match_record& rec);

/// Closes the active session `rec`: status, time, reason, members, indexes.
void close_record(shared_state& st, match_record& rec,
                  const std::string& reason, int64_t now);

/// Ends the active session `rec` as `end_session` does: closes it, records
/// who ended it and writes its `session.ended` event.
end_record end_active(shared_state& st, match_record& rec,
                      const std::string& ended_by, const std::string& reason,
                      int64_t now);

/// Writes a new active session for `req`: session, members, outbox event,
/// and for a mutual request its pair instead of the users' active
/// memberships.
match_record create_session(shared_state& st, const match_request& req,
                            const std::string& key, int64_t now,
                            uint32_t lease_ms);

/// Writes a new active group session for `req`: session, members, event.
match_record
create_group_session(shared_state& st, const group_match_request& req,
                     const std::string& key, int64_t now, uint32_t lease_ms);

/// Removes everything `create_session` wrote for session `id` with `key`.
void remove_session(shared_state& st, const std::string& id,
                    const std::string& key);

/// The session `id`, or null.
match_record* session_row(shared_state& st, const std::string& id);

/// Names every one of `members` that is in an active session, worded as
/// the PostgreSQL store words it; empty if none.
std::string busy_detail(const shared_state& st,
                        const std::vector<session_member>& members);

/// What a call about a session that does not exist answers.
failure no_session(const std::string& id);

/// The match key of a committed session, as its request had it.
std::string key_of(const match_record& rec);

/// Deletes the closed session `id` and everything that names it.
void prune_session(shared_state& st, const std::string& id);

} // namespace mm::memory_detail
