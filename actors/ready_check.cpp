// The ready check (actors/ready_check.hpp). One proposal's life:
//
//   finalize(g, accept_ms) --> proposed --all accepted--> committing --> answer
//                                 |  (poll, or an answer here)
//                                 \--declined / deadline--> settled --> answer
//
// The store decides (lua/group_decide.lua, at its clock); this actor only
// asks, commits what was accepted and tells the members. Its proposals are
// kept by queue, so one store call a poll looks at a queue's every one.

#include "actors/ready_check.hpp"

#include <chrono>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <caf/all.hpp>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "core/log_limit.hpp"
#include "core/logger.hpp"

namespace mm {

namespace {

std::shared_ptr<spdlog::logger> rc_log() {
  static auto log = logger("ready_check");
  return log;
}

using verdict_promise = caf::typed_response_promise<group_verdict>;

struct proposal {
  group_commit g;
  std::vector<verdict_promise> waiters;
  bool asking = false;     // a decide of it is under way
  bool again = false;      // an answer came meanwhile: ask again after it
  bool nudged = false;     // an answer came: asked at the next flush
  bool committing = false; // accepted: the group finalizer has it
};

struct ready_check_state {
  ready_check_config cfg;
  // queue -> group -> proposal
  std::map<std::string, std::map<std::string, proposal>> open;
  bool armed = false;
  // Answers' nudges not asked yet, by queue: asked in one decide a queue
  // once the mailbox's messages before the flush are handled.
  std::map<std::string, std::vector<std::string>> nudged;
  static inline const char* name = "mm.ready_check";
};

using rc_ptr = ready_check_actor::stateful_pointer<ready_check_state>;

int64_t unix_ms_now() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch())
    .count();
}

/// Every member with its ticket (the store's, as in match.created: the
/// API shows the client's) and team, and the teams.
nlohmann::json roster_of(const group_commit& g) {
  auto users = nlohmann::json::array();
  std::map<uint32_t, std::vector<std::string>> teams;
  for (auto& t : g.tickets)
    for (auto& m : t.members) {
      users.push_back({{"user", m.user},
                       {"ticket", t.ticket},
                       {"team", t.team > 0 ? t.team - 1 : 0}});
      if (t.team > 0)
        teams[t.team - 1].push_back(m.user);
    }
  auto tj = nlohmann::json::array();
  for (auto& [k, v] : teams)
    tj.push_back(v);
  return {{"users", users}, {"teams", tj}};
}

/// One event to `to` (routed as a match's: here, or through the gateway).
void tell(rc_ptr self, const group_commit& g, const std::string& type,
          const std::string& tag, nlohmann::json payload,
          const std::vector<std::string>& to) {
  auto& st = self->state;
  if (!st.cfg.directory || to.empty())
    return;
  match_event ev;
  // The gateway of a member's node takes it from this node only: the
  // payload names the holder (actors/node_gateway_routing.cpp).
  payload["holder"] = st.cfg.node;
  ev.event_id = "proposal:" + st.cfg.node + ":" + g.queue + ":" + g.group + ":"
                + tag;
  ev.queue = g.queue;
  ev.type = type;
  ev.payload = payload.dump();
  ev.user_a = to.front();
  ev.others.assign(to.begin() + 1, to.end());
  caf::anon_send(st.cfg.directory, deliver_atom_v, std::move(ev));
}

void propose(rc_ptr self, const group_commit& g) {
  auto j = roster_of(g);
  j["proposal"] = g.group;
  j["queue"] = g.queue;
  j["accept_timeout_s"] = g.accept_ms / 1000.0;
  j["deadline_ms"] = unix_ms_now() + g.accept_ms;
  std::vector<std::string> to;
  for (auto& t : g.tickets)
    for (auto& m : t.members)
      to.push_back(m.user);
  tell(self, g, proposed_event, "proposed", std::move(j), to);
}

/// Tells each member how the proposal ended for it.
void tell_end(rc_ptr self, const group_commit& g,
              const std::map<std::string, std::string>& outcome_of_ticket,
              const std::string& all) {
  std::map<std::string, std::vector<std::string>> by_outcome;
  for (auto& t : g.tickets) {
    auto i = outcome_of_ticket.find(t.ticket);
    auto& o = i != outcome_of_ticket.end() ? i->second : all;
    for (auto& m : t.members)
      by_outcome[o].push_back(m.user);
  }
  for (auto& [o, users] : by_outcome)
    tell(self, g, proposal_ended_event, o,
         {{"proposal", g.group}, {"queue", g.queue}, {"outcome", o}}, users);
}

/// The open proposal `group` of `queue`, or null.
proposal* find(rc_ptr self, const std::string& queue,
               const std::string& group) {
  auto& open = self->state.open;
  auto q = open.find(queue);
  if (q == open.end())
    return nullptr;
  auto i = q->second.find(group);
  return i == q->second.end() ? nullptr : &i->second;
}

void finish(rc_ptr self, const std::string& queue, const std::string& group,
            const group_verdict& v) {
  auto& open = self->state.open;
  auto q = open.find(queue);
  if (q == open.end())
    return;
  auto i = q->second.find(group);
  if (i == q->second.end())
    return;
  for (auto& rp : i->second.waiters)
    rp.deliver(v);
  q->second.erase(i);
  if (q->second.empty())
    open.erase(q);
}

void count(rc_ptr self, std::atomic<uint64_t> engine_metrics::*what) {
  if (auto& m = self->state.cfg.metrics)
    ((*m).*what).fetch_add(1, std::memory_order_relaxed);
}

void commit(rc_ptr self, proposal& p) {
  p.committing = true;
  count(self, &engine_metrics::proposals_accepted);
  auto g = p.g;
  g.accept_ms = 0;
  auto queue = g.queue;
  auto group = g.group;
  self
    ->request(self->state.cfg.finalizer, caf::infinite, finalize_atom_v,
              std::move(g))
    .then(
      [self, queue, group](group_verdict& v) {
        if (auto* p = find(self, queue, group)) {
          std::map<std::string, std::string> out;
          for (auto& t : v.removed)
            out[t] = "removed";
          tell_end(self, p->g, out, v.committed ? "matched" : "requeued");
        }
        finish(self, queue, group, v);
      },
      [self, queue, group](caf::error& err) {
        // The group finalizer is a core actor: the engine stops without
        // it; the lease settles the proposal in the queue.
        group_verdict v;
        v.detail = self->system().render(err);
        finish(self, queue, group, v);
      });
}

void ask(rc_ptr self, const std::string& queue,
         std::vector<std::string> groups);

void on_decision(rc_ptr self, const std::string& queue, proposal_decision& d) {
  auto* found = find(self, queue, d.group);
  if (found == nullptr)
    return;
  auto& p = *found;
  p.asking = false;
  if (d.status == "pending" && p.again && !p.committing) {
    // An answer came while the store was asked: it may decide it now
    // (else it would wait for the next poll).
    p.again = false;
    ask(self, queue, {d.group});
    return;
  }
  if (d.status == "pending" || p.committing)
    return;
  if (d.status == "accepted") {
    commit(self, p);
    return;
  }
  group_verdict v;
  if (d.status == "gone") {
    // Settled without us (the lease lapsed): each member's party reads its
    // ticket's fate at its next re-scan.
    count(self, &engine_metrics::proposals_lapsed);
    v.detail = "proposal lapsed";
    finish(self, queue, d.group, v);
    return;
  }
  std::map<std::string, std::string> out;
  bool declined = false;
  for (size_t k = 0; k < d.tickets.size(); ++k) {
    out[d.tickets[k]] = d.outcomes[k];
    declined = declined || d.outcomes[k] == "declined";
    if (d.outcomes[k] != "requeued") {
      v.removed.push_back(d.tickets[k]);
      v.reasons.push_back(d.outcomes[k]);
    }
  }
  count(self, declined ? &engine_metrics::proposals_declined
                       : &engine_metrics::proposals_timed_out);
  v.detail = declined ? "declined" : "timed_out";
  tell_end(self, p.g, out, "requeued");
  finish(self, queue, d.group, v);
}

/// Asks the store about `groups` of `queue` (none asked already).
void ask(rc_ptr self, const std::string& queue,
         std::vector<std::string> groups) {
  if (groups.empty())
    return;
  auto& st = self->state;
  auto q = st.open.find(queue);
  if (q == st.open.end())
    return;
  for (auto& g : groups)
    q->second[g].asking = true;
  auto asked = groups;
  self
    ->request(st.cfg.broker,
              std::chrono::milliseconds(st.cfg.request_timeout_ms),
              decide_atom_v, queue, std::move(groups))
    .then(
      [self, queue](std::vector<proposal_decision>& ds) {
        for (auto& d : ds)
          on_decision(self, queue, d);
      },
      [self, queue, asked](caf::error& err) {
        MM_LOG_LIMITED(rc_log(), warn, "proposals of {} not decided: {}", queue,
                       self->system().render(err));
        for (auto& g : asked)
          if (auto* p = find(self, queue, g))
            p->asking = false; // the next poll asks again
      });
}

/// How many open proposals are not decided yet (none committing).
size_t undecided(rc_ptr self) {
  size_t n = 0;
  for (auto& [queue, ps] : self->state.open)
    for (auto& [gid, p] : ps)
      n += p.committing ? 0 : 1;
  return n;
}

void arm(rc_ptr self) {
  auto& st = self->state;
  if (st.armed || st.open.empty())
    return;
  st.armed = true;
  self->delayed_send(self, std::chrono::milliseconds(st.cfg.poll_ms),
                     tick_atom_v);
}

} // namespace

ready_check_actor spawn_ready_check(caf::actor_system& sys,
                                    ready_check_config cfg) {
  auto impl = [](rc_ptr self,
                 ready_check_config cfg) -> ready_check_actor::behavior_type {
    self->state.cfg = std::move(cfg);
    return {
      [self](finalize_atom a, group_commit& g) -> caf::result<group_verdict> {
        auto& st = self->state;
        // A backfill's fill (its request first) is never proposed.
        if (g.accept_ms == 0
            || (!g.tickets.empty() && is_backfill_ticket(g.tickets[0].ticket)))
          return self->delegate(st.cfg.finalizer, a, std::move(g));
        auto rp = self->make_response_promise<group_verdict>();
        auto& p = st.open[g.queue][g.group];
        bool fresh = p.g.group.empty();
        p.waiters.push_back(rp);
        if (fresh) {
          p.g = std::move(g);
          count(self, &engine_metrics::proposals_made);
          propose(self, p.g);
          arm(self);
          if (st.cfg.on_held) // a test hook: off unless armed
            st.cfg.on_held(undecided(self));
        }
        return rp;
      },
      [self](answer_atom, group_ref& ref) {
        auto* p = find(self, ref.queue, ref.group);
        if (p == nullptr || p->committing)
          return;
        if (p->asking) {
          p->again = true;
          return;
        }
        if (p->nudged)
          return;
        p->nudged = true;
        auto& st = self->state;
        if (st.nudged.empty())
          self->send(self, answer_atom_v); // the flush, after what is queued
        st.nudged[ref.queue].push_back(ref.group);
      },
      [self](answer_atom) {
        // The nudges gathered since the first: one decide per queue.
        auto nudged = std::move(self->state.nudged);
        self->state.nudged.clear();
        for (auto& [queue, gs] : nudged) {
          std::vector<std::string> groups;
          for (auto& g : gs)
            if (auto* p = find(self, queue, g); p && p->nudged) {
              p->nudged = false;
              if (!p->asking && !p->committing)
                groups.push_back(g);
              if (groups.size() == 1000) // a decide's most
                ask(self, queue, std::exchange(groups, {}));
            }
          ask(self, queue, std::move(groups));
        }
      },
      [self](tick_atom) {
        auto& st = self->state;
        st.armed = false;
        for (auto& [queue, ps] : st.open) {
          std::vector<std::string> groups;
          for (auto& [gid, p] : ps)
            if (!p.asking && !p.committing && groups.size() < 1000) {
              p.nudged = false; // asked now
              groups.push_back(gid);
            }
          ask(self, queue, std::move(groups));
        }
        arm(self);
      },
    };
  };
  return sys.spawn(impl, std::move(cfg));
}

} // namespace mm
