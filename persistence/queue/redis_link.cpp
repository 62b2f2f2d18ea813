// One hiredis connection: every batch pipelined in one round trip
// (docs/benchmarks-history.md, "One broker pipelining atomic claims"). The
// function library of lua/ is loaded once per connection (FUNCTION LOAD) and
// its functions run with FCALL; a "Function not found" reply (FUNCTION FLUSH,
// a restarted Redis) loads it again, a dropped connection reconnects and
// re-sends the calls whose replies were not received yet.

#include "persistence/queue/redis_link.hpp"

#include "core/log_limit.hpp"
#include "core/logger.hpp"
#include "persistence/queue/redis_reply.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <thread>
#include <utility>

#include <pthread.h>
#include <sys/time.h>

#include <hiredis/hiredis.h>
#include <spdlog/spdlog.h>

namespace mm {

namespace {

struct reply_deleter {
  void operator()(redisReply* r) const noexcept {
    if (r != nullptr)
      freeReplyObject(r);
  }
};
using reply_ptr = std::unique_ptr<redisReply, reply_deleter>;

/// Defaults used when an option is 0: a zero timeout would mean "wait
/// forever" for hiredis reads, and the store must never block forever.
constexpr uint32_t default_connect_timeout_ms = 2000;
constexpr uint32_t default_command_timeout_ms = 5000;

/// How often one batch loads the library again after "Function not found"
/// before it hands the error to the caller as an ordinary error reply.
constexpr int max_reload_rounds = 3;

timeval to_timeval(uint32_t ms, uint32_t fallback_ms) {
  if (ms == 0)
    ms = fallback_ms;
  timeval tv;
  tv.tv_sec = static_cast<time_t>(ms / 1000);
  tv.tv_usec = static_cast<suseconds_t>((ms % 1000) * 1000);
  return tv;
}

std::shared_ptr<spdlog::logger> store_logger() {
  return logger("queue_store");
}

/// Converts a hiredis reply; returns false for a reply type it does not know.
bool convert(const redisReply& r, store_value& v) {
  switch (r.type) {
    case REDIS_REPLY_INTEGER:
      v.type = store_value::kind::integer;
      v.integer = static_cast<int64_t>(r.integer);
      return true;
    case REDIS_REPLY_STRING:
      v.type = store_value::kind::string;
      v.str.assign(r.str, r.len);
      return true;
    case REDIS_REPLY_STATUS:
      v.type = store_value::kind::status;
      v.str.assign(r.str, r.len);
      return true;
    case REDIS_REPLY_ERROR:
      v.type = store_value::kind::error;
      v.str.assign(r.str, r.len);
      return true;
    case REDIS_REPLY_NIL:
      v.type = store_value::kind::nil;
      return true;
    case REDIS_REPLY_ARRAY:
      v.type = store_value::kind::array;
      v.elements.resize(r.elements);
      for (size_t i = 0; i < r.elements; ++i) {
        if (r.element[i] == nullptr || !convert(*r.element[i], v.elements[i]))
          return false;
      }
      return true;
    default:
      return false;
  }
}

/// The server does not know the function: its library is not loaded there.
bool is_missing_function(const redisReply& r) {
  static constexpr char text[] = "ERR Function not found";
  return r.type == REDIS_REPLY_ERROR && r.len >= sizeof(text) - 1
         && std::memcmp(r.str, text, sizeof(text) - 1) == 0;
}

/// Checks a request before it is sent; fills `out` and returns false when
/// it cannot be sent at all.
bool valid(const link_request& req, store_reply& out) {
  if (req.call != nullptr) {
    if (static_cast<size_t>(req.call->script) >= script_count) {
      out.code = errc::invalid_argument;
      out.detail = "unknown script id "
                   + std::to_string(static_cast<size_t>(req.call->script));
      return false;
    }
    return true;
  }
  if (req.command == nullptr || req.command->empty()) {
    // An empty multibulk gets no reply from Redis and would shift every
    // later reply of the pipeline.
    out.code = errc::invalid_argument;
    out.detail = "empty command";
    return false;
  }
  return true;
}

} // namespace

store_reply to_store_reply(const redisReply& r) {
  store_reply out;
  if (!convert(r, out.value)) {
    out.value = store_value{};
    out.code = errc::protocol_error;
    out.detail = "redis answered a reply of unknown type "
                 + std::to_string(r.type);
  }
  return out;
}

outcome<bool> check_functions(redis_link& link) {
  store_command cmd{"FUNCTION", "LIST", "LIBRARYNAME", script_library_name};
  auto r = link.exchange({link_request{nullptr, &cmd, false}}).at(0);
  if (r.code != errc::none)
    return failure{r.code, r.detail};
  if (r.value.type == store_value::kind::error
      && r.value.str.find("unknown command") != std::string::npos)
    return failure{errc::protocol_error,
                   "redis " + link.where()
                     + " has no FUNCTION command: the queue's scripts are "
                       "a Redis function library, which needs Redis 7.0 "
                       "or later ("
                     + r.value.str + ")"};
  return true;
}

// -- sigpipe_guard -------------------------------------------------------------

static_assert(sizeof(sigset_t) <= 128, "sigpipe_guard::old_ is too small");

sigpipe_guard::sigpipe_guard() noexcept {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &set, reinterpret_cast<sigset_t*>(old_));
  sigset_t pending;
  sigemptyset(&pending);
  sigpending(&pending);
  was_pending_ = sigismember(&pending, SIGPIPE) == 1;
}

sigpipe_guard::~sigpipe_guard() {
  int saved_errno = errno;
  if (!was_pending_) {
    sigset_t pending;
    sigemptyset(&pending);
    sigpending(&pending);
    if (sigismember(&pending, SIGPIPE) == 1) {
      sigset_t set;
      sigemptyset(&set);
      sigaddset(&set, SIGPIPE);
      timespec zero{0, 0};
      while (sigtimedwait(&set, nullptr, &zero) < 0 && errno == EINTR) {
      }
    }
  }
  pthread_sigmask(SIG_SETMASK, reinterpret_cast<sigset_t*>(old_), nullptr);
  errno = saved_errno;
}

// -- redis_link ----------------------------------------------------------------

redis_link::redis_link(redis_link_options opts)
  : opts_(std::move(opts)),
    where_(opts_.host + ":" + std::to_string(opts_.port)) {
  // nop: connects on first use (or ensure_connected)
}

redis_link::~redis_link() {
  if (ctx_ != nullptr)
    redisFree(ctx_);
}

bool redis_link::ensure_connected() {
  if (ctx_ != nullptr)
    return true;
  sigpipe_guard guard;
  return connect_now();
}

bool redis_link::connect_now() {
  drop_connection();
  auth_refused_ = false;
  redisContext* c = redisConnectWithTimeout(
    opts_.host.c_str(), opts_.port,
    to_timeval(opts_.connect_timeout_ms, default_connect_timeout_ms));
  if (c == nullptr) {
    last_error_ = "cannot allocate a redis context";
    return false;
  }
  auto fail = [&](const char* fallback) {
    last_error_ = c->err != 0 ? c->errstr : fallback;
    redisFree(c);
    return false;
  };
  if (c->err != 0)
    return fail("cannot connect");
  if (redisSetTimeout(c, to_timeval(opts_.command_timeout_ms,
                                    default_command_timeout_ms))
      != REDIS_OK)
    return fail("cannot set the command timeout");
  if (redisEnableKeepAlive(c) != REDIS_OK)
    return fail("cannot enable TCP keepalive");
  ctx_ = c;
  if (!authenticate())
    return false;
  if (!opts_.load_scripts)
    return true;
  return load_library();
}

bool redis_link::authenticate() {
  if (opts_.password.empty())
    return true;
  std::vector<const char*> argv{"AUTH"};
  std::vector<size_t> len{4};
  if (!opts_.user.empty()) {
    argv.push_back(opts_.user.data());
    len.push_back(opts_.user.size());
  }
  argv.push_back(opts_.password.data());
  len.push_back(opts_.password.size());
  void* raw = redisCommandArgv(ctx_, static_cast<int>(argv.size()), argv.data(),
                               len.data());
  if (raw == nullptr) {
    drop_connection();
    return false;
  }
  reply_ptr r{static_cast<redisReply*>(raw)};
  if (r->type == REDIS_REPLY_ERROR) {
    // Redis's own text ("WRONGPASS invalid username-password pair ...")
    // never contains the password.
    last_error_ = "redis refused AUTH";
    if (!opts_.user.empty())
      last_error_ += " for user '" + opts_.user + "'";
    last_error_ += ": " + std::string{r->str, r->len};
    redisFree(ctx_);
    ctx_ = nullptr;
    auth_refused_ = true;
    return false;
  }
  return true;
}

void redis_link::drop_connection() {
  if (ctx_ == nullptr)
    return;
  if (ctx_->err == 0)
    last_error_ = "redis sent no reply";
  else if (ctx_->err == REDIS_ERR_IO
           && std::strcmp(ctx_->errstr, std::strerror(EAGAIN)) == 0)
    last_error_ = "no reply within "
                  + std::to_string(opts_.command_timeout_ms != 0
                                     ? opts_.command_timeout_ms
                                     : default_command_timeout_ms)
                  + " ms (command timeout)";
  else
    last_error_ = ctx_->errstr;
  redisFree(ctx_);
  ctx_ = nullptr;
}

bool redis_link::load_library() {
  const char* argv[] = {"FUNCTION", "LOAD", script_library};
  const size_t argvlen[] = {8, 4, std::strlen(script_library)};
  void* raw = redisCommandArgv(ctx_, 3, argv, argvlen);
  if (raw == nullptr) {
    drop_connection();
    return false;
  }
  reply_ptr r{static_cast<redisReply*>(raw)};
  std::string text = r->type == REDIS_REPLY_ERROR ? std::string{r->str, r->len}
                                                  : std::string{};
  if (r->type == REDIS_REPLY_STRING
      || (r->type == REDIS_REPLY_ERROR
          && text.find("already exists") != std::string::npos)) {
    // Loaded now, or by another connection (or node of this build) before.
    library_error_.clear();
    return true;
  }
  // Not loadable here (an ACL without FUNCTION, a Redis before 7.0): the
  // calls still go out, in case somebody else loaded it; if the server does
  // not know them, they answer this.
  library_error_ = r->type == REDIS_REPLY_ERROR
                     ? "ERR cannot load the function library: " + text
                     : "ERR unexpected reply to FUNCTION LOAD";
  store_logger()->error("redis {} refused the function library {}: {}", where_,
                        script_library_name, library_error_);
  return true;
}

bool redis_link::append(const link_request& req) {
  if (req.asking) {
    const char* argv[] = {"ASKING"};
    const size_t len[] = {6};
    if (redisAppendCommandArgv(ctx_, 1, argv, len) != REDIS_OK)
      return false;
  }
  argv_.clear();
  argvlen_.clear();
  auto add = [this](const std::string& s) {
    argv_.push_back(s.data());
    argvlen_.push_back(s.size());
  };
  std::string numkeys;
  if (req.call != nullptr) {
    const char* fn
      = script_sources[static_cast<size_t>(req.call->script)].function;
    numkeys = std::to_string(req.call->keys.size());
    argv_.push_back("FCALL");
    argvlen_.push_back(5);
    argv_.push_back(fn);
    argvlen_.push_back(std::strlen(fn));
    add(numkeys);
    for (const auto& k : req.call->keys)
      add(k);
    for (const auto& a : req.call->args)
      add(a);
  } else {
    for (const auto& part : *req.command)
      add(part);
  }
  return redisAppendCommandArgv(ctx_, static_cast<int>(argv_.size()),
                                argv_.data(), argvlen_.data())
         == REDIS_OK;
}

std::vector<store_reply>
redis_link::exchange(const std::vector<link_request>& reqs) {
  send(reqs);
  return receive(reqs);
}

bool redis_link::append_all(const std::vector<link_request>& reqs,
                            in_flight& f) {
  f.sent.clear();
  for (auto i : f.todo) {
    const auto& req = reqs[i];
    if (!append(req))
      return false;
    f.sent.push_back(i);
  }
  return true;
}

void redis_link::send(const std::vector<link_request>& reqs) {
  if (flight_.pending && flight_.written) {
    // Sent and never received (the caller gave up on it): its replies must
    // not answer these requests.
    drop_connection();
  }
  flight_ = in_flight{};
  flight_.pending = true;
  flight_.out.resize(reqs.size());
  flight_.todo.reserve(reqs.size());
  for (size_t i = 0; i < reqs.size(); ++i)
    if (valid(reqs[i], flight_.out[i]))
      flight_.todo.push_back(i);
  if (flight_.todo.empty() || ctx_ == nullptr)
    return; // receive connects and sends it all
  sigpipe_guard guard;
  if (!append_all(reqs, flight_)) {
    drop_connection(); // nothing was written: receive sends it all
    ++flight_.failures;
    return;
  }
  // Write it all now (hiredis would write at the first read).
  int done = 0;
  while (done == 0)
    if (redisBufferWrite(ctx_, &done) != REDIS_OK) {
      // What went out may have run; receive sends every request again,
      // as after a connection lost before its replies.
      drop_connection();
      ++flight_.failures;
      return;
    }
  flight_.written = true;
}

std::vector<store_reply>
redis_link::receive(const std::vector<link_request>& reqs) {
  if (!flight_.pending || flight_.out.size() != reqs.size())
    send(reqs); // no send before: do its part
  in_flight f = std::move(flight_);
  flight_ = in_flight{};
  auto& out = f.out;
  auto& todo = f.todo;
  if (todo.empty())
    return std::move(out);
  sigpipe_guard guard;
  const uint32_t max_attempts = std::max<uint32_t>(1, opts_.max_attempts);
  uint32_t failures = f.failures;
  bool pause_before_connect = false;
  int reload_rounds = 0;
  auto& sent = f.sent;
  std::vector<size_t> retry;
  bool written = f.written; // the first round was sent by send()
  while (!todo.empty() && failures < max_attempts) {
    retry.clear();
    if (!written) {
      if (ctx_ == nullptr) {
        // Reconnect at once after a drop; pause between failed connects.
        if (pause_before_connect && opts_.retry_delay_ms > 0)
          std::this_thread::sleep_for(
            std::chrono::milliseconds(opts_.retry_delay_ms));
        if (!connect_now()) {
          store_logger()->debug("redis {}: connect failed: {}", where_,
                                last_error_);
          pause_before_connect = true;
          if (++failures >= max_attempts || auth_refused_)
            break;
          continue;
        }
      }
      // Pipeline: append everything, then read every reply in order.
      if (!append_all(reqs, f)) {
        drop_connection();
        pause_before_connect = false;
        if (++failures >= max_attempts)
          break;
        continue; // nothing was read: `todo` is still complete
      }
    }
    written = false;
    bool need_reload = false;
    size_t got = 0;
    for (; got < sent.size(); ++got) {
      auto i = sent[got];
      void* raw = nullptr;
      if (reqs[i].asking) {
        // ASKING's own +OK (or an error, which the command's reply repeats).
        if (redisGetReply(ctx_, &raw) != REDIS_OK || raw == nullptr)
          break;
        freeReplyObject(raw);
        raw = nullptr;
      }
      if (redisGetReply(ctx_, &raw) != REDIS_OK || raw == nullptr)
        break;
      reply_ptr r{static_cast<redisReply*>(raw)};
      if (reqs[i].call != nullptr && is_missing_function(*r)) {
        if (reload_rounds < max_reload_rounds && opts_.load_scripts) {
          // The server forgot the library (FUNCTION FLUSH, a restart
          // without persistence): the call did not run. Load it again and
          // send the call again.
          need_reload = true;
          retry.push_back(i);
          continue;
        }
        if (!library_error_.empty()) {
          out[i] = store_reply{};
          out[i].value.type = store_value::kind::error;
          out[i].value.str = library_error_; // why it is not there
          continue;
        }
      }
      out[i] = to_store_reply(*r);
    }
    if (got < sent.size()) {
      // The connection dropped: every call from `got` on has no reply.
      drop_connection();
      store_logger()->debug("redis {}: connection lost after {} of {} "
                            "replies: {}",
                            where_, got, sent.size(), last_error_);
      retry.insert(retry.end(), sent.begin() + static_cast<ptrdiff_t>(got),
                   sent.end());
      todo.swap(retry);
      pause_before_connect = false;
      if (++failures >= max_attempts)
        break;
      continue;
    }
    if (need_reload) {
      ++reload_rounds;
      if (!load_library()) {
        pause_before_connect = false;
        if (++failures >= max_attempts) {
          todo.swap(retry);
          break;
        }
      }
    }
    todo.swap(retry);
  }
  if (!todo.empty()) {
    // The detail may reach a client: no address in it (the log has it).
    std::string detail = auth_refused_ ? last_error_
                                       : "redis unavailable after "
                                           + std::to_string(failures)
                                           + " attempt(s): " + last_error_;
    // Rate-limited: while Redis is down every batch of every connection
    // ends here.
    static log_limit limit{5, std::chrono::seconds(10)};
    uint64_t suppressed = 0;
    if (limit.admit(suppressed)) {
      if (suppressed > 0)
        store_logger()->error("{} similar redis failures not logged",
                              suppressed);
      store_logger()->error("redis {}: {} ({} of {} calls failed)", where_,
                            detail, todo.size(), reqs.size());
    }
    for (auto i : todo) {
      out[i] = store_reply{};
      out[i].code = errc::store_unavailable;
      out[i].detail = detail;
    }
  }
  return std::move(out);
}

} // namespace mm
