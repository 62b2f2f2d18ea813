// `matchctl load` (app/matchctl/load.hpp), the driver: one io thread per
// shard of the virtual users, pacing their start and ending the run; then
// the checker and the report over what they observed (with --cycles, the
// session ledger the shards share).

#include "app/matchctl/load.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <memory>
#include <thread>

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include "app/matchctl/load/report.hpp"
#include "app/matchctl/load/virtual_users.hpp"

namespace mm {

namespace {

using namespace mm::load;

std::atomic<int> interrupts{0};

extern "C" void on_interrupt(int) {
  // The second Ctrl-C means "now": no report.
  if (interrupts.fetch_add(1) >= 1)
    std::_Exit(130);
}

/// How long the final GETs may take all together.
constexpr std::chrono::milliseconds final_timeout = request_timeout;

/// How long before the run's end a session must have ended for the checker
/// to expect both its session.ended events (--cycles).
constexpr int64_t cycle_grace_us = 2000000;

/// The users of one io thread: every `count`-th user starting at `id`, with
/// their own io_context and share of rate and concurrency. It paces their
/// start, notices the end (all done, --duration, a stall, Ctrl-C), lets the
/// last events settle and then asks about everyone still open.
class shard {
 public:
  shard(const load_options& opts, shared_state& st,
        std::vector<user_record>& recs, unsigned id, unsigned count,
        const std::vector<http_endpoint>& endpoints, session_ledger* ledger)
    : opts_(opts), st_(st),
      users_(opts, st, recs, id, count, io_, endpoints, ledger,
             [this] {
               try_start();
               check_finished();
             }),
      tick_(io_), settle_(io_) {
    rate_ = opts.rate / count;
    concurrency_ = std::max<std::size_t>(1, opts.concurrency / count);
  }

  /// The thread body. Not idempotent.
  void run() {
    asio::post(io_, [this] {
      try_start();
      if (!starting_over_)
        arm_tick();
    });
    // A throwing handler must not take the whole run down with it.
    for (;;) {
      try {
        io_.run();
        return;
      } catch (const std::exception& e) {
        std::cerr << "\nmatchctl load: internal error: " << e.what() << "\n";
        users_.errors["internal_error"]++;
      }
    }
  }

  /// Stops starting users and checks the rest now. Thread-safe; idempotent.
  void interrupt() {
    asio::post(io_, [this] {
      if (users_.finishing())
        return;
      end_starting();
      begin_final();
    });
  }

  /// What the users saw besides their records; read it once `run` ended.
  const virtual_users& users() const noexcept {
    return users_;
  }

 private:
  // -- pacing ---------------------------------------------------------------

  void arm_tick() {
    // Fine-grained while pacing; otherwise only to notice --duration.
    tick_.expires_after(rate_ > 0 ? std::chrono::milliseconds(1)
                                  : std::chrono::milliseconds(50));
    tick_.async_wait([this](const error_code& ec) {
      if (ec || starting_over_)
        return;
      try_start();
      if (!starting_over_)
        arm_tick();
    });
  }

  void try_start() {
    if (starting_over_)
      return;
    auto now = st_.now_us();
    if (interrupts.load() > 0
        || (opts_.duration_s > 0 && now >= opts_.duration_s * 1e6)) {
      end_starting();
      return;
    }
    // Every slot taken by a user that never finishes (a server that stopped
    // answering) would block the run forever: give up starting instead.
    if (users_.in_progress() >= concurrency_ && next_ < users_.size()
        && now - users_.last_done_us()
             > std::max<int64_t>(opts_.settle_ms, 1000) * 1000) {
      users_.count_error("stalled");
      end_starting();
      return;
    }
    uint64_t allowed = UINT64_MAX;
    if (rate_ > 0)
      allowed = static_cast<uint64_t>(rate_ * (now / 1e6)) + 1;
    while (next_ < users_.size() && users_.in_progress() < concurrency_
           && started_ < allowed) {
      users_.start(users_.global(next_++));
      started_++;
    }
    if (next_ >= users_.size())
      end_starting();
  }

  void end_starting() {
    if (starting_over_)
      return;
    starting_over_ = true;
    starting_over_us_ = st_.now_us();
    tick_.cancel();
    arm_settle();
    check_finished();
  }

  void arm_settle() {
    auto deadline = std::max(users_.last_join_us(), starting_over_us_)
                    + opts_.settle_ms * 1000;
    settle_.expires_at(st_.start + std::chrono::microseconds(deadline));
    settle_.async_wait([this](const error_code& ec) {
      if (ec || users_.finishing())
        return;
      // A join sent after the timer was armed moves the deadline.
      auto deadline = std::max(users_.last_join_us(), starting_over_us_)
                      + opts_.settle_ms * 1000;
      if (st_.now_us() < deadline)
        return arm_settle();
      begin_final();
    });
  }

  void check_finished() {
    if (starting_over_ && users_.in_progress() == 0 && !users_.finishing())
      begin_final();
  }

  // -- the end --------------------------------------------------------------

  void begin_final() {
    if (users_.finishing())
      return;
    tick_.cancel();
    settle_.cancel();
    final_pending_ = users_.begin_final([this] {
      if (--final_pending_ == 0)
        grace();
    });
    if (final_pending_ == 0)
      return close_all();
    // Answers that take longer than a request may are not coming.
    settle_.expires_after(final_timeout + std::chrono::seconds(1));
    settle_.async_wait([this](const error_code& ec) {
      if (!ec && final_pending_ > 0)
        close_all();
    });
  }

  void grace() {
    if (closed_)
      return;
    // Events racing the last GETs still count.
    settle_.expires_after(std::chrono::milliseconds(
      std::min<int64_t>(1000, std::max<int64_t>(opts_.settle_ms, 0))));
    settle_.async_wait([this](const error_code&) { close_all(); });
  }

  void close_all() {
    if (closed_)
      return;
    closed_ = true;
    settle_.cancel();
    users_.close_all();
  }

  const load_options& opts_;
  shared_state& st_;
  asio::io_context io_{1}; // before users_: their sockets and timers use it
  virtual_users users_;
  asio::steady_timer tick_;
  asio::steady_timer settle_;
  std::size_t next_ = 0;
  std::size_t concurrency_ = 1;
  uint64_t started_ = 0;
  double rate_ = 0;
  int64_t starting_over_us_ = 0;
  std::size_t final_pending_ = 0;
  bool starting_over_ = false;
  bool closed_ = false;
};

void draw_progress(const shared_state& st, const load_options& opts) {
  auto elapsed = st.now_us() / 1e6;
  char cycles[48] = "";
  if (opts.cycles > 1)
    std::snprintf(cycles, sizeof(cycles), "cycles %llu  ",
                  static_cast<unsigned long long>(st.cycles.load()));
  std::fprintf(stderr,
               "\rstarted %llu/%zu  done %llu  matched %llu  %serrors %llu  "
               "%.1fs   ",
               static_cast<unsigned long long>(st.started.load()), opts.users,
               static_cast<unsigned long long>(st.done.load()),
               static_cast<unsigned long long>(st.matched.load()), cycles,
               static_cast<unsigned long long>(st.errors.load()), elapsed);
  std::fflush(stderr);
}

/// Adds one shard's samples and times to the run's.
void merge_samples(run_extras& run, const virtual_users& u) {
  auto append = [](std::vector<double>& to, const std::vector<double>& from) {
    to.insert(to.end(), from.begin(), from.end());
  };
  append(run.connect_ms, u.connect_ms);
  append(run.join_ms, u.join_ms);
  append(run.match_ms, u.match_ms);
  if (u.first_join_us >= 0
      && (run.first_join_us < 0 || u.first_join_us < run.first_join_us))
    run.first_join_us = u.first_join_us;
  run.last_event_us = std::max(run.last_event_us, u.last_event_us);
  run.last_cycle_us = std::max(run.last_cycle_us, u.last_cycle_us);
}

} // namespace

bool resolve_urls(const std::vector<http_url>& urls,
                  std::vector<http_endpoint>& out) {
  asio::io_context resolver_io;
  for (auto& u : urls) {
    http_endpoint ep;
    std::string err;
    if (!resolve_endpoint(resolver_io, u, ep, err)) {
      std::cerr << "matchctl load: " << err << "\n";
      return false;
    }
    out.push_back(std::move(ep));
  }
  return true;
}

int run_load(const load_options& opts) {
  shared_state st;
  std::vector<user_record> recs(opts.users);
  unsigned threads = std::max(1u, opts.threads);

  std::vector<http_endpoint> endpoints;
  if (!resolve_urls(opts.urls, endpoints))
    return 1;

  // Only --cycles needs the sessions in flight across users.
  session_ledger ledger;
  auto* ledger_ptr = opts.cycles > 1 ? &ledger : nullptr;
  std::vector<std::unique_ptr<shard>> shards;
  for (unsigned s = 0; s < threads; ++s)
    shards.push_back(std::make_unique<shard>(opts, st, recs, s, threads,
                                             endpoints, ledger_ptr));

  interrupts = 0;
  auto old_int = std::signal(SIGINT, on_interrupt);
  auto old_term = std::signal(SIGTERM, on_interrupt);

  st.start = clock_type::now();
  std::atomic<unsigned> running{threads};
  std::vector<std::thread> pool;
  for (auto& s : shards)
    pool.emplace_back([&running, sp = s.get()] {
      sp->run();
      running--;
    });
  bool interrupted = false;
  while (running.load() > 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    if (interrupts.load() > 0 && !interrupted) {
      interrupted = true;
      for (auto& s : shards)
        s->interrupt();
    }
    if (opts.progress)
      draw_progress(st, opts);
  }
  for (auto& t : pool)
    t.join();
  auto end_us = st.now_us();
  auto duration_s = end_us / 1e6;
  std::signal(SIGINT, old_int);
  std::signal(SIGTERM, old_term);
  if (opts.progress) {
    draw_progress(st, opts);
    std::fputc('\n', stderr);
  }

  // -- merge, check, report ---------------------------------------------------

  run_extras run;
  run.duration_s = duration_s;
  run.ok_answers = st.ok_answers.load();
  for (auto& s : shards) {
    auto& u = s->users();
    for (auto& [k, v] : u.errors)
      run.errors[k] += v;
    run.extras.insert(run.extras.end(), u.extras.begin(), u.extras.end());
    run.duplicates += u.duplicate_events;
    merge_samples(run, u);
  }
  run.sessions_seen = ledger.sessions();
  run.sessions_ended = ledger.sessions_ended();
  // A session that ended just before the run did may have its last
  // session.ended event still on the way: it is not judged.
  auto checked = ledger_ptr != nullptr
                   ? check_cycles(recs, ledger, end_us, cycle_grace_us)
                   : check_records(recs, run.extras);
  auto summary = summarize(opts, recs, run);
  print_report(std::cout, opts, recs, run, summary, checked);
  if (!opts.json_file.empty()
      && !write_json(opts.json_file, opts, run, summary, checked)) {
    std::cerr << "matchctl load: cannot write " << opts.json_file << "\n";
    return 1;
  }
  if (run.ok_answers == 0 && summary.joins_refused == 0)
    return 1; // nothing answered at all: most likely no server there
  if (std::string(checked.verdict()) != "ok")
    return 2; // an invariant broke
  // The invariants held, but a run whose joins the node refused is no
  // success for an operator or a script.
  return summary.availability < opts.min_availability ? 3 : 0;
}

} // namespace mm
