// The Redis queue store: one synchronous hiredis connection per queue_store,
// every batch pipelined in one round trip (STACK-NOTES: pipelining is the
// lever). Scripts are loaded once per connection and run with EVALSHA; a
// NOSCRIPT reply reloads them, a dropped connection reconnects and re-sends
// the calls whose replies were not received yet.

#include "core/log_limit.hpp"
#include "core/logger.hpp"
#include "persistence/queue/queue_store.hpp"
#include "persistence/queue/redis_reply.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <pthread.h>
#include <sys/time.h>

#include <hiredis/hiredis.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

namespace mm {

namespace {

// -- RAII for hiredis objects --------------------------------------------------

struct reply_deleter {
  void operator()(redisReply* r) const noexcept {
    if (r != nullptr)
      freeReplyObject(r);
  }
};
using reply_ptr = std::unique_ptr<redisReply, reply_deleter>;

struct context_deleter {
  void operator()(redisContext* c) const noexcept {
    if (c != nullptr)
      redisFree(c);
  }
};
using context_ptr = std::unique_ptr<redisContext, context_deleter>;

// -- helpers -------------------------------------------------------------------

/// Defaults used when an option is 0: a zero timeout would mean "wait
/// forever" for hiredis reads, and the store must never block forever.
constexpr uint32_t default_connect_timeout_ms = 2000;
constexpr uint32_t default_command_timeout_ms = 5000;

/// How often one batch reloads scripts after NOSCRIPT before it hands the
/// NOSCRIPT error to the caller as an ordinary error reply.
constexpr int max_noscript_rounds = 3;

timeval to_timeval(uint32_t ms, uint32_t fallback_ms) {
  if (ms == 0)
    ms = fallback_ms;
  timeval tv;
  tv.tv_sec = static_cast<time_t>(ms / 1000);
  tv.tv_usec = static_cast<suseconds_t>((ms % 1000) * 1000);
  return tv;
}

/// The shared logger "queue_store"; created on first use when the
/// application has not registered one.
std::shared_ptr<spdlog::logger> store_logger() {
  return logger("queue_store");
}

/// hiredis writes with write(2): a peer that closed the socket raises SIGPIPE,
/// which kills the process by default. This guard blocks SIGPIPE for the
/// calling thread while it talks to Redis and discards a SIGPIPE raised
/// meanwhile, so the failure shows up as EPIPE only. Process-wide signal
/// dispositions are left alone.
class sigpipe_guard {
public:
  sigpipe_guard() noexcept {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &set, &old_);
    sigset_t pending;
    sigemptyset(&pending);
    sigpending(&pending);
    was_pending_ = sigismember(&pending, SIGPIPE) == 1;
  }

  ~sigpipe_guard() {
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
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
    errno = saved_errno;
  }

  sigpipe_guard(const sigpipe_guard&) = delete;
  sigpipe_guard& operator=(const sigpipe_guard&) = delete;

private:
  sigset_t old_;
  bool was_pending_ = false;
};

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

namespace {

bool is_noscript(const redisReply& r) {
  return r.type == REDIS_REPLY_ERROR && r.len >= 8
         && std::memcmp(r.str, "NOSCRIPT", 8) == 0;
}

/// One entry of a batch: a script call or a plain command.
struct request {
  const script_call* call = nullptr;
  const store_command* command = nullptr;
};

// -- the connection ------------------------------------------------------------

class redis_queue_store final : public queue_store {
public:
  explicit redis_queue_store(redis_options opts)
    : opts_(std::move(opts)),
      where_(opts_.host + ":" + std::to_string(opts_.port)) {
    // One eager attempt; when Redis is down the store stays disconnected and
    // tries again on first use.
    sigpipe_guard guard;
    if (!connect_now())
      store_logger()->debug("redis {} not reachable yet ({}); will retry on "
                            "first use",
                            where_, last_error_);
  }

  std::vector<store_reply> run(const std::vector<script_call>& calls) override {
    std::vector<request> reqs(calls.size());
    for (size_t i = 0; i < calls.size(); ++i)
      reqs[i].call = &calls[i];
    return exchange(reqs);
  }

  std::vector<store_reply>
  execute(const std::vector<store_command>& commands) override {
    std::vector<request> reqs(commands.size());
    for (size_t i = 0; i < commands.size(); ++i)
      reqs[i].command = &commands[i];
    return exchange(reqs);
  }

  bool blocking() const noexcept override {
    return true;
  }

private:
  /// Opens a fresh connection, sets timeouts and keepalive and loads all
  /// scripts. On failure leaves the store disconnected with `last_error_`.
  bool connect_now() {
    ctx_.reset();
    context_ptr c{redisConnectWithTimeout(
      opts_.host.c_str(), opts_.port,
      to_timeval(opts_.connect_timeout_ms, default_connect_timeout_ms))};
    if (!c) {
      last_error_ = "cannot allocate a redis context";
      return false;
    }
    if (c->err != 0) {
      last_error_ = c->errstr;
      return false;
    }
    if (redisSetTimeout(c.get(), to_timeval(opts_.command_timeout_ms,
                                            default_command_timeout_ms))
        != REDIS_OK) {
      last_error_ = c->err != 0 ? c->errstr : "cannot set the command timeout";
      return false;
    }
    if (redisEnableKeepAlive(c.get()) != REDIS_OK) {
      last_error_ = c->err != 0 ? c->errstr : "cannot enable TCP keepalive";
      return false;
    }
    ctx_ = std::move(c);
    std::array<bool, script_count> all;
    all.fill(true);
    return load_scripts(all);
  }

  /// Forgets the connection after a transport failure.
  void drop_connection() {
    if (ctx_) {
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
    }
    ctx_.reset();
  }

  /// SCRIPT LOAD for every script in `which`, pipelined. Returns false (and
  /// drops the connection) on a transport failure only; a script that Redis
  /// refuses keeps its error in `load_error_` and its calls answer it.
  bool load_scripts(const std::array<bool, script_count>& which) {
    std::vector<size_t> sent;
    for (size_t i = 0; i < script_count; ++i) {
      if (!which[i])
        continue;
      const char* text = script_sources[i].text;
      const char* argv[] = {"SCRIPT", "LOAD", text};
      const size_t argvlen[] = {6, 4, std::strlen(text)};
      if (redisAppendCommandArgv(ctx_.get(), 3, argv, argvlen) != REDIS_OK) {
        drop_connection();
        return false;
      }
      sent.push_back(i);
    }
    for (auto i : sent) {
      void* raw = nullptr;
      if (redisGetReply(ctx_.get(), &raw) != REDIS_OK || raw == nullptr) {
        drop_connection();
        return false;
      }
      reply_ptr r{static_cast<redisReply*>(raw)};
      if (r->type == REDIS_REPLY_STRING) {
        sha_[i].assign(r->str, r->len);
        load_error_[i].clear();
      } else {
        sha_[i].clear();
        if (r->type == REDIS_REPLY_ERROR)
          load_error_[i].assign(r->str, r->len);
        else
          load_error_[i] = "ERR unexpected reply to SCRIPT LOAD";
        store_logger()->error("redis {} refused script '{}': {}", where_,
                              script_sources[i].name, load_error_[i]);
      }
    }
    return true;
  }

  /// Checks a request before it is sent; fills `out` and returns false when
  /// it cannot be sent at all.
  static bool valid(const request& req, store_reply& out) {
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

  /// Appends one request to the output buffer of the connection.
  bool append(const request& req) {
    argv_.clear();
    argvlen_.clear();
    auto add = [this](const std::string& s) {
      argv_.push_back(s.data());
      argvlen_.push_back(s.size());
    };
    std::string numkeys;
    if (req.call != nullptr) {
      const auto& sha = sha_[static_cast<size_t>(req.call->script)];
      numkeys = std::to_string(req.call->keys.size());
      argv_.push_back("EVALSHA");
      argvlen_.push_back(7);
      add(sha);
      add(numkeys);
      for (const auto& k : req.call->keys)
        add(k);
      for (const auto& a : req.call->args)
        add(a);
    } else {
      for (const auto& part : *req.command)
        add(part);
    }
    return redisAppendCommandArgv(ctx_.get(), static_cast<int>(argv_.size()),
                                  argv_.data(), argvlen_.data())
           == REDIS_OK;
  }

  /// Runs a batch: pipelines every pending request, reads the replies in
  /// order, reloads scripts after NOSCRIPT and reconnects after a drop, then
  /// re-sends what has no reply yet. Bounded by `max_attempts`.
  std::vector<store_reply> exchange(const std::vector<request>& reqs) {
    std::vector<store_reply> out(reqs.size());
    if (reqs.empty())
      return out;
    sigpipe_guard guard;
    std::vector<size_t> todo;
    todo.reserve(reqs.size());
    for (size_t i = 0; i < reqs.size(); ++i)
      if (valid(reqs[i], out[i]))
        todo.push_back(i);
    const uint32_t max_attempts = std::max<uint32_t>(1, opts_.max_attempts);
    uint32_t failures = 0;
    bool pause_before_connect = false;
    int noscript_rounds = 0;
    std::vector<size_t> sent;
    std::vector<size_t> retry;
    while (!todo.empty()) {
      if (!ctx_) {
        // Reconnect at once after a drop; pause between failed connects.
        if (pause_before_connect && opts_.retry_delay_ms > 0)
          std::this_thread::sleep_for(
            std::chrono::milliseconds(opts_.retry_delay_ms));
        if (!connect_now()) {
          store_logger()->debug("redis {}: connect failed: {}", where_,
                                last_error_);
          pause_before_connect = true;
          if (++failures >= max_attempts)
            break;
          continue;
        }
      }
      // Pipeline: append everything, then read every reply in order.
      sent.clear();
      retry.clear();
      bool append_failed = false;
      for (auto i : todo) {
        const auto& req = reqs[i];
        if (req.call != nullptr) {
          auto id = static_cast<size_t>(req.call->script);
          if (sha_[id].empty()) {
            out[i].value.type = store_value::kind::error;
            out[i].value.str = load_error_[id];
            continue;
          }
        }
        if (!append(req)) {
          append_failed = true;
          break;
        }
        sent.push_back(i);
      }
      if (append_failed) {
        drop_connection();
        pause_before_connect = false;
        if (++failures >= max_attempts)
          break;
        continue; // nothing was read: `todo` is still complete
      }
      std::array<bool, script_count> reload{};
      bool need_reload = false;
      size_t got = 0;
      for (; got < sent.size(); ++got) {
        void* raw = nullptr;
        if (redisGetReply(ctx_.get(), &raw) != REDIS_OK || raw == nullptr)
          break;
        reply_ptr r{static_cast<redisReply*>(raw)};
        auto i = sent[got];
        if (reqs[i].call != nullptr && is_noscript(*r)
            && noscript_rounds < max_noscript_rounds) {
          // The server forgot the script (SCRIPT FLUSH, restart): the call
          // did not run. Reload it and send the call again.
          reload[static_cast<size_t>(reqs[i].call->script)] = true;
          need_reload = true;
          retry.push_back(i);
          continue;
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
        ++noscript_rounds;
        if (!load_scripts(reload)) {
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
      std::string detail = "redis unavailable after "
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
    return out;
  }

  redis_options opts_;
  std::string where_; ///< "host:port"
  context_ptr ctx_;   ///< null while disconnected
  std::string last_error_;
  std::array<std::string, script_count> sha_;        ///< empty: not loaded
  std::array<std::string, script_count> load_error_; ///< why not loaded
  std::vector<const char*> argv_;                    ///< scratch for append
  std::vector<size_t> argvlen_;
};

class redis_store_factory final : public queue_store_factory {
public:
  explicit redis_store_factory(redis_options opts) : opts_(std::move(opts)) {
  }

  std::unique_ptr<queue_store> connect() override {
    return std::make_unique<redis_queue_store>(opts_);
  }

  std::string describe() const override {
    return "redis " + opts_.host + ":" + std::to_string(opts_.port);
  }

private:
  const redis_options opts_;
};

} // namespace

std::shared_ptr<queue_store_factory> make_redis_store(redis_options opts) {
  return std::make_shared<redis_store_factory>(std::move(opts));
}

} // namespace mm
