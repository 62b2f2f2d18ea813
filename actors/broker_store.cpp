// The queue broker's calls to its store (actors/broker_data.hpp): inline on
// a non-blocking store, else through a pool of detached workers, one
// blocking connection each, the waiting calls pipelined in batches.

#include "actors/broker_data.hpp"
#include "actors/worker_bound.hpp"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "core/logger.hpp"
#include "persistence/queue/group_codec.hpp"

namespace mm::broker_detail {

std::shared_ptr<spdlog::logger> broker_log() {
  static auto log = logger("broker");
  return log;
}

/// Owns one blocking connection; runs one batch at a time.
store_worker_actor::behavior_type
store_worker(store_worker_actor::pointer,
             std::shared_ptr<queue_store_factory> factory) {
  std::shared_ptr<queue_store> store = factory->connect();
  return {
    [store](batch_ptr& b) {
      b->replies = store->run(b->calls);
      return b;
    },
  };
}

void submit(broker_ptr self, script_call call, reply_fn then) {
  auto& st = self->state;
  if (st.inline_store) {
    std::vector<script_call> calls;
    calls.emplace_back(std::move(call));
    auto replies = st.inline_store->run(calls);
    then(replies.front());
    return;
  }
  st.pending.push_back(pending_call{std::move(call), std::move(then), {}});
  dispatch(self);
}

void submit_answer(broker_ptr self, proposal_answer a,
                   std::function<void(outcome<proposal_state>)> out) {
  auto& st = self->state;
  if (auto call = codec::group_answer_call(a); !call) {
    out(call.error());
    return;
  } else if (st.inline_store) {
    submit(self, std::move(*call),
           [a, out](store_reply& r) { out(codec::parse_group_answer(a, r)); });
    return;
  }
  auto& open = st.open_answers[a.queue];
  if (open && open->answers.size() < codec::max_answers) {
    open->answers.emplace_back(std::move(a));
    open->outs.emplace_back(std::move(out));
    return;
  }
  open = std::make_shared<answer_batch>();
  open->answers.emplace_back(std::move(a));
  open->outs.emplace_back(std::move(out));
  auto b = open;
  reply_fn then = [b](store_reply& r) {
    auto all = codec::parse_group_answers(b->answers, r);
    for (size_t i = 0; i < b->outs.size(); ++i)
      b->outs[i](all ? std::move((*all)[i])
                     : outcome<proposal_state>{all.error()});
  };
  st.pending.push_back(pending_call{{}, std::move(then), std::move(b)});
  dispatch(self);
}

void dispatch(broker_ptr self) {
  auto& st = self->state;
  while (!st.idle.empty() && !st.pending.empty()) {
    auto worker = std::move(st.idle.back());
    st.idle.pop_back();
    auto b = std::make_shared<batch>();
    auto n = std::min<size_t>(st.pending.size(), st.cfg.max_batch);
    b->calls.reserve(n);
    b->then.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      auto& p = st.pending.front();
      if (p.answers) {
        // Sealed now: later answers of its queue start a new call.
        auto q = p.answers->answers.front().queue;
        if (auto j = st.open_answers.find(q);
            j != st.open_answers.end() && j->second == p.answers)
          st.open_answers.erase(j);
        auto call = codec::group_answers_call(p.answers->answers);
        // Each answer was checked alone; together they are of one queue.
        p.call = call ? std::move(*call) : script_call{};
      }
      b->calls.emplace_back(std::move(p.call));
      b->then.emplace_back(std::move(p.then));
      st.pending.pop_front();
    }
    self->request(worker, worker_bound(st.cfg.worker_timeout_ms), std::move(b))
      .then(
        [self, worker](batch_ptr& done) {
          self->state.idle.push_back(worker);
          for (size_t i = 0; i < done->then.size(); ++i)
            done->then[i](done->replies[i]);
          dispatch(self);
        },
        [self](caf::error& err) {
          // A worker died: its batch is lost to it, not to the callers.
          broker_log()->error("queue store worker failed: {}",
                              self->system().render(err));
          self->quit(err);
        });
  }
}

} // namespace mm::broker_detail
