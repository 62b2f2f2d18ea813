// The node gateway's store workers (interface in actors/gateway_store.hpp).

#include "actors/gateway_store.hpp"

#include <caf/all.hpp>

namespace mm {

outcome<std::optional<match_record>> look_up(match_store& conn,
                                             const gw_lookup& x) {
  return x.by_session ? conn.find_session(x.key)
                      : conn.active_session_of(x.key);
}

queue_worker_actor::behavior_type
queue_worker(queue_worker_actor::pointer, std::shared_ptr<queue_store> conn) {
  return {
    [conn](gw_queue_job_ptr& job) {
      job->replies = conn->run(job->calls);
      return job;
    },
  };
}

match_worker_actor::behavior_type
match_worker(match_worker_actor::pointer, std::shared_ptr<match_store> conn) {
  return {
    [conn](gw_match_job_ptr& job) {
      for (auto& x : job->lookups)
        job->found.push_back(look_up(*conn, x));
      return job;
    },
  };
}

} // namespace mm
