// The PostgreSQL match store's outbox: leasing undelivered events, marking
// them delivered, and waiting for the commit notification (LISTEN).

#include "persistence/matchdb/pg/pg_match_store.hpp"

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include <poll.h>

namespace mm::pg {

outcome<std::vector<outbox_event>>
pg_match_store::do_fetch_undelivered(uint32_t limit, uint32_t lease_ms) {
  auto lim = std::to_string(limit);
  auto lease = std::to_string(lease_ms);
  return run<std::vector<outbox_event>>("fetch undelivered", [&] {
    auto r = exec_prepared(st_fetch, {&lim, &lease});
    must(r, "fetch undelivered");
    std::vector<outbox_event> out;
    const int n = PQntuples(r.get());
    out.reserve(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) {
      outbox_event ev;
      ev.seq = int_of(r.get(), i, 0);
      ev.event_id = text(r.get(), i, 1);
      ev.aggregate_id = text(r.get(), i, 2);
      ev.type = text(r.get(), i, 3);
      ev.payload = text(r.get(), i, 4);
      ev.created_at = int_of(r.get(), i, 5);
      ev.delivered_at = int_of(r.get(), i, 6);
      ev.locked_until = int_of(r.get(), i, 7);
      ev.attempts = static_cast<int32_t>(int_of(r.get(), i, 8));
      out.push_back(std::move(ev));
    }
    // RETURNING has no order.
    std::sort(out.begin(), out.end(),
              [](const auto& x, const auto& y) { return x.seq < y.seq; });
    return outcome<std::vector<outbox_event>>{std::move(out)};
  });
}

outcome<size_t>
pg_match_store::mark_delivered(const std::vector<std::string>& event_ids) {
  // An id the database cannot even hold names no event: skip it.
  std::vector<std::string> ids;
  for (const auto& id : event_ids)
    if (check_id("event id", id).code == errc::none)
      ids.push_back(id);
  if (ids.empty())
    return size_t{0};
  auto arg = binary_array(ids);
  return run<size_t>("mark delivered", [&] {
    auto r = exec_prepared(st_mark, {&arg}, 1);
    must(r, "mark delivered");
    return outcome<size_t>{static_cast<size_t>(int_of(r.get(), 0, 0))};
  });
}

outcome<bool> pg_match_store::wait_for_events(uint32_t timeout_ms) {
  return run<bool>("wait for events", [&] {
    if (!listening_) {
      must(exec(std::string{"LISTEN "} + outbox_channel), "LISTEN");
      listening_ = true;
    }
    using clock = std::chrono::steady_clock;
    auto deadline = clock::now() + std::chrono::milliseconds(timeout_ms);
    for (;;) {
      if (PQconsumeInput(conn_.get()) == 0)
        throw connection_lost{trimmed(PQerrorMessage(conn_.get()))};
      bool got = false;
      while (notify_ptr n{PQnotifies(conn_.get())})
        got = true;
      if (got)
        return outcome<bool>{true};
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    deadline - clock::now())
                    .count();
      if (left <= 0)
        return outcome<bool>{false};
      pollfd pfd{PQsocket(conn_.get()), POLLIN, 0};
      if (pfd.fd < 0)
        throw connection_lost{"no socket"};
      ::poll(&pfd, 1, static_cast<int>(left));
    }
  });
}

} // namespace mm::pg
