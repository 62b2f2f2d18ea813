#include "actors/swipe.hpp"
#include "actors/worker_bound.hpp"

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "core/logger.hpp"
#include "persistence/matchdb/match_store.hpp"
#include "persistence/queue/queue_codec.hpp"

namespace mm {

namespace {

/// One swipe's database step, on its way through a worker and back.
struct swipe_job {
  swipe_request req;
  outcome<swipe_record> result{errc::none};
};

using swipe_job_ptr = std::shared_ptr<swipe_job>;

} // namespace

} // namespace mm

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(mm::swipe_job_ptr)

namespace mm {

namespace {

/// A detached worker of the pool; owns one blocking database connection.
/// Local only, so it needs no type ID.
using swipe_worker_actor = caf::typed_actor<
  // Records the job's swipe (match_store::record_swipe) and answers the same
  // job with the record or the store's failure. Idempotent: the same swipe
  // again changes nothing.
  caf::replies_to<swipe_job_ptr>::with<swipe_job_ptr>>;

/// Owns one blocking connection; records one swipe at a time.
swipe_worker_actor::behavior_type
swipe_worker(swipe_worker_actor::pointer,
             std::shared_ptr<match_store_factory> factory) {
  std::shared_ptr<match_store> store = factory->connect();
  return {
    [store](swipe_job_ptr& job) {
      job->result = store->record_swipe(job->req.from, job->req.to,
                                        job->req.like);
      return job;
    },
  };
}

struct swipe_state {
  std::shared_ptr<engine_metrics> metrics;
  uint32_t worker_timeout_ms = 0;
  pair_lock_actor lock;
  finalizer_actor finalizer;
  std::unique_ptr<match_store> inline_store;
  std::vector<swipe_worker_actor> workers;
  size_t next = 0;
  static inline const char* name = "swipe";
};

using swipe_ptr = swipe_actor::stateful_pointer<swipe_state>;

std::shared_ptr<spdlog::logger> swipe_log() {
  static auto log = logger("swipe");
  return log;
}
using result_promise = caf::typed_response_promise<swipe_result>;

/// The same id rules as queue users, so a user id works in both.
std::string check_user(const char* what, const std::string& id) {
  ticket_spec probe;
  probe.queue = "q";
  probe.user = id;
  probe.ticket = "t";
  probe.node = "n";
  auto err = codec::check_spec(probe);
  return err.empty() ? err : std::string{what} + ": " + err;
}

/// Releases the pair's lock, then answers.
void finish(swipe_ptr self, const swipe_request& req, const std::string& token,
            result_promise rp, caf::expected<swipe_result> res) {
  self->send(self->state.lock, release_atom_v, req.from, req.to, token);
  if (res)
    rp.deliver(std::move(*res));
  else
    rp.deliver(std::move(res.error()));
}

/// The critical section, holding the lock: decide, and create the match.
void decide(swipe_ptr self, swipe_request req, std::string token,
            result_promise rp, swipe_record rec) {
  if (!req.like || !rec.opposite_like) {
    finish(self, req, token, rp, swipe_result{false, {}, false});
    return;
  }
  if (rec.matched) {
    finish(self, req, token, rp, swipe_result{true, rec.session_id, false});
    return;
  }
  auto pair = mutual_pair{std::min(req.from, req.to),
                          std::max(req.from, req.to)};
  self->request(self->state.finalizer, caf::infinite, finalize_atom_v, pair)
    .then(
      [self, req, token, rp](finalize_result& r) {
        finish(self, req, token, rp,
               swipe_result{true, r.session_id, r.detail == "created"});
      },
      [self, req, token, rp](caf::error& err) {
        finish(self, req, token, rp, std::move(err));
      });
}

void record(swipe_ptr self, swipe_request req, std::string token,
            result_promise rp) {
  auto& st = self->state;
  auto on_done = [self, req, token, rp](outcome<swipe_record>& r) mutable {
    if (!r)
      finish(self, req, token, rp, to_error(r.error()));
    else
      decide(self, std::move(req), std::move(token), rp, std::move(*r));
  };
  if (st.inline_store) {
    auto r = st.inline_store->record_swipe(req.from, req.to, req.like);
    on_done(r);
    return;
  }
  auto job = std::make_shared<swipe_job>();
  job->req = req;
  auto& worker = st.workers[st.next++ % st.workers.size()];
  self->request(worker, worker_bound(st.worker_timeout_ms), std::move(job))
    .then([on_done](swipe_job_ptr& done) mutable { on_done(done->result); },
          [self, req, token, rp](caf::error& err) {
            bool stuck = err == caf::sec::request_timeout;
            finish(self, req, token, rp, std::move(err));
            if (stuck) {
              // The worker is still inside its store call: every later job
              // on it would wait too. Stop loudly (the engine goes down).
              swipe_log()->critical("database worker stuck: no answer within "
                                    "{} ms",
                                    self->state.worker_timeout_ms);
              self->quit(caf::sec::request_timeout);
            }
          });
}

swipe_actor::behavior_type
swipe_impl(swipe_ptr self, std::shared_ptr<match_store_factory> factory,
           pair_lock_actor lock, finalizer_actor finalizer, swipe_config cfg) {
  auto& st = self->state;
  st.metrics = cfg.metrics;
  st.worker_timeout_ms = cfg.worker_timeout_ms;
  st.lock = std::move(lock);
  st.finalizer = std::move(finalizer);
  auto probe = factory->connect();
  if (probe->blocking()) {
    for (uint32_t i = 0; i < std::max<uint32_t>(1, cfg.workers); ++i)
      st.workers.push_back(
        self->spawn<caf::detached + caf::linked>(swipe_worker, factory));
  } else {
    st.inline_store = std::move(probe);
  }
  return {
    [self](swipe_atom, swipe_request& req) {
      auto rp = self->make_response_promise<swipe_result>();
      std::string err;
      if (!(err = check_user("from", req.from)).empty()
          || !(err = check_user("to", req.to)).empty()) {
        rp.deliver(caf::make_error(errc::invalid_argument, err));
        return rp;
      }
      if (req.from == req.to) {
        rp.deliver(caf::make_error(errc::invalid_argument,
                                   "a user cannot swipe on itself"));
        return rp;
      }
      // Nothing is written before the lock is ours: a swipe that cannot get
      // it within the bound fails with `conflict` and changes nothing.
      self
        ->request(self->state.lock, caf::infinite, acquire_atom_v, req.from,
                  req.to)
        .then(
          [self, req, rp](std::string& token) {
            record(self, req, std::move(token), rp);
          },
          [self, rp](caf::error& err) mutable {
            auto& m = self->state.metrics;
            if (m && err.category() == caf::atom("mm")
                && err.code() == static_cast<uint8_t>(errc::conflict))
              m->conflicts.fetch_add(1,
                                     std::memory_order_relaxed); // wait bound
            rp.deliver(std::move(err));
          });
      return rp;
    },
  };
}

} // namespace

swipe_actor
spawn_swipe(caf::actor_system& sys, std::shared_ptr<match_store_factory> store,
            pair_lock_actor lock, finalizer_actor finalizer, swipe_config cfg) {
  return sys.spawn(swipe_impl, std::move(store), std::move(lock),
                   std::move(finalizer), cfg);
}

} // namespace mm
