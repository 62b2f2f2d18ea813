// Rules shared by both match stores, so that they validate and key matches
// identically (their events' ids and payloads: match_events.cpp).

#include "persistence/matchdb/match_store.hpp"

#include "core/utf8.hpp"

#include <algorithm>
#include <chrono>
#include <exception>
#include <random>
#include <set>
#include <stdexcept>
#include <vector>

#include "mm_migrations.hpp" // generated from persistence/matchdb/migrations/

namespace mm {

const char* to_string(commit_stage x) noexcept {
  return x == commit_stage::after_create ? "after_create" : "before_commit";
}

match_store::~match_store() = default;

namespace {

/// The caller's check as the implementations call it: index `k` of theirs
/// is `to_caller(k)` of the caller's, and whatever the caller's check
/// throws becomes one exception type that they catch (they fail the call
/// and write nothing). Empty when `check` is.
template <class Map>
commit_check rethrowing(const commit_check& check, Map to_caller) {
  if (!check)
    return {};
  return [&check, to_caller](commit_stage stage, size_t k) -> bool {
    try {
      return check(stage, to_caller(k));
    } catch (const std::exception& e) {
      throw std::runtime_error(std::string{"commit check threw: "} + e.what());
    } catch (...) {
      throw std::runtime_error("commit check threw");
    }
  };
}

/// The arguments of a member's call about a session (end, leave).
failure check_member_call(const std::string& session_id,
                          const std::string& user, const std::string& reason) {
  if (auto f = check_id("session id", session_id); f.code != errc::none)
    return f;
  if (auto f = check_id("user", user); f.code != errc::none)
    return f;
  return check_close_reason(reason);
}

} // namespace

std::vector<outcome<match_record>>
match_store::commit_matches(const std::vector<match_request>& requests,
                            const commit_check& check) {
  std::vector<outcome<match_record>> out;
  out.reserve(requests.size());
  std::vector<match_request> valid;
  std::vector<size_t> slot; // valid[k] answers out[slot[k]]
  for (size_t i = 0; i < requests.size(); ++i) {
    auto f = check_match_request(requests[i]);
    if (f.code == errc::none) {
      valid.push_back(requests[i]);
      slot.push_back(i);
      out.emplace_back(errc::store_unavailable, "not committed");
    } else {
      out.emplace_back(std::move(f));
    }
  }
  if (valid.empty())
    return out;
  // The implementations count in `valid`; the caller counts in `requests`.
  auto mapped = rethrowing(check, [&slot](size_t k) { return slot.at(k); });
  auto res = do_commit_matches(valid, mapped);
  for (size_t k = 0; k < slot.size() && k < res.size(); ++k)
    out[slot[k]] = std::move(res[k]);
  return out;
}

outcome<bool> match_store::close_session(const std::string& session_id,
                                         const std::string& reason) {
  if (auto f = check_id("session id", session_id); f.code != errc::none)
    return f;
  if (auto f = check_close_reason(reason); f.code != errc::none)
    return f;
  return do_close_session(session_id, reason);
}

outcome<end_record> match_store::end_session(const std::string& session_id,
                                             const std::string& user,
                                             const std::string& reason) {
  if (auto f = check_member_call(session_id, user, reason);
      f.code != errc::none)
    return f;
  return do_end_session(session_id, user, reason);
}

std::vector<outcome<end_record>>
match_store::end_sessions(const std::vector<end_request>& requests) {
  std::vector<outcome<end_record>> out(requests.size(),
                                       outcome<end_record>{errc::none});
  std::vector<end_request> valid;
  std::vector<size_t> slot; // index in `requests` of valid[k]
  for (size_t i = 0; i < requests.size(); ++i) {
    const auto& r = requests[i];
    auto f = check_member_call(r.session_id, r.user, r.reason);
    if (f.code != errc::none) {
      out[i] = f;
      continue;
    }
    valid.push_back(r);
    slot.push_back(i);
  }
  if (valid.empty())
    return out;
  auto res = do_end_sessions(valid);
  for (size_t k = 0; k < slot.size(); ++k)
    out[slot[k]] = k < res.size()
                     ? std::move(res[k])
                     : outcome<end_record>{errc::protocol_error,
                                           "end sessions: no answer"};
  return out;
}

outcome<std::vector<end_record>>
match_store::expire_sessions(uint32_t max_age_ms, uint32_t limit) {
  if (auto f = check_expire_args(max_age_ms, limit); f.code != errc::none)
    return f;
  return do_expire_sessions(max_age_ms, limit);
}

outcome<prune_counts> match_store::prune(uint32_t retention_ms,
                                         uint32_t limit) {
  if (auto f = check_prune_args(retention_ms, limit); f.code != errc::none)
    return f;
  return do_prune(retention_ms, limit);
}

outcome<std::optional<match_record>>
match_store::active_session_of(const std::string& user) {
  if (auto f = check_id("user", user); f.code != errc::none)
    return f;
  return do_active_session_of(user);
}

std::vector<outcome<std::optional<match_record>>>
match_store::active_sessions_of(const std::vector<std::string>& users) {
  std::vector<outcome<std::optional<match_record>>> out;
  out.reserve(users.size());
  std::vector<std::string> valid;
  std::vector<size_t> where;
  for (size_t i = 0; i < users.size(); ++i) {
    auto f = check_id("user", users[i]);
    out.emplace_back(
      f.code == errc::none
        ? outcome<std::optional<match_record>>{std::optional<match_record>{}}
        : outcome<std::optional<match_record>>{f});
    if (f.code == errc::none) {
      valid.push_back(users[i]);
      where.push_back(i);
    }
  }
  if (valid.empty())
    return out;
  auto res = do_active_sessions_of(valid);
  for (size_t k = 0; k < where.size(); ++k)
    out[where[k]] = k < res.size()
                      ? std::move(res[k])
                      : outcome<std::optional<match_record>>{
                        errc::protocol_error, "the store gave fewer answers"};
  return out;
}

std::vector<outcome<std::optional<match_record>>>
match_store::do_active_sessions_of(const std::vector<std::string>& users) {
  std::vector<outcome<std::optional<match_record>>> out;
  out.reserve(users.size());
  for (auto& u : users)
    out.push_back(do_active_session_of(u));
  return out;
}

outcome<std::optional<match_record>>
match_store::find_session(const std::string& session_id) {
  if (auto f = check_id("session id", session_id); f.code != errc::none)
    return f;
  return do_find_session(session_id);
}

outcome<std::vector<outbox_event>>
match_store::fetch_undelivered(uint32_t limit, uint32_t lease_ms) {
  if (auto f = check_fetch_args(limit, lease_ms); f.code != errc::none)
    return f;
  return do_fetch_undelivered(limit, lease_ms);
}

outcome<match_record> match_store::commit_group(const group_match_request& req,
                                                const commit_check& check) {
  if (auto f = check_group_request(req); f.code != errc::none)
    return f;
  auto mapped = rethrowing(check, [](size_t k) { return k; });
  return do_commit_group(req, mapped);
}

outcome<leave_record> match_store::leave_session(const std::string& session_id,
                                                 const std::string& user,
                                                 const std::string& reason) {
  if (auto f = check_member_call(session_id, user, reason);
      f.code != errc::none)
    return f;
  return do_leave_session(session_id, user, reason);
}

outcome<backfill_record> match_store::add_members(const backfill_request& req,
                                                  const commit_check& check) {
  if (auto f = check_backfill_request(req); f.code != errc::none)
    return f;
  auto mapped = rethrowing(check, [](size_t k) { return k; });
  return do_add_members(req, mapped);
}

outcome<backfill_record> match_store::do_add_members(const backfill_request&,
                                                     const commit_check&) {
  return failure{errc::protocol_error,
                 "add_members is not supported by this store"};
}

outcome<match_record> match_store::do_commit_group(const group_match_request&,
                                                   const commit_check&) {
  return failure{errc::protocol_error,
                 "commit_group is not supported by this store"};
}

outcome<leave_record> match_store::do_leave_session(const std::string&,
                                                    const std::string&,
                                                    const std::string&) {
  return failure{errc::protocol_error,
                 "leave_session is not supported by this store"};
}

outcome<swipe_record> match_store::record_swipe(const std::string& from,
                                                const std::string& to,
                                                bool like) {
  if (auto f = check_id("from", from); f.code != errc::none)
    return f;
  if (auto f = check_id("to", to); f.code != errc::none)
    return f;
  if (from == to)
    return outcome<swipe_record>{errc::invalid_argument,
                                 "a user cannot swipe on itself"};
  return do_record_swipe(from, to, like);
}

outcome<std::optional<match_record>>
match_store::mutual_match_of(const std::string& a, const std::string& b) {
  if (auto f = check_id("user a", a); f.code != errc::none)
    return f;
  if (auto f = check_id("user b", b); f.code != errc::none)
    return f;
  if (a == b)
    return outcome<std::optional<match_record>>{
      errc::invalid_argument, "a user cannot be matched with itself"};
  return do_mutual_match_of(a, b);
}

outcome<swipe_record> match_store::do_record_swipe(const std::string&,
                                                   const std::string&, bool) {
  return outcome<swipe_record>{errc::protocol_error,
                               "record_swipe is not supported by this store"};
}

outcome<std::optional<match_record>>
match_store::do_mutual_match_of(const std::string&, const std::string&) {
  return outcome<std::optional<match_record>>{
    errc::protocol_error, "mutual_match_of is not supported by this store"};
}

outcome<end_record> match_store::do_end_session(const std::string&,
                                                const std::string&,
                                                const std::string&) {
  return outcome<end_record>{errc::protocol_error,
                             "end_session is not supported by this store"};
}

std::vector<outcome<end_record>>
match_store::do_end_sessions(const std::vector<end_request>& requests) {
  std::vector<outcome<end_record>> out;
  out.reserve(requests.size());
  for (const auto& r : requests)
    out.push_back(do_end_session(r.session_id, r.user, r.reason));
  return out;
}

outcome<std::vector<end_record>> match_store::do_expire_sessions(uint32_t,
                                                                 uint32_t) {
  return outcome<std::vector<end_record>>{
    errc::protocol_error, "expire_sessions is not supported by this store"};
}

outcome<partition_report> match_store::maintain_partitions(uint32_t width_s,
                                                           uint32_t retention_s,
                                                           uint32_t ahead) {
  if (width_s < 1 || width_s > max_partition_width_s)
    return outcome<partition_report>{
      errc::invalid_argument, "partition width must be 1.."
                                + std::to_string(max_partition_width_s) + " s"};
  if (ahead < 1 || ahead > 64)
    return outcome<partition_report>{errc::invalid_argument,
                                     "partitions ahead must be 1..64"};
  return do_maintain_partitions(width_s, retention_s, ahead);
}

outcome<partition_report>
match_store::do_maintain_partitions(uint32_t, uint32_t, uint32_t) {
  return outcome<partition_report>{partition_report{}};
}

outcome<prune_counts> match_store::do_prune(uint32_t, uint32_t) {
  return outcome<prune_counts>{errc::protocol_error,
                               "prune is not supported by this store"};
}

match_store_factory::~match_store_factory() = default;

namespace {

constexpr size_t max_queue_len = 64;
constexpr size_t max_id_len = 128;
constexpr size_t max_ticket_len = 300; // store tickets (core/ticket_id.hpp)
constexpr size_t max_attrs_len = 4096;

bool has_control(const std::string& s) {
  for (auto ch : s) {
    auto c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c == 0x7F)
      return true;
  }
  return false;
}

failure bad(std::string detail) {
  return failure{errc::invalid_argument, std::move(detail)};
}

failure check_text(const std::string& what, const std::string& s,
                   size_t max_len) {
  if (s.empty() || s.size() > max_len)
    return bad(what + " must have 1.." + std::to_string(max_len) + " bytes");
  if (has_control(s))
    return bad(what + " contains a control character");
  if (!valid_utf8(s))
    return bad(what + " is not valid UTF-8");
  return {};
}

failure check_limit(uint32_t limit, uint32_t max) {
  if (limit == 0 || limit > max)
    return bad("limit must be 1.." + std::to_string(max));
  return {};
}

failure check_attrs(const std::string& attrs) {
  // NUL: PostgreSQL text and jsonb cannot hold it.
  if (attrs.size() > max_attrs_len || attrs.find('\0') != std::string::npos
      || !valid_utf8(attrs))
    return bad("attrs must be UTF-8 without NUL, at most "
               + std::to_string(max_attrs_len) + " bytes");
  return {};
}

} // namespace

namespace {

/// A group member's user, ticket and attrs (a group's or a fill's).
failure check_member_row(const session_member& m) {
  if (auto f = check_id("user", m.user); f.code != errc::none)
    return f;
  if (auto f = check_text("ticket", m.ticket, max_ticket_len);
      f.code != errc::none)
    return f;
  return check_attrs(m.attrs);
}

} // namespace

failure check_group_request(const group_match_request& req) {
  if (auto f = check_text("queue", req.queue, max_queue_len);
      f.code != errc::none)
    return f;
  if (auto f = check_id("group", req.group); f.code != errc::none)
    return f;
  const auto n = req.members.size();
  if (n < 2 || n > max_group_members)
    return bad("a group match has 2.." + std::to_string(max_group_members)
               + " members");
  if (req.min_players < 2 || req.min_players > n)
    return bad("min_players must be 2..members");
  std::set<std::string> seen;
  for (const auto& m : req.members) {
    if (auto f = check_member_row(m); f.code != errc::none)
      return f;
    if (m.team >= max_group_members)
      return bad("team must be below " + std::to_string(max_group_members));
    if (!seen.insert(m.user).second)
      return bad("user '" + m.user + "' is twice in the group");
  }
  return {};
}

failure check_backfill_request(const backfill_request& req) {
  if (auto f = check_id("session id", req.session_id); f.code != errc::none)
    return f;
  if (auto f = check_text("queue", req.queue, max_queue_len);
      f.code != errc::none)
    return f;
  if (auto f = check_id("group", req.group); f.code != errc::none)
    return f;
  if (req.max_players < 2 || req.max_players > max_group_members)
    return bad("max_players must be 2.." + std::to_string(max_group_members));
  if (req.team_size > 0
      && (req.team_size * 2 > req.max_players
          || req.max_players % req.team_size != 0))
    return bad("team_size must divide max_players into two teams or more");
  const auto teams = req.team_size > 0 ? req.max_players / req.team_size : 1;
  const auto n = req.members.size();
  // A session that takes a member keeps one at least.
  if (n < 1 || n > max_group_members - 1)
    return bad("a fill adds 1.." + std::to_string(max_group_members - 1)
               + " members");
  std::set<std::string> seen;
  for (const auto& m : req.members) {
    if (auto f = check_member_row(m); f.code != errc::none)
      return f;
    if (m.team >= teams)
      return bad(req.team_size > 0
                   ? "team must be below " + std::to_string(teams)
                   : std::string{"team must be 0 without teams"});
    if (!seen.insert(m.user).second)
      return bad("user '" + m.user + "' is twice in the fill");
  }
  return {};
}

failure check_id(const std::string& what, const std::string& id) {
  return check_text(what, id, max_id_len);
}

failure check_match_request(const match_request& req) {
  if (auto f = check_text("queue", req.queue, max_queue_len);
      f.code != errc::none)
    return f;
  const std::pair<const char*, const std::string*> ids[] = {
    {"user_a", &req.user_a},
    {"ticket_a", &req.ticket_a},
    {"user_b", &req.user_b},
    {"ticket_b", &req.ticket_b},
  };
  for (auto& [what, id] : ids) {
    auto max = what[0] == 't' ? max_ticket_len : max_id_len;
    if (auto f = check_text(what, *id, max); f.code != errc::none)
      return f;
  }
  if (req.user_a == req.user_b)
    return bad("a user cannot be matched with itself ('" + req.user_a + "')");
  for (auto* attrs : {&req.attrs_a, &req.attrs_b})
    if (auto f = check_attrs(*attrs); f.code != errc::none)
      return f;
  return {};
}

failure check_close_reason(const std::string& reason) {
  if (reason.size() > 256 || reason.find('\0') != std::string::npos
      || !valid_utf8(reason))
    return bad("close reason must be UTF-8 without NUL, at most 256 bytes");
  return {};
}

failure check_fetch_args(uint32_t limit, uint32_t lease_ms) {
  if (auto f = check_limit(limit, 10000); f.code != errc::none)
    return f;
  if (lease_ms == 0)
    return bad("lease_ms must be positive");
  return {};
}

failure check_expire_args(uint32_t max_age_ms, uint32_t limit) {
  if (auto f = check_limit(limit, 10000); f.code != errc::none)
    return f;
  if (max_age_ms == 0)
    return bad("max_age_ms must be positive");
  return {};
}

failure check_prune_args(uint32_t, uint32_t limit) {
  // A retention of 0 is allowed: everything delivered or closed goes.
  return check_limit(limit, 100000);
}

failure check_member(const match_record& session, const std::string& user) {
  if (user == session.user_a || user == session.user_b)
    return {};
  for (const auto& m : session.members)
    if (m.user == user)
      return {};
  return failure{errc::forbidden, "user '" + user
                                    + "' is not a member of session "
                                    + session.session_id};
}

std::string match_key(const match_request& req) {
  // Ids contain no control characters, so '\n' and '\t' cannot collide.
  auto a = req.user_a + '\t' + req.ticket_a;
  auto b = req.user_b + '\t' + req.ticket_b;
  if (b < a)
    std::swap(a, b);
  return req.queue + '\n' + a + '\n' + b;
}

std::pair<std::string, std::string> pair_bounds(const std::string& a,
                                                const std::string& b) {
  // std::string compares as unsigned char: byte order, like COLLATE "C".
  return b < a ? std::make_pair(b, a) : std::make_pair(a, b);
}

std::string group_key(const group_match_request& req) {
  // A pair's key holds tabs; ids hold no control characters.
  return req.queue + "\ngroup\n" + req.group;
}

std::string new_session_id() {
  thread_local std::mt19937_64 gen{[] {
    std::random_device rd;
    std::seed_seq seq{rd(), rd(), rd(), rd(), rd(), rd(), rd(), rd()};
    return std::mt19937_64{seq};
  }()};
  // Version 7 (RFC 9562): the first 48 bits are the Unix time in ms, so
  // ids made one after the other sort together and the indexes keyed by
  // them take new entries at their right edge (a random key lands on a
  // random page of an index that outgrows the cache); 74 random bits.
  const auto ms = static_cast<uint64_t>(
    std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::system_clock::now().time_since_epoch())
      .count());
  uint64_t hi = (ms << 16) | uint64_t{0x7000} | (gen() & 0x0FFF);
  uint64_t lo = gen();
  lo = (lo & ~(uint64_t{0xC} << 60)) | (uint64_t{0x8} << 60); // RFC 9562
  // Written by hand: snprintf's parsing of the format was most of an id's
  // cost on the commit's path.
  static constexpr char hex[] = "0123456789abcdef";
  std::string id(36, '-');
  auto put = [&id](size_t at, uint64_t v, size_t digits) {
    for (size_t i = digits; i-- > 0; v >>= 4)
      id[at + i] = hex[v & 0xF];
  };
  put(0, hi >> 32, 8);
  put(9, hi >> 16, 4);
  put(14, hi, 4);
  put(19, lo >> 48, 4);
  put(24, lo, 12);
  return id;
}

std::vector<std::string> known_migrations() {
  std::vector<std::string> out;
  for (const auto& m : migration_sources)
    out.emplace_back(m.name);
  return out;
}

} // namespace mm
