#pragma once

// What `matchctl load --backfill R` checks of backfill (docs/groups.md
// "Backfill"): every `session.members_changed` a member heard, by event;
// at the end, fills that took a session over its maximum, and members of
// a fill (its `users`, everyone active after it) who kept listening and
// never heard it. A user who left its session is not expected to hear
// later fills. No sockets here: group_load feeds it.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace mm {

/// Whether a load whose parties have all heard their matches may end (and
/// close their sockets) now: at once without backfill; with it only after
/// `quiet` without progress, since the event of a fill that matched the
/// last party may still be on its way to the members already playing.
bool fills_may_end(bool backfill,
                   std::chrono::steady_clock::duration since_progress,
                   std::chrono::steady_clock::duration quiet);

/// The fills a load saw.
class fill_ledger {
 public:
  /// `user` heard the `session.members_changed` event `ev` (the client's
  /// JSON). Idempotent per (user, event).
  void heard(const std::string& user, const nlohmann::json& ev);

  /// `user` left its session (it expects no later fill). Idempotent.
  void left(const std::string& user) {
    left_.insert(user);
  }

  struct counts {
    std::size_t fills = 0;         ///< distinct fills heard
    std::size_t seats = 0;         ///< players they added
    std::size_t over_capacity = 0; ///< fills past `max_players`
    std::size_t untold = 0;        ///< (fill, member) pairs never heard
    /// A few: "USER EVENT added|member heard K/N, first T ms ago".
    std::vector<std::string> untold_examples;
  };

  /// The counts; `listening(user)`: whether `user` is one of this run's
  /// and kept its socket to the end. Idempotent.
  counts count(uint32_t max_players,
               const std::function<bool(const std::string&)>& listening) const;

 private:
  struct fill {
    std::set<std::string> users; ///< active after it
    std::size_t added = 0;
    std::set<std::string> added_users;
    std::set<std::string> heard_by;
    std::chrono::steady_clock::time_point first; ///< first heard
  };
  std::map<std::string, fill> fills_; ///< by event id
  std::set<std::string> left_;
};

} // namespace mm
