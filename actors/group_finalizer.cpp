// The group finalizer (actors/group_finalizer.hpp).
//
//   finalize(group) --> [checkpoints + commit] --committed--> release --> answer
//                                              \--otherwise--> requeue --> answer
//
// The commit runs on a detached worker (blocking store) or inline (memory
// store); the release or requeue goes through the queue broker.

#include "actors/group_finalizer.hpp"

#include <algorithm>
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "actors/peer_events.hpp"
#include "actors/worker_bound.hpp"
#include "core/log_limit.hpp"
#include "core/logger.hpp"
#include "persistence/matchdb/match_store.hpp"

namespace mm {

namespace {

std::shared_ptr<spdlog::logger> gfin_log() {
  static auto log = logger("group_finalizer");
  return log;
}

using hook_fn = std::function<void(checkpoint, const group_commit&)>;

/// One group on its way through the worker and back.
struct group_job {
  enum kind_t { committed, cancelled, conflict, unavailable, invalid };
  group_commit req;
  kind_t kind = unavailable;
  std::string session_id;
  bool created = false;
  std::vector<std::string> removed; ///< tickets that must leave the queue
  std::string detail;
  std::optional<match_event> event; ///< created: pushed to the relay
  uint32_t seats = 0;               ///< a fill's new members
};

using group_job_ptr = std::shared_ptr<group_job>;

} // namespace

} // namespace mm

// Local only: the job goes to this node's worker and back.
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(mm::group_job_ptr)

namespace mm {

namespace {

/// The worker: owns one blocking database connection.
using group_worker_actor
  = caf::typed_actor<caf::replies_to<group_job_ptr>::with<group_job_ptr>>;

/// The tickets of `g` with a cancel of any of their members.
std::vector<std::string> cancelled_tickets(const cancel_registry& cancels,
                                           const group_commit& g) {
  std::vector<std::string> out;
  for (const auto& t : g.tickets)
    for (const auto& m : t.members)
      if (cancels.contains(g.queue, m.user, t.ticket)) {
        out.push_back(t.ticket);
        break;
      }
  return out;
}

/// The session rows of a group (teams are 1-based in the claim, 0 without
/// teams; 0-based in the session).
group_match_request to_request(const group_commit& g) {
  group_match_request r;
  r.queue = g.queue;
  r.group = g.group;
  r.min_players = g.min_players;
  for (const auto& t : g.tickets)
    for (const auto& m : t.members)
      r.members.push_back(session_member{m.user, t.ticket, m.attrs,
                                         t.team > 0 ? t.team - 1 : 0, true});
  return r;
}

/// The tickets of `g` (from `first` on) with a member in an active session.
std::vector<std::string> busy_tickets(match_store& store, const group_commit& g,
                                      size_t first) {
  std::vector<std::string> out;
  for (size_t i = first; i < g.tickets.size(); ++i)
    for (const auto& m : g.tickets[i].members) {
      auto a = store.active_session_of(m.user);
      // Unknown: the ticket stays (a later claim finds out again).
      if (a && a->has_value()) {
        out.push_back(g.tickets[i].ticket);
        break;
      }
    }
  return out;
}

/// Asks checkpoint `before_create`: a group with a cancelled ticket is
/// withdrawn (`job` says so, and the answer is empty). Else the commit's
/// check of the later checkpoints.
commit_check checkpoints(const cancel_registry& cancels, const hook_fn& hook,
                         group_job& job) {
  const auto& g = job.req;
  if (hook)
    hook(checkpoint::before_create, g);
  if (auto c = cancelled_tickets(cancels, g); !c.empty()) {
    job.kind = group_job::cancelled;
    job.removed = std::move(c);
    job.detail = "cancelled before create";
    return {};
  }
  return [&cancels, &hook, &g](commit_stage stage, size_t) {
    if (hook)
      hook(stage == commit_stage::after_create ? checkpoint::after_create
                                               : checkpoint::before_answer,
           g);
    return cancelled_tickets(cancels, g).empty();
  };
}

/// A fill of a backfill request (its ticket first, docs/groups.md
/// "Backfill"): the other tickets' members join the session in one
/// transaction. A session that ended or filled up meanwhile (or that
/// refused the fill for its roster) takes the request out: its owner
/// reads the session again and asks anew if seats are still open.
void run_fill(match_store& store, const cancel_registry& cancels,
              const hook_fn& hook, group_job& job) {
  const auto& g = job.req;
  auto check = checkpoints(cancels, hook, job);
  if (!check)
    return;
  backfill_request r;
  r.session_id = g.tickets[0].ticket.substr(1);
  r.queue = g.queue;
  r.group = g.group;
  r.max_players = g.max_players;
  r.team_size = g.team_size;
  for (size_t i = 1; i < g.tickets.size(); ++i)
    for (const auto& m : g.tickets[i].members)
      r.members.push_back(session_member{
        m.user, g.tickets[i].ticket, m.attrs,
        g.tickets[i].team > 0 ? g.tickets[i].team - 1 : 0, true});
  auto f = store.add_members(r, check);
  if (f) {
    job.kind = group_job::committed;
    job.session_id = f->session.session_id;
    job.created = f->added_now;
    job.seats = static_cast<uint32_t>(r.members.size());
    if (f->added_now)
      job.event = members_changed_event(f->session, r);
    return;
  }
  job.detail = f.error().detail;
  switch (f.error().code) {
    case errc::cancelled:
      job.kind = group_job::cancelled;
      job.removed = cancelled_tickets(cancels, g);
      return;
    case errc::conflict:
      job.kind = group_job::conflict;
      job.removed = busy_tickets(store, g, 1);
      if (job.removed.empty()) // full, or its roster changed: asked anew
        job.removed.push_back(g.tickets[0].ticket);
      return;
    case errc::not_found:
    case errc::invalid_argument:
      job.kind = group_job::invalid; // the session is over: no request
      job.removed.push_back(g.tickets[0].ticket);
      return;
    default:
      job.kind = group_job::unavailable;
      return;
  }
}

/// Runs the checkpoints and the commit of one group; for a refused group,
/// finds the tickets whose members are in another active session.
void run_group(match_store& store, const cancel_registry& cancels,
               const hook_fn& hook, group_job& job) {
  const auto& g = job.req;
  if (!g.tickets.empty() && is_backfill_ticket(g.tickets[0].ticket)) {
    run_fill(store, cancels, hook, job);
    return;
  }
  auto check = checkpoints(cancels, hook, job);
  if (!check)
    return;
  auto r = store.commit_group(to_request(g), check);
  if (r) {
    job.kind = group_job::committed;
    job.session_id = r->session_id;
    job.created = r->created;
    if (r->created)
      job.event = event_of(*r);
    if (hook && r->created)
      hook(checkpoint::after_commit, g);
    return;
  }
  job.detail = r.error().detail;
  switch (r.error().code) {
    case errc::cancelled:
      job.kind = group_job::cancelled;
      job.removed = cancelled_tickets(cancels, g);
      return;
    case errc::conflict:
      job.kind = group_job::conflict;
      job.removed = busy_tickets(store, g, 0);
      return;
    case errc::invalid_argument:
      // A claim that made a group the store cannot hold: it would be
      // claimed again forever, so its tickets leave.
      job.kind = group_job::invalid;
      for (const auto& t : g.tickets)
        job.removed.push_back(t.ticket);
      return;
    default:
      job.kind = group_job::unavailable;
      return;
  }
}

group_worker_actor::behavior_type
group_worker(group_worker_actor::pointer,
             std::shared_ptr<match_store_factory> factory,
             std::shared_ptr<cancel_registry> cancels, hook_fn hook,
             uint32_t push_lease_ms) {
  std::shared_ptr<match_store> store = factory->connect();
  store->set_commit_lease(push_lease_ms);
  return {
    [store, cancels, hook](group_job_ptr& job) {
      run_group(*store, *cancels, hook, *job);
      return job;
    },
  };
}

struct group_finalizer_state {
  group_finalizer_config cfg;
  queue_broker_actor broker;
  std::unique_ptr<match_store> inline_store; ///< non-blocking store
  std::vector<group_worker_actor> workers;   ///< blocking store
  size_t next_worker = 0;
  static inline const char* name = "mm.group_finalizer";
};

using gfin_ptr = group_finalizer_actor::stateful_pointer<group_finalizer_state>;
using verdict_promise = caf::typed_response_promise<group_verdict>;

/// Settles a finished job in the queue, then answers.
void settle(gfin_ptr self, group_job_ptr job, verdict_promise rp) {
  auto& st = self->state;
  auto bound = worker_bound(st.cfg.worker_timeout_ms);
  group_ref ref{job->req.queue, job->req.group};
  group_verdict v;
  v.session_id = job->session_id;
  v.created = job->created;
  v.removed = job->removed;
  v.detail = job->detail;
  auto log_failed = [self, ref](const char* what) {
    return [self, ref, what](caf::error& err) mutable {
      // The claim hold lapses and the queue settles the group itself.
      MM_LOG_LIMITED(gfin_log(), warn, "{} of group {} failed: {}", what,
                     ref.group, self->system().render(err));
    };
  };
  if (job->kind == group_job::committed) {
    v.committed = true;
    if (job->created && job->seats == 0 && st.cfg.on_short) {
      size_t players = 0;
      for (auto& t : job->req.tickets)
        players += t.members.size();
      if (players < job->req.max_players)
        st.cfg.on_short(job->session_id, job->req.queue);
    }
    if (auto& m = st.cfg.metrics; m && job->created) {
      if (job->seats > 0)
        m->backfill_seats_filled.fetch_add(job->seats,
                                           std::memory_order_relaxed);
      else
        m->matches.fetch_add(1, std::memory_order_relaxed);
    }
    // Its event leased to this node's relay (push_lease_ms) goes to it
    // once the group left the queue, as a pair's does; else the relay
    // fetches it.
    auto push = [self, job] {
      auto& relay = self->state.cfg.relay;
      if (!relay)
        return;
      if (job->event && self->state.cfg.push_lease_ms > 0)
        self->send(relay, deliver_atom_v,
                   std::vector<match_event>{std::move(*job->event)});
      else
        self->send(relay, tick_atom_v);
    };
    self->request(st.broker, bound, release_atom_v, ref)
      .then(
        [rp, v, push](group_settle_result&) mutable {
          push();
          rp.deliver(v);
        },
        [rp, v, push, f = log_failed("release")](caf::error& err) mutable {
          f(err);
          push();
          rp.deliver(v);
        });
    return;
  }
  if (job->kind == group_job::conflict)
    if (auto& m = st.cfg.metrics)
      m->conflicts.fetch_add(1, std::memory_order_relaxed);
  if (job->kind == group_job::unavailable || job->kind == group_job::invalid)
    MM_LOG_LIMITED(gfin_log(), warn, "group {} of {} not committed: {}",
                   ref.group, ref.queue, job->detail);
  self->request(st.broker, bound, requeue_atom_v, ref, job->removed)
    .then([rp, v](group_settle_result&) mutable { rp.deliver(v); },
          [rp, v, f = log_failed("requeue")](caf::error& err) mutable {
            f(err);
            rp.deliver(v);
          });
}

group_finalizer_actor::behavior_type
group_finalizer_impl(gfin_ptr self,
                     std::shared_ptr<match_store_factory> factory,
                     queue_broker_actor broker, group_finalizer_config cfg) {
  auto& st = self->state;
  if (!cfg.cancels)
    cfg.cancels = std::make_shared<cancel_registry>();
  st.cfg = cfg;
  st.broker = std::move(broker);
  if (!st.cfg.relay)
    st.cfg.push_lease_ms = 0; // nobody to push to: the events stay free
  auto probe = factory->connect();
  if (probe->blocking()) {
    // Groups of distinct users commit side by side (a user is in one
    // claimed group at a time: the claim is atomic).
    for (uint32_t i = 0; i < std::max<uint32_t>(1, cfg.workers); ++i)
      st.workers.push_back(self->spawn<caf::detached + caf::linked>(
        group_worker, factory, cfg.cancels, cfg.at_checkpoint,
        st.cfg.push_lease_ms));
  } else {
    st.inline_store = std::move(probe);
    st.inline_store->set_commit_lease(st.cfg.push_lease_ms);
  }
  return {
    [self](finalize_atom, group_commit& g) {
      auto& st = self->state;
      auto rp = self->make_response_promise<group_verdict>();
      auto job = std::make_shared<group_job>();
      job->req = std::move(g);
      if (st.inline_store) {
        run_group(*st.inline_store, *st.cfg.cancels, st.cfg.at_checkpoint,
                  *job);
        settle(self, std::move(job), rp);
        return rp;
      }
      auto& worker = st.workers[st.next_worker++ % st.workers.size()];
      self
        ->request(worker, worker_bound(st.cfg.worker_timeout_ms),
                  std::move(job))
        .then([self, rp](group_job_ptr& done) { settle(self, done, rp); },
              [self](caf::error& err) {
                MM_LOG_LIMITED(gfin_log(), error, "group worker failed: {}",
                               self->system().render(err));
                self->quit(err);
              });
      return rp;
    },
  };
}

} // namespace

group_finalizer_actor
spawn_group_finalizer(caf::actor_system& sys,
                      std::shared_ptr<match_store_factory> store,
                      queue_broker_actor broker, group_finalizer_config cfg) {
  return sys.spawn(group_finalizer_impl, std::move(store), std::move(broker),
                   std::move(cfg));
}

} // namespace mm
