// The PostgreSQL match store's swipes: recording one under the pair's
// advisory lock, and reading a pair's mutual match.
//
// Swipes of one pair are serialized by a transaction-scoped advisory lock
// taken in the statement before the upsert-and-read, so the read's snapshot
// sees every swipe committed before this one (mutual likes: problem 6 of
// docs/design.md; how the match is committed: pg_commit.cpp).

#include "persistence/matchdb/pg/pg_match_store.hpp"

namespace mm::pg {

namespace {

/// First key of the two-key advisory locks that serialize the swipes of one
/// pair ("mmlk"); the second is a hash of the pair. (Two-int4 keys and the
/// one-int8 key of the migrations never collide: separate key spaces.)
constexpr int32_t swipe_lock_class = 0x6d6d6c6b;

/// The second key of a pair's swipe lock: FNV-1a of "min\nmax". A collision
/// only makes two pairs wait for each other now and then.
int32_t swipe_lock_key(const std::pair<std::string, std::string>& pair) {
  uint32_t h = 2166136261u;
  auto mix = [&h](const std::string& x) {
    for (auto ch : x) {
      h ^= static_cast<unsigned char>(ch);
      h *= 16777619u;
    }
  };
  mix(pair.first);
  mix("\n");
  mix(pair.second);
  return static_cast<int32_t>(h);
}

} // namespace

outcome<swipe_record> pg_match_store::do_record_swipe(const std::string& from,
                                                      const std::string& to,
                                                      bool like) {
  auto pair = pair_bounds(from, to);
  const std::string kind = like ? "LIKE" : "DISLIKE";
  // The lock is taken in its own statement, before the one that reads:
  // a READ COMMITTED statement reads the snapshot of its start, so a
  // statement that waited for the lock itself would miss the swipe that
  // the lock holder committed meanwhile.
  const auto lock = "BEGIN; SELECT pg_advisory_xact_lock("
                    + std::to_string(swipe_lock_class) + ", "
                    + std::to_string(swipe_lock_key(pair)) + ")";
  return run<swipe_record>("record swipe", [&] {
    must(exec(lock), "lock pair");
    auto r = exec_prepared(st_swipe,
                           {&from, &to, &kind, &pair.first, &pair.second});
    must(r, "record swipe");
    swipe_record out;
    out.opposite_like = text(r.get(), 0, 0) == "t";
    out.matched = PQgetisnull(r.get(), 0, 1) == 0;
    if (out.matched)
      out.session_id = text(r.get(), 0, 1);
    commit();
    return outcome<swipe_record>{std::move(out)};
  });
}

outcome<std::optional<match_record>>
pg_match_store::do_mutual_match_of(const std::string& a, const std::string& b) {
  auto pair = pair_bounds(a, b);
  return run<std::optional<match_record>>("mutual match", [&] {
    return one_session(exec_prepared(st_mutual_of, {&pair.first, &pair.second}),
                       "mutual match");
  });
}

} // namespace mm::pg
