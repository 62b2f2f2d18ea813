#include "actors/finalizer.hpp"
#include "actors/worker_bound.hpp"

#include <algorithm>
#include <map>
#include <random>
#include <unordered_map>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "core/log_limit.hpp"
#include "core/logger.hpp"

#include "actors/finalizer_commit.hpp"
#include "actors/verdict_book.hpp"
#include "persistence/matchdb/match_store.hpp"

namespace mm {

namespace {

std::shared_ptr<spdlog::logger> fin_log() {
  static auto log = logger("finalizer");
  return log;
}

using namespace finalizer_detail;

// -- the actor ----------------------------------------------------------------

using finalize_promise = caf::typed_response_promise<finalize_result>;
using steady_time = std::chrono::steady_clock::time_point;

struct pending_pair {
  claim_pair pair;
  finalize_promise rp;
  uint32_t attempts = 0;
  bool mutual = false;
  steady_time since = std::chrono::steady_clock::now(); ///< receipt
  clock_time commit_by = clock_time::max();             ///< claim_window_ms
};

/// Answers a finalization and records how long it took since its receipt.
template <class T>
void answer(const std::shared_ptr<engine_metrics>& m, steady_time since,
            finalize_promise& rp, T&& x) {
  if (m) {
    auto us = std::chrono::duration_cast<std::chrono::microseconds>(
      std::chrono::steady_clock::now() - since);
    m->finalize_latency.observe_us(
      static_cast<uint64_t>(std::max<int64_t>(0, us.count())));
  }
  rp.deliver(std::forward<T>(x));
}

/// Cancels waiting for their ticket's verdict.
struct waiting_cancel {
  inflight_cancel ticket;
  std::vector<caf::typed_response_promise<cancel_verdict>> promises;
  bool asked = false; // a database lookup for it is under way
};

struct finalizer_state {
  finalizer_config cfg;
  queue_broker_actor broker;
  std::unique_ptr<match_store> inline_store; // non-blocking stores
  std::vector<commit_worker_actor> idle;     // blocking stores: free workers
  std::vector<pending_pair> pending;
  std::vector<ticket_lookup> lookups; // waiting for a worker
  bool tick_armed = false;
  /// The commit backoff (retry_min_ms..retry_max_ms): 0 while the database
  /// takes commits; nothing runs before `backoff_until`.
  uint32_t backoff_ms = 0;
  steady_time backoff_until{};
  std::minstd_rand rng{std::random_device{}()};
  std::unordered_map<std::string, waiting_cancel> waiting;
  /// Tickets of pairs in `pending`, in a running batch or being undone;
  /// final verdicts for late cancels, kept `decided_ttl_ms` (later ones ask
  /// the database); requeue marks, kept `cancel_wait_ms`, for a cancel that
  /// saw the ticket claimed just before an undo put it back: it is told
  /// once "retry at the queue" instead of waiting for a pair that never
  /// comes ("retry at the queue" is no verdict: a new claim ends it). Set
  /// from `cfg` when the actor starts; the defaults until then.
  verdict_book book{
    std::chrono::milliseconds{finalizer_config{}.decided_ttl_ms},
    std::chrono::milliseconds{finalizer_config{}.cancel_wait_ms}};
  static inline const char* name = "finalizer";
};

using fin_ptr = finalizer_actor::stateful_pointer<finalizer_state>;

void flush(fin_ptr self);

/// Counts the tickets of `pp` in (+1) or out (-1) of flight. A ticket that
/// comes back into flight (claimed again after a requeue) has no verdict
/// yet: an older one no longer holds.
void mark_in_flight(finalizer_state& st, const pending_pair& pp, int delta) {
  if (pp.mutual)
    return; // no queue tickets to cancel
  auto& p = pp.pair;
  const std::pair<const std::string*, const std::string*> sides[] = {
    {&p.claimer_user, &p.claimer_ticket},
    {&p.claimed.user, &p.claimed.ticket},
  };
  for (auto [user, ticket] : sides) {
    auto k = ticket_key(p.queue, *user, *ticket);
    if (delta > 0)
      st.book.enter(k, true);
    else
      st.book.leave(k);
  }
}

/// Records the verdict for a ticket and answers every cancel waiting on it.
void decide(fin_ptr self, const std::string& queue, const std::string& user,
            const std::string& ticket, cancel_verdict v) {
  auto& st = self->state;
  auto k = ticket_key(queue, user, ticket);
  if (auto i = st.waiting.find(k); i != st.waiting.end()) {
    for (auto& rp : i->second.promises)
      rp.deliver(v);
    st.waiting.erase(i);
  }
  st.book.record(k, v, std::chrono::steady_clock::now());
}

void log_failure(const char* what, const caf::error& err, fin_ptr self) {
  MM_LOG_LIMITED(fin_log(), error, "{} failed: {}", what,
                 self->system().render(err));
}

/// Drops claimed/claimer records of one queue from it — all in one store
/// call, in chunks — then runs `then`, also after a failure: the claim holds
/// lapse on their own and the sides self-heal (I2 of docs/design.md).
void release_all(fin_ptr self, const std::string& queue,
                 std::vector<std::string> tickets, std::function<void()> then) {
  constexpr size_t chunk = 500;
  if (tickets.size() > chunk) {
    std::vector<std::string> rest(tickets.begin() + chunk, tickets.end());
    tickets.resize(chunk);
    auto first = std::move(then);
    then = [self, queue, rest{std::move(rest)}, first]() mutable {
      release_all(self, queue, std::move(rest), std::move(first));
    };
  }
  self
    ->request(self->state.broker, caf::infinite, release_atom_v, queue,
              std::move(tickets))
    .then([then](std::vector<release_result>&) { then(); },
          [self, then](caf::error& err) {
            log_failure("release", err, self);
            then();
          });
}

/// Puts a claimed (or claimer) record back at its original place, then runs
/// `then`.
void requeue(fin_ptr self, const std::string& queue, const std::string& ticket,
             std::function<void()> then) {
  self
    ->request(self->state.broker, caf::infinite, requeue_atom_v, queue, ticket)
    .then([then](requeue_result&) { then(); },
          [self, then](caf::error& err) {
            log_failure("requeue", err, self);
            then();
          });
}

/// Keeps a ticket "in flight" while its undo runs, so a cancel that comes
/// meanwhile waits for the verdict the undo gives once the queue changed.
struct undo_guard {
  fin_ptr self;
  std::string key;
  undo_guard(fin_ptr s, std::string k) : self(s), key(std::move(k)) {
    self->state.book.enter(key, false);
  }
  void done() {
    self->state.book.leave(key);
  }
};

/// Undoes a claim that did not become a match. `claimed_guilty` /
/// `claimer_guilty`: that side is already in an active session. Each side's
/// verdict is given once the queue has changed: a cancel told "honoured"
/// finds its ticket gone, a cancel told "retry at the queue" finds it
/// waiting there.
void undo(fin_ptr self, pending_pair& pp, bool claimed_guilty,
          bool claimer_guilty, finalize_result for_claimer) {
  auto& st = self->state;
  auto& p = pp.pair;
  // Cancels count up to now, also those that came after the checkpoints.
  bool claimed_cancelled = st.cfg.cancels->contains(p.queue, p.claimed.user,
                                                    p.claimed.ticket);
  bool claimer_cancelled = st.cfg.cancels->contains(p.queue, p.claimer_user,
                                                    p.claimer_ticket);
  auto claimed_done = [self, q{p.queue}, u{p.claimed.user},
                       t{p.claimed.ticket}](bool honoured) {
    auto g = std::make_shared<undo_guard>(self, ticket_key(q, u, t));
    return [self, q, u, t, honoured, g] {
      g->done();
      decide(self, q, u, t, cancel_verdict{honoured, {}});
    };
  };
  if (claimed_cancelled || claimed_guilty) {
    release_all(self, p.queue, {p.claimed.ticket}, claimed_done(true));
  } else {
    // Back at its original place (I2, I7).
    requeue(self, p.queue, p.claimed.ticket, claimed_done(false));
  }
  bool requeue_claimer = false;
  if (claimer_cancelled) {
    for_claimer = finalize_result{finalize_outcome::cancelled, {}, "cancelled"};
  } else if (claimer_guilty) {
    for_claimer.outcome = finalize_outcome::refused;
    // The database names the session the claimer is already in (the match
    // stores word it "user 'U' is already in active session S"): the claimer
    // IS matched there, e.g. by a pair whose event is still on its way.
    auto marker = "user '" + p.claimer_user + "' is already in active session ";
    if (auto pos = for_claimer.detail.find(marker); pos != std::string::npos) {
      auto start = pos + marker.size();
      auto end = for_claimer.detail.find(';', start);
      for_claimer.session_id = for_claimer.detail.substr(
        start, end == std::string::npos ? std::string::npos : end - start);
    }
  } else {
    // The claimer claims again from where it stood: its record goes back
    // at the score it had (a re-scan claimer keeps its place, I7).
    requeue_claimer = for_claimer.outcome == finalize_outcome::retry;
  }
  auto g = std::make_shared<undo_guard>(
    self, ticket_key(p.queue, p.claimer_user, p.claimer_ticket));
  auto rp = pp.rp;
  auto then = [self, rp, for_claimer, g, m{st.cfg.metrics}, since{pp.since},
               q{p.queue}, u{p.claimer_user}, t{p.claimer_ticket},
               claimer_cancelled]() mutable {
    g->done();
    cancel_verdict v{claimer_cancelled, {}};
    if (!claimer_cancelled)
      v.session_id = for_claimer.session_id; // guilty: matched there
    decide(self, q, u, t, std::move(v));
    answer(m, since, rp, for_claimer);
  };
  if (requeue_claimer)
    requeue(self, p.queue, p.claimer_ticket, std::move(then));
  else
    release_all(self, p.queue, {p.claimer_ticket}, std::move(then));
}

/// Re-queues a pair whose commit could not reach the database, for the
/// commit after the backoff (flush waits for it); false when it has had
/// its attempts.
bool retry_later(fin_ptr self, pending_pair& pp) {
  auto& st = self->state;
  if (++pp.attempts >= st.cfg.attempts)
    return false;
  mark_in_flight(st, pp, +1);
  st.pending.push_back(std::move(pp));
  return true;
}

/// Backs the commits off after a job the database could not take (doubling
/// the delay, with jitter), or lets them run freely after one it took.
void note_commit(fin_ptr self, const commit_job& job) {
  auto& st = self->state;
  const std::string* detail = nullptr;
  for (auto& o : job.out)
    if (o.kind == pair_outcome::unavailable)
      detail = &o.detail;
  for (auto& l : job.lookups)
    if (l.kind == ticket_lookup::unavailable)
      detail = &l.detail;
  if (detail == nullptr) {
    if (!job.out.empty() || !job.lookups.empty())
      st.backoff_ms = 0;
    return;
  }
  if (auto& m = st.cfg.metrics)
    m->commit_retries.fetch_add(1, std::memory_order_relaxed);
  auto now = std::chrono::steady_clock::now();
  // A job that was already running when an earlier one failed does not
  // double the delay again: one outage step per delay.
  if (now < st.backoff_until)
    return;
  auto lo = std::max<uint32_t>(1, st.cfg.retry_min_ms);
  auto hi = std::max(lo, st.cfg.retry_max_ms);
  st.backoff_ms = st.backoff_ms == 0 ? lo : std::min(hi, st.backoff_ms * 2);
  auto pct = std::min<uint32_t>(st.cfg.retry_jitter_pct, 100);
  std::uniform_int_distribution<int64_t> spread(-int64_t{pct}, int64_t{pct});
  auto ms = std::max<int64_t>(1, int64_t{st.backoff_ms} * (100 + spread(st.rng))
                                   / 100);
  st.backoff_until = now + std::chrono::milliseconds(ms);
  static log_limit limit{3, std::chrono::seconds(10)};
  uint64_t suppressed = 0;
  if (limit.admit(suppressed)) {
    if (suppressed > 0)
      fin_log()->warn("{} similar commit failures not logged", suppressed);
    fin_log()->warn("commit failed, the database is unavailable ({}); next "
                    "commit in {} ms",
                    *detail, ms);
  }
}

/// True while the commits back off; arms the tick that ends the wait.
bool backing_off(fin_ptr self) {
  auto& st = self->state;
  auto now = std::chrono::steady_clock::now();
  if (st.backoff_ms == 0 || now >= st.backoff_until)
    return false;
  if (!st.tick_armed) {
    st.tick_armed = true;
    self->delayed_send(self,
                       std::chrono::duration_cast<std::chrono::milliseconds>(
                         st.backoff_until - now)
                         + std::chrono::milliseconds(1),
                       tick_atom_v);
  }
  return true;
}

/// A mutual like has no queue tickets: nothing to release or requeue.
void settle_mutual(fin_ptr self, pending_pair& pp, pair_outcome& o) {
  auto& m = self->state.cfg.metrics;
  switch (o.kind) {
    case pair_outcome::committed:
      answer(m, pp.since, pp.rp,
             finalize_result{finalize_outcome::committed, o.session_id,
                             o.created ? "created" : "existing"});
      break;
    case pair_outcome::unavailable:
      if (retry_later(self, pp))
        break;
      [[fallthrough]];
    default:
      answer(m, pp.since, pp.rp,
             caf::make_error(o.kind == pair_outcome::unavailable
                               ? errc::store_unavailable
                               : errc::conflict,
                             o.detail));
  }
}

/// The claim's and the commit's times of a committed pair, for traces.
void record_timing(match_timings& out, const pending_pair& pp,
                   const std::string& session) {
  using namespace std::chrono;
  auto since = duration_cast<nanoseconds>(pp.since.time_since_epoch()).count();
  match_timing t;
  t.claim_end_ns = match_timings::wall_ns_of_steady(since);
  t.claim_start_ns = pp.pair.claimed_at > 0
                       ? match_timings::wall_ns_of_steady(pp.pair.claimed_at)
                       : t.claim_end_ns;
  t.commit_end_ns = match_timings::now_ns();
  out.put(session, t);
}

/// The pairs of one queue committed by one batch: released together, then
/// their claimers answered.
struct committed_group {
  std::vector<std::string> tickets;
  std::vector<std::pair<finalize_promise, std::string>> answers;
  std::vector<steady_time> since;
};

void settle(fin_ptr self, std::vector<pending_pair>& batch,
            std::vector<pair_outcome>& outs) {
  auto& st = self->state;
  // Counted before the relay is woken: whoever hears of a match finds it
  // counted.
  if (auto& m = st.cfg.metrics)
    for (auto& o : outs) {
      if (o.kind == pair_outcome::committed && o.created)
        m->matches.fetch_add(1, std::memory_order_relaxed);
      else if (o.kind == pair_outcome::conflict)
        m->conflicts.fetch_add(1, std::memory_order_relaxed);
    }
  // The events this batch created: pushed to the relay once the pairs'
  // tickets are released (the claimed side hears of its match only when its
  // ticket is gone), or the relay is only woken to fetch them.
  auto events = std::make_shared<std::vector<match_event>>();
  for (auto& o : outs)
    if (o.kind == pair_outcome::committed && o.created && o.event)
      events->push_back(std::move(*o.event));
  if (st.cfg.relay && events->empty()
      && std::any_of(outs.begin(), outs.end(), [](const pair_outcome& o) {
           return o.kind == pair_outcome::committed && o.created;
         }))
    self->send(st.cfg.relay, tick_atom_v);
  std::map<std::string, committed_group> groups;
  for (size_t i = 0; i < batch.size(); ++i) {
    auto& pp = batch[i];
    auto& p = pp.pair;
    auto& o = outs[i];
    mark_in_flight(st, pp, -1);
    if (pp.mutual) {
      settle_mutual(self, pp, o);
      continue;
    }
    switch (o.kind) {
      case pair_outcome::committed: {
        decide(self, p.queue, p.claimer_user, p.claimer_ticket,
               {false, o.session_id});
        decide(self, p.queue, p.claimed.user, p.claimed.ticket,
               {false, o.session_id});
        // Both tickets of every pair of the queue in one release call, the
        // claimers answered after it.
        auto& g = groups[p.queue];
        g.tickets.push_back(p.claimed.ticket);
        g.tickets.push_back(p.claimer_ticket);
        g.answers.emplace_back(pp.rp, o.session_id);
        g.since.push_back(pp.since);
        if (st.cfg.timings && o.created)
          record_timing(*st.cfg.timings, pp, o.session_id);
        break;
      }
      case pair_outcome::cancelled:
        undo(self, pp, false, false,
             finalize_result{finalize_outcome::retry, {}, o.detail});
        break;
      case pair_outcome::conflict:
        undo(self, pp, o.claimed_active, o.claimer_active,
             finalize_result{finalize_outcome::retry, {}, o.detail});
        break;
      case pair_outcome::unavailable:
        if (retry_later(self, pp))
          break;
        // During an outage every pair gives up in turn.
        MM_LOG_LIMITED(fin_log(), error, "giving up pair {}/{}: {}",
                       p.claimer_ticket, p.claimed.ticket, o.detail);
        undo(self, pp, false, false,
             finalize_result{finalize_outcome::retry, {}, o.detail});
        break;
      default:
        MM_LOG_LIMITED(fin_log(), error, "pair {}/{} refused: {}",
                       p.claimer_ticket, p.claimed.ticket, o.detail);
        undo(self, pp, false, false,
             finalize_result{finalize_outcome::refused, {}, o.detail});
    }
  }
  // The relay gets the events once every group's release came back.
  auto open = std::make_shared<size_t>(groups.size());
  auto push = [self, events] {
    auto& relay = self->state.cfg.relay;
    if (relay && !events->empty())
      self->send(relay, deliver_atom_v, std::move(*events));
  };
  if (groups.empty())
    push();
  for (auto& [queue, g] : groups) {
    release_all(self, queue, std::move(g.tickets),
                [self, open, push, answers{std::move(g.answers)},
                 since{std::move(g.since)}]() mutable {
                  auto& m = self->state.cfg.metrics;
                  for (size_t k = 0; k < answers.size(); ++k)
                    answer(m, since[k], answers[k].first,
                           finalize_result{finalize_outcome::committed,
                                           answers[k].second,
                                           {}});
                  if (--*open == 0)
                    push();
                });
  }
}

/// Answers the cancels of looked-up tickets from the database's view.
void settle_lookups(fin_ptr self, std::vector<ticket_lookup>& lookups) {
  auto& st = self->state;
  for (auto& l : lookups) {
    auto& t = l.ticket;
    auto k = ticket_key(t.queue, t.user, t.ticket);
    auto i = st.waiting.find(k);
    if (i == st.waiting.end())
      continue; // decided meanwhile
    i->second.asked = false;
    if (st.book.in_flight(k))
      continue; // its pair arrived meanwhile: the pair's decision answers
    switch (l.kind) {
      case ticket_lookup::matched:
        decide(self, t.queue, t.user, t.ticket, {false, l.session_id});
        break;
      case ticket_lookup::free:
        // Not matched, and the registered cancel refuses any pair with
        // this ticket that reaches this finalizer later.
        decide(self, t.queue, t.user, t.ticket, {true, {}});
        break;
      default: {
        // The database cannot tell now: say so; guessing is not allowed.
        auto promises = std::move(i->second.promises);
        st.waiting.erase(i);
        for (auto& rp : promises)
          rp.deliver(caf::make_error(errc::store_unavailable,
                                     "cancel undecided: " + l.detail));
      }
    }
  }
}

void flush(fin_ptr self) {
  auto& st = self->state;
  while ((!st.pending.empty() || !st.lookups.empty())
         && (st.inline_store || !st.idle.empty())) {
    if (backing_off(self))
      return;
    auto n = std::min<size_t>(st.pending.size(), st.cfg.batch_max);
    auto batch = std::make_shared<std::vector<pending_pair>>(
      std::make_move_iterator(st.pending.begin()),
      std::make_move_iterator(st.pending.begin() + n));
    st.pending.erase(st.pending.begin(), st.pending.begin() + n);
    auto job = std::make_shared<commit_job>();
    job->push = st.cfg.push_lease_ms > 0;
    job->lookups.swap(st.lookups);
    for (auto& pp : *batch) {
      job->pairs.push_back(pp.pair);
      job->mutual.push_back(pp.mutual);
      job->commit_by.push_back(pp.commit_by);
    }
    if (st.inline_store) {
      run_job(*st.inline_store, *st.cfg.cancels, st.cfg.at_checkpoint,
              self->clock(), *job);
      note_commit(self, *job);
      settle_lookups(self, job->lookups);
      settle(self, *batch, job->out);
      continue;
    }
    auto worker = std::move(st.idle.back());
    st.idle.pop_back();
    self
      ->request(worker, worker_bound(st.cfg.worker_timeout_ms), std::move(job))
      .then(
        [self, worker, batch](job_ptr& done) {
          self->state.idle.push_back(worker);
          note_commit(self, *done);
          settle_lookups(self, done->lookups);
          settle(self, *batch, done->out);
          flush(self);
        },
        [self](caf::error& err) {
          MM_LOG_LIMITED(fin_log(), error, "commit worker failed: {}",
                         self->system().render(err));
          self->quit(err);
        });
  }
}

/// Adds a pair to the next group commit.
void enqueue(fin_ptr self, pending_pair pp) {
  auto& st = self->state;
  mark_in_flight(st, pp, +1);
  st.pending.push_back(std::move(pp));
  if (st.cfg.batch_delay_ms == 0 || st.pending.size() >= st.cfg.batch_max) {
    flush(self);
  } else if (!st.tick_armed) {
    // Group commit: give concurrent finalizations a moment to join.
    st.tick_armed = true;
    self->delayed_send(self, std::chrono::milliseconds(st.cfg.batch_delay_ms),
                       tick_atom_v);
  }
}

finalizer_actor::behavior_type
finalizer_impl(fin_ptr self, std::shared_ptr<match_store_factory> factory,
               queue_broker_actor broker, finalizer_config cfg) {
  auto& st = self->state;
  if (!cfg.cancels)
    cfg.cancels = std::make_shared<cancel_registry>();
  cfg.batch_max = std::max<uint32_t>(1, cfg.batch_max);
  if (!cfg.relay)
    cfg.push_lease_ms = 0; // nobody to push to: the events stay free
  st.cfg = cfg;
  st.book = verdict_book{std::chrono::milliseconds{cfg.decided_ttl_ms},
                         std::chrono::milliseconds{cfg.cancel_wait_ms}};
  st.broker = std::move(broker);
  auto probe = factory->connect();
  if (probe->blocking()) {
    for (uint32_t i = 0; i < std::max<uint32_t>(1, cfg.workers); ++i)
      st.idle.push_back(self->spawn<caf::detached + caf::linked>(
        commit_worker, factory, cfg.cancels, cfg.at_checkpoint,
        cfg.push_lease_ms));
  } else {
    st.inline_store = std::move(probe);
    st.inline_store->set_commit_lease(cfg.push_lease_ms);
  }
  return {
    [self](finalize_atom, claim_pair& pair) {
      auto rp = self->make_response_promise<finalize_result>();
      auto window = self->state.cfg.claim_window_ms;
      auto commit_by = clock_time::max();
      if (window > 0) {
        // Counted from the claim request (no later than the claim itself),
        // or from now when the sender did not say.
        auto at = self->clock().now();
        if (pair.claimed_at > 0)
          at = clock_time{std::chrono::duration_cast<clock_time::duration>(
            std::chrono::nanoseconds{pair.claimed_at})};
        commit_by = at + std::chrono::milliseconds(window);
      }
      pending_pair pp{std::move(pair), rp, 0, false};
      pp.commit_by = commit_by;
      enqueue(self, std::move(pp));
      return rp;
    },
    [self](finalize_atom, mutual_pair& m) {
      auto rp = self->make_response_promise<finalize_result>();
      claim_pair pair;
      pair.queue = mutual_queue;
      pair.claimer_user = m.user_a;
      pair.claimer_ticket = mutual_ticket;
      pair.claimed.user = m.user_b;
      pair.claimed.ticket = mutual_ticket;
      enqueue(self, pending_pair{std::move(pair), rp, 0, true});
      return rp;
    },
    [self](cancel_atom, inflight_cancel& c) {
      auto& st = self->state;
      auto rp = self->make_response_promise<cancel_verdict>();
      auto k = ticket_key(c.queue, c.user, c.ticket);
      if (auto* v = st.book.final_verdict(k,
                                          std::chrono::steady_clock::now())) {
        rp.deliver(*v);
        return rp;
      }
      st.cfg.cancels->add(c.queue, c.user, c.ticket);
      if (st.book.take_requeued(k, std::chrono::steady_clock::now())) {
        // Put back a moment ago: waiting in the queue (or claimed again,
        // and that pair will see the cancel registered above).
        rp.deliver(cancel_verdict{false, {}});
        return rp;
      }
      auto& w = st.waiting[k];
      w.promises.push_back(rp);
      if (w.promises.size() == 1) {
        w.ticket = std::move(c);
        self->delayed_send(self,
                           std::chrono::milliseconds(st.cfg.cancel_wait_ms),
                           grace_atom_v, k);
      }
      return rp;
    },
    [self](tick_atom) {
      self->state.tick_armed = false;
      flush(self);
    },
    [self](grace_atom, std::string& k) {
      auto& st = self->state;
      auto i = st.waiting.find(k);
      if (i == st.waiting.end() || i->second.asked)
        return;
      if (st.book.in_flight(k)) {
        // Its pair is being committed right now: the decision will answer;
        // look again after another bound in case it never does.
        self->delayed_send(self,
                           std::chrono::milliseconds(st.cfg.cancel_wait_ms),
                           grace_atom_v, k);
        return;
      }
      // No pair with this ticket reached us within the bound: the database
      // tells whether the user is matched with it (never a guess).
      i->second.asked = true;
      ticket_lookup l;
      l.ticket = i->second.ticket;
      st.lookups.push_back(std::move(l));
      flush(self);
    },
  };
}

} // namespace

finalizer_actor spawn_finalizer(caf::actor_system& sys,
                                std::shared_ptr<match_store_factory> store,
                                queue_broker_actor broker,
                                finalizer_config cfg) {
  return sys.spawn(finalizer_impl, std::move(store), std::move(broker),
                   std::move(cfg));
}

} // namespace mm
