// The Redis queue store against a private redis-server (CTest fixture
// "redis", tests/support/redis_server.sh): script replies, pipelining,
// library reloads (FUNCTION FLUSH), reconnects, bounded failures and plain commands; and
// its connection's two halves (redis_link send/receive).

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <signal.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "persistence/queue/queue_store.hpp"
#include "persistence/queue/redis_link.hpp"
#include "tests/support/free_port.hpp"
#include "tests/support/test_env.hpp"

namespace {

using namespace std::chrono_literals;
using mm::errc;
using mm::script_call;
using mm::script_id;
using mm::store_reply;
using mm::store_value;
using kind = mm::store_value::kind;
using clock_type = std::chrono::steady_clock;

// -- helpers -------------------------------------------------------------------

/// A queue name unique to the running test.
std::string queue_name() {
  auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  return std::string{info->test_suite_name()} + "." + info->name();
}

/// The five KEYS every script takes, under the queue's hash tag.
std::vector<std::string> queue_keys(const std::string& q) {
  return {"mm:{" + q + "}:waiting", "mm:{" + q + "}:seq",
          "mm:{" + q + "}:tickets", "mm:{" + q + "}:users",
          "mm:{" + q + "}:deadlines"};
}

script_call call(script_id id, const std::string& q,
                 std::vector<std::string> args) {
  return script_call{id, queue_keys(q), std::move(args)};
}

/// The elements of an array reply of strings; fails the test otherwise.
std::vector<std::string> strings_of(const store_reply& r) {
  EXPECT_EQ(r.code, errc::none) << r.detail;
  EXPECT_EQ(r.value.type, kind::array)
    << "reply is not an array: " << r.value.str;
  std::vector<std::string> out;
  for (const auto& e : r.value.elements) {
    EXPECT_EQ(e.type, kind::string);
    out.push_back(e.str);
  }
  return out;
}

bool all_digits(const std::string& s) {
  return !s.empty() && s.find_first_not_of("0123456789") == std::string::npos;
}

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
           std::chrono::system_clock::now().time_since_epoch())
    .count();
}

mm::redis_options test_options() {
  mm::redis_options o;
  o.host = "127.0.0.1";
  o.port = mm::test::redis_port();
  o.connect_timeout_ms = 1000;
  o.command_timeout_ms = 3000;
  o.max_attempts = 3;
  o.retry_delay_ms = 50;
  return o;
}

/// A direct hiredis connection for administrative commands, independent of
/// the code under test.
class admin_connection {
 public:
  explicit admin_connection(uint16_t port) {
    timeval tv{2, 0};
    ctx_ = redisConnectWithTimeout("127.0.0.1", port, tv);
    if (ctx_ == nullptr || ctx_->err != 0)
      throw std::runtime_error("admin connection failed");
    timeval cmd{5, 0};
    redisSetTimeout(ctx_, cmd);
  }
  ~admin_connection() {
    redisFree(ctx_);
  }

  /// Runs one command; returns {type, integer, str}.
  struct result {
    int type = 0;
    long long integer = 0;
    std::string str;
  };
  result command(const std::vector<std::string>& argv) {
    std::vector<const char*> a;
    std::vector<size_t> l;
    for (const auto& s : argv) {
      a.push_back(s.data());
      l.push_back(s.size());
    }
    auto* raw = static_cast<redisReply*>(
      redisCommandArgv(ctx_, static_cast<int>(a.size()), a.data(), l.data()));
    if (raw == nullptr)
      throw std::runtime_error("admin command failed");
    result out;
    out.type = raw->type;
    out.integer = raw->integer;
    if (raw->str != nullptr)
      out.str.assign(raw->str, raw->len);
    freeReplyObject(raw);
    return out;
  }

 private:
  redisContext* ctx_ = nullptr;
};

class RedisStore : public ::testing::Test {
 protected:
  void SetUp() override {
    port_ = mm::test::redis_port();
    factory_ = mm::make_redis_store(test_options());
    store_ = factory_->connect();
    ASSERT_NE(store_, nullptr);
    q_ = queue_name();
  }

  std::vector<std::string> enqueue(const std::string& user,
                                   const std::string& ticket,
                                   const std::string& attrs = "a") {
    auto r = store_->run(
      {call(script_id::enqueue, q_, {user, ticket, "node-1", attrs, "60000"})});
    EXPECT_EQ(r.size(), 1u);
    return strings_of(r.at(0));
  }

  uint16_t port_ = 0;
  std::shared_ptr<mm::queue_store_factory> factory_;
  std::unique_ptr<mm::queue_store> store_;
  std::string q_;
};

// -- tests ---------------------------------------------------------------------

TEST_F(RedisStore, DescribesItselfAndBlocks) {
  EXPECT_EQ(factory_->describe(), "redis 127.0.0.1:" + std::to_string(port_));
  EXPECT_TRUE(store_->blocking());
  EXPECT_TRUE(store_->run({}).empty());
  EXPECT_TRUE(store_->execute({}).empty());
}

TEST_F(RedisStore, EveryScriptAnswersItsReplyShape) {
  auto before = now_ms();
  // enqueue -> {'created', ticket, token, score, deadline}
  auto created = enqueue("u1", "t1", "attrs-1");
  ASSERT_EQ(created.size(), 5u);
  EXPECT_EQ(created[0], "created");
  EXPECT_EQ(created[1], "t1");
  EXPECT_TRUE(all_digits(created[2]));
  EXPECT_EQ(created[3], "1"); // first score of a fresh queue
  ASSERT_TRUE(all_digits(created[4]));
  EXPECT_GE(std::stoll(created[4]), before + 60000 - 2000);
  EXPECT_LE(std::stoll(created[4]), now_ms() + 60000 + 2000);
  auto token1 = created[2];

  // enqueue again -> {'exists', ticket, token, score, deadline, state}
  auto again = enqueue("u1", "t1", "attrs-1");
  ASSERT_EQ(again.size(), 6u);
  EXPECT_EQ(again[0], "exists");
  EXPECT_EQ(again[2], token1);
  EXPECT_EQ(again[5], "waiting");

  // The remaining scripts in ONE pipelined batch, in order.
  auto replies = store_->run({
    // heartbeat -> {'alive', ticket, state, deadline}
    call(script_id::heartbeat, q_, {"u1", token1, "60000"}),
    // claim -> {'matched', ticket, token, p_user, p_ticket, p_node, p_attrs,
    //           p_score, p_token, stale_removed}
    call(script_id::claim, q_,
         {"u2", "t2", "node-2", "attrs-2", "60000", "10", "30000", "0"}),
    // requeue the claimed partner -> {'requeued', ticket, score}
    call(script_id::requeue, q_, {"t1"}),
    // release the claimer -> {'released', ticket}
    call(script_id::release, q_, {"t2"}),
    // cancel the requeued waiter -> {'cancelled', ticket}
    call(script_id::cancel, q_, {"u1", token1}),
    // sweep -> {'swept', removed, more, depth, tracked}
    call(script_id::sweep, q_, {"100"}),
    // invalid input -> {'invalid', what}
    call(script_id::enqueue, q_, {"bad user!", "t3", "n", "", "1000"}),
  });
  ASSERT_EQ(replies.size(), 7u);

  auto alive = strings_of(replies[0]);
  ASSERT_EQ(alive.size(), 4u);
  EXPECT_EQ(alive[0], "alive");
  EXPECT_EQ(alive[1], "t1");
  EXPECT_EQ(alive[2], "waiting");
  EXPECT_TRUE(all_digits(alive[3]));

  auto matched = strings_of(replies[1]);
  ASSERT_EQ(matched.size(), 10u);
  EXPECT_EQ(matched[0], "matched");
  EXPECT_EQ(matched[1], "t2");
  EXPECT_TRUE(all_digits(matched[2]));
  EXPECT_EQ(matched[3], "u1");
  EXPECT_EQ(matched[4], "t1");
  EXPECT_EQ(matched[5], "node-1");
  EXPECT_EQ(matched[6], "attrs-1");
  EXPECT_EQ(matched[7], "1");
  EXPECT_EQ(matched[8], token1);
  EXPECT_EQ(matched[9], "0");

  auto requeued = strings_of(replies[2]);
  ASSERT_EQ(requeued.size(), 3u);
  EXPECT_EQ(requeued[0], "requeued");
  EXPECT_EQ(requeued[1], "t1");
  EXPECT_EQ(requeued[2], "1"); // original score kept

  EXPECT_EQ(strings_of(replies[3]),
            (std::vector<std::string>{"released", "t2"}));
  EXPECT_EQ(strings_of(replies[4]),
            (std::vector<std::string>{"cancelled", "t1"}));
  EXPECT_EQ(strings_of(replies[5]),
            (std::vector<std::string>{"swept", "0", "0", "0", "0"}));
  EXPECT_EQ(strings_of(replies[6]),
            (std::vector<std::string>{"invalid", "user"}));

  // Everything is gone now: heartbeat answers {'gone'}, claim queues.
  auto tail = store_->run({
    call(script_id::heartbeat, q_, {"u1", token1, "60000"}),
    call(script_id::claim, q_,
         {"u4", "t4", "node-4", "", "60000", "10", "30000", "0"}),
  });
  ASSERT_EQ(tail.size(), 2u);
  EXPECT_EQ(strings_of(tail[0]), (std::vector<std::string>{"gone"}));
  auto queued = strings_of(tail[1]);
  ASSERT_EQ(queued.size(), 7u);
  EXPECT_EQ(queued[0], "queued");
  EXPECT_EQ(queued[1], "t4");
  EXPECT_TRUE(all_digits(queued[3]));
  EXPECT_EQ(queued[5], "0");
  EXPECT_EQ(queued[6], "0");
}

TEST_F(RedisStore, ScriptErrorIsAnOrdinaryErrorReply) {
  // No KEYS: the script fails inside Redis. That is a reply, not a failure.
  auto r = store_->run(
    {script_call{script_id::enqueue, {}, {"u1", "t1", "n", "", "1000"}},
     call(script_id::sweep, q_, {"10"})});
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].code, errc::none);
  EXPECT_EQ(r[0].value.type, kind::error);
  EXPECT_FALSE(r[0].value.str.empty());
  // The pipeline stays in step after the error.
  EXPECT_EQ(strings_of(r[1]),
            (std::vector<std::string>{"swept", "0", "0", "0", "0"}));
}

TEST_F(RedisStore, ArgumentsAndRepliesAreBinarySafe) {
  std::string attrs{"a\0b\r\n*3\r\n\xff", 10};
  ASSERT_EQ(enqueue("u1", "t1", attrs)[0], "created");
  auto r
    = store_->run({call(script_id::claim, q_,
                        {"u2", "t2", "n2", "", "60000", "10", "30000", "0"})});
  auto matched = strings_of(r.at(0));
  ASSERT_EQ(matched.size(), 10u);
  EXPECT_EQ(matched[0], "matched");
  EXPECT_EQ(matched[6], attrs);
}

TEST_F(RedisStore, ThousandPipelinedCallsAnswerInOrder) {
  std::vector<script_call> calls;
  for (int i = 0; i < 1000; ++i)
    calls.push_back(
      call(script_id::enqueue, q_,
           {"user-" + std::to_string(i), "ticket-" + std::to_string(i), "node",
            "x", "60000"}));
  auto start = clock_type::now();
  auto replies = store_->run(calls);
  auto elapsed = clock_type::now() - start;
  ASSERT_EQ(replies.size(), 1000u);
  for (int i = 0; i < 1000; ++i) {
    auto s = strings_of(replies[i]);
    ASSERT_EQ(s.size(), 5u) << i;
    EXPECT_EQ(s[0], "created") << i;
    EXPECT_EQ(s[1], "ticket-" + std::to_string(i));
    EXPECT_EQ(s[3], std::to_string(i + 1)); // FIFO score = send order
  }
  EXPECT_LT(elapsed, 10s);
  // The queue holds exactly those tickets.
  admin_connection admin{port_};
  EXPECT_EQ(admin.command({"ZCARD", queue_keys(q_)[0]}).integer, 1000);
}

/// How many "ERR ..." errors the server has answered so far (INFO
/// errorstats); a call of a function it does not know is one.
long long err_errors(admin_connection& admin) {
  auto info = admin.command({"INFO", "errorstats"}).str;
  auto pos = info.find("errorstat_ERR:count=");
  if (pos == std::string::npos)
    return 0;
  return std::stoll(info.substr(pos + 20));
}

TEST_F(RedisStore, ReloadsTheLibraryAfterFunctionFlush) {
  ASSERT_EQ(enqueue("u1", "t1")[0], "created");
  admin_connection admin{port_};
  auto errors_before = err_errors(admin);
  for (int round = 0; round < 3; ++round) {
    ASSERT_EQ(admin.command({"FUNCTION", "FLUSH"}).str, "OK");
    auto r = store_->run({
      call(script_id::enqueue, q_,
           {"u" + std::to_string(round + 2), "t" + std::to_string(round + 2),
            "n", "", "60000"}),
      call(script_id::sweep, q_, {"10"}),
      call(script_id::enqueue, q_, {"u1", "t1", "n", "", "60000"}),
    });
    ASSERT_EQ(r.size(), 3u);
    EXPECT_EQ(strings_of(r[0]).at(0), "created") << round;
    EXPECT_EQ(strings_of(r[0]).at(3), std::to_string(round + 2)) << round;
    EXPECT_EQ(strings_of(r[1]).at(0), "swept") << round;
    EXPECT_EQ(strings_of(r[2]).at(0), "exists") << round;
  }
  // The recovery really went through "Function not found" (one per call
  // of a flushed batch), the caller never saw it, and the library is back.
  EXPECT_GE(err_errors(admin), errors_before + 9);
  auto libs = store_->execute(
    {{"FUNCTION", "LIST", "LIBRARYNAME", mm::script_library_name}});
  ASSERT_EQ(libs.size(), 1u);
  EXPECT_EQ(libs[0].value.elements.size(), 1u);
}

TEST_F(RedisStore, ReconnectsAfterClientKill) {
  auto id_before = store_->execute({{"CLIENT", "ID"}});
  ASSERT_EQ(id_before.at(0).value.type, kind::integer);
  ASSERT_EQ(enqueue("u0", "t0")[0], "created");

  admin_connection admin{port_};
  auto killed = admin.command({"CLIENT", "KILL", "TYPE", "normal"});
  ASSERT_EQ(killed.type, REDIS_REPLY_INTEGER);
  EXPECT_GE(killed.integer, 1);

  // A large batch (8 MB): hiredis writes it in several write(2) calls, and
  // those after the server's reset must not kill the process with SIGPIPE.
  std::vector<script_call> calls;
  for (int i = 1; i <= 2000; ++i)
    calls.push_back(call(script_id::enqueue, q_,
                         {"u" + std::to_string(i), "t" + std::to_string(i), "n",
                          std::string(4000, 'x'), "60000"}));
  auto replies = store_->run(calls);
  ASSERT_EQ(replies.size(), calls.size());
  for (size_t i = 0; i < replies.size(); ++i) {
    auto s = strings_of(replies[i]);
    ASSERT_FALSE(s.empty()) << i;
    EXPECT_EQ(s[0], "created") << i;
  }
  auto id_after = store_->execute({{"CLIENT", "ID"}});
  ASSERT_EQ(id_after.at(0).value.type, kind::integer);
  EXPECT_NE(id_after[0].value.integer, id_before[0].value.integer);

  // And once more for plain commands.
  admin.command({"CLIENT", "KILL", "TYPE", "normal"});
  auto pong = store_->execute({{"PING"}});
  ASSERT_EQ(pong.at(0).code, errc::none) << pong[0].detail;
  EXPECT_EQ(pong[0].value.type, kind::status);
  EXPECT_EQ(pong[0].value.str, "PONG");
}

TEST(RedisStoreDown, ClosedPortAnswersStoreUnavailableInBoundedTime) {
  auto opts = test_options();
  opts.port = mm::test::free_tcp_port();
  opts.max_attempts = 3;
  opts.retry_delay_ms = 50;
  auto factory = mm::make_redis_store(opts);
  auto start = clock_type::now();
  std::unique_ptr<mm::queue_store> store;
  ASSERT_NO_THROW(store = factory->connect());
  ASSERT_NE(store, nullptr);
  std::vector<store_reply> r;
  ASSERT_NO_THROW(r = store->run({call(script_id::sweep, "down", {"10"}),
                                  call(script_id::sweep, "down", {"10"})}));
  ASSERT_EQ(r.size(), 2u);
  auto where = "127.0.0.1:" + std::to_string(opts.port);
  for (const auto& x : r) {
    EXPECT_EQ(x.code, errc::store_unavailable);
    // Details may reach clients: no internal address (issue 12).
    EXPECT_EQ(x.detail.find(where), std::string::npos) << x.detail;
    EXPECT_NE(x.detail.find("unavailable"), std::string::npos) << x.detail;
    EXPECT_EQ(x.value.type, kind::nil);
  }
  auto e = store->execute({{"PING"}});
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].code, errc::store_unavailable);
  EXPECT_LT(clock_type::now() - start, 3s);
}

TEST(RedisStoreDown, ConnectsOnFirstUseOnceRedisIsUp) {
  auto opts = test_options();
  opts.port = mm::test::free_tcp_port();
  opts.max_attempts = 2;
  auto store = mm::make_redis_store(opts)->connect();
  auto q = queue_name();
  auto first = store->run({call(script_id::sweep, q, {"10"})});
  ASSERT_EQ(first.at(0).code, errc::store_unavailable);

  // Start a second private redis-server on that port.
  auto dir = mm::test::redis_dir() + "/late";
  ASSERT_EQ(std::system(("mkdir -p '" + dir + "'").c_str()), 0);
  auto port = std::to_string(opts.port);
  auto cmd = "redis-server --port " + port
             + " --bind 127.0.0.1 --save '' --appendonly no --daemonize yes"
               " --dir '"
             + dir + "' --pidfile '" + dir + "/redis.pid' --logfile '" + dir
             + "/redis.log'";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  struct stopper {
    std::string pidfile;
    ~stopper() {
      for (int i = 0; i < 100; ++i) {
        std::ifstream in(pidfile);
        pid_t pid = 0;
        if (in >> pid && pid > 0) {
          ::kill(pid, SIGTERM);
          return;
        }
        std::this_thread::sleep_for(20ms);
      }
    }
  } stop{dir + "/redis.pid"};

  std::vector<store_reply> r;
  for (int i = 0; i < 100; ++i) {
    r = store->run({call(script_id::sweep, q, {"10"})});
    if (r.at(0).code == errc::none)
      break;
    std::this_thread::sleep_for(50ms);
  }
  ASSERT_EQ(r.at(0).code, errc::none) << r[0].detail;
  EXPECT_EQ(strings_of(r[0]),
            (std::vector<std::string>{"swept", "0", "0", "0", "0"}));
}

TEST_F(RedisStore, CommandTimeoutBoundsAStalledServer) {
  auto opts = test_options();
  opts.command_timeout_ms = 200;
  opts.max_attempts = 2;
  opts.retry_delay_ms = 50;
  auto store = mm::make_redis_store(opts)->connect();
  ASSERT_EQ(
    strings_of(store->run({call(script_id::sweep, q_, {"10"})}).at(0)).at(0),
    "swept");

  admin_connection admin{port_};
  auto pause_start = clock_type::now();
  ASSERT_EQ(admin.command({"CLIENT", "PAUSE", "1500", "ALL"}).str, "OK");
  auto r = store->run({call(script_id::sweep, q_, {"10"})});
  auto elapsed = clock_type::now() - pause_start;
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].code, errc::store_unavailable);
  EXPECT_LT(elapsed, 1400ms); // gave up before the pause ended
  EXPECT_NE(r[0].detail.find("command timeout"), std::string::npos)
    << r[0].detail;

  std::this_thread::sleep_until(pause_start + 1700ms);
  auto after = store->run({call(script_id::sweep, q_, {"10"})});
  ASSERT_EQ(after.at(0).code, errc::none) << after[0].detail;
  EXPECT_EQ(strings_of(after[0]).at(0), "swept");
}

TEST_F(RedisStore, ExecutesPlainCommands) {
  auto key = "mm:{" + q_ + "}:lock";
  std::string value{"v\0\r\n", 4};
  auto r = store_->execute({
    {"SET", key, value, "NX", "PX", "5000"},
    {"SET", key, "other", "NX", "PX", "5000"},
    {"GET", key},
    {"PTTL", key},
    {"INCR", key},
    {"DEL", key},
    {"GET", key},
    {"MGET", key, key},
  });
  ASSERT_EQ(r.size(), 8u);
  for (const auto& x : r)
    EXPECT_EQ(x.code, errc::none) << x.detail;
  EXPECT_EQ(r[0].value.type, kind::status);
  EXPECT_EQ(r[0].value.str, "OK");
  EXPECT_EQ(r[1].value.type, kind::nil);
  EXPECT_EQ(r[2].value.type, kind::string);
  EXPECT_EQ(r[2].value.str, value);
  EXPECT_EQ(r[3].value.type, kind::integer);
  EXPECT_GT(r[3].value.integer, 0);
  EXPECT_LE(r[3].value.integer, 5000);
  EXPECT_EQ(r[4].value.type, kind::error); // not an integer: a reply
  EXPECT_FALSE(r[4].value.str.empty());
  EXPECT_EQ(r[5].value.type, kind::integer);
  EXPECT_EQ(r[5].value.integer, 1);
  EXPECT_EQ(r[6].value.type, kind::nil);
  ASSERT_EQ(r[7].value.type, kind::array);
  ASSERT_EQ(r[7].value.elements.size(), 2u);
  EXPECT_EQ(r[7].value.elements[0].type, kind::nil);
}

TEST_F(RedisStore, EmptyCommandIsRefusedWithoutShiftingReplies) {
  auto r = store_->execute({{}, {"PING"}, {"ECHO", "x"}});
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0].code, errc::invalid_argument);
  EXPECT_EQ(r[1].value.str, "PONG");
  EXPECT_EQ(r[2].value.type, kind::string);
  EXPECT_EQ(r[2].value.str, "x");
}

TEST(RedisLink, ABatchSentButNeverReceivedAnswersNothingLater) {
  // The cluster store sends to every primary before it reads any reply; a
  // batch whose replies were never read (its caller gave up on it) must
  // not answer the next batch on that connection.
  mm::redis_link_options o;
  o.port = mm::test::redis_port();
  o.load_scripts = false;
  mm::redis_link link{o};
  ASSERT_TRUE(link.ensure_connected()) << link.last_error();
  mm::store_command first{"ECHO", "first"};
  mm::store_command second{"ECHO", "second"};
  std::vector<mm::link_request> a{mm::link_request{nullptr, &first}};
  std::vector<mm::link_request> b{mm::link_request{nullptr, &second}};
  link.send(a);
  link.send(b);
  auto r = link.receive(b);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].code, errc::none) << r[0].detail;
  EXPECT_EQ(r[0].value.str, "second");
  link.send(a);
  auto e = link.exchange(b);
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].value.str, "second");
  // Both halves in order answer as one exchange does.
  link.send(a);
  auto f = link.receive(a);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].value.str, "first");
}

} // namespace
