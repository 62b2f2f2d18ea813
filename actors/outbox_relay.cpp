#include "actors/outbox_relay.hpp"
#include "actors/relay_events.hpp"
#include "actors/relay_workers.hpp"
#include "actors/worker_bound.hpp"

#include <algorithm>
#include <chrono>
#include <deque>
#include <functional>
#include <limits>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "core/clock.hpp"
#include "core/log_limit.hpp"
#include "core/logger.hpp"

#include "persistence/matchdb/match_store.hpp"
#include "persistence/queue/queue_store.hpp"

namespace mm {

namespace {

using namespace relay_detail;

std::shared_ptr<spdlog::logger> relay_log() {
  static auto log = logger("relay");
  return log;
}

/// The relay's own handle type: the public interface plus its timers
/// (`tick_atom, tag`), which nobody else needs to see.
using relay_impl_actor
  = outbox_relay_actor::extend<caf::reacts_to<tick_atom, uint64_t>>;

constexpr uint64_t poll_tag = 0;            ///< the polling timer
constexpr uint64_t next_tag = 1;            ///< the next batch of a cycle
constexpr uint64_t mark_tag = ~uint64_t{0}; ///< the gathered marks are due
// Tags from 2 on name one armed backoff timer each (the latest one counts).

/// How long the relay waits for the directory's answers. The events it did
/// not answer for stay unmarked and go again after their lease; the rest of
/// the batch is marked, so a directory that does not answer stalls nothing.
constexpr auto directory_timeout = std::chrono::seconds(10);

/// One leased batch on its way through sink, directory and mark.
struct batch {
  std::vector<outbox_event> events;
  std::vector<match_event> parsed; ///< one per event
  std::vector<bool> readable;      ///< payload parsed: deliver to sessions
  std::vector<size_t> unsent;      ///< indexes still to XADD
  failure last;                    ///< why the last XADD of one failed
  uint64_t pushes = 0;             ///< pushed messages it holds (0: fetched)
};

using batch_ptr = std::shared_ptr<batch>;

/// A flush waiting for a cycle that started after it arrived, and for the
/// events pushed before it.
struct flush_waiter {
  caf::typed_response_promise<uint32_t> rp;
  uint64_t first_cycle; ///< the first cycle that may answer it
  uint64_t pushes;      ///< pushed messages that must be settled first
  uint32_t delivered = 0;
};

struct relay_state {
  relay_config cfg;
  directory_actor directory;
  std::shared_ptr<match_store> inline_store; ///< non-blocking match store
  match_worker_actor store_worker;           ///< blocking match store
  std::shared_ptr<queue_store> inline_sink;  ///< non-blocking sink
  sink_worker_actor sink_worker;             ///< blocking sink
  bool busy = false;        ///< a batch is on its way (fetched or pushed)
  bool dirty = false;       ///< woken while busy: run one more fetch cycle
  bool fetching = false;    ///< a fetch cycle is running
  uint64_t cycle = 0;       ///< number of the current / last fetch cycle
  uint64_t cycles_done = 0; ///< fetch cycles that found nothing more
  /// Events committed and leased by this node, pushed by its finalizer
  /// (`deliver_atom`): they go out before the next fetch, without one.
  std::deque<std::vector<match_event>> pushed;
  uint64_t pushes_in = 0;   ///< pushed messages received
  uint64_t pushes_done = 0; ///< pushed messages settled
  /// Pushed events delivered and not marked yet (event id, created_at):
  /// marked together (cfg.mark_delay_ms), one mark in flight at a time.
  std::vector<std::pair<std::string, int64_t>> to_mark;
  bool marking = false;
  bool mark_armed = false;
  uint32_t mark_backoff_ms = 0; ///< delay of a failed mark's retry; 0: none
  std::vector<flush_waiter> flushes;
  uint32_t backoff_ms = 0;       ///< current delay; 0: no failure streak
  uint64_t retry_tag = next_tag; ///< tag of the armed backoff timer
  std::function<void()> retry;   ///< what the armed backoff timer resumes
  uint64_t delivered = 0;        ///< since start, for logs
  static inline const char* name = "outbox_relay";
};

using relay_ptr = relay_impl_actor::stateful_pointer<relay_state>;

/// Runs `work` on the match store (inline or on the worker), then `then`.
void with_store(relay_ptr self, std::function<void(match_store&)> work,
                std::function<void()> then) {
  auto& st = self->state;
  if (st.inline_store) {
    work(*st.inline_store);
    then();
    return;
  }
  auto job = std::make_shared<store_job<match_store>>();
  job->work = std::move(work);
  self
    ->request(st.store_worker, worker_bound(st.cfg.worker_timeout_ms),
              std::move(job))
    .then([then](match_job_ptr&) { then(); },
          [self](caf::error& err) {
            MM_LOG_LIMITED(relay_log(), error, "match store worker failed: {}",
                           self->system().render(err));
            self->quit(err);
          });
}

/// Runs `work` on the sink (inline or on the worker), then `then`.
void with_sink(relay_ptr self, std::function<void(queue_store&)> work,
               std::function<void()> then) {
  auto& st = self->state;
  if (st.inline_sink) {
    work(*st.inline_sink);
    then();
    return;
  }
  auto job = std::make_shared<store_job<queue_store>>();
  job->work = std::move(work);
  self
    ->request(st.sink_worker, worker_bound(st.cfg.worker_timeout_ms),
              std::move(job))
    .then([then](sink_job_ptr&) { then(); },
          [self](caf::error& err) {
            MM_LOG_LIMITED(relay_log(), error, "sink worker failed: {}",
                           self->system().render(err));
            self->quit(err);
          });
}

/// A step worked: end the failure streak.
void recovered(relay_ptr self) {
  auto& st = self->state;
  if (st.backoff_ms != 0)
    relay_log()->info("outbox relay recovered");
  st.backoff_ms = 0;
}

/// Counts `n` event deliveries that have to be tried again.
void count_retries(relay_ptr self, size_t n) {
  if (auto& m = self->state.cfg.metrics; m && n > 0)
    m->relay_retries.fetch_add(n, std::memory_order_relaxed);
}

/// A step failed: run `resume` after the next backoff delay. Only the first
/// failure of a streak is logged as an error.
void retry_later(relay_ptr self, const char* what, const failure& f,
                 std::function<void()> resume) {
  auto& st = self->state;
  if (st.backoff_ms == 0) {
    MM_LOG_LIMITED(relay_log(), error,
                   "outbox relay: {} failed ({}: {}); retrying with "
                   "backoff",
                   what, to_string(f.code), f.detail);
    st.backoff_ms = st.cfg.backoff_min_ms;
  } else {
    relay_log()->debug("outbox relay: {} failed again ({}: {})", what,
                       to_string(f.code), f.detail);
    st.backoff_ms = std::min(st.backoff_ms * 2, st.cfg.backoff_max_ms);
  }
  st.retry = std::move(resume);
  self->delayed_send(self, std::chrono::milliseconds(st.backoff_ms),
                     tick_atom_v, ++st.retry_tag);
}

void fetch(relay_ptr self);
void sink(relay_ptr self, batch_ptr b);

/// Answers the flushes whose fetch cycle is done and whose pushed events
/// are settled.
void run_marks(relay_ptr self);

void answer_flushes(relay_ptr self) {
  auto& st = self->state;
  if (!st.to_mark.empty() || st.marking) {
    // A flush answers once what it covers is marked: mark now (unless a
    // failed mark waits out its backoff).
    if (!st.flushes.empty() && st.mark_backoff_ms == 0)
      run_marks(self);
    return;
  }
  auto i = std::stable_partition(
    st.flushes.begin(), st.flushes.end(), [&st](const flush_waiter& w) {
      return w.first_cycle > st.cycles_done || w.pushes > st.pushes_done;
    });
  std::vector<flush_waiter> answer(std::make_move_iterator(i),
                                   std::make_move_iterator(st.flushes.end()));
  st.flushes.erase(i, st.flushes.end());
  for (auto& w : answer)
    w.rp.deliver(w.delivered);
}

void start_cycle(relay_ptr self) {
  auto& st = self->state;
  st.busy = true;
  st.dirty = false;
  st.fetching = true;
  ++st.cycle;
  fetch(self);
}

/// Pushed events as one batch (as many messages as fit `cfg.batch`, at
/// least one): leased by the commit (attempt 1), parsed by the finalizer.
batch_ptr take_pushed(relay_ptr self) {
  auto& st = self->state;
  auto b = std::make_shared<batch>();
  auto now = wall_clock_ms();
  while (!st.pushed.empty()
         && (b->pushes == 0
             || b->events.size() + st.pushed.front().size() <= st.cfg.batch)) {
    for (auto& ev : st.pushed.front()) {
      outbox_event row;
      row.event_id = ev.event_id;
      row.aggregate_id = ev.session_id;
      row.type = ev.type;
      row.payload = ev.payload;
      row.created_at = now;
      row.attempts = 1;
      b->unsent.push_back(b->events.size());
      b->events.push_back(std::move(row));
      b->parsed.push_back(std::move(ev));
      b->readable.push_back(true);
    }
    st.pushed.pop_front();
    ++b->pushes;
  }
  return b;
}

/// What to do once a batch is settled (or when work arrives for an idle
/// relay): pushed events first, then the running fetch cycle, then a fetch
/// cycle somebody asked for meanwhile; else the relay rests.
void step(relay_ptr self) {
  auto& st = self->state;
  st.busy = true;
  if (!st.pushed.empty()) {
    sink(self, take_pushed(self));
    return;
  }
  if (st.fetching) {
    fetch(self);
    return;
  }
  if (st.dirty) {
    start_cycle(self);
    return;
  }
  st.busy = false;
}

/// A wake-up: start a cycle, or make the running one go round once more
/// (it may have fetched before the event that woke us was committed).
void wake(relay_ptr self) {
  auto& st = self->state;
  if (st.busy)
    st.dirty = true;
  else
    start_cycle(self);
}

/// A fetch found nothing more: the cycle is done.
void finish_cycle(relay_ptr self) {
  auto& st = self->state;
  st.fetching = false;
  st.cycles_done = st.cycle;
  answer_flushes(self);
  step(self);
}

void fetch(relay_ptr self) {
  auto res = std::make_shared<outcome<std::vector<outbox_event>>>(errc::none);
  auto cfg = self->state.cfg;
  with_store(
    self,
    [res, cfg](match_store& s) {
      *res = s.fetch_undelivered(cfg.batch, cfg.lease_ms);
    },
    [self, res] {
      if (!*res) {
        retry_later(self, "fetch", res->error(), [self] { fetch(self); });
        return;
      }
      recovered(self);
      auto& evs = **res;
      if (evs.empty()) {
        if (auto& m = self->state.cfg.metrics)
          m->outbox_lag_ms.store(0, std::memory_order_relaxed);
        finish_cycle(self);
        return;
      }
      // Leased before and never marked: a relay (maybe this one) lost it.
      count_retries(self, static_cast<size_t>(std::count_if(
                            evs.begin(), evs.end(), [](const outbox_event& ev) {
                              return ev.attempts > 1;
                            })));
      auto b = std::make_shared<batch>();
      b->events = std::move(evs);
      b->parsed.resize(b->events.size());
      b->readable.resize(b->events.size());
      for (size_t i = 0; i < b->events.size(); ++i) {
        std::string why;
        b->readable[i] = parse_event(b->events[i], b->parsed[i], why);
        if (!b->readable[i])
          MM_LOG_LIMITED(relay_log(), error,
                         "outbox event {} has an unreadable payload "
                         "({}): it goes to the stream only",
                         b->events[i].event_id, why);
        b->unsent.push_back(i);
      }
      sink(self, std::move(b));
    });
}

void mark(relay_ptr self, batch_ptr b, std::vector<size_t> sent);

/// Whether the directory's report `r` for `ev` lets it be marked delivered
/// (logs why not): a user whose node could not be reached, or one the store
/// knows no node for on its first deliveries, leaves it for another one.
bool settled(relay_ptr self, const outbox_event& ev, const delivery_report& r) {
  if (!complete(r)) {
    MM_LOG_LIMITED(relay_log(), warn,
                   "event {} did not reach {} user(s) on a node that "
                   "could not be reached: left for another delivery "
                   "when its lease lapses",
                   ev.event_id, r.failed);
    return false;
  }
  if (r.unrouted > 0 && ev.attempts >= 0
      && static_cast<uint32_t>(ev.attempts)
           <= self->state.cfg.unrouted_attempts) {
    relay_log()->info("event {}: no node known for {} user(s) (attempt {}): "
                      "left for another delivery in case the store forgot "
                      "their node",
                      ev.event_id, r.unrouted, ev.attempts);
    return false;
  }
  return true;
}

/// Hands the XADDed events to the directory, waits for its answers, marks
/// the ones that every user got (or that wait for users connected nowhere).
/// An event whose user's node could not be reached, or that the directory
/// did not answer for, stays unmarked: its lease lapses and it is delivered
/// again (by any relay), never lost.
void deliver(relay_ptr self, batch_ptr b, std::vector<size_t> sent) {
  auto& st = self->state;
  // The readable events go to the directory in ONE message; `at` maps its
  // reports back to the batch.
  std::vector<size_t> at;
  std::vector<match_event> evs;
  if (st.directory)
    for (auto i : sent)
      if (b->readable[i]) {
        at.push_back(i);
        evs.push_back(b->parsed[i]);
      }
  if (at.empty()) {
    mark(self, std::move(b), std::move(sent));
    return;
  }
  // Marks what was sent but for the events flagged in `left`.
  auto mark_but = [self, b, sent](const std::vector<bool>& left) {
    std::vector<size_t> done;
    for (auto i : sent)
      if (!left[i])
        done.push_back(i);
    mark(self, b, std::move(done));
  };
  self->request(st.directory, directory_timeout, deliver_atom_v, std::move(evs))
    .then(
      [self, b, at, mark_but](std::vector<delivery_report>& rs) {
        std::vector<bool> left(b->events.size(), false);
        for (size_t k = 0; k < at.size(); ++k) // unanswered: left too
          left[at[k]] = k >= rs.size()
                        || !settled(self, b->events[at[k]], rs[k]);
        mark_but(left);
      },
      [self, b, at, mark_but](caf::error& err) {
        MM_LOG_LIMITED(relay_log(), warn,
                       "directory did not take {} event(s) ({} .. {}): "
                       "{}; left for another delivery when their lease "
                       "lapses",
                       at.size(), b->events[at.front()].event_id,
                       b->events[at.back()].event_id,
                       self->system().render(err));
        std::vector<bool> left(b->events.size(), false);
        for (auto i : at)
          left[i] = true;
        mark_but(left);
      });
}

void sink(relay_ptr self, batch_ptr b) {
  auto cmds = std::make_shared<std::vector<store_command>>();
  for (auto i : b->unsent)
    cmds->push_back(xadd(self->state.cfg.stream, self->state.cfg.stream_maxlen,
                         b->events[i], b->parsed[i]));
  auto replies = std::make_shared<std::vector<store_reply>>();
  with_sink(
    self, [cmds, replies](queue_store& s) { *replies = s.execute(*cmds); },
    [self, b, replies] {
      std::vector<size_t> sent;
      std::vector<size_t> failed;
      for (size_t k = 0; k < b->unsent.size(); ++k) {
        const store_reply* r = k < replies->size() ? &(*replies)[k] : nullptr;
        if (r != nullptr && r->code == errc::none
            && r->value.type != store_value::kind::error) {
          sent.push_back(b->unsent[k]);
          continue;
        }
        if (failed.empty()) {
          if (r == nullptr)
            b->last = failure{errc::protocol_error, "missing XADD reply"};
          else if (r->code != errc::none)
            b->last = failure{r->code, r->detail};
          else
            b->last = failure{errc::protocol_error, r->value.str};
        }
        failed.push_back(b->unsent[k]);
      }
      count_retries(self, failed.size());
      b->unsent = std::move(failed);
      if (!sent.empty()) {
        // The accepted ones go on now; the rest waits for the backoff.
        deliver(self, b, std::move(sent));
        return;
      }
      retry_later(self, "XADD", b->last, [self, b] { sink(self, b); });
    });
}

/// After `sent` is marked: retry the rest of the batch, or take the next one.
void settle(relay_ptr self, batch_ptr b, size_t sent) {
  auto& st = self->state;
  st.delivered += sent;
  for (auto& w : st.flushes)
    w.delivered += static_cast<uint32_t>(sent);
  if (!b->unsent.empty()) {
    retry_later(self, "XADD", b->last, [self, b] { sink(self, b); });
    return;
  }
  if (b->pushes > 0) {
    st.pushes_done += b->pushes;
    answer_flushes(self);
  }
  // Through the mailbox: lets exits and flushes in between and keeps the
  // inline (non-blocking) path from recursing batch after batch.
  self->send(self, tick_atom_v, next_tag);
}

/// Counts `n` events marked, the oldest created at `oldest` (ms).
void count_marked(relay_ptr self, size_t n, int64_t oldest) {
  if (auto& m = self->state.cfg.metrics; m && n > 0) {
    m->outbox_lag_ms.store(std::max<int64_t>(0, wall_clock_ms() - oldest),
                           std::memory_order_relaxed);
    m->events_delivered.fetch_add(n, std::memory_order_relaxed);
  }
}

/// Marks the gathered pushed events in one statement (one at a time; the
/// ones gathered meanwhile go next). A failure keeps them for the next
/// round; a fetch after their lease would deliver them again anyway.
void run_marks(relay_ptr self) {
  auto& st = self->state;
  if (st.marking || st.to_mark.empty())
    return;
  st.marking = true;
  auto taken = std::make_shared<std::vector<std::pair<std::string, int64_t>>>();
  taken->swap(st.to_mark);
  auto ids = std::make_shared<std::vector<std::string>>();
  for (auto& [id, at] : *taken)
    ids->push_back(id);
  auto res = std::make_shared<outcome<size_t>>(errc::none);
  with_store(
    self, [ids, res](match_store& s) { *res = s.mark_delivered(*ids); },
    [self, taken, res] {
      auto& st = self->state;
      st.marking = false;
      if (!*res) {
        // Tried again with a doubling delay; logged once per failure
        // streak (a database outage fails every round).
        count_retries(self, taken->size());
        if (st.mark_backoff_ms == 0)
          MM_LOG_LIMITED(relay_log(), warn,
                         "outbox relay: marking pushed events delivered "
                         "failed ({}: {}); retrying with backoff",
                         to_string(res->error().code), res->error().detail);
        st.mark_backoff_ms
          = st.mark_backoff_ms == 0
              ? std::max(st.cfg.mark_delay_ms, st.cfg.backoff_min_ms)
              : std::min(st.mark_backoff_ms * 2, st.cfg.backoff_max_ms);
        st.to_mark.insert(st.to_mark.begin(), taken->begin(), taken->end());
        if (!st.mark_armed) {
          st.mark_armed = true;
          self->delayed_send(self,
                             std::chrono::milliseconds(st.mark_backoff_ms),
                             tick_atom_v, mark_tag);
        }
        return;
      }
      if (st.mark_backoff_ms != 0)
        relay_log()->info("outbox relay: marks work again");
      st.mark_backoff_ms = 0;
      int64_t oldest = std::numeric_limits<int64_t>::max();
      for (auto& [id, at] : *taken)
        oldest = std::min(oldest, at);
      count_marked(self, taken->size(), oldest);
      if (st.to_mark.size() >= st.cfg.batch)
        run_marks(self);
      answer_flushes(self);
    });
}

/// A pushed batch's delivered events join the marks to come; the relay
/// goes on with the next batch at once.
void gather_marks(relay_ptr self, batch_ptr b,
                  const std::vector<size_t>& sent) {
  auto& st = self->state;
  for (auto i : sent)
    st.to_mark.emplace_back(b->events[i].event_id, b->events[i].created_at);
  if (st.to_mark.size() >= st.cfg.batch && st.mark_backoff_ms == 0) {
    run_marks(self);
  } else if (!st.mark_armed) {
    st.mark_armed = true;
    self->delayed_send(self, std::chrono::milliseconds(st.cfg.mark_delay_ms),
                       tick_atom_v, mark_tag);
  }
  if (b->unsent.empty())
    recovered(self);
  settle(self, b, sent.size());
}

void mark(relay_ptr self, batch_ptr b, std::vector<size_t> sent) {
  if (b->pushes > 0 && !self->state.inline_store
      && self->state.cfg.mark_delay_ms > 0) {
    gather_marks(self, std::move(b), sent);
    return;
  }
  auto ids = std::make_shared<std::vector<std::string>>();
  for (auto i : sent)
    ids->push_back(b->events[i].event_id);
  auto res = std::make_shared<outcome<size_t>>(errc::none);
  with_store(
    self, [ids, res](match_store& s) { *res = s.mark_delivered(*ids); },
    [self, b, sent, res] {
      if (!*res) {
        count_retries(self, sent.size());
        retry_later(self, "mark delivered", res->error(),
                    [self, b, sent] { mark(self, b, sent); });
        return;
      }
      int64_t oldest = std::numeric_limits<int64_t>::max();
      for (auto i : sent)
        oldest = std::min(oldest, b->events[i].created_at);
      count_marked(self, sent.size(), oldest);
      if (b->unsent.empty()) // else the XADD failure streak goes on
        recovered(self);
      settle(self, b, sent.size());
    });
}

relay_impl_actor::behavior_type
relay_impl(relay_ptr self, std::shared_ptr<match_store> store,
           std::shared_ptr<match_store_factory> factory,
           std::shared_ptr<queue_store> sink_conn, directory_actor directory,
           relay_config cfg) {
  auto& st = self->state;
  st.cfg = cfg;
  st.directory = std::move(directory);
  if (store->blocking()) {
    st.store_worker = self->spawn<caf::detached + caf::linked>(
      store_worker<match_store>, store);
    if (cfg.listen)
      self->spawn<caf::detached + caf::linked>(
        listen_worker, factory, caf::actor_cast<outbox_relay_actor>(self),
        cfg.poll_ms > 0 ? cfg.poll_ms : 1000u);
  } else {
    // Inline: only this actor ever uses the connection.
    st.inline_store = std::move(store);
  }
  if (sink_conn->blocking())
    st.sink_worker = self->spawn<caf::detached + caf::linked>(
      store_worker<queue_store>, sink_conn);
  else
    st.inline_sink = std::move(sink_conn);
  // Whatever was committed before we started.
  self->send(self, tick_atom_v);
  if (cfg.poll_ms > 0)
    self->delayed_send(self, std::chrono::milliseconds(cfg.poll_ms),
                       tick_atom_v, poll_tag);
  return {
    [self](tick_atom) { wake(self); },
    [self](tick_atom, uint64_t tag) {
      auto& st = self->state;
      if (tag == poll_tag) {
        wake(self);
        self->delayed_send(self, std::chrono::milliseconds(st.cfg.poll_ms),
                           tick_atom_v, poll_tag);
      } else if (tag == next_tag) {
        step(self);
      } else if (tag == mark_tag) {
        st.mark_armed = false;
        run_marks(self);
      } else if (tag == st.retry_tag && st.retry) {
        auto resume = std::move(st.retry);
        st.retry = nullptr;
        resume();
      }
    },
    [self](flush_atom) {
      auto& st = self->state;
      auto rp = self->make_response_promise<uint32_t>();
      // Answered by the end of the next fetch cycle to start (now, or after
      // the running one): only that one is sure to see what came before;
      // and once the events pushed before it went out.
      st.flushes.push_back(flush_waiter{rp, st.cycle + 1, st.pushes_in});
      wake(self);
      return rp;
    },
    [self](deliver_atom, std::vector<match_event>& evs) {
      auto& st = self->state;
      if (evs.empty())
        return;
      ++st.pushes_in;
      st.pushed.push_back(std::move(evs));
      if (!st.busy)
        step(self);
    },
  };
}

} // namespace

outbox_relay_actor
spawn_outbox_relay(caf::actor_system& sys,
                   std::shared_ptr<match_store_factory> store,
                   std::shared_ptr<queue_store_factory> sink,
                   directory_actor directory, relay_config cfg) {
  cfg.batch = std::clamp<uint32_t>(cfg.batch, 1, 10000);
  cfg.lease_ms = std::max<uint32_t>(cfg.lease_ms, 1);
  cfg.backoff_min_ms = std::max<uint32_t>(cfg.backoff_min_ms, 1);
  cfg.backoff_max_ms = std::max(cfg.backoff_max_ms, cfg.backoff_min_ms);
  // The first connections are opened here (PostgreSQL connects eagerly:
  // never inside a cooperative actor) and tell inline from worker use.
  std::shared_ptr<match_store> store_conn = store->connect();
  std::shared_ptr<queue_store> sink_conn = sink->connect();
  auto hdl = sys.spawn(relay_impl, std::move(store_conn), std::move(store),
                       std::move(sink_conn), std::move(directory),
                       std::move(cfg));
  return caf::actor_cast<outbox_relay_actor>(hdl);
}

} // namespace mm
