#include "actors/queue_broker.hpp"
#include "actors/broker_data.hpp"

#include <algorithm>
#include <functional>
#include <optional>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "core/log_limit.hpp"
#include "persistence/queue/group_codec.hpp"
#include "persistence/queue/queue_codec.hpp"
#include "persistence/queue/queue_store.hpp"

namespace mm {

namespace {

using namespace broker_detail;

template <class T>
using sink = std::function<void(outcome<T>)>;

/// Logs a store outage, rate-limited: during one every call of every user
/// fails.
void log_failure(const failure& f) {
  if (f.code != errc::store_unavailable)
    return;
  static log_limit limit{5, std::chrono::seconds(10)};
  uint64_t suppressed = 0;
  if (limit.admit(suppressed)) {
    if (suppressed > 0)
      broker_log()->error("{} similar queue store failures not logged",
                          suppressed);
    broker_log()->error("queue store unavailable: {}", f.detail);
  }
}

/// Runs `call` and hands the parsed reply to `out`.
template <class T>
void run_parsed(broker_ptr self, outcome<script_call> call,
                outcome<T> (*parse)(const store_reply&), sink<T> out) {
  if (!call) {
    out(call.error());
    return;
  }
  submit(self, std::move(*call), [parse, out](store_reply& r) {
    auto res = parse(r);
    if (!res)
      log_failure(res.error());
    out(std::move(res));
  });
}

void publish_known(broker_ptr self) {
  if (auto& m = self->state.cfg.metrics)
    m->queues_known.store(self->state.queues.size(), std::memory_order_relaxed);
}

/// Makes `q` known (or refreshes it) for a join; refuses, changing
/// nothing, a queue outside `cfg.queues` (when that list is not empty) or
/// one more queue than `cfg.max_queues` (when it is). A re-scan (`join ==
/// false`) is never refused: its ticket exists; it only refreshes a known
/// queue or takes a free place.
std::optional<failure> admit(broker_ptr self, const std::string& q, bool join) {
  auto& st = self->state;
  auto& allowed = st.cfg.queues;
  auto now = self->clock().now();
  if (auto i = st.queues.find(q); i != st.queues.end()) {
    i->second.last_join = now;
    return std::nullopt;
  }
  if (!allowed.empty()) {
    if (std::find(allowed.begin(), allowed.end(), q) == allowed.end()) {
      if (!join)
        return std::nullopt;
      return failure{errc::unknown_queue, "unknown queue '" + q + "'"};
    }
  } else if (st.queues.size() >= std::max<uint32_t>(1, st.cfg.max_queues)) {
    if (!join)
      return std::nullopt;
    if (!st.warned_full) // once per full spell: clients may retry a lot
      MM_LOG_LIMITED(broker_log(), warn,
                     "joins of new queues refused ('{}' first): {} "
                     "queues known (max_queues)",
                     q, st.queues.size());
    st.warned_full = true;
    return failure{errc::too_many_queues, "this node serves at most "
                                            + std::to_string(st.cfg.max_queues)
                                            + " queues at once; '" + q
                                            + "' is not one of them"};
  }
  st.queues.emplace(q, known_queue{now});
  publish_known(self);
  return std::nullopt;
}

/// Counts one claim script that answered and the stale tickets it removed.
void count_claim(broker_ptr self, uint32_t stale_removed) {
  if (auto& m = self->state.cfg.metrics) {
    m->claims.fetch_add(1, std::memory_order_relaxed);
    m->stale_removed.fetch_add(stale_removed, std::memory_order_relaxed);
  }
}

/// The candidates a claim of `spec` looks at. A queue with rules looks at
/// more: its index already leaves out every incompatible cell
/// (docs/rules.md).
uint32_t scan_of(const broker_config& cfg, const ticket_spec& spec) {
  return spec.rules.empty() ? cfg.scan : std::max(cfg.scan, cfg.rule_scan);
}

/// Claim-or-enqueue with bounded rescans after stale-only windows (problem 3
/// of docs/design.md).
void claim(broker_ptr self, ticket_spec spec, bool rescan, uint32_t scans,
           uint32_t stale, sink<claim_result> out) {
  auto& cfg = self->state.cfg;
  auto call = codec::claim_call(spec, scan_of(cfg, spec), cfg.hold_ms, rescan);
  if (!call) {
    out(call.error());
    return;
  }
  // Only well-formed requests count towards the bound; the broker's own
  // follow-up scans (scans > 0) were admitted with their first call.
  if (scans == 0) {
    if (auto f = admit(self, spec.queue, !rescan)) {
      out(std::move(*f));
      return;
    }
  }
  submit(self, std::move(*call),
         [self, spec{std::move(spec)}, scans, stale,
          out{std::move(out)}](store_reply& r) mutable {
           auto res = codec::parse_claim(r);
           if (!res) {
             out(std::move(res));
             return;
           }
           count_claim(self, res->stale_removed);
           res->scans = scans + 1;
           res->stale_removed += stale;
           if (res->outcome == claim_outcome::queued && res->more
               && res->scans <= self->state.cfg.max_rescans) {
             // Our ticket now waits: rescan as a waiter, so that if it is
             // claimed meanwhile we never claim a second partner.
             claim(self, std::move(spec), true, res->scans, res->stale_removed,
                   std::move(out));
             return;
           }
           out(std::move(res));
         });
}

/// A party's claim-or-enqueue on a queue with a shape, with bounded
/// rescans after stale-only windows, as `claim` (problem 3, docs/groups.md).
void group_claim(broker_ptr self, group_ticket_spec spec, uint32_t scans,
                 uint32_t stale, sink<group_claim_result> out) {
  auto& cfg = self->state.cfg;
  auto scan = std::max(cfg.scan, cfg.group_scan);
  auto call = codec::group_claim_call(spec, scan, cfg.hold_ms);
  if (!call) {
    out(call.error());
    return;
  }
  if (scans == 0) {
    if (auto f = admit(self, spec.queue, true)) {
      out(std::move(*f));
      return;
    }
  }
  submit(self, std::move(*call),
         [self, spec{std::move(spec)}, scans, stale,
          out{std::move(out)}](store_reply& r) mutable {
           auto res = codec::parse_group_claim(r);
           if (!res) {
             out(std::move(res));
             return;
           }
           count_claim(self, res->stale_removed);
           res->stale_removed += stale;
           if (res->outcome == group_claim_outcome::queued && res->more
               && scans + 1 <= self->state.cfg.max_rescans) {
             group_claim(self, std::move(spec), scans + 1, res->stale_removed,
                         std::move(out));
             return;
           }
           out(std::move(res));
         });
}

template <class T>
sink<T> deliver_to(caf::typed_response_promise<T> rp) {
  return [rp](outcome<T> res) mutable {
    if (res)
      rp.deliver(std::move(*res));
    else
      rp.deliver(to_error(res.error()));
  };
}

/// After the last sweep call of a known queue: forgets it when it held no
/// ticket and got no join for `queue_idle_ms`, else records its depth.
void settle_known(broker_ptr self, const std::string& queue,
                  const sweep_result& res) {
  auto& st = self->state;
  auto i = st.queues.find(queue);
  if (i == st.queues.end())
    return; // an explicit sweep of a queue we do not know: no label
  auto& m = st.cfg.metrics;
  auto idle_for = self->clock().now() - i->second.last_join;
  if (st.cfg.queue_idle_ms > 0 && res.tracked == 0
      && idle_for >= std::chrono::milliseconds(st.cfg.queue_idle_ms)) {
    st.queues.erase(i);
    st.warned_full = false;
    if (m) {
      m->drop_queue_depth(queue);
      // Open mode: a forgotten name must not keep a histogram (declared
      // queues are a fixed list and keep theirs).
      if (st.cfg.queues.empty())
        m->drop_time_to_match(queue);
    }
    publish_known(self);
    return;
  }
  if (m)
    m->set_queue_depth(queue, res.depth);
}

/// Sweeps `queue` until a call reports nothing more (bounded); the last
/// call's depth is the queue's depth.
void sweep(broker_ptr self, std::string queue, uint32_t removed,
           uint32_t rounds, sink<sweep_result> out) {
  auto call = codec::sweep_call(queue, self->state.cfg.sweep_batch);
  run_parsed<sweep_result>(
    self, std::move(call), codec::parse_sweep,
    [self, queue, removed, rounds, out](outcome<sweep_result> res) {
      if (!res) {
        out(std::move(res));
        return;
      }
      auto& m = self->state.cfg.metrics;
      if (m)
        m->stale_removed.fetch_add(res->removed, std::memory_order_relaxed);
      res->removed += removed;
      if (res->more && rounds < 100) {
        sweep(self, queue, res->removed, rounds + 1, out);
        return;
      }
      settle_known(self, queue, *res);
      out(std::move(res));
    });
}

/// Arms the heartbeat timer for the roster's next due time unless one
/// that fires no later is armed.
void arm_beat(broker_ptr self) {
  auto& st = self->state;
  auto next = st.waiters.next_due();
  if (!next || (st.beat_at && *st.beat_at <= *next))
    return;
  st.beat_at = next;
  auto now = self->clock().now();
  self->delayed_send(self, *next > now ? *next - now : caf::timespan{0},
                     heartbeat_atom_v);
}

/// Where the answer of a roster's re-scan goes: to its session when it
/// changes something; the roster's timer re-armed.
sink<claim_result> settle_rescan(broker_ptr self, uint64_t id, uint64_t gen,
                                 int64_t sent_ns) {
  return [self, id, gen, sent_ns](outcome<claim_result> res) {
    auto v = self->state.waiters.settle(id, gen, res ? &*res : nullptr,
                                        self->clock().now());
    if (v.tell)
      self->send(caf::actor_cast<session_actor>(v.session), rescan_atom_v, gen,
                 sent_ns, std::move(*res));
    if (!v.keep && v.session)
      self->demonitor(caf::actor_cast<caf::actor_addr>(v.session));
    arm_beat(self);
  };
}

/// Re-scans `due` (tickets of one queue) in one rescan call; each answer
/// is settled as a claim's with `rescan` would be, a stale-only window
/// followed up by a claim of its own (problem 3).
void rescan(broker_ptr self, std::vector<waiter_roster::scan> due,
            int64_t sent_ns) {
  auto& cfg = self->state.cfg;
  std::vector<codec::rescan_item> items;
  items.reserve(due.size());
  for (auto& s : due)
    items.push_back({s.spec.get(), scan_of(cfg, *s.spec)});
  auto call = codec::rescan_call(items, cfg.hold_ms);
  admit(self, due.front().spec->queue, false); // never refused: it refreshes
  if (!call) {
    for (auto& s : due)
      settle_rescan(self, s.id, s.gen, sent_ns)(call.error());
    return;
  }
  submit(self, std::move(*call),
         [self, due{std::move(due)}, sent_ns](store_reply& r) {
           auto all = codec::parse_rescan(r, due.size());
           if (!all)
             log_failure(all.error());
           for (size_t i = 0; i < due.size(); ++i) {
             auto out = settle_rescan(self, due[i].id, due[i].gen, sent_ns);
             auto res = all ? std::move((*all)[i])
                            : outcome<claim_result>{all.error()};
             if (res) {
               count_claim(self, res->stale_removed);
               res->scans = 1;
             }
             if (res && res->outcome == claim_outcome::queued && res->more
                 && self->state.cfg.max_rescans >= 1)
               claim(self, *due[i].spec, true, 1, res->stale_removed,
                     std::move(out));
             else
               out(std::move(res));
           }
         });
}

/// The heartbeats due now: a re-scan each (it refreshes the presence
/// deadline and pairs a live waiter beside it, problem 4), those of one
/// queue together in rescan calls of up to `cfg.rescan_batch` tickets; an
/// answer that changes something goes to its session.
void beat(broker_ptr self) {
  auto& st = self->state;
  auto now = self->clock().now();
  if (st.beat_at && *st.beat_at <= now)
    st.beat_at.reset();
  auto sent_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                   now.time_since_epoch())
                   .count();
  auto per_call = std::clamp<size_t>(st.cfg.rescan_batch, 1,
                                     codec::max_rescans);
  for (auto& group : st.waiters.take_due_by_queue(now, per_call))
    rescan(self, std::move(group), sent_ns);
  arm_beat(self);
}

queue_broker_actor::behavior_type
broker_impl(broker_ptr self, std::shared_ptr<queue_store_factory> factory,
            broker_config cfg) {
  auto& st = self->state;
  st.cfg = cfg;
  auto probe = factory->connect();
  if (probe->blocking()) {
    for (uint32_t i = 0; i < std::max<uint32_t>(1, cfg.workers); ++i)
      st.idle.push_back(
        self->spawn<caf::detached + caf::linked>(store_worker, factory));
  } else {
    st.inline_store = std::move(probe);
  }
  if (cfg.sweep_interval_ms > 0)
    self->delayed_send(self, std::chrono::milliseconds(cfg.sweep_interval_ms),
                       tick_atom_v);
  self->set_default_handler(caf::drop);
  // A session gone while its ticket waited: its heartbeats stop, so the
  // ticket lapses at its deadline as a dead waiter's must (I2).
  self->set_down_handler(
    [self](caf::down_msg& m) { self->state.waiters.unwatch(m.source.id()); });
  return {
    [self](enqueue_atom, ticket_spec& spec) {
      auto rp = self->make_response_promise<enqueue_result>();
      auto call = codec::enqueue_call(spec);
      if (!call) {
        rp.deliver(to_error(call.error()));
        return rp;
      }
      if (auto f = admit(self, spec.queue, true)) {
        rp.deliver(to_error(*f));
        return rp;
      }
      run_parsed<enqueue_result>(self, std::move(call), codec::parse_enqueue,
                                 deliver_to(rp));
      return rp;
    },
    [self](claim_atom, ticket_spec& spec) {
      auto rp = self->make_response_promise<claim_result>();
      claim(self, std::move(spec), false, 0, 0, deliver_to(rp));
      return rp;
    },
    [self](claim_atom, std::vector<ticket_spec>& specs) {
      auto rp = self->make_response_promise<std::vector<claim_result>>();
      struct gather {
        std::vector<claim_result> results;
        size_t open;
        caf::error first_error;
      };
      auto g = std::make_shared<gather>();
      g->results.resize(specs.size());
      g->open = specs.size();
      if (specs.empty()) {
        rp.deliver(std::vector<claim_result>{});
        return rp;
      }
      for (size_t i = 0; i < specs.size(); ++i)
        claim(self, std::move(specs[i]), false, 0, 0,
              [g, i, rp](outcome<claim_result> res) mutable {
                if (res)
                  g->results[i] = std::move(*res);
                else if (!g->first_error)
                  g->first_error = to_error(res.error());
                if (--g->open == 0) {
                  if (g->first_error)
                    rp.deliver(std::move(g->first_error));
                  else
                    rp.deliver(std::move(g->results));
                }
              });
      return rp;
    },
    [self](claim_atom, group_ticket_spec& spec) {
      auto rp = self->make_response_promise<group_claim_result>();
      group_claim(self, std::move(spec), 0, 0, deliver_to(rp));
      return rp;
    },
    [self](cancel_atom, group_leave& x) {
      auto rp = self->make_response_promise<group_cancel_result>();
      run_parsed<group_cancel_result>(
        self, codec::group_cancel_call(x.queue, x.user, x.token),
        codec::parse_group_cancel, deliver_to(rp));
      return rp;
    },
    [self](cancel_atom, backfill_ref& x) {
      auto rp = self->make_response_promise<group_cancel_result>();
      auto call = codec::backfill_cancel_call(x.queue, x.session_id);
      if (!call) {
        rp.deliver(to_error(call.error()));
        return rp;
      }
      submit(self, std::move(*call), [rp, x](store_reply& r) mutable {
        deliver_to(rp)(codec::parse_backfill_cancel(x.session_id, r));
      });
      return rp;
    },
    [self](release_atom, group_ref& g) {
      auto rp = self->make_response_promise<group_settle_result>();
      run_parsed<group_settle_result>(
        self, codec::group_release_call(g.queue, g.group),
        codec::parse_group_settle, deliver_to(rp));
      return rp;
    },
    [self](requeue_atom, group_ref& g, std::vector<std::string>& leaving) {
      auto rp = self->make_response_promise<group_settle_result>();
      run_parsed<group_settle_result>(
        self, codec::group_requeue_call(g.queue, g.group, leaving),
        codec::parse_group_settle, deliver_to(rp));
      return rp;
    },
    [self](answer_atom, proposal_answer& a) {
      auto rp = self->make_response_promise<proposal_state>();
      submit_answer(self, std::move(a), deliver_to(rp));
      return rp;
    },
    [self](decide_atom, std::string& queue, std::vector<std::string>& groups) {
      using decisions = std::vector<proposal_decision>;
      auto rp = self->make_response_promise<decisions>();
      auto call = codec::group_decide_call(queue, groups);
      if (!call) {
        rp.deliver(to_error(call.error()));
        return rp;
      }
      submit(self, std::move(*call), [rp, groups](store_reply& r) mutable {
        deliver_to(rp)(codec::parse_group_decide(groups, r));
      });
      return rp;
    },
    [self](watch_atom, uint64_t gen, ticket_spec& spec, int64_t first_at_ms,
           uint32_t period_ms, uint32_t align_ms) {
      auto who = self->current_sender();
      // A spec the store would refuse never beats: in a call of a queue's
      // tickets it would fail the others too.
      if (!who || !codec::check_spec(spec).empty())
        return;
      waiter_roster::waiter w{who, gen, nullptr, period_ms, align_ms, {}};
      w.spec = std::make_shared<const ticket_spec>(std::move(spec));
      auto due
        = waiter_roster::time_point{std::chrono::milliseconds(first_at_ms)};
      if (self->state.waiters.watch(who->id(), std::move(w), due))
        self->monitor(who);
      arm_beat(self);
    },
    [self](unwatch_atom) {
      if (auto who = self->current_sender())
        if (auto gone = self->state.waiters.unwatch(who->id()))
          self->demonitor(caf::actor_cast<caf::actor_addr>(gone));
    },
    [self](heartbeat_atom) { beat(self); },
    [self](rescan_atom, ticket_spec& spec) {
      auto rp = self->make_response_promise<claim_result>();
      claim(self, std::move(spec), true, 0, 0, deliver_to(rp));
      return rp;
    },
    [self](cancel_atom, ticket_ref& ref) {
      auto rp = self->make_response_promise<cancel_result>();
      run_parsed<cancel_result>(self, codec::cancel_call(ref),
                                codec::parse_cancel, deliver_to(rp));
      return rp;
    },
    [self](heartbeat_atom, ticket_ref& ref, uint32_t ttl_ms) {
      auto rp = self->make_response_promise<heartbeat_result>();
      run_parsed<heartbeat_result>(self, codec::heartbeat_call(ref, ttl_ms),
                                   codec::parse_heartbeat, deliver_to(rp));
      return rp;
    },
    [self](requeue_atom, std::string& queue, std::string& ticket) {
      auto rp = self->make_response_promise<requeue_result>();
      run_parsed<requeue_result>(
        self, codec::requeue_call(queue, ticket), codec::parse_requeue,
        [self, out{deliver_to(rp)}](outcome<requeue_result> res) {
          // Only a waiter really put back counts (not "waiting" again).
          auto& m = self->state.cfg.metrics;
          if (m && res && res->outcome == requeue_outcome::requeued)
            m->requeues.fetch_add(1, std::memory_order_relaxed);
          out(std::move(res));
        });
      return rp;
    },
    [self](release_atom, std::string& queue, std::string& ticket) {
      auto rp = self->make_response_promise<release_result>();
      run_parsed<release_result>(self, codec::release_call(queue, ticket),
                                 codec::parse_release, deliver_to(rp));
      return rp;
    },
    [self](release_atom, std::string& queue,
           std::vector<std::string>& tickets) {
      auto rp = self->make_response_promise<std::vector<release_result>>();
      auto call = codec::release_call(queue, tickets);
      if (!call) {
        rp.deliver(to_error(call.error()));
        return rp;
      }
      auto out = deliver_to(rp);
      submit(self, std::move(*call),
             [tickets{std::move(tickets)}, out](store_reply& r) mutable {
               out(codec::parse_release(r, tickets));
             });
      return rp;
    },
    [self](tick_atom) {
      // By name: a sweep may forget its queue (inline stores: at once).
      std::vector<std::string> names;
      names.reserve(self->state.queues.size());
      for (auto& kv : self->state.queues)
        names.push_back(kv.first);
      for (auto& q : names)
        sweep(self, q, 0, 0, [](outcome<sweep_result>) {});
      self->delayed_send(
        self, std::chrono::milliseconds(self->state.cfg.sweep_interval_ms),
        tick_atom_v);
    },
    [self](sweep_atom, std::string& queue) {
      auto rp = self->make_response_promise<sweep_result>();
      sweep(self, std::move(queue), 0, 0, deliver_to(rp));
      return rp;
    },
  };
}

} // namespace

queue_broker_actor
spawn_queue_broker(caf::actor_system& sys,
                   std::shared_ptr<queue_store_factory> store,
                   broker_config cfg) {
  return sys.spawn(broker_impl, std::move(store), cfg);
}

} // namespace mm
