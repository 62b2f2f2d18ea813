#pragma once

// The sessions of a `matchctl load --cycles` run that are not settled yet:
// which of their two users saw the match.created and the session.ended
// event, and whether the observers agree on who is in them. A session
// leaves the ledger once both users saw both events, so the ledger holds
// the sessions in flight and the ones the checker will complain about, not
// the run's history.

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace mm {

/// What one observer's event says about a session: the pair and its
/// tickets, as seen from user `self`.
struct session_sighting {
  uint32_t self = 0;
  int32_t partner = -1;    ///< index, -2 for a user not of this run
  bool bad = false;        ///< the event's users are not {self, other}
  std::string self_ticket; ///< self's ticket in the event
  std::string partner_ticket;
};

/// The sessions in flight, shared by the io threads. Thread-safe.
class session_ledger {
 public:
  /// A session still in the ledger when the run ended.
  struct open_session {
    std::string id;
    int32_t users[2] = {-3, -3}; ///< by index, lower first; < 0: not ours
    std::string tickets[2];
    bool created[2] = {false, false}; ///< saw match.created
    bool ended[2] = {false, false};   ///< saw session.ended
    bool end_known = false;    ///< an end was answered or an ended event seen
    int64_t end_known_us = -1; ///< since when (us since the run started)
  };

  /// `s.self` saw the match.created event of session `id`. Not idempotent:
  /// call it once per user and session (the caller dedupes).
  void created(const std::string& id, const session_sighting& s);

  /// `s.self` saw the session.ended event of session `id`, at `now_us`.
  /// Not idempotent, as `created`.
  void ended(const std::string& id, const session_sighting& s, int64_t now_us);

  /// A member's end of `id` was answered "ended", at `now_us`. Idempotent.
  void end_answered(const std::string& id, int64_t now_us);

  /// Sessions seen at all (distinct ids).
  uint64_t sessions() const;
  /// Sessions known to have ended (an end answered or an ended event).
  uint64_t sessions_ended() const;

  /// Sessions whose observers disagree about their users (or whose events
  /// name other than two users).
  uint64_t conflicts() const;
  /// One user of each of the first few of them, for the report.
  std::vector<int32_t> conflict_examples() const;

  /// What is left; read it after the io threads ended.
  std::vector<open_session> open_sessions() const;

 private:
  struct entry {
    open_session s;
    bool conflict = false;
  };

  /// The entry of `id` with `s` applied; `side` is s.self's side.
  entry& observe(const std::string& id, const session_sighting& s, int& side);
  /// Marks `e` ended at `now_us`, once.
  void settle(entry& e, int64_t now_us);
  /// Drops `id` once each of its users of this run saw both events; a
  /// session in conflict stays.
  void maybe_erase(const std::string& id);
  /// Counts `e` as a conflict, once; `user` may become an example.
  void flag_conflict(entry& e, int32_t user);

  mutable std::mutex mtx_;
  std::unordered_map<std::string, entry> open_;
  uint64_t sessions_ = 0;
  uint64_t ended_ = 0;
  uint64_t conflicts_ = 0;
  std::vector<int32_t> conflict_examples_;
};

} // namespace mm
