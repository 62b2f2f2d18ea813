#include "actors/pair_lock.hpp"
#include "actors/worker_bound.hpp"

#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <unordered_map>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "core/log_limit.hpp"
#include "core/logger.hpp"

#include "persistence/queue/queue_store.hpp"

namespace mm {

namespace {

using reply_fn = std::function<void(store_reply&)>;

/// One store operation of the lock: SET NX PX (a plain command) or the
/// unlock script.
struct store_op {
  std::optional<store_command> command;
  std::optional<script_call> call;
};

/// A pipelined round trip to the worker; the continuations never leave the
/// lock actor.
struct lock_batch {
  std::vector<store_op> ops;
  std::vector<store_reply> replies;
  std::vector<reply_fn> then;
};

using lock_batch_ptr = std::shared_ptr<lock_batch>;

} // namespace

} // namespace mm

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(mm::lock_batch_ptr)

namespace mm {

namespace {

/// The detached worker that owns the lock's blocking connection. Local only
/// (the batch carries continuations), so it needs no type ID.
using lock_worker_actor = caf::typed_actor<
  // Runs the batch's ops in order (see run_ops) and answers the same batch
  // with one reply per op. A batch sent twice runs twice: a SET NX then
  // finds its own key and fails, an unlock finds nothing.
  caf::replies_to<lock_batch_ptr>::with<lock_batch_ptr>>;

std::shared_ptr<spdlog::logger> lock_log() {
  static auto log = logger("pair_lock");
  return log;
}

constexpr size_t max_id = 128;
constexpr size_t max_batch = 256;

bool id_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
         || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == ':'
         || c == '-' || c == '@';
}

std::string check_id(const char* what, const std::string& x) {
  if (x.empty())
    return std::string{what} + " is empty";
  if (x.size() > max_id)
    return std::string{what} + " is longer than " + std::to_string(max_id)
           + " bytes";
  for (char c : x)
    if (!id_char(c))
      return std::string{what} + " has a character outside [A-Za-z0-9._:@-]";
  return {};
}

/// Runs `ops` in order and appends one reply per op to `out`. Consecutive
/// ops of one kind share a round trip; the order across kinds is kept, so an
/// unlock reaches Redis before the SET NX of the waiter it makes way for.
void run_ops(queue_store& store, const std::vector<store_op>& ops,
             std::vector<store_reply>& out) {
  out.clear();
  out.reserve(ops.size());
  size_t i = 0;
  while (i < ops.size()) {
    std::vector<store_reply> part;
    if (ops[i].call) {
      std::vector<script_call> calls;
      for (; i < ops.size() && ops[i].call; ++i)
        calls.push_back(*ops[i].call);
      part = store.run(calls);
    } else {
      std::vector<store_command> cmds;
      for (; i < ops.size() && !ops[i].call; ++i)
        cmds.push_back(*ops[i].command);
      part = store.execute(cmds);
    }
    for (auto& r : part)
      out.push_back(std::move(r));
  }
}

/// Owns one blocking connection; runs one batch at a time.
lock_worker_actor::behavior_type
lock_worker(lock_worker_actor::pointer,
            std::shared_ptr<queue_store_factory> factory) {
  std::shared_ptr<queue_store> store = factory->connect();
  return {
    [store](lock_batch_ptr& b) {
      run_ops(*store, b->ops, b->replies);
      return b;
    },
  };
}

/// A local contender, waiting in its pair's queue.
struct waiter {
  uint64_t id; ///< also the generation of its wait-bound timer
  std::string token;
  caf::strong_actor_ptr requester;
  caf::typed_response_promise<std::string> rp;
};

/// The current holder of a pair on this node.
struct holding {
  uint64_t gen; ///< generation of the lease timer
  std::string token;
  caf::actor_addr holder; ///< invalid for anonymous requests
};

struct pair_entry {
  std::deque<waiter> waiters; ///< FIFO; only the head asks the store
  std::optional<holding> held;
  bool trying = false;      ///< a SET NX for the head is out
  uint64_t retry_gen = 0;   ///< the pending retry timer; 0: none
  std::string last_failure; ///< the head's last store failure
};

struct pair_lock_state {
  pair_lock_config cfg;
  std::unique_ptr<queue_store> inline_store; // non-blocking stores
  lock_worker_actor worker;                  // blocking stores
  bool worker_busy = false;
  std::deque<std::pair<store_op, reply_fn>> pending;
  std::unordered_map<std::string, pair_entry> pairs;
  /// Holders -> the pairs they hold; one monitor per holder.
  std::map<caf::actor_addr, std::set<std::string>> held_by;
  uint64_t next_gen = 0;
  std::mt19937_64 rng;
  static inline const char* name = "pair_lock";
};

using lock_ptr = pair_lock_actor::stateful_pointer<pair_lock_state>;

/// 128 random bits as hex: a holder proves itself with it, and a stale
/// holder cannot guess the next one.
std::string make_token(std::mt19937_64& rng) {
  static constexpr char hex[] = "0123456789abcdef";
  std::string out;
  out.reserve(32);
  for (int i = 0; i < 2; ++i) {
    auto x = rng();
    for (int j = 0; j < 16; ++j, x >>= 4)
      out += hex[x & 0xf];
  }
  return out;
}

std::string redis_key(const pair_lock_state& st, const std::string& key) {
  return st.cfg.prefix + "{" + key + "}";
}

void dispatch(lock_ptr self);

void submit(lock_ptr self, store_op op, reply_fn then) {
  auto& st = self->state;
  if (st.inline_store) {
    std::vector<store_op> ops;
    ops.emplace_back(std::move(op));
    std::vector<store_reply> replies;
    run_ops(*st.inline_store, ops, replies);
    then(replies.front());
    return;
  }
  st.pending.emplace_back(std::move(op), std::move(then));
  dispatch(self);
}

void dispatch(lock_ptr self) {
  auto& st = self->state;
  if (st.worker_busy || st.pending.empty())
    return;
  st.worker_busy = true;
  auto b = std::make_shared<lock_batch>();
  auto n = std::min(st.pending.size(), max_batch);
  for (size_t i = 0; i < n; ++i) {
    b->ops.emplace_back(std::move(st.pending.front().first));
    b->then.emplace_back(std::move(st.pending.front().second));
    st.pending.pop_front();
  }
  self->request(st.worker, worker_bound(st.cfg.worker_timeout_ms), std::move(b))
    .then(
      [self](lock_batch_ptr& done) {
        self->state.worker_busy = false;
        for (size_t i = 0; i < done->then.size(); ++i)
          done->then[i](done->replies[i]);
        dispatch(self);
      },
      [self](caf::error& err) {
        MM_LOG_LIMITED(lock_log(), error, "pair lock store worker failed: {}",
                       self->system().render(err));
        self->quit(err);
      });
}

/// Compare-and-delete in the store: frees the key only while it still holds
/// `token`.
void unlock(lock_ptr self, const std::string& key, const std::string& token) {
  script_call call{script_id::unlock, {redis_key(self->state, key)}, {token}};
  submit(self, store_op{std::nullopt, std::move(call)}, [key](store_reply& r) {
    if (r.code != errc::none)
      MM_LOG_LIMITED(lock_log(), error,
                     "unlock of pair {} failed: {} (its lease "
                     "lapses on its own)",
                     key, r.detail);
    else if (r.value.type == store_value::kind::error)
      MM_LOG_LIMITED(lock_log(), error, "unlock of pair {} failed: {}", key,
                     r.value.str);
  });
}

/// Forgets the holder of `e` (and stops watching it once it holds nothing).
void drop_holding(lock_ptr self, const std::string& key, pair_entry& e) {
  auto& st = self->state;
  if (!e.held)
    return;
  auto& addr = e.held->holder;
  if (addr) {
    auto i = st.held_by.find(addr);
    if (i != st.held_by.end()) {
      i->second.erase(key);
      if (i->second.empty()) {
        self->demonitor(addr);
        st.held_by.erase(i);
      }
    }
  }
  e.held.reset();
}

void on_set_reply(lock_ptr self, const std::string& key, uint64_t id,
                  const std::string& token, caf::actor_clock::time_point sent,
                  store_reply& r);

/// Lets the head of the pair's queue ask the store, unless the pair is held
/// or asked for already. Drops the entry once nothing is left in it.
void advance(lock_ptr self, const std::string& key) {
  auto& st = self->state;
  auto i = st.pairs.find(key);
  if (i == st.pairs.end())
    return;
  auto& e = i->second;
  if (e.held || e.trying)
    return;
  if (e.waiters.empty()) {
    st.pairs.erase(i);
    return;
  }
  e.trying = true;
  e.retry_gen = 0; // a retry timer still pending is moot now
  auto& head = e.waiters.front();
  store_command cmd{"SET",      redis_key(st, key),
                    head.token, "NX",
                    "PX",       std::to_string(st.cfg.lease_ms)};
  submit(self, store_op{std::move(cmd), std::nullopt},
         [self, key, id{head.id}, token{head.token}, sent{self->clock().now()}](
           store_reply& r) { on_set_reply(self, key, id, token, sent, r); });
}

/// Makes the head of `key`'s queue the holder. The local lease counts from
/// when the SET was sent, so it never outlasts the one in Redis.
void grant(lock_ptr self, const std::string& key, pair_entry& e,
           caf::timespan lease_left) {
  auto& st = self->state;
  auto w = std::move(e.waiters.front());
  e.waiters.pop_front();
  e.last_failure.clear();
  holding h{++st.next_gen, w.token,
            caf::actor_cast<caf::actor_addr>(w.requester)};
  if (w.requester) {
    auto& keys = st.held_by[h.holder];
    // A holder that is already gone gets a down message at once.
    if (keys.empty())
      self->monitor(w.requester);
    keys.insert(key);
  }
  self->delayed_send(self, lease_left, tick_atom_v, key, h.gen);
  e.held = std::move(h);
  w.rp.deliver(w.token);
}

void on_set_reply(lock_ptr self, const std::string& key, uint64_t id,
                  const std::string& token, caf::actor_clock::time_point sent,
                  store_reply& r) {
  auto& st = self->state;
  bool ok = r.code == errc::none
            && (r.value.type == store_value::kind::status
                || r.value.type == store_value::kind::string)
            && r.value.str == "OK";
  auto i = st.pairs.find(key);
  if (i == st.pairs.end()) { // cannot happen while `trying` is set
    if (ok)
      unlock(self, key, token);
    return;
  }
  auto& e = i->second;
  e.trying = false;
  if (e.waiters.empty() || e.waiters.front().id != id) {
    // Its waiter gave up while the SET was out: it must never hold the pair.
    if (ok)
      unlock(self, key, token);
    advance(self, key);
    return;
  }
  if (ok) {
    auto elapsed = self->clock().now() - sent;
    auto lease = std::chrono::milliseconds(st.cfg.lease_ms);
    if (elapsed < lease) {
      grant(self, key, e, lease - elapsed);
      return;
    }
    // The answer came after the lease lapsed: another node may hold the
    // pair by now. Give back what may be left and ask again.
    unlock(self, key, token);
  } else if (r.code != errc::none) {
    e.last_failure = r.detail;
  } else if (r.value.type == store_value::kind::error) {
    e.last_failure = r.value.str;
  } else {
    e.last_failure.clear(); // plainly held elsewhere: the store is fine
  }
  // Another node holds the pair (or the store failed): ask again while the
  // waiter's bound allows; its wait-bound timer ends the retries.
  e.retry_gen = ++st.next_gen;
  self->delayed_send(self, std::chrono::milliseconds(st.cfg.retry_ms),
                     tick_atom_v, key, e.retry_gen);
}

pair_lock_actor::behavior_type
pair_lock_impl(lock_ptr self, std::shared_ptr<queue_store_factory> factory,
               pair_lock_config cfg) {
  auto& st = self->state;
  st.cfg = std::move(cfg);
  std::random_device rd;
  std::seed_seq seed{rd(), rd(), rd(), rd(), rd(), rd(), rd(), rd()};
  st.rng.seed(seed);
  auto probe = factory->connect();
  if (probe->blocking())
    st.worker = self->spawn<caf::detached + caf::linked>(lock_worker, factory);
  else
    st.inline_store = std::move(probe);
  self->set_down_handler([self](caf::down_msg& dm) {
    auto& st = self->state;
    auto i = st.held_by.find(dm.source);
    if (i == st.held_by.end())
      return;
    auto keys = std::move(i->second);
    st.held_by.erase(i);
    for (auto& key : keys) {
      auto j = st.pairs.find(key);
      if (j == st.pairs.end() || !j->second.held
          || j->second.held->holder != dm.source)
        continue;
      auto token = std::move(j->second.held->token);
      j->second.held.reset();
      lock_log()->debug("holder of pair {} went down: released", key);
      unlock(self, key, token);
      advance(self, key);
    }
  });
  self->set_default_handler(caf::drop);
  return {
    [self](acquire_atom, std::string& a, std::string& b) {
      // Before the promise: making it takes the sender out of the message.
      auto requester = self->current_sender();
      auto rp = self->make_response_promise<std::string>();
      std::string why;
      auto key = pair_lock_key(a, b, &why);
      if (key.empty()) {
        rp.deliver(caf::make_error(errc::invalid_argument, why));
        return rp;
      }
      auto& st = self->state;
      if (st.cfg.global)
        key = "global";
      waiter w{++st.next_gen, make_token(st.rng), std::move(requester), rp};
      self->delayed_send(self, std::chrono::milliseconds(st.cfg.wait_ms),
                         tick_atom_v, key, w.id);
      st.pairs[key].waiters.emplace_back(std::move(w));
      advance(self, key);
      return rp;
    },
    [self](release_atom, std::string& a, std::string& b, std::string& token) {
      auto key = pair_lock_key(a, b);
      auto& st = self->state;
      if (st.cfg.global && !key.empty())
        key = "global";
      auto i = key.empty() ? st.pairs.end() : st.pairs.find(key);
      if (i == st.pairs.end() || !i->second.held
          || i->second.held->token != token) {
        // Stale (lease lapsed, released before, never granted): the token
        // is not the current one, so nothing is released anywhere.
        return;
      }
      drop_holding(self, key, i->second);
      unlock(self, key, token);
      advance(self, key);
    },
    [self](tick_atom, std::string& key, uint64_t gen) {
      auto& st = self->state;
      auto i = st.pairs.find(key);
      if (i == st.pairs.end())
        return;
      auto& e = i->second;
      if (e.held && e.held->gen == gen) {
        // The holder overran its lease: it no longer holds the pair. Its
        // Redis key lapses now too; deleting it (if still ours) saves the
        // next waiter a retry.
        MM_LOG_LIMITED(lock_log(), warn,
                       "pair {} held longer than its lease of {} ms: "
                       "released",
                       key, st.cfg.lease_ms);
        auto token = e.held->token;
        drop_holding(self, key, e);
        unlock(self, key, token);
        advance(self, key);
        return;
      }
      if (e.retry_gen != 0 && e.retry_gen == gen) {
        e.retry_gen = 0;
        advance(self, key);
        return;
      }
      for (auto w = e.waiters.begin(); w != e.waiters.end(); ++w) {
        if (w->id != gen)
          continue;
        // The wait bound passed: out of the queue, never to hold the pair
        // (a SET still out for it is undone when it answers).
        if (w == e.waiters.begin()) {
          e.retry_gen = 0;
          if (!e.last_failure.empty())
            MM_LOG_LIMITED(lock_log(), error,
                           "pair {}: queue store failing: {}", key,
                           e.last_failure);
          e.last_failure.clear();
        }
        auto rp = std::move(w->rp);
        e.waiters.erase(w);
        rp.deliver(caf::make_error(
          errc::conflict, "could not lock pair " + key + " within "
                            + std::to_string(st.cfg.wait_ms) + " ms; retry"));
        advance(self, key);
        return;
      }
    },
  };
}

} // namespace

std::string pair_lock_key(const std::string& a, const std::string& b,
                          std::string* why) {
  auto fail = [why](std::string what) {
    if (why != nullptr)
      *why = std::move(what);
    return std::string{};
  };
  if (auto err = check_id("first id", a); !err.empty())
    return fail(std::move(err));
  if (auto err = check_id("second id", b); !err.empty())
    return fail(std::move(err));
  if (a == b)
    return fail("cannot lock a pair of '" + a + "' with itself");
  // One key per unordered pair: "a locks b" and "b locks a" are one lock.
  // (Ids may contain ':', so two pairs can share a key; that only
  // serializes them more than needed.)
  return a < b ? a + ":" + b : b + ":" + a;
}

pair_lock_actor spawn_pair_lock(caf::actor_system& sys,
                                std::shared_ptr<queue_store_factory> store,
                                pair_lock_config cfg) {
  return sys.spawn(pair_lock_impl, std::move(store), std::move(cfg));
}

} // namespace mm
