#include "actors/finalizer.hpp"

#include <algorithm>
#include <deque>
#include <map>
#include <mutex>
#include <unordered_map>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "core/logger.hpp"

#include "persistence/matchdb/match_store.hpp"

namespace mm {

// -- cancel_registry ------------------------------------------------------------

struct cancel_registry::impl {
  int64_t memory_ms;
  mutable std::mutex mtx;
  std::unordered_map<std::string, std::chrono::steady_clock::time_point> keys;
  std::deque<std::pair<std::chrono::steady_clock::time_point, std::string>>
    order;
};

namespace {

std::string key_of(const std::string& queue, const std::string& ticket) {
  return queue + '\n' + ticket;
}

} // namespace

cancel_registry::cancel_registry(int64_t memory_ms) : impl_(new impl) {
  impl_->memory_ms = memory_ms;
}

cancel_registry::~cancel_registry() = default;

void cancel_registry::add(const std::string& queue, const std::string& ticket) {
  auto now = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> guard{impl_->mtx};
  // Forget what is older than the memory bound: no pair lives that long.
  auto horizon = now - std::chrono::milliseconds(impl_->memory_ms);
  while (!impl_->order.empty() && impl_->order.front().first < horizon) {
    auto i = impl_->keys.find(impl_->order.front().second);
    if (i != impl_->keys.end() && i->second == impl_->order.front().first)
      impl_->keys.erase(i);
    impl_->order.pop_front();
  }
  auto k = key_of(queue, ticket);
  impl_->keys[k] = now;
  impl_->order.emplace_back(now, std::move(k));
}

bool cancel_registry::contains(const std::string& queue,
                               const std::string& ticket) const {
  std::lock_guard<std::mutex> guard{impl_->mtx};
  return impl_->keys.count(key_of(queue, ticket)) > 0;
}

namespace {

std::shared_ptr<spdlog::logger> fin_log() {
  static auto log = logger("finalizer");
  return log;
}

// -- one group commit ---------------------------------------------------------------

/// How one pair of a batch ended in the store.
struct pair_outcome {
  enum kind_t { committed, cancelled, conflict, unavailable, invalid };
  kind_t kind = unavailable;
  std::string session_id;
  bool created = false; // false: an earlier commit made it (a retry)
  std::string detail;
  bool claimer_active = false; // conflict: already in an active session
  bool claimed_active = false;
};

/// A batch on its way through a worker and back; the promises stay home.
struct commit_job {
  std::vector<claim_pair> pairs;
  std::vector<bool> mutual; // a mutual like: no queue tickets, no cancels
  std::vector<pair_outcome> out;
};

using job_ptr = std::shared_ptr<commit_job>;

} // namespace

} // namespace mm

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(mm::job_ptr)

namespace mm {

namespace {

/// A detached worker of the pool; owns one blocking database connection.
/// Local only (the job never leaves the node), so it needs no type ID.
using commit_worker_actor = caf::typed_actor<
  // Runs the job's pairs as one group commit, with the cancel checkpoints,
  // and answers the same job with one outcome per pair. Idempotent per pair
  // (a pair committed before comes back `created == false`).
  caf::replies_to<job_ptr>::with<job_ptr>>;

using hook_fn = std::function<void(checkpoint, const claim_pair&)>;

/// Runs one batch: checkpoint 1 before the transaction, checkpoints 2 and 3
/// inside it (the store asks before it writes COMMIT), then, for refused
/// pairs, which side is already in an active session.
void run_job(match_store& store, const cancel_registry& cancels,
             const hook_fn& hook, commit_job& job) {
  auto& pairs = job.pairs;
  job.out.assign(pairs.size(), pair_outcome{});
  auto cancelled = [&](size_t i) {
    auto& p = pairs[i];
    return !job.mutual[i]
           && (cancels.contains(p.queue, p.claimer_ticket)
               || cancels.contains(p.queue, p.claimed.ticket));
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
    live.push_back(i);
    reqs.push_back(match_request{p.queue, p.claimer_user, p.claimer_ticket,
                                 p.claimer_attrs, p.claimed.user,
                                 p.claimed.ticket, p.claimed.attrs,
                                 job.mutual[i]});
  }
  if (reqs.empty())
    return;
  auto check = [&](commit_stage stage, size_t k) {
    auto& p = pairs[live[k]];
    if (hook)
      hook(stage == commit_stage::after_create ? checkpoint::after_create
                                               : checkpoint::before_answer,
           p);
    return !cancelled(live[k]);
  };
  auto res = store.commit_matches(reqs, check);
  for (size_t k = 0; k < live.size(); ++k) {
    auto& o = job.out[live[k]];
    auto& r = res.at(k);
    if (r) {
      o.kind = pair_outcome::committed;
      o.session_id = r->session_id;
      o.created = r->created;
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
commit_worker(commit_worker_actor::pointer,
              std::shared_ptr<match_store_factory> factory,
              std::shared_ptr<cancel_registry> cancels, hook_fn hook) {
  std::shared_ptr<match_store> store = factory->connect();
  return {
    [store, cancels, hook](job_ptr& job) {
      run_job(*store, *cancels, hook, *job);
      return job;
    },
  };
}

// -- the actor ------------------------------------------------------------------------

using finalize_promise = caf::typed_response_promise<finalize_result>;
using steady_time = std::chrono::steady_clock::time_point;

struct pending_pair {
  claim_pair pair;
  finalize_promise rp;
  uint32_t attempts = 0;
  bool mutual = false;
  steady_time since = std::chrono::steady_clock::now(); ///< receipt
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

struct finalizer_state {
  finalizer_config cfg;
  queue_broker_actor broker;
  std::unique_ptr<match_store> inline_store; // non-blocking stores
  std::vector<commit_worker_actor> idle; // blocking stores: free workers
  std::vector<pending_pair> pending;
  bool tick_armed = false;
  /// Tickets of pairs in `pending` or in a running batch.
  std::unordered_map<std::string, int> in_flight;
  /// Cancels waiting for their pair's decision.
  std::map<std::string, std::vector<caf::typed_response_promise<cancel_verdict>>>
    waiting;
  /// Recent decisions, so a cancel that arrives late gets the same answer.
  std::unordered_map<std::string, cancel_verdict> decided;
  std::deque<std::string> decided_order;
  static inline const char* name = "finalizer";
};

using fin_ptr = finalizer_actor::stateful_pointer<finalizer_state>;

void flush(fin_ptr self);

void mark_in_flight(finalizer_state& st, const pending_pair& pp, int delta) {
  if (pp.mutual)
    return; // no queue tickets to cancel
  auto& p = pp.pair;
  for (auto* t : {&p.claimer_ticket, &p.claimed.ticket}) {
    auto k = key_of(p.queue, *t);
    if ((st.in_flight[k] += delta) <= 0)
      st.in_flight.erase(k);
  }
}

/// Records the verdict for `ticket` and answers every cancel waiting on it.
void decide(fin_ptr self, const std::string& queue, const std::string& ticket,
            cancel_verdict v) {
  auto& st = self->state;
  auto k = key_of(queue, ticket);
  if (auto i = st.waiting.find(k); i != st.waiting.end()) {
    for (auto& rp : i->second)
      rp.deliver(v);
    st.waiting.erase(i);
  }
  if (st.decided.emplace(k, v).second) {
    st.decided_order.push_back(k);
    if (st.decided_order.size() > 100000) {
      st.decided.erase(st.decided_order.front());
      st.decided_order.pop_front();
    }
  } else {
    st.decided[k] = v;
  }
}

void log_failure(const char* what, const caf::error& err, fin_ptr self) {
  fin_log()->error("{} failed: {}", what, self->system().render(err));
}

/// Drops a claimed/claimer record from the queue, then runs `then`.
void release(fin_ptr self, const std::string& queue, const std::string& ticket,
             std::function<void()> then) {
  self->request(self->state.broker, caf::infinite, release_atom_v, queue, ticket)
    .then([then](release_result&) { then(); },
          [self, then](caf::error& err) {
            // The claim hold lapses on its own; the sides self-heal (I2 of docs/design.md).
            log_failure("release", err, self);
            then();
          });
}

void requeue(fin_ptr self, const std::string& queue,
             const std::string& ticket) {
  self->request(self->state.broker, caf::infinite, requeue_atom_v, queue, ticket)
    .then([](requeue_result&) {},
          [self](caf::error& err) { log_failure("requeue", err, self); });
}

/// Undoes a claim that did not become a match. `claimed_guilty` /
/// `claimer_guilty`: that side is already in an active session.
void undo(fin_ptr self, pending_pair& pp, bool claimed_guilty,
          bool claimer_guilty, finalize_result for_claimer) {
  auto& st = self->state;
  auto& p = pp.pair;
  // Cancels count up to now, also those that came after the checkpoints.
  bool claimed_cancelled = st.cfg.cancels->contains(p.queue, p.claimed.ticket);
  bool claimer_cancelled = st.cfg.cancels->contains(p.queue, p.claimer_ticket);
  if (claimed_cancelled || claimed_guilty) {
    release(self, p.queue, p.claimed.ticket, [] {});
    decide(self, p.queue, p.claimed.ticket, cancel_verdict{true, {}});
  } else {
    // Back at its original place (I2, I7); a cancel of it now goes to the
    // queue again (empty verdict = "not here, retry at the queue").
    requeue(self, p.queue, p.claimed.ticket);
    decide(self, p.queue, p.claimed.ticket, cancel_verdict{false, {}});
  }
  if (claimer_cancelled) {
    for_claimer = finalize_result{finalize_outcome::cancelled, {}, "cancelled"};
    decide(self, p.queue, p.claimer_ticket, cancel_verdict{true, {}});
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
  }
  auto rp = pp.rp;
  release(self, p.queue, p.claimer_ticket,
          [rp, for_claimer, m{st.cfg.metrics}, since{pp.since}]() mutable {
            answer(m, since, rp, for_claimer);
          });
}

/// Re-queues a pair whose commit could not reach the database; false when
/// it has had its attempts.
bool retry_later(fin_ptr self, pending_pair& pp) {
  auto& st = self->state;
  if (++pp.attempts >= st.cfg.attempts)
    return false;
  mark_in_flight(st, pp, +1);
  st.pending.push_back(std::move(pp));
  if (!st.tick_armed) {
    st.tick_armed = true;
    self->delayed_send(self, std::chrono::milliseconds(st.cfg.retry_delay_ms),
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
  if (st.cfg.relay
      && std::any_of(outs.begin(), outs.end(), [](const pair_outcome& o) {
           return o.kind == pair_outcome::committed && o.created;
         }))
    self->send(st.cfg.relay, tick_atom_v);
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
        decide(self, p.queue, p.claimer_ticket, {false, o.session_id});
        decide(self, p.queue, p.claimed.ticket, {false, o.session_id});
        release(self, p.queue, p.claimed.ticket, [] {});
        auto rp = pp.rp;
        auto sid = o.session_id;
        release(self, p.queue, p.claimer_ticket,
                [rp, sid, m{st.cfg.metrics}, since{pp.since}]() mutable {
                  answer(m, since, rp,
                         finalize_result{finalize_outcome::committed, sid,
                                         {}});
                });
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
        fin_log()->error("giving up pair {}/{}: {}", p.claimer_ticket,
                         p.claimed.ticket, o.detail);
        undo(self, pp, false, false,
             finalize_result{finalize_outcome::retry, {}, o.detail});
        break;
      default:
        fin_log()->error("pair {}/{} refused: {}", p.claimer_ticket,
                         p.claimed.ticket, o.detail);
        undo(self, pp, false, false,
             finalize_result{finalize_outcome::refused, {}, o.detail});
    }
  }
}

void flush(fin_ptr self) {
  auto& st = self->state;
  while (!st.pending.empty() && (st.inline_store || !st.idle.empty())) {
    auto n = std::min<size_t>(st.pending.size(), st.cfg.batch_max);
    auto batch = std::make_shared<std::vector<pending_pair>>(
      std::make_move_iterator(st.pending.begin()),
      std::make_move_iterator(st.pending.begin() + n));
    st.pending.erase(st.pending.begin(), st.pending.begin() + n);
    auto job = std::make_shared<commit_job>();
    for (auto& pp : *batch) {
      job->pairs.push_back(pp.pair);
      job->mutual.push_back(pp.mutual);
    }
    if (st.inline_store) {
      run_job(*st.inline_store, *st.cfg.cancels, st.cfg.at_checkpoint, *job);
      settle(self, *batch, job->out);
      continue;
    }
    auto worker = std::move(st.idle.back());
    st.idle.pop_back();
    self->request(worker, caf::infinite, std::move(job))
      .then(
        [self, worker, batch](job_ptr& done) {
          self->state.idle.push_back(worker);
          settle(self, *batch, done->out);
          flush(self);
        },
        [self](caf::error& err) {
          fin_log()->error("commit worker failed: {}",
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
  st.cfg = cfg;
  st.broker = std::move(broker);
  auto probe = factory->connect();
  if (probe->blocking()) {
    for (uint32_t i = 0; i < std::max<uint32_t>(1, cfg.workers); ++i)
      st.idle.push_back(self->spawn<caf::detached + caf::linked>(
        commit_worker, factory, cfg.cancels, cfg.at_checkpoint));
  } else {
    st.inline_store = std::move(probe);
  }
  return {
    [self](finalize_atom, claim_pair& pair) {
      auto rp = self->make_response_promise<finalize_result>();
      enqueue(self, pending_pair{std::move(pair), rp, 0, false});
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
      auto k = key_of(c.queue, c.ticket);
      if (auto i = st.decided.find(k); i != st.decided.end()) {
        rp.deliver(i->second);
        return rp;
      }
      st.cfg.cancels->add(c.queue, c.ticket);
      st.waiting[k].push_back(rp);
      if (st.in_flight.count(k) == 0)
        self->delayed_send(self,
                           std::chrono::milliseconds(st.cfg.cancel_wait_ms),
                           grace_atom_v, k);
      return rp;
    },
    [self](tick_atom) {
      self->state.tick_armed = false;
      flush(self);
    },
    [self](grace_atom, std::string& k) {
      auto& st = self->state;
      if (st.waiting.count(k) == 0)
        return;
      if (st.in_flight.count(k) > 0) {
        // Its pair is being committed right now: the decision will answer.
        return;
      }
      // No pair with this ticket reached us within the bound; the cancel is
      // registered, so a late one is refused at checkpoint 1.
      auto nl = k.find('\n');
      decide(self, k.substr(0, nl), k.substr(nl + 1), cancel_verdict{true, {}});
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
