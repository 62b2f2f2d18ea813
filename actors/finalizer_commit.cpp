// The finalizer's group commit (actors/finalizer_commit.hpp).

#include "actors/finalizer_commit.hpp"

#include <spdlog/spdlog.h>

#include "core/log_limit.hpp"
#include "core/logger.hpp"
#include "persistence/matchdb/match_store.hpp"

namespace mm::finalizer_detail {

namespace {

std::shared_ptr<spdlog::logger> fin_log() {
  static auto log = logger("finalizer");
  return log;
}

/// Answers one lookup: is the user's active session the one of its ticket?
void resolve(match_store& store, ticket_lookup& l) {
  auto r = store.active_session_of(l.ticket.user);
  if (!r) {
    l.kind = ticket_lookup::unavailable;
    l.detail = r.error().detail;
    return;
  }
  l.kind = ticket_lookup::free;
  if (!r->has_value())
    return;
  auto& rec = **r;
  auto& t = l.ticket;
  if (rec.queue == t.queue
      && ((rec.user_a == t.user && rec.ticket_a == t.ticket)
          || (rec.user_b == t.user && rec.ticket_b == t.ticket))) {
    l.kind = ticket_lookup::matched;
    l.session_id = rec.session_id;
  }
}

} // namespace

void run_job(match_store& store, const cancel_registry& cancels,
             const hook_fn& hook, const caf::actor_clock& clock,
             commit_job& job) {
  for (auto& l : job.lookups)
    resolve(store, l);
  auto& pairs = job.pairs;
  job.out.assign(pairs.size(), pair_outcome{});
  auto cancelled = [&](size_t i) {
    auto& p = pairs[i];
    return !job.mutual[i]
           && (cancels.contains(p.queue, p.claimer_user, p.claimer_ticket)
               || cancels.contains(p.queue, p.claimed.user, p.claimed.ticket));
  };
  // Past its claim window a pair never commits: its claim hold lapses
  // soon, and a cancel whose owner node cannot be asked counts on no
  // COMMIT starting later (docs/engine.md).
  auto expired = [&](size_t i) {
    if (clock.now() <= job.commit_by[i])
      return false;
    auto& p = pairs[i];
    MM_LOG_LIMITED(fin_log(), warn,
                   "pair {}/{} not committed: its claim is older than the "
                   "claim window",
                   p.claimer_ticket, p.claimed.ticket);
    return true;
  };
  std::vector<size_t> live;
  std::vector<match_request> reqs;
  for (size_t i = 0; i < pairs.size(); ++i) {
    auto& p = pairs[i];
    if (hook)
      hook(checkpoint::before_create, p);
    if (cancelled(i)) {
      job.out[i].kind = pair_outcome::cancelled;
      job.out[i].detail = "cancelled before create";
      continue;
    }
    if (expired(i)) {
      job.out[i].kind = pair_outcome::cancelled;
      job.out[i].detail = "claim older than the claim window";
      continue;
    }
    live.push_back(i);
    reqs.push_back(match_request{
      p.queue, p.claimer_user, p.claimer_ticket, p.claimer_attrs,
      p.claimed.user, p.claimed.ticket, p.claimed.attrs, job.mutual[i]});
  }
  if (reqs.empty())
    return;
  auto check = [&](commit_stage stage, size_t k) {
    auto& p = pairs[live[k]];
    if (hook)
      hook(stage == commit_stage::after_create ? checkpoint::after_create
                                               : checkpoint::before_answer,
           p);
    return !cancelled(live[k]) && !expired(live[k]);
  };
  auto res = store.commit_matches(reqs, check);
  for (size_t k = 0; k < live.size(); ++k) {
    auto& o = job.out[live[k]];
    auto& r = res.at(k);
    if (r) {
      o.kind = pair_outcome::committed;
      o.session_id = r->session_id;
      o.created = r->created;
      if (job.push && r->created) {
        // The row's event as the store wrote it (one derivation of id and
        // payload for both, match_store.hpp), for the relay to push.
        auto& q = reqs[k];
        match_event ev;
        ev.event_id = match_created_event_id(r->session_id);
        ev.session_id = r->session_id;
        ev.queue = q.queue;
        ev.user_a = q.user_a;
        ev.ticket_a = q.ticket_a;
        ev.user_b = q.user_b;
        ev.ticket_b = q.ticket_b;
        ev.payload = match_created_payload(r->session_id, q);
        ev.type = match_created_type;
        o.event = std::move(ev);
      }
      if (hook && r->created)
        hook(checkpoint::after_commit, pairs[live[k]]);
      continue;
    }
    o.detail = r.error().detail;
    switch (r.error().code) {
      case errc::cancelled:
        o.kind = pair_outcome::cancelled;
        break;
      case errc::conflict: {
        o.kind = pair_outcome::conflict;
        auto& p = pairs[live[k]];
        auto a = store.active_session_of(p.claimer_user);
        auto b = store.active_session_of(p.claimed.user);
        o.claimer_active = a && a->has_value();
        o.claimed_active = b && b->has_value();
        break;
      }
      case errc::store_unavailable:
        o.kind = pair_outcome::unavailable;
        break;
      default:
        o.kind = pair_outcome::invalid;
    }
  }
}

/// Owns one blocking database connection; runs one batch at a time.
commit_worker_actor::behavior_type
commit_worker(commit_worker_actor::pointer self,
              std::shared_ptr<match_store_factory> factory,
              std::shared_ptr<cancel_registry> cancels, hook_fn hook,
              uint32_t push_lease_ms) {
  std::shared_ptr<match_store> store = factory->connect();
  store->set_commit_lease(push_lease_ms);
  const auto* clock = &self->system().clock();
  return {
    [store, cancels, hook, clock](job_ptr& job) {
      run_job(*store, *cancels, hook, *clock, *job);
      return job;
    },
  };
}

} // namespace mm::finalizer_detail
