// `matchctl load` with groups (app/matchctl/load/group_load.hpp): one io
// thread drives every party's WebSockets; the checker runs over what the
// members saw.

#include "app/matchctl/load/group_load.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <set>

#include <boost/asio/steady_timer.hpp>
#include <nlohmann/json.hpp>

#include "app/common/http_client.hpp"
#include "app/common/token.hpp"
#include "app/matchctl/load/checker.hpp"
#include "app/matchctl/load/fill_check.hpp"
#include "app/matchctl/load/group_run.hpp"
#include "app/matchctl/load/proposal_check.hpp"

namespace mm {

bool parse_range(const std::string& text, uint32_t& lo, uint32_t& hi) {
  auto dash = text.find('-');
  try {
    size_t used = 0;
    auto a = std::stoul(text.substr(0, dash), &used);
    if (used != text.substr(0, dash).size())
      return false;
    auto b = a;
    if (dash != std::string::npos) {
      auto rest = text.substr(dash + 1);
      b = std::stoul(rest, &used);
      if (used != rest.size())
        return false;
    }
    if (a < 1 || b < a || b > 64)
      return false;
    lo = static_cast<uint32_t>(a);
    hi = static_cast<uint32_t>(b);
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

namespace {

using namespace group_run;
using clock_type = std::chrono::steady_clock;

class group_runner {
 public:
  group_runner(const load_options& o, const group_load_options& g,
               std::vector<http_endpoint> where)
    : o_(o), g_(g), where_(std::move(where)), tick_(io_) {
    std::mt19937_64 rng{o.seed};
    answers_.seed(o.seed + 1);
    std::uniform_int_distribution<uint32_t> size{g.party_min, g.party_max};
    std::uniform_int_distribution<int> skill{1000, 2000};
    auto exp = std::chrono::duration_cast<std::chrono::seconds>(
                 std::chrono::system_clock::now().time_since_epoch())
                 .count()
               + o.token_ttl_s;
    while (users_.size() < o.users) {
      party_run p;
      auto n = std::min<size_t>(size(rng), o.users - users_.size());
      for (size_t i = 0; i < n; ++i) {
        member m;
        m.user = o.user_name(users_.size());
        m.auth = "Bearer " + sign_token(o.secret, m.user, exp);
        m.skill = skill(rng);
        p.members.push_back(users_.size());
        users_.push_back(std::move(m));
      }
      p.ticket = "gt-" + o.prefix + std::to_string(parties_.size());
      parties_.push_back(std::move(p));
    }
  }

  group_check run() {
    start_ = clock_type::now();
    pace();
    io_.run();
    return check();
  }

 private:
  // -- pacing and the end -----------------------------------------------------

  void pace() {
    if (final_)
      return;
    auto elapsed = std::chrono::duration<double>(clock_type::now() - start_);
    while (next_ < parties_.size()
           && active_users_ < std::max<size_t>(1, o_.concurrency)
           && (o_.rate <= 0
               || static_cast<double>(started_users_)
                    < o_.rate * elapsed.count() + 1)) {
      start_party(next_++);
    }
    auto now = clock_type::now();
    if (next_ == parties_.size() && active_users_ == 0
        && fills_may_end(
          g_.leave_rate > 0, now - last_progress_,
          std::chrono::milliseconds(std::min<int64_t>(o_.settle_ms, 2000)))) {
      finish_run();
      return;
    }
    if (next_ == parties_.size()
        && now - last_progress_ > std::chrono::milliseconds(o_.settle_ms)) {
      final_look();
      return;
    }
    tick_.expires_after(std::chrono::milliseconds(10));
    tick_.async_wait([this](const error_code& ec) {
      if (!ec)
        pace();
    });
  }

  /// Asks about every party that was queued and not matched, then ends.
  void final_look() {
    final_ = true;
    for (size_t p = 0; p < parties_.size(); ++p) {
      auto& pr = parties_[p];
      if (pr.finished || !pr.queued || pr.matched == pr.members.size())
        continue;
      auto leader = pr.members.front();
      json msg = pr.id.empty() ? json{{"op", "state"}, {"ticket", pr.ticket}}
                               : json{{"op", "party_state"}, {"party", pr.id}};
      ++looks_;
      call(leader, std::move(msg), [this, p](unsigned status, const json& b) {
        auto phase = b.value(parties_[p].id.empty() ? "state" : "phase",
                             std::string{});
        parties_[p].final_phase = phase;
        for (const char* k : {"session_id", "detail"})
          if (b.contains(k) && b[k].is_string())
            parties_[p].final_note += std::string{" "} + k + "="
                                      + b[k].get<std::string>();
        parties_[p].waiting = status == 200
                              && (phase == "queued" || phase == "claiming"
                                  || phase == "finalizing");
        if (--looks_ == 0)
          finish_run();
      });
    }
    if (looks_ == 0)
      finish_run();
    else {
      tick_.expires_after(std::chrono::seconds(15));
      tick_.async_wait([this](const error_code& ec) {
        if (!ec)
          finish_run();
      });
    }
  }

  void finish_run() {
    if (over_)
      return;
    over_ = true;
    tick_.cancel();
    for (auto& m : users_)
      if (m.ws)
        m.ws->abort();
  }

  // -- one party ---------------------------------------------------------------

  void start_party(size_t p) {
    auto& pr = parties_[p];
    started_users_ += pr.members.size();
    active_users_ += pr.members.size();
    for (size_t k = 0; k < pr.members.size(); ++k) {
      auto i = pr.members[k];
      auto& m = users_[i];
      // Parties spread over the nodes, and a party's members too: member
      // k on the node after its leader's by k (one node: all there).
      m.node = (p + k) % where_.size();
      m.ws = std::make_shared<ws_client>(
        io_, where_[m.node], "/v1/users/" + m.user + "/events", m.auth);
      ws_handlers h;
      h.on_open = [this, p, i] {
        users_[i].open = true;
        if (++parties_[p].opened == parties_[p].members.size())
          form(p);
      };
      h.on_message = [this, p, i](std::string_view text) {
        on_message(p, i, text);
      };
      h.on_close = [this, p, i](const ws_close_info&) {
        auto& m = users_[i];
        m.open = false;
        // Ended before the user was done; not by the run's end (its
        // sockets closed then: a party still waiting kept listening).
        if (!m.done && !over_) {
          fail_calls(i);
          give_up(p);
        }
      };
      m.ws->start(std::move(h));
    }
  }

  json attrs_of(size_t i) const {
    return g_.skill ? json{{"skill", users_[i].skill}} : json::object();
  }

  /// Every member's socket is open: alone, the join; else the party.
  void form(size_t p) {
    auto& pr = parties_[p];
    auto leader = pr.members.front();
    auto queue = o_.queue_name(0);
    if (pr.members.size() == 1) {
      json body{{"queue", queue}, {"ticket", pr.ticket}};
      if (g_.skill)
        body["attrs"] = attrs_of(leader);
      call(leader, {{"op", "join"}, {"body", body}},
           [this, p](unsigned status, const json& b) { queued(p, status, b); });
      return;
    }
    call(leader, {{"op", "party_create"}},
         [this, p](unsigned status, const json& b) {
           if (status != 200) {
             error(p, "party_create", status, b);
             return;
           }
           auto& pr = parties_[p];
           pr.id = b.value("party", "");
           auto code = b.value("code", "");
           auto left = std::make_shared<size_t>(pr.members.size() - 1);
           for (size_t k = 1; k < pr.members.size(); ++k)
             call_retrying(pr.members[k],
                           {{"op", "party_join"},
                            {"party", pr.id},
                            {"body", {{"code", code}}}},
                           [this, p, left](unsigned st, const json& jb) {
                             if (st != 200) {
                               error(p, "party_join", st, jb);
                               return;
                             }
                             if (--*left == 0)
                               queue_party(p);
                           });
         });
  }

  void queue_party(size_t p) {
    auto& pr = parties_[p];
    json attrs = json::object();
    for (auto i : pr.members)
      attrs[users_[i].user] = attrs_of(i);
    json body{{"queue", o_.queue_name(0)}, {"ticket", pr.ticket}};
    if (g_.skill)
      body["attrs"] = attrs;
    call_retrying(pr.members.front(),
                  {{"op", "party_queue"}, {"party", pr.id}, {"body", body}},
                  [this, p](unsigned status, const json& b) {
                    queued(p, status, b);
                  });
  }

  void queued(size_t p, unsigned status, const json& b) {
    if (status != 200) {
      error(p, "queue", status, b);
      return;
    }
    parties_[p].queued = true;
    ++answered_;
  }

  void error(size_t p, const char* what, unsigned status, const json& b) {
    if (errors_++ < 5)
      std::cerr << "matchctl load: " << what << ": " << status << " "
                << b.dump() << "\n";
    give_up(p);
  }

  /// The party is over for this run: its sockets close.
  void give_up(size_t p) {
    auto& pr = parties_[p];
    if (pr.finished)
      return;
    pr.finished = true;
    pr.gave_up = pr.matched < pr.members.size();
    active_users_ -= std::min(active_users_, pr.members.size());
    last_progress_ = clock_type::now();
    // With --backfill a matched party keeps listening (for the fills of
    // its session) until the run ends.
    if (g_.leave_rate > 0 && !pr.gave_up) {
      for (auto i : pr.members)
        users_[i].done = true;
      return;
    }
    for (auto i : pr.members) {
      users_[i].done = true;
      if (users_[i].ws)
        users_[i].ws->close();
    }
  }

  void on_message(size_t p, size_t i, std::string_view text) {
    auto j = json::parse(text, nullptr, false);
    if (!j.is_object())
      return;
    auto type = j.value("type", "");
    auto& m = users_[i];
    if (type == "reply") {
      auto id = j.value("id", uint32_t{0});
      auto it = m.calls.find(id);
      if (it == m.calls.end())
        return;
      auto cb = std::move(it->second);
      m.calls.erase(it);
      cb(j.value("status", 0u), j.contains("body") ? j["body"] : json{});
      return;
    }
    if (type == "match.proposed") {
      on_proposed(p, i, j);
      return;
    }
    if (type == "match.proposal_ended") {
      on_proposal_ended(p, i, j);
      return;
    }
    // A removal the party tells (a lapsed proposal's holder cannot): its
    // update to `open`, or a party of one's final state.
    if (type == "party.updated" || type == "state") {
      auto phase = j.value(type == "state" ? "state" : "phase", "");
      if ((phase == "open" || phase == "failed" || phase == "timed_out")
          && removal_reason(j.value("detail", "")))
        removed_told(p, {});
      return;
    }
    if (type == "session.members_changed") {
      on_fill(p, i, j);
      return;
    }
    if (type != "match.created")
      return;
    auto sid = j.value("session_id", "");
    if (!m.session.empty()) {
      if (sid != m.session)
        ++m.extra_sessions;
      return;
    }
    m.session = sid;
    if (j.contains("users"))
      for (auto& u : j["users"])
        if (u.is_string())
          m.roster.insert(u.get<std::string>());
    m.teams = j.contains("teams") ? j["teams"] : json::array();
    matched(p, i);
  }

  /// Member i of party p heard its match (a session's start or a fill).
  void matched(size_t p, size_t i) {
    last_match_ = clock_type::now();
    last_progress_ = last_match_;
    auto& pr = parties_[p];
    maybe_leave(i);
    if (++pr.matched == pr.members.size())
      give_up(p); // done: every member heard its match
  }

  // -- backfill ---------------------------------------------------------------

  /// With --backfill, a matched member leaves its session at that rate.
  void maybe_leave(size_t i) {
    auto& m = users_[i];
    if (g_.leave_rate <= 0 || m.left
        || !std::bernoulli_distribution{g_.leave_rate}(answers_))
      return;
    m.left = true;
    fills_.left(m.user);
    ++leaves_;
    call_retrying(i, {{"op", "leave"}, {"session", m.session}},
                  [this](unsigned st, const json& b) {
                    if (st != 200 && errors_++ < 5)
                      std::cerr << "matchctl load: leave: " << st << " "
                                << b.dump() << "\n";
                  });
  }

  /// A fill of a session (backfill): every member hears it; a new member
  /// takes it as its match.
  void on_fill(size_t p, size_t i, const json& j) {
    auto& m = users_[i];
    fills_.heard(m.user, j);
    last_progress_ = clock_type::now();
    bool added = false;
    if (j.contains("added") && j["added"].is_array())
      for (auto& a : j["added"])
        added = added || (a.is_object() && a.value("user", "") == m.user);
    if (!added)
      return;
    auto sid = j.value("session_id", "");
    if (!m.session.empty()) {
      if (sid != m.session)
        ++m.extra_sessions; // in two sessions
      return;
    }
    m.session = sid;
    if (j.contains("users"))
      for (auto& u : j["users"])
        if (u.is_string())
          m.roster.insert(u.get<std::string>());
    m.teams = j.contains("teams") ? j["teams"] : json::array();
    matched(p, i);
  }

  // -- the ready check --------------------------------------------------------

  void on_proposed(size_t p, size_t i, const json& j) {
    auto id = j.value("proposal", "");
    auto& m = users_[i];
    if (id.empty() || m.proposed.count(id) != 0)
      return;
    auto& h = m.proposed[id];
    h.holder = proposal_holder(j.value("event_id", ""));
    h.seq = proposal_seq(id);
    if (j.contains("users") && j["users"].is_array())
      for (auto& u : j["users"])
        if (u.is_string())
          h.users.insert(u.get<std::string>());
    ++proposals_heard_;
    last_progress_ = clock_type::now();
    if (parties_[p].removed) { // late, from another node: over before that
      m.ended.emplace(id, "later");
      return;
    }
    // Drawn only when asked for: runs without it keep their answers.
    if (g_.ignore_rate > 0
        && std::bernoulli_distribution{g_.ignore_rate}(answers_)) {
      ++ignores_; // never answered: the deadline (or a decline) decides
      return;
    }
    std::bernoulli_distribution yes{g_.accept_rate};
    bool accept = yes(answers_);
    h.accepted = accept;
    declines_ += accept ? 0 : 1;
    call_retrying(i,
                  {{"op", accept ? "proposal_accept" : "proposal_decline"},
                   {"proposal", id},
                   {"body", {{"queue", j.value("queue", "")}}}},
                  [this](unsigned st, const json& b) {
                    // 404: it ended meanwhile (another member declined).
                    if (st != 200 && st != 404 && errors_++ < 5)
                      std::cerr << "matchctl load: answer: " << st << " "
                                << b.dump() << "\n";
                  });
  }

  void on_proposal_ended(size_t p, size_t i, const json& j) {
    auto& m = users_[i];
    auto id = j.value("proposal", "");
    m.ended.emplace(id, "told");
    last_progress_ = clock_type::now();
    if (removal_reason(j.value("outcome", "")))
      removed_told(p, id);
  }

  /// The party left the queue and was told (by proposal `id`'s end, or
  /// with `id` empty by its own update after a lapsed proposal, which is
  /// then the latest any member heard): done, not lost. One ticket, in
  /// one proposal at a time: this end is every member's, and every
  /// proposal any member heard before it is over (the sockets close now,
  /// before each member hears the ends still on their way).
  void removed_told(size_t p, const std::string& id) {
    auto& pr = parties_[p];
    if (pr.removed || pr.matched != 0)
      return;
    std::string last = id;
    uint64_t last_seq = 0;
    if (last.empty())
      for (auto k : pr.members)
        for (auto& [pid, h] : users_[k].proposed)
          if (users_[k].ended.count(pid) == 0 && h.seq >= last_seq) {
            last = pid;
            last_seq = h.seq;
          }
    // `id`'s end is on its way to the other members.
    for (auto k : pr.members)
      for (auto& [pid, h] : users_[k].proposed) {
        auto how = pid != last ? "later" : !id.empty() ? "told" : "removed";
        if (users_[k].ended.emplace(pid, how).second && how[0] == 'r')
          last_removed_ms_[h.holder] = unix_now_ms();
      }
    pr.removed = true;
    give_up(p);
    pr.gave_up = false;
  }

  void call(size_t i, json msg, reply_fn cb) {
    auto& m = users_[i];
    auto id = ++m.next_id;
    msg["id"] = id;
    if (!m.ws || !m.ws->send(msg.dump())) {
      cb(0, json{{"error", "socket closed"}});
      return;
    }
    m.calls.emplace(id, std::move(cb));
  }

  /// `call`, asked again (up to 4 times, 250 ms apart) while the answer
  /// is 503: a node that could not reach the party's node, or a store
  /// outage; every party call is idempotent, so a client asks again.
  void call_retrying(size_t i, json msg, reply_fn cb, int left = 4) {
    call(i, msg, [this, i, msg, cb, left](unsigned st, const json& b) mutable {
      if (st != 503 || left == 0) {
        cb(st, b);
        return;
      }
      ++retries_;
      auto t = std::make_shared<asio::steady_timer>(io_);
      t->expires_after(std::chrono::milliseconds(250));
      t->async_wait([this, i, msg, cb, left, t](const error_code& ec) mutable {
        if (ec)
          cb(0, json{{"error", "stopped"}});
        else
          call_retrying(i, std::move(msg), std::move(cb), left - 1);
      });
    });
  }

  void fail_calls(size_t i) {
    auto calls = std::move(users_[i].calls);
    users_[i].calls.clear();
    for (auto& [id, cb] : calls)
      cb(0, json{{"error", "socket closed"}});
  }

  // -- the checker -------------------------------------------------------------

  group_check check() const {
    group_tallies t{errors_, proposals_heard_, declines_,        ignores_,
                    leaves_, &fills_,          &last_removed_ms_};
    return check_group_run(users_, parties_, g_, t);
  }

 public:
  double users_per_s(const group_check& c) const {
    auto s = std::chrono::duration<double>(last_match_ - start_).count();
    return s > 0 ? c.matched_users / s : 0;
  }

  size_t answered() const {
    return answered_;
  }

  size_t retries() const {
    return retries_;
  }

 private:
  const load_options& o_;
  group_load_options g_;
  std::vector<http_endpoint> where_;
  asio::io_context io_;
  asio::steady_timer tick_;
  std::vector<member> users_;
  std::vector<party_run> parties_;
  size_t next_ = 0;
  size_t started_users_ = 0;
  size_t active_users_ = 0;
  size_t answered_ = 0;
  size_t errors_ = 0;
  size_t retries_ = 0; ///< calls asked again after a 503
  size_t looks_ = 0;
  size_t proposals_heard_ = 0; ///< by every member, each once
  size_t declines_ = 0;
  size_t leaves_ = 0;
  fill_ledger fills_;
  size_t ignores_ = 0;
  /// By holder: Unix ms of the last removal a party told after a lapse.
  std::map<std::string, int64_t> last_removed_ms_;
  std::mt19937_64 answers_; ///< ignore, accept or decline
  bool final_ = false;
  bool over_ = false;
  clock_type::time_point start_;
  clock_type::time_point last_match_;
  clock_type::time_point last_progress_ = clock_type::now();
};

} // namespace

int run_group_load(const load_options& opts, const group_load_options& g) {
  if (opts.urls.empty())
    return 1;
  std::vector<http_endpoint> where;
  if (!resolve_urls(opts.urls, where))
    return 1;
  group_runner runner{opts, g, std::move(where)};
  auto c = runner.run();
  std::printf("groups: players %u-%u, teams %u, parties of %u-%u on queue %s; "
              "%zu calls asked again after a 503\n",
              g.min_players, g.max_players, g.teams, g.party_min, g.party_max,
              opts.queue_name(0).c_str(), runner.retries());
  for (auto& [holder, t] : c.holders)
    std::printf("holder=%s heard=%zu told=%zu removed=%zu later=%zu "
                "matched=%zu queued=%zu leaked=%zu last_removed_ms=%lld\n",
                holder.c_str(), t.heard, t.told, t.removed, t.later, t.matched,
                t.queued, t.leaked, static_cast<long long>(t.last_removed_ms));
  for (auto& x : c.leaked_examples)
    std::printf("leaked: %s\n", x.c_str());
  for (auto& x : c.undelivered_examples)
    std::printf("undelivered: %s\n", x.c_str());
  for (auto& x : c.lost_examples)
    std::printf("requeued lost: %s\n", x.c_str());
  std::printf("verdict=%s users=%zu parties=%zu matched=%zu sessions=%zu "
              "waiting=%zu errors=%zu users_per_s=%.0f double_bookings=%zu "
              "partial_matches=%zu split_parties=%zu undelivered_events=%zu "
              "lost_users=%zu unobserved=%zu cross_node_sessions=%zu "
              "cross_node_parties=%zu matches_left=%zu proposals=%zu "
              "declines=%zu removed_parties=%zu proposals_leaked=%zu "
              "requeued_lost=%zu over_capacity=%zu ignores=%zu "
              "unaccepted_sessions=%zu leaves=%zu fills=%zu "
              "seats_filled=%zu\n",
              c.verdict(), c.users, c.parties, c.matched_users, c.sessions,
              c.waiting, c.errors, runner.users_per_s(c), c.double_bookings,
              c.partial_matches, c.split_parties, c.undelivered_events,
              c.lost_users, c.unobserved, c.cross_node_sessions,
              c.cross_node_parties, c.matches_left, c.proposals, c.declines,
              c.removed_parties, c.proposals_leaked, c.requeued_lost,
              c.over_capacity, c.ignores, c.unaccepted_sessions, c.leaves,
              c.fills, c.seats_filled);
  std::fflush(stdout);
  if (runner.answered() == 0)
    return 1;
  return c.verdict()[0] == 'o' ? 0 : 2;
}

} // namespace mm
