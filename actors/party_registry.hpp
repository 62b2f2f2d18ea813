#pragma once

// Which party each user of this node is in (docs/groups.md, "Parties"): a
// user is in at most one party, and a user in a party joins queues only
// through it. Shared by the party hub, the parties and the sessions (which
// refuse a join of their own while their user is in a party). No CAF here.

#include <memory>
#include <string>

namespace mm {

/// Thread-safe map user -> party id. Entries leave with their member, so it
/// holds only the users who are in a party now.
class party_registry {
 public:
  party_registry();
  ~party_registry();

  /// Puts `user` in `party`: true when the user was in no party or already
  /// in this one, false (nothing changed) when in another. Idempotent.
  bool enter(const std::string& user, const std::string& party);

  /// Takes `user` out of `party` (nothing when the user is in another or
  /// none). Idempotent.
  void leave(const std::string& user, const std::string& party);

  /// The party `user` is in, '' none.
  std::string party_of(const std::string& user) const;

  /// Users in a party now.
  size_t size() const;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

} // namespace mm
