// The in-memory match store: every connection of one factory shares one data
// set under one mutex; a call holds the mutex from start to end, so a call is
// as atomic as a PostgreSQL transaction (and as serialized as the PostgreSQL
// store's swipes of one pair), and the rules (validation, keys, conflict
// order, event ids, leases, cancel checkpoints, mutual pairs, session
// lifecycle) are the PostgreSQL store's. Ordered indexes stand in for the
// PostgreSQL ones (undelivered events, active sessions by age, prunable
// closed sessions and delivered events by age), so the periodic calls never
// walk the history; once pruned, nothing of a session stays (mutual matches'
// sessions stay, as in PostgreSQL).
//
// The data set and the steps the calls share: memory_state.hpp.

#include "persistence/matchdb/match_store.hpp"
#include "persistence/matchdb/memory_state.hpp"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <unordered_map>
#include <unordered_set>

namespace mm {

namespace {

using namespace memory_detail;

/// The key under which requests of one batch share their fate (see
/// `withdraw`): the pair for a mutual request, the match key otherwise.
std::string fate_key(const match_request& req, const std::string& key) {
  if (!req.mutual)
    return "k\n" + key;
  auto [lo, hi] = pair_bounds(req.user_a, req.user_b);
  return "m\n" + lo + "\n" + hi;
}

class memory_match_store final : public match_store {
 public:
  explicit memory_match_store(std::shared_ptr<shared_state> state)
    : state_(std::move(state)) {}

  outcome<std::vector<std::string>> apply_migrations() override {
    std::lock_guard<std::mutex> guard{state_->mtx};
    std::vector<std::string> applied;
    for (auto& name : known_migrations())
      if (state_->migrations.insert(name).second)
        applied.push_back(name);
    return applied;
  }

  // Cancel checkpoints as in PostgreSQL: create a request, ask
  // `after_create`, remove it at once when withdrawn; then ask
  // `before_commit` for the survivors, remove the withdrawn ones, and ask
  // the rest again until a round withdraws nobody. All under the mutex, so
  // nobody ever sees a withdrawn request's rows.
  std::vector<outcome<match_record>>
  do_commit_matches(const std::vector<match_request>& requests,
                    const commit_check& check) override {
    const size_t n = requests.size();
    std::vector<outcome<match_record>> out;
    out.reserve(n);
    std::vector<std::string> keys;  ///< match keys
    std::vector<std::string> fates; ///< fate keys
    keys.reserve(n);
    fates.reserve(n);
    std::vector<bool> fresh(n, false); ///< created by this call, still kept
    std::vector<std::optional<failure>> withdrawn(n);
    std::unordered_map<std::string, failure> withdrawn_keys;
    std::lock_guard<std::mutex> guard{state_->mtx};
    auto& st = *state_;
    const auto now = now_ms();
    // Takes request k out again; a duplicate (same pair, answering k's
    // session) shares its fate, as in PostgreSQL.
    auto withdraw = [&](size_t k, commit_stage stage) {
      failure f{errc::cancelled,
                std::string{"withdrawn at "} + to_string(stage)};
      remove_session(st, out[k]->session_id, keys[k]);
      fresh[k] = false;
      for (size_t j = 0; j < out.size(); ++j) {
        if (j != k && fates[j] == fates[k] && out[j] && !out[j]->created) {
          out[j] = f;
          withdrawn[j] = f;
        }
      }
      withdrawn_keys.emplace(fates[k], f);
      withdrawn[k] = f;
      out[k] = std::move(f);
    };
    try {
      for (size_t k = 0; k < n; ++k) {
        const auto& req = requests[k];
        keys.push_back(match_key(req));
        const auto& key = keys.back();
        fates.push_back(fate_key(req, key));
        if (auto i = withdrawn_keys.find(fates.back());
            i != withdrawn_keys.end()) {
          withdrawn[k] = i->second;
          out.emplace_back(i->second);
          continue;
        }
        if (req.mutual) {
          // The pair has its match already (before or earlier in the batch).
          auto i = st.mutual.find(pair_bounds(req.user_a, req.user_b));
          if (i != st.mutual.end()) {
            auto rec = st.sessions.at(i->second);
            rec.created = false;
            out.emplace_back(std::move(rec));
            continue;
          }
        }
        if (auto i = st.by_key.find(key); i != st.by_key.end()) {
          auto rec = st.sessions.at(i->second);
          rec.created = false;
          out.emplace_back(std::move(rec));
          continue;
        }
        std::string detail;
        // A mutual match neither takes nor needs an active membership.
        for (auto* user : {&req.user_a, &req.user_b}) {
          auto i = req.mutual ? st.active.end() : st.active.find(*user);
          if (i != st.active.end()) {
            if (!detail.empty())
              detail += "; ";
            detail += "user '" + *user + "' is already in active session "
                      + i->second;
          }
        }
        if (!detail.empty()) {
          out.emplace_back(errc::conflict, std::move(detail));
          continue;
        }
        out.emplace_back(create_session(st, req, key, now, commit_lease_ms_));
        fresh[k] = true;
        if (check && !check(commit_stage::after_create, k))
          withdraw(k, commit_stage::after_create);
      }
      if (check) {
        // Each round that withdraws removes one at least: bounded by n.
        for (bool again = true; again;) {
          again = false;
          for (size_t k = 0; k < n; ++k) {
            if (fresh[k] && !check(commit_stage::before_commit, k)) {
              withdraw(k, commit_stage::before_commit);
              again = true;
            }
          }
        }
      }
    } catch (const std::exception& e) {
      // A throwing check: like a failed transaction, nothing stays.
      for (size_t k = 0; k < out.size(); ++k)
        if (fresh[k])
          remove_session(st, out[k]->session_id, keys[k]);
      std::vector<outcome<match_record>> failed;
      failed.reserve(n);
      failure why{errc::protocol_error,
                  std::string{"commit matches: "} + e.what()};
      for (size_t k = 0; k < n; ++k)
        failed.emplace_back(withdrawn[k] ? *withdrawn[k] : why);
      return failed;
    }
    // Leased events are the committer's to deliver: nobody else to wake.
    if (commit_lease_ms_ == 0
        && std::find(fresh.begin(), fresh.end(), true) != fresh.end())
      notify(st);
    return out;
  }

  // One request, the same checkpoints as do_commit_matches.
  outcome<match_record> do_commit_group(const group_match_request& req,
                                        const commit_check& check) override {
    std::lock_guard<std::mutex> guard{state_->mtx};
    auto& st = *state_;
    auto key = group_key(req);
    if (auto i = st.by_key.find(key); i != st.by_key.end()) {
      auto rec = st.sessions.at(i->second);
      rec.created = false;
      return rec;
    }
    if (auto detail = busy_detail(st, req.members); !detail.empty())
      return failure{errc::conflict, std::move(detail)};
    auto rec = create_group_session(st, req, key, now_ms(), commit_lease_ms_);
    try {
      for (auto stage :
           {commit_stage::after_create, commit_stage::before_commit})
        if (check && !check(stage, 0)) {
          remove_session(st, rec.session_id, key);
          return failure{errc::cancelled,
                         std::string{"withdrawn at "} + to_string(stage)};
        }
    } catch (const std::exception& e) {
      remove_session(st, rec.session_id, key);
      return failure{errc::protocol_error,
                     std::string{"commit group: "} + e.what()};
    }
    if (commit_lease_ms_ == 0)
      notify(st);
    return rec;
  }

  outcome<leave_record> do_leave_session(const std::string& session_id,
                                         const std::string& user,
                                         const std::string& reason) override {
    std::unique_lock<std::mutex> guard{state_->mtx};
    auto& st = *state_;
    auto* rec = session_row(st, session_id);
    if (rec == nullptr)
      return no_session(session_id);
    if (auto f = check_member(*rec, user); f.code != errc::none)
      return f;
    leave_record out;
    if (rec->members.empty()) { // a pair: the leave ends it
      guard.unlock();
      auto end = do_end_session(session_id, user, reason);
      if (!end)
        return end.error();
      out.session = end->session;
      out.left_now = out.ended_now = end->ended_now;
      return out;
    }
    auto m
      = std::find_if(rec->members.begin(), rec->members.end(),
                     [&](const session_member& x) { return x.user == user; });
    if (rec->status == session_status::active && m->active) {
      const auto now = now_ms();
      m->active = false;
      free_user(st, user, session_id);
      add_event(st, session_id, member_left_event_id(session_id, user),
                member_left_type, member_left_payload(*rec, user, reason), now);
      out.left_now = true;
      auto stay
        = std::count_if(rec->members.begin(), rec->members.end(),
                        [](const session_member& x) { return x.active; });
      if (static_cast<uint32_t>(stay) < rec->min_players) {
        end_active(st, *rec, user, reason, now);
        out.ended_now = true;
      }
      notify(st);
    }
    out.session = *rec;
    out.session.created = false;
    return out;
  }

  // The checkpoints are asked before anything is written: under the mutex
  // nobody could tell the difference, and nothing needs undoing.
  outcome<backfill_record> do_add_members(const backfill_request& req,
                                          const commit_check& check) override {
    std::lock_guard<std::mutex> guard{state_->mtx};
    auto& st = *state_;
    auto* rec = session_row(st, req.session_id);
    if (rec == nullptr)
      return no_session(req.session_id);
    auto retry = check_fill(*rec, req);
    if (!retry)
      return retry.error();
    backfill_record out;
    if (!*retry) {
      // Busy elsewhere (not in this roster: check_fill named those).
      if (auto detail = busy_detail(st, req.members); !detail.empty())
        return failure{errc::conflict, std::move(detail)};
      try {
        for (auto stage :
             {commit_stage::after_create, commit_stage::before_commit})
          if (check && !check(stage, 0))
            return failure{errc::cancelled,
                           std::string{"withdrawn at "} + to_string(stage)};
      } catch (const std::exception& e) {
        return failure{errc::protocol_error,
                       std::string{"add members: "} + e.what()};
      }
      for (auto m : req.members) {
        m.active = true;
        st.active.emplace(m.user, rec->session_id);
        rec->members.push_back(std::move(m));
      }
      st.fills[rec->session_id].push_back(req.group);
      add_event(st, rec->session_id,
                members_changed_event_id(rec->session_id, req.group),
                members_changed_type, members_changed_payload(*rec, req),
                now_ms(), commit_lease_ms_);
      if (commit_lease_ms_ == 0)
        notify(st);
      out.added_now = true;
    }
    out.session = *rec;
    out.session.created = false;
    return out;
  }

  outcome<bool> do_close_session(const std::string& session_id,
                                 const std::string& reason) override {
    std::lock_guard<std::mutex> guard{state_->mtx};
    auto* rec = session_row(*state_, session_id);
    if (rec == nullptr)
      return no_session(session_id);
    if (rec->status == session_status::closed)
      return false;
    close_record(*state_, *rec, reason, now_ms());
    return true;
  }

  outcome<end_record> do_end_session(const std::string& session_id,
                                     const std::string& user,
                                     const std::string& reason) override {
    std::lock_guard<std::mutex> guard{state_->mtx};
    auto* rec = session_row(*state_, session_id);
    if (rec == nullptr)
      return no_session(session_id);
    if (auto f = check_member(*rec, user); f.code != errc::none)
      return f;
    if (rec->status == session_status::active) {
      auto out = end_active(*state_, *rec, user, reason, now_ms());
      notify(*state_);
      return out;
    }
    end_record out; // ended before: the recorded state
    out.session = *rec;
    out.session.created = false;
    if (auto j = state_->ended_by.find(session_id); j != state_->ended_by.end())
      out.ended_by = j->second;
    out.reason = rec->close_reason;
    return out;
  }

  outcome<std::vector<end_record>> do_expire_sessions(uint32_t max_age_ms,
                                                      uint32_t limit) override {
    std::lock_guard<std::mutex> guard{state_->mtx};
    auto& st = *state_;
    const auto now = now_ms();
    const auto cutoff = now - static_cast<int64_t>(max_age_ms);
    std::vector<end_record> out;
    for (auto i = st.active_by_age.begin(); i != st.active_by_age.end()
                                            && out.size() < limit
                                            && i->first < cutoff;) {
      auto id = (i++)->second; // ending it erases its entry
      out.push_back(
        end_active(st, st.sessions.at(id), "", expired_reason, now));
    }
    if (!out.empty())
      notify(st);
    return out;
  }

  outcome<prune_counts> do_prune(uint32_t retention_ms,
                                 uint32_t limit) override {
    std::lock_guard<std::mutex> guard{state_->mtx};
    auto& st = *state_;
    const auto cutoff = now_ms() - static_cast<int64_t>(retention_ms);
    prune_counts out;
    for (auto i = st.delivered_by_age.begin(); i != st.delivered_by_age.end()
                                               && out.outbox < limit
                                               && i->first < cutoff;) {
      auto event_id = st.outbox.at((i++)->second).event_id; // a copy
      remove_event(st, event_id);
      ++out.outbox;
    }
    for (auto i = st.closed_by_age.begin(); i != st.closed_by_age.end()
                                            && out.sessions < limit
                                            && i->first < cutoff;) {
      if (has_undelivered(st, i->second)) {
        ++i; // its event names it until delivered
        continue;
      }
      prune_session(st, i->second);
      i = st.closed_by_age.erase(i);
      ++out.sessions;
    }
    return out;
  }

  outcome<std::optional<match_record>>
  do_active_session_of(const std::string& user) override {
    std::lock_guard<std::mutex> guard{state_->mtx};
    auto i = state_->active.find(user);
    if (i == state_->active.end())
      return std::optional<match_record>{};
    auto rec = state_->sessions.at(i->second);
    rec.created = false;
    return std::optional<match_record>{std::move(rec)};
  }

  outcome<std::optional<match_record>>
  do_find_session(const std::string& session_id) override {
    std::lock_guard<std::mutex> guard{state_->mtx};
    auto i = state_->sessions.find(session_id);
    if (i == state_->sessions.end())
      return std::optional<match_record>{};
    auto rec = i->second;
    rec.created = false;
    return std::optional<match_record>{std::move(rec)};
  }

  outcome<swipe_record> do_record_swipe(const std::string& from,
                                        const std::string& to,
                                        bool like) override {
    std::lock_guard<std::mutex> guard{state_->mtx};
    auto& st = *state_;
    st.likes[{from, to}] = like;
    swipe_record out;
    if (auto i = st.likes.find({to, from}); i != st.likes.end())
      out.opposite_like = i->second;
    if (auto i = st.mutual.find(pair_bounds(from, to)); i != st.mutual.end()) {
      out.matched = true;
      out.session_id = i->second;
    }
    return out;
  }

  outcome<std::optional<match_record>>
  do_mutual_match_of(const std::string& a, const std::string& b) override {
    std::lock_guard<std::mutex> guard{state_->mtx};
    auto i = state_->mutual.find(pair_bounds(a, b));
    if (i == state_->mutual.end())
      return std::optional<match_record>{};
    auto rec = state_->sessions.at(i->second);
    rec.created = false;
    return std::optional<match_record>{std::move(rec)};
  }

  outcome<std::vector<outbox_event>>
  do_fetch_undelivered(uint32_t limit, uint32_t lease_ms) override {
    std::lock_guard<std::mutex> guard{state_->mtx};
    const auto now = now_ms();
    std::vector<outbox_event> out;
    for (auto seq : state_->undelivered) {
      if (out.size() >= limit)
        break;
      auto& ev = state_->outbox.at(seq);
      bool leased = ev.locked_until != 0 && ev.locked_until > now;
      if (ev.delivered_at != 0 || leased)
        continue;
      ev.locked_until = now + lease_ms;
      ++ev.attempts;
      out.push_back(ev);
    }
    return out;
  }

  outcome<size_t>
  mark_delivered(const std::vector<std::string>& event_ids) override {
    std::lock_guard<std::mutex> guard{state_->mtx};
    const auto now = now_ms();
    size_t marked = 0;
    for (auto& id : event_ids) {
      auto i = state_->event_seq.find(id);
      if (i == state_->event_seq.end())
        continue;
      auto& ev = state_->outbox.at(i->second);
      if (ev.delivered_at != 0)
        continue;
      ev.delivered_at = now;
      ev.locked_until = 0;
      state_->undelivered.erase(i->second);
      state_->delivered_by_age.emplace(ev.created_at, i->second);
      ++marked;
    }
    return marked;
  }

  outcome<bool> wait_for_events(uint32_t timeout_ms) override {
    std::unique_lock<std::mutex> guard{state_->mtx};
    if (!listening_) {
      // Like LISTEN: only commits from now on count.
      listening_ = true;
      seen_ = state_->notify_seq;
    }
    auto fresh = [this] { return state_->notify_seq != seen_; };
    bool got = fresh()
               || state_->notified.wait_for(
                 guard, std::chrono::milliseconds(timeout_ms), fresh);
    seen_ = state_->notify_seq;
    return got;
  }

  bool blocking() const noexcept override {
    return false;
  }

 private:
  /// Like NOTIFY: wakes the waiting `wait_for_events` of every connection.
  static void notify(shared_state& st) {
    ++st.notify_seq;
    st.notified.notify_all();
  }

  std::shared_ptr<shared_state> state_;
  bool listening_ = false;
  uint64_t seen_ = 0;
};

class memory_factory final : public match_store_factory {
 public:
  memory_factory() : state_(std::make_shared<shared_state>()) {}

  std::unique_ptr<match_store> connect() override {
    return std::make_unique<memory_match_store>(state_);
  }

  std::string describe() const override {
    return "memory";
  }

  uint32_t commit_bound_ms() const override {
    return 0; // the last checkpoint and the commit share one lock
  }

 private:
  std::shared_ptr<shared_state> state_;
};

} // namespace

std::shared_ptr<match_store_factory> make_memory_match_store() {
  return std::make_shared<memory_factory>();
}

} // namespace mm
