#include "app/matchd/jwks_source.hpp"

#include <chrono>
#include <condition_variable>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>
#include <utility>

#include <spdlog/spdlog.h>

#include "app/matchd/http_once.hpp"
#include "core/logger.hpp"

namespace mm {

namespace {

using steady = std::chrono::steady_clock;

std::shared_ptr<spdlog::logger> jwks_log() {
  static auto log = logger("tokens");
  return log;
}

std::string read_file(const std::string& path, std::string& err) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    err = "cannot read " + path;
    return {};
  }
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

/// The set behind a refresher, shared with its thread.
struct jwks_state {
  jwks_options opts;
  std::mutex mtx;
  std::condition_variable cv;
  std::shared_ptr<const jwk_set> set;
  bool stop = false;
  bool missed = false;
  steady::time_point last_fetch;
};

/// Reads the set from its file or URL; null and `err` when unusable.
std::shared_ptr<const jwk_set> load(const jwks_options& o, std::string& err) {
  std::string text;
  if (o.file.empty()) {
    http_once_request req;
    req.url = o.url;
    req.ca_file = o.ca_file;
    req.timeout_ms = o.timeout_ms;
    auto got = http_once(req);
    err = got.error;
    if (err.empty())
      text = std::move(got.body);
  } else {
    text = read_file(o.file, err);
  }
  if (text.empty()) {
    if (err.empty())
      err = "an empty JWK Set";
    return nullptr;
  }
  auto source = o.file.empty() ? o.url : o.file;
  std::vector<std::string> skipped;
  auto set = jwk_set::parse(text, err, &skipped);
  if (set && set->size() == 0) {
    err = "the JWK Set has no RS256 or ES256 key";
    set = nullptr;
  }
  if (!set)
    err = source + ": " + err;
  for (auto& s : skipped)
    jwks_log()->info("JWK Set of {}: skipped {}", source, s);
  return set;
}

void refresh_loop(std::shared_ptr<jwks_state> st) {
  std::unique_lock<std::mutex> lk{st->mtx};
  for (;;) {
    // Due: the periodic read, or the soonest one after a missed kid; the
    // deadline is computed anew after every wake-up (missed() changes it).
    auto due = st->last_fetch + std::chrono::seconds(st->opts.refresh_s);
    if (st->missed)
      due = std::min(due, st->last_fetch
                            + std::chrono::seconds(st->opts.min_refresh_s));
    if (st->stop)
      return;
    if (steady::now() < due) {
      st->cv.wait_until(lk, due);
      continue;
    }
    st->missed = false;
    st->last_fetch = steady::now();
    lk.unlock();
    std::string err;
    auto set = load(st->opts, err);
    lk.lock();
    if (!set) {
      jwks_log()->warn("JWK Set not refreshed (the last one stays): {}", err);
      continue;
    }
    if (set->kids() != st->set->kids()) {
      std::string kids;
      for (auto& k : set->kids())
        kids += (kids.empty() ? "" : ", ") + (k.empty() ? "(no kid)" : k);
      jwks_log()->info("JWK Set refreshed: {} keys ({})", set->size(), kids);
    }
    st->set = std::move(set);
  }
}

class jwks_refresher : public key_source {
 public:
  explicit jwks_refresher(std::shared_ptr<jwks_state> st) : st_(std::move(st)) {
    thread_ = std::thread{refresh_loop, st_};
  }

  ~jwks_refresher() override {
    {
      std::lock_guard<std::mutex> lk{st_->mtx};
      st_->stop = true;
    }
    st_->cv.notify_all();
    thread_.join();
  }

  std::shared_ptr<const jwk_set> current() const override {
    std::lock_guard<std::mutex> lk{st_->mtx};
    return st_->set;
  }

  void missed(const std::string&) const override {
    {
      std::lock_guard<std::mutex> lk{st_->mtx};
      if (st_->missed)
        return;
      st_->missed = true;
    }
    st_->cv.notify_all();
  }

 private:
  std::shared_ptr<jwks_state> st_;
  std::thread thread_;
};

} // namespace

std::shared_ptr<key_source> start_jwks(const jwks_options& opts,
                                       std::string& err) {
  auto st = std::make_shared<jwks_state>();
  st->opts = opts;
  st->set = load(opts, err);
  if (!st->set)
    return nullptr;
  st->last_fetch = steady::now();
  return std::make_shared<jwks_refresher>(std::move(st));
}

} // namespace mm
