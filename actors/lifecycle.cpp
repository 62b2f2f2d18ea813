#include "actors/lifecycle.hpp"

#include <algorithm>
#include <functional>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "core/log_limit.hpp"
#include "core/logger.hpp"
#include "persistence/matchdb/match_store.hpp"

namespace mm {

namespace {

std::shared_ptr<spdlog::logger> lc_log() {
  static auto log = logger("lifecycle");
  return log;
}

/// One database call on its way through the worker and back: `run` executes
/// on the worker's thread, `done` back in the actor.
struct lc_job {
  std::function<void(match_store&)> run;
};

using lc_job_ptr = std::shared_ptr<lc_job>;

} // namespace

} // namespace mm

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(mm::lc_job_ptr)

namespace mm {

namespace {

/// The detached worker that owns the blocking connection. Local only (the
/// job carries a closure), so it needs no type ID.
using lc_worker_actor = caf::typed_actor<
  // Runs the job's call and answers the same job. A job sent twice runs
  // twice; every call it makes is idempotent except pruning's counts.
  caf::replies_to<lc_job_ptr>::with<lc_job_ptr>>;

lc_worker_actor::behavior_type lc_worker(lc_worker_actor::pointer,
                                         std::shared_ptr<match_store> store) {
  return {
    [store](lc_job_ptr& job) {
      job->run(*store);
      return job;
    },
  };
}

using lookup_promise = caf::typed_response_promise<std::string>;

using end_promise = caf::typed_response_promise<end_result>;

struct lc_state {
  lifecycle_config cfg;
  std::shared_ptr<match_store> inline_store; // non-blocking stores
  lc_worker_actor worker;                    // blocking stores: ends, sweeps
  /// Blocking stores: the in-session checks of joins, on their own
  /// connection so that an end or a sweep never holds a join up.
  lc_worker_actor lookup_worker;
  /// In-session checks waiting for the running batch to finish: every
  /// batch takes all of them (one worker round trip for many joins).
  std::vector<std::pair<std::string, lookup_promise>> lookups;
  bool lookup_running = false;
  bool lookup_armed = false; ///< the gathering window is open
  /// Ends waiting for the running batch of ends to commit: every batch
  /// takes up to `cfg.batch` of them in one transaction (one WAL flush for
  /// many ends, as the finalizer's group commit does for matches).
  std::vector<std::pair<end_request, end_promise>> ends;
  bool ends_running = false;
  bool sweeping = false;
  /// When the sweep maintains the outbox's partitions next.
  std::chrono::steady_clock::time_point partitions_due;
  bool sweep_failing = false; // log a failing sweep once, not every period
  static inline const char* name = "lifecycle";
};

/// The lifecycle actor with its own timer (the lookups' gathering window),
/// which nobody else needs to see.
using lc_impl_actor
  = lifecycle_actor::extend<caf::reacts_to<tick_atom, uint64_t>>;

using lc_ptr = lc_impl_actor::stateful_pointer<lc_state>;

/// Runs `call` against the store (inline or on the worker), then `done` in
/// the actor; `failed` when the worker did not answer in time.
void with_store(lc_ptr self, std::function<void(match_store&)> call,
                std::function<void()> done,
                std::function<void(const caf::error&)> failed,
                bool lookup = false) {
  auto& st = self->state;
  if (st.inline_store) {
    call(*st.inline_store);
    done();
    return;
  }
  auto job = std::make_shared<lc_job>(lc_job{std::move(call)});
  self
    ->request(lookup ? st.lookup_worker : st.worker,
              std::chrono::milliseconds(st.cfg.call_timeout_ms), std::move(job))
    .then([done](lc_job_ptr&) { done(); },
          [failed](caf::error& err) { failed(err); });
}

caf::error as_error(const failure& f) {
  return to_error(f);
}

void count_ended(lc_ptr self, size_t n) {
  auto& st = self->state;
  if (n == 0)
    return;
  if (st.cfg.metrics)
    st.cfg.metrics->sessions_ended.fetch_add(n, std::memory_order_relaxed);
  if (st.cfg.relay)
    self->send(st.cfg.relay, tick_atom_v);
}

void sweep_done(lc_ptr self, const std::string& what, const failure& err) {
  auto& st = self->state;
  st.sweeping = false;
  if (err.code != errc::none) {
    if (!st.sweep_failing)
      MM_LOG_LIMITED(lc_log(), warn, "session sweep: {} failed: {} ({})", what,
                     to_string(err.code), err.detail);
    st.sweep_failing = true;
  } else if (st.sweep_failing) {
    lc_log()->info("session sweep works again");
    st.sweep_failing = false;
  }
}

/// The failure handler of a batched store call: every request of the batch
/// is told the database did not answer, then `finish` runs.
template <class Batch, class Finish>
auto answer_unavailable(std::shared_ptr<Batch> batch, Finish finish) {
  return [batch, finish](const caf::error&) {
    for (auto& entry : *batch)
      entry.second.deliver(caf::make_error(
        errc::store_unavailable, "the database did not answer in time"));
    finish();
  };
}

/// Answers every waiting in-session check in one worker round trip, then
/// the ones that arrived meanwhile.
void run_lookups(lc_ptr self) {
  auto& st = self->state;
  if (st.lookup_running || st.lookups.empty() || st.lookup_armed)
    return;
  st.lookup_running = true;
  auto batch
    = std::make_shared<std::vector<std::pair<std::string, lookup_promise>>>();
  batch->swap(st.lookups);
  auto res
    = std::make_shared<std::vector<outcome<std::optional<match_record>>>>();
  std::vector<std::string> users;
  for (auto& entry : *batch)
    users.push_back(entry.first);
  auto finish = [self] {
    self->state.lookup_running = false;
    run_lookups(self);
  };
  with_store(
    self,
    // One statement for the whole batch, not one transaction per join.
    [res, users](match_store& s) { *res = s.active_sessions_of(users); },
    [batch, res, finish] {
      for (size_t i = 0; i < batch->size(); ++i) {
        auto& rp = (*batch)[i].second;
        auto& r = (*res)[i];
        if (!r)
          rp.deliver(as_error(r.error()));
        else
          rp.deliver(*r ? (*r)->session_id : std::string{});
      }
      finish();
    },
    answer_unavailable(batch, finish), true);
}

/// Ends the waiting sessions in one store call (one transaction), up to
/// `cfg.batch` at a time, then the ones that arrived meanwhile.
void run_ends(lc_ptr self) {
  auto& st = self->state;
  if (st.ends_running || st.ends.empty())
    return;
  st.ends_running = true;
  auto batch
    = std::make_shared<std::vector<std::pair<end_request, end_promise>>>();
  auto n = std::min<size_t>(st.ends.size(), st.cfg.batch);
  batch->assign(std::make_move_iterator(st.ends.begin()),
                std::make_move_iterator(st.ends.begin() + n));
  st.ends.erase(st.ends.begin(), st.ends.begin() + n);
  auto reqs = std::make_shared<std::vector<end_request>>();
  for (auto& entry : *batch)
    reqs->push_back(entry.first);
  auto res = std::make_shared<std::vector<outcome<end_record>>>();
  auto finish = [self] {
    self->state.ends_running = false;
    run_ends(self);
  };
  with_store(
    self, [reqs, res](match_store& s) { *res = s.end_sessions(*reqs); },
    [self, batch, res, finish] {
      size_t ended = 0;
      for (size_t i = 0; i < batch->size(); ++i) {
        auto& rp = (*batch)[i].second;
        if (i >= res->size()) {
          rp.deliver(caf::make_error(errc::protocol_error,
                                     "the store did not answer this end"));
          continue;
        }
        auto& r = (*res)[i];
        if (!r) {
          rp.deliver(as_error(r.error()));
          continue;
        }
        if (r->ended_now)
          ++ended;
        if (r->ended_now && !r->session.group.empty()
            && self->state.cfg.on_member_left) // its backfill ends too
          self->state.cfg.on_member_left(r->session.session_id, {});
        rp.deliver(end_result{r->session.session_id, r->session.queue,
                              r->ended_by, r->reason, r->ended_now});
      }
      count_ended(self, ended);
      finish();
    },
    answer_unavailable(batch, finish));
}

/// Seconds of the config as the store's milliseconds (saturated).
uint32_t ms_of(uint32_t seconds) {
  return static_cast<uint32_t>(
    std::min<uint64_t>(uint64_t{seconds} * 1000, UINT32_MAX));
}

/// Expiry and prune statements one sweep runs at most of each (a statement
/// takes up to `batch` rows of a kind): bounds a sweep's time on the worker.
constexpr uint32_t max_sweep_rounds = 50;

/// How often the sweep maintains the outbox's partitions.
std::chrono::milliseconds partition_period(const lifecycle_config& cfg) {
  uint64_t quarter = uint64_t{cfg.partition_s} * 1000 / 4;
  return std::chrono::milliseconds(
    std::max<uint64_t>(1, std::min<uint64_t>(cfg.partition_check_ms, quarter)));
}

/// One sweep: maintain the outbox's partitions when due, end the sessions
/// past `max_session_s`, then prune.
void sweep(lc_ptr self) {
  auto& st = self->state;
  if (st.sweeping
      || (st.cfg.max_session_s == 0 && st.cfg.retention_s == 0
          && st.cfg.partition_s == 0))
    return;
  st.sweeping = true;
  struct result {
    size_t ended = 0;
    size_t pruned = 0;
    partition_report parts;
    failure err;
    std::string what;
  };
  auto res = std::make_shared<result>();
  auto cfg = st.cfg;
  bool maintain = false;
  if (cfg.partition_s > 0) {
    auto now = std::chrono::steady_clock::now();
    if (now >= st.partitions_due) {
      maintain = true;
      st.partitions_due = now + partition_period(cfg);
    }
  }
  with_store(
    self,
    [res, cfg, maintain](match_store& s) {
      if (maintain) {
        auto parts = s.maintain_partitions(cfg.partition_s, cfg.retention_s,
                                           cfg.partition_ahead);
        if (!parts) {
          res->err = parts.error();
          res->what = "partition maintenance";
          return;
        }
        res->parts = *parts;
      }
      if (cfg.max_session_s > 0) {
        // As pruning below: until a batch comes back short.
        for (uint32_t round = 0; round < max_sweep_rounds; ++round) {
          auto ended = s.expire_sessions(ms_of(cfg.max_session_s), cfg.batch);
          if (!ended) {
            res->err = ended.error();
            res->what = "expiry";
            return;
          }
          res->ended += ended->size();
          if (ended->size() < cfg.batch)
            break;
        }
      }
      if (cfg.retention_s > 0) {
        // Until a batch comes back short: one batch a tick falls behind as
        // soon as more rows a second are written than a batch holds.
        for (uint32_t round = 0; round < max_sweep_rounds; ++round) {
          auto pruned = s.prune(ms_of(cfg.retention_s), cfg.batch);
          if (!pruned) {
            res->err = pruned.error();
            res->what = "pruning";
            return;
          }
          res->pruned += pruned->outbox + pruned->sessions;
          if (pruned->outbox < cfg.batch && pruned->sessions < cfg.batch)
            break;
        }
      }
    },
    [self, res] {
      count_ended(self, res->ended);
      if (auto& m = self->state.cfg.metrics) {
        m->rows_pruned.fetch_add(res->pruned, std::memory_order_relaxed);
        m->partitions_dropped.fetch_add(res->parts.dropped,
                                        std::memory_order_relaxed);
      }
      if (res->parts.created + res->parts.dropped > 0)
        lc_log()->info("outbox partitions: {} created, {} dropped, {} old "
                       "kept for undelivered events, {} now",
                       res->parts.created, res->parts.dropped, res->parts.kept,
                       res->parts.partitions);
      sweep_done(self, res->what, res->err);
    },
    [self](const caf::error& err) {
      sweep_done(self, "the database call",
                 failure{errc::store_unavailable, self->system().render(err)});
    });
}

lc_impl_actor::behavior_type
lifecycle_impl(lc_ptr self, std::shared_ptr<match_store> store,
               std::shared_ptr<match_store> lookup_store,
               lifecycle_config cfg) {
  auto& st = self->state;
  st.cfg = std::move(cfg);
  if (store->blocking()) {
    st.worker = self->spawn<caf::detached + caf::linked>(lc_worker,
                                                         std::move(store));
    st.lookup_worker = self->spawn<caf::detached + caf::linked>(
      lc_worker, std::move(lookup_store));
  } else
    st.inline_store = std::move(store); // inline: only this actor uses it
  if (st.cfg.sweep_ms > 0)
    self->delayed_send(self, std::chrono::milliseconds(st.cfg.sweep_ms),
                       tick_atom_v);
  return {
    [self](end_atom, std::string& session_id, std::string& user,
           std::string& reason) -> caf::result<end_result> {
      auto rp = self->make_response_promise<end_result>();
      self->state.ends.emplace_back(
        end_request{std::move(session_id), std::move(user), std::move(reason)},
        rp);
      run_ends(self);
      return rp;
    },
    [self](leave_atom, std::string& session_id, std::string& user,
           std::string& reason) -> caf::result<leave_result> {
      auto rp = self->make_response_promise<leave_result>();
      auto res = std::make_shared<outcome<leave_record>>(
        failure{errc::protocol_error, "the store did not answer"});
      with_store(
        self,
        [res, session_id, user, reason](match_store& s) {
          *res = s.leave_session(session_id, user, reason);
        },
        [self, res, rp, user]() mutable {
          if (!*res) {
            rp.deliver(as_error(res->error()));
            return;
          }
          auto& r = **res;
          leave_result out{r.session.session_id,
                           r.session.queue,
                           user,
                           0,
                           r.left_now,
                           r.session.status != session_status::active};
          for (auto& m : r.session.members)
            out.remaining += m.active ? 1 : 0;
          if (r.left_now && self->state.cfg.relay)
            self->send(self->state.cfg.relay, tick_atom_v); // tell them now
          if (r.left_now && !r.ended_now && !r.session.group.empty()
              && self->state.cfg.on_member_left)
            self->state.cfg.on_member_left(r.session.session_id,
                                           r.session.queue);
          count_ended(self, r.ended_now ? 1 : 0);
          rp.deliver(std::move(out));
        },
        [rp](const caf::error& err) mutable { rp.deliver(err); });
      return rp;
    },
    [self](state_atom, std::string& user) -> caf::result<std::string> {
      auto& st = self->state;
      if (st.cfg.database_down
          && st.cfg.database_down->load(std::memory_order_relaxed))
        return caf::make_error(errc::store_unavailable,
                               "the database is unavailable");
      auto rp = self->make_response_promise<std::string>();
      st.lookups.emplace_back(std::move(user), rp);
      if (st.lookups.size() == 1 && !st.lookup_running && !st.inline_store
          && st.cfg.lookup_delay_ms > 0) {
        // The first of a batch: the ones of the next moments join it.
        st.lookup_armed = true;
        self->delayed_send(self,
                           std::chrono::milliseconds(st.cfg.lookup_delay_ms),
                           tick_atom_v, uint64_t{0});
        return rp;
      }
      run_lookups(self);
      return rp;
    },
    [self](tick_atom, uint64_t) {
      self->state.lookup_armed = false;
      run_lookups(self);
    },
    [self](tick_atom) {
      sweep(self);
      auto& st = self->state;
      // Only the timer re-arms itself: a tick from a test adds no timer.
      if (st.cfg.sweep_ms > 0 && self->current_sender() == self->ctrl())
        self->delayed_send(self, std::chrono::milliseconds(st.cfg.sweep_ms),
                           tick_atom_v);
    },
  };
}

} // namespace

lifecycle_actor spawn_lifecycle(caf::actor_system& sys,
                                std::shared_ptr<match_store_factory> store,
                                lifecycle_config cfg) {
  cfg.batch = std::clamp<uint32_t>(cfg.batch, 1, 10000);
  cfg.call_timeout_ms = std::max<uint32_t>(cfg.call_timeout_ms, 1);
  std::shared_ptr<match_store> conn = store->connect();
  std::shared_ptr<match_store> lookup_conn;
  if (conn->blocking())
    lookup_conn = store->connect();
  return caf::actor_cast<lifecycle_actor>(sys.spawn(
    lifecycle_impl, std::move(conn), std::move(lookup_conn), std::move(cfg)));
}

} // namespace mm
