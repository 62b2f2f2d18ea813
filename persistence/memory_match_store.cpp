// The in-memory match store: every connection of one factory shares one data
// set under one mutex; a call holds the mutex from start to end, so a call is
// as atomic as a PostgreSQL transaction, and the rules (validation, keys,
// conflict order, event ids, leases) are the PostgreSQL store's.

#include "persistence/match_store.hpp"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <unordered_map>
#include <unordered_set>

namespace mm {

namespace {

int64_t now_ms() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch())
    .count();
}

/// What all connections of one factory share.
struct shared_state {
  std::mutex mtx;
  std::condition_variable notified;
  uint64_t notify_seq = 0; ///< counts commits that created events
  std::set<std::string> migrations;
  std::unordered_map<std::string, match_record> sessions; ///< by id
  std::unordered_map<std::string, std::string> by_key;    ///< match key → id
  std::unordered_map<std::string, std::string> active;    ///< user → id
  std::map<int64_t, outbox_event> outbox;                 ///< by seq
  std::unordered_map<std::string, int64_t> event_seq;     ///< event id → seq
  int64_t next_seq = 1;
};

class memory_match_store final : public match_store {
public:
  explicit memory_match_store(std::shared_ptr<shared_state> state)
    : state_(std::move(state)) {
  }

  outcome<std::vector<std::string>> apply_migrations() override {
    std::lock_guard<std::mutex> guard{state_->mtx};
    std::vector<std::string> applied;
    for (auto& name : known_migrations())
      if (state_->migrations.insert(name).second)
        applied.push_back(name);
    return applied;
  }

  std::vector<outcome<match_record>>
  do_commit_matches(const std::vector<match_request>& requests) override {
    std::vector<outcome<match_record>> out;
    out.reserve(requests.size());
    std::lock_guard<std::mutex> guard{state_->mtx};
    auto& st = *state_;
    const auto now = now_ms();
    bool created_any = false;
    for (const auto& req : requests) {
      auto key = match_key(req);
      if (auto i = st.by_key.find(key); i != st.by_key.end()) {
        auto rec = st.sessions.at(i->second);
        rec.created = false;
        out.emplace_back(std::move(rec));
        continue;
      }
      std::string detail;
      for (auto* user : {&req.user_a, &req.user_b}) {
        if (auto i = st.active.find(*user); i != st.active.end()) {
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
      match_record rec;
      rec.session_id = new_session_id();
      rec.queue = req.queue;
      rec.user_a = req.user_a;
      rec.ticket_a = req.ticket_a;
      rec.user_b = req.user_b;
      rec.ticket_b = req.ticket_b;
      rec.status = session_status::active;
      rec.created_at = now;
      st.sessions.emplace(rec.session_id, rec);
      st.by_key.emplace(std::move(key), rec.session_id);
      st.active.emplace(req.user_a, rec.session_id);
      st.active.emplace(req.user_b, rec.session_id);
      outbox_event ev;
      ev.seq = st.next_seq++;
      ev.event_id = match_created_event_id(rec.session_id);
      ev.aggregate_id = rec.session_id;
      ev.type = match_created_type;
      ev.payload = match_created_payload(rec.session_id, req);
      ev.created_at = now;
      st.event_seq.emplace(ev.event_id, ev.seq);
      st.outbox.emplace(ev.seq, std::move(ev));
      created_any = true;
      rec.created = true;
      out.emplace_back(std::move(rec));
    }
    if (created_any) {
      ++st.notify_seq;
      st.notified.notify_all();
    }
    return out;
  }

  outcome<bool> do_close_session(const std::string& session_id,
                                 const std::string& reason) override {
    std::lock_guard<std::mutex> guard{state_->mtx};
    auto& st = *state_;
    auto i = st.sessions.find(session_id);
    if (i == st.sessions.end())
      return outcome<bool>{errc::not_found, "no session " + session_id};
    auto& rec = i->second;
    if (rec.status == session_status::closed)
      return false;
    rec.status = session_status::closed;
    rec.closed_at = now_ms();
    rec.close_reason = reason;
    for (auto* user : {&rec.user_a, &rec.user_b}) {
      auto j = st.active.find(*user);
      if (j != st.active.end() && j->second == session_id)
        st.active.erase(j);
    }
    return true;
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

  outcome<std::vector<outbox_event>>
  do_fetch_undelivered(uint32_t limit, uint32_t lease_ms) override {
    std::lock_guard<std::mutex> guard{state_->mtx};
    const auto now = now_ms();
    std::vector<outbox_event> out;
    for (auto& [seq, ev] : state_->outbox) {
      if (out.size() >= limit)
        break;
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
  std::shared_ptr<shared_state> state_;
  bool listening_ = false;
  uint64_t seen_ = 0;
};

class memory_factory final : public match_store_factory {
public:
  memory_factory() : state_(std::make_shared<shared_state>()) {
  }

  std::unique_ptr<match_store> connect() override {
    return std::make_unique<memory_match_store>(state_);
  }

  std::string describe() const override {
    return "memory";
  }

private:
  std::shared_ptr<shared_state> state_;
};

} // namespace

std::shared_ptr<match_store_factory> make_memory_match_store() {
  return std::make_shared<memory_factory>();
}

} // namespace mm
