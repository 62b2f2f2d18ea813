// The embedded queue store: the Redis command subset with Redis semantics,
// Redis<->Lua type conversion, the Lua environment, and every script of lua/
// run once or more. Redis 7.0 behaviour is the reference throughout.

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <ostream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "persistence/queue/embedded_dataset.hpp"
#include "persistence/queue/queue_store.hpp"

namespace mm {

// Test-only equality and printing of replies (found by ADL from gtest).
bool operator==(const store_value& x, const store_value& y) {
  if (x.type != y.type)
    return false;
  switch (x.type) {
    case store_value::kind::nil:
      return true;
    case store_value::kind::integer:
      return x.integer == y.integer;
    case store_value::kind::array:
      return x.elements == y.elements;
    default:
      return x.str == y.str;
  }
}

void PrintTo(const store_value& x, std::ostream* os) {
  switch (x.type) {
    case store_value::kind::nil:
      *os << "nil";
      break;
    case store_value::kind::integer:
      *os << "(integer) " << x.integer;
      break;
    case store_value::kind::string:
      *os << '"' << x.str << '"';
      break;
    case store_value::kind::status:
      *os << "(status) " << x.str;
      break;
    case store_value::kind::error:
      *os << "(error) " << x.str;
      break;
    case store_value::kind::array:
      *os << '[';
      for (size_t i = 0; i < x.elements.size(); ++i) {
        if (i > 0)
          *os << ", ";
        PrintTo(x.elements[i], os);
      }
      *os << ']';
      break;
  }
}

} // namespace mm

namespace {

using mm::errc;
using mm::script_call;
using mm::script_id;
using mm::store_command;
using mm::store_reply;
using mm::store_value;
using kind = mm::store_value::kind;

store_value S(std::string x) {
  store_value v;
  v.type = kind::string;
  v.str = std::move(x);
  return v;
}

store_value I(int64_t x) {
  store_value v;
  v.type = kind::integer;
  v.integer = x;
  return v;
}

store_value NIL() {
  return store_value{};
}

store_value ST(std::string x) {
  store_value v;
  v.type = kind::status;
  v.str = std::move(x);
  return v;
}

store_value ERR(std::string x) {
  store_value v;
  v.type = kind::error;
  v.str = std::move(x);
  return v;
}

store_value A(std::vector<store_value> xs) {
  store_value v;
  v.type = kind::array;
  v.elements = std::move(xs);
  return v;
}

/// An array of bulk strings.
store_value AS(std::vector<std::string> xs) {
  std::vector<store_value> elements;
  for (auto& x : xs)
    elements.push_back(S(std::move(x)));
  return A(std::move(elements));
}

const std::string wrongtype
  = "WRONGTYPE Operation against a key holding the wrong kind of value";

constexpr int64_t t0 = 1'700'000'000'123;

class embedded_store_test : public ::testing::Test {
 protected:
  int64_t now = t0;
  std::shared_ptr<mm::queue_store_factory> factory
    = mm::make_embedded_store(mm::embedded_options{[this] { return now; }});
  std::unique_ptr<mm::queue_store> store = factory->connect();

  store_value cmd(store_command c) {
    auto replies = store->execute({std::move(c)});
    EXPECT_EQ(replies.size(), 1u);
    if (replies.size() != 1)
      return {};
    EXPECT_EQ(replies[0].code, errc::none);
    return replies[0].value;
  }

  static std::vector<std::string> queue_keys(const std::string& q) {
    return {"mm:{" + q + "}:waiting", "mm:{" + q + "}:seq",
            "mm:{" + q + "}:tickets", "mm:{" + q + "}:users",
            "mm:{" + q + "}:deadlines"};
  }

  store_value script(script_id id, std::vector<std::string> args,
                     const std::string& q = "q") {
    auto replies
      = store->run({script_call{id, queue_keys(q), std::move(args)}});
    EXPECT_EQ(replies.size(), 1u);
    if (replies.size() != 1)
      return {};
    EXPECT_EQ(replies[0].code, errc::none);
    return replies[0].value;
  }

  store_value enqueue(const std::string& user, const std::string& ticket,
                      const std::string& ttl = "10000") {
    return script(script_id::enqueue, {user, ticket, "n1", "a=1", ttl});
  }
};

/// An engine with a controlled clock, for scripts given as source text.
class embedded_eval_test : public ::testing::Test {
 protected:
  int64_t now = t0;
  mm::embedded::engine engine{[this] { return now; }};

  store_value eval(const std::string& src, std::vector<std::string> keys = {},
                   std::vector<std::string> args = {}) {
    return engine.eval(src, keys, args);
  }

  store_value cmd(store_command c) {
    return engine.execute(c);
  }
};

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

// -- the factory -----------------------------------------------------------

TEST_F(embedded_store_test, factory_describes_itself_and_never_blocks) {
  EXPECT_EQ(factory->describe(), "embedded");
  EXPECT_FALSE(store->blocking());
}

TEST_F(embedded_store_test, connections_of_one_factory_share_one_data_set) {
  auto other = factory->connect();
  EXPECT_EQ(cmd({"SET", "k", "v"}), ST("OK"));
  auto replies = other->execute({{"GET", "k"}});
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_EQ(replies[0].value, S("v"));
  // Another factory has its own, empty data set.
  auto fresh = mm::make_embedded_store({})->connect();
  EXPECT_EQ(fresh->execute({{"GET", "k"}})[0].value, NIL());
}

TEST_F(embedded_store_test, execute_answers_each_command_in_order) {
  auto replies = store->execute(
    {{"SET", "a", "1"}, {"INCR", "a"}, {"NOPE"}, {"GET", "a"}, {}});
  ASSERT_EQ(replies.size(), 5u);
  EXPECT_EQ(replies[0].value, ST("OK"));
  EXPECT_EQ(replies[1].value, I(2));
  EXPECT_EQ(replies[2].value, ERR("ERR unknown command 'NOPE'"));
  EXPECT_EQ(replies[3].value, S("2"));
  EXPECT_EQ(replies[4].value.type, kind::error);
  for (const auto& r : replies)
    EXPECT_EQ(r.code, errc::none);
  EXPECT_TRUE(store->execute({}).empty());
}

TEST_F(embedded_store_test, default_clock_is_the_system_clock) {
  auto s = mm::make_embedded_store({})->connect();
  auto before = std::chrono::duration_cast<std::chrono::seconds>(
                  std::chrono::system_clock::now().time_since_epoch())
                  .count();
  auto t = s->execute({{"TIME"}})[0].value;
  ASSERT_EQ(t.type, kind::array);
  ASSERT_EQ(t.elements.size(), 2u);
  auto secs = std::stoll(t.elements[0].str);
  EXPECT_GE(secs, before);
  EXPECT_LE(secs, before + 5);
}

// -- strings, keys and expiry ------------------------------------------------

TEST_F(embedded_store_test, time_comes_from_the_injected_clock) {
  EXPECT_EQ(cmd({"TIME"}), AS({"1700000000", "123000"}));
  now += 1877;
  EXPECT_EQ(cmd({"time"}), AS({"1700000002", "0"}));
}

TEST_F(embedded_store_test, get_set_del_exists_incr) {
  EXPECT_EQ(cmd({"GET", "k"}), NIL());
  EXPECT_EQ(cmd({"SET", "k", "v"}), ST("OK"));
  EXPECT_EQ(cmd({"get", "k"}), S("v"));
  EXPECT_EQ(cmd({"SeT", "k", "w"}), ST("OK"));
  EXPECT_EQ(cmd({"GET", "k"}), S("w"));
  EXPECT_EQ(cmd({"EXISTS", "k", "k", "nope"}), I(2));
  EXPECT_EQ(cmd({"SET", "k2", std::string("a\0b", 3)}), ST("OK"));
  EXPECT_EQ(cmd({"GET", "k2"}), S(std::string("a\0b", 3)));
  EXPECT_EQ(cmd({"DEL", "k", "k2", "k", "nope"}), I(2));
  EXPECT_EQ(cmd({"EXISTS", "k"}), I(0));

  EXPECT_EQ(cmd({"INCR", "n"}), I(1));
  EXPECT_EQ(cmd({"INCR", "n"}), I(2));
  EXPECT_EQ(cmd({"GET", "n"}), S("2"));
  EXPECT_EQ(cmd({"SET", "n", "-5"}), ST("OK"));
  EXPECT_EQ(cmd({"INCR", "n"}), I(-4));
  for (const char* bad : {"abc", "01", "+1", " 1", "1.5", ""}) {
    EXPECT_EQ(cmd({"SET", "bad", bad}), ST("OK"));
    EXPECT_EQ(cmd({"INCR", "bad"}),
              ERR("ERR value is not an integer or out of range"))
      << bad;
  }
  EXPECT_EQ(cmd({"SET", "big", "9223372036854775807"}), ST("OK"));
  EXPECT_EQ(cmd({"INCR", "big"}),
            ERR("ERR increment or decrement would overflow"));
}

TEST_F(embedded_store_test, set_nx_xx_and_get) {
  EXPECT_EQ(cmd({"SET", "k", "1", "XX"}), NIL());
  EXPECT_EQ(cmd({"SET", "k", "1", "NX"}), ST("OK"));
  EXPECT_EQ(cmd({"SET", "k", "2", "nx"}), NIL());
  EXPECT_EQ(cmd({"GET", "k"}), S("1"));
  EXPECT_EQ(cmd({"SET", "k", "3", "XX"}), ST("OK"));
  EXPECT_EQ(cmd({"SET", "k", "4", "GET"}), S("3"));
  EXPECT_EQ(cmd({"GET", "k"}), S("4"));
  EXPECT_EQ(cmd({"SET", "k", "5", "NX", "XX"}), ERR("ERR syntax error"));
  EXPECT_EQ(cmd({"SET", "k", "5", "FOO"}), ERR("ERR syntax error"));
  EXPECT_EQ(cmd({"SET", "k", "5", "PX"}), ERR("ERR syntax error"));
  EXPECT_EQ(cmd({"SET", "k", "5", "PX", "0"}),
            ERR("ERR invalid expire time in 'set' command"));
  EXPECT_EQ(cmd({"SET", "k", "5", "PX", "abc"}),
            ERR("ERR value is not an integer or out of range"));
  EXPECT_EQ(cmd({"SET", "k"}),
            ERR("ERR wrong number of arguments for 'set' command"));
}

TEST_F(embedded_store_test, set_nx_px_expires_lazily_on_the_injected_clock) {
  EXPECT_EQ(cmd({"SET", "lock", "a", "NX", "PX", "3000"}), ST("OK"));
  EXPECT_EQ(cmd({"SET", "lock", "b", "NX", "PX", "3000"}), NIL());
  EXPECT_EQ(cmd({"PTTL", "lock"}), I(3000));
  now += 2999;
  EXPECT_EQ(cmd({"PTTL", "lock"}), I(1));
  now += 1; // Redis: a key expires once now > expiry time
  EXPECT_EQ(cmd({"PTTL", "lock"}), I(0));
  EXPECT_EQ(cmd({"GET", "lock"}), S("a"));
  now += 1;
  EXPECT_EQ(cmd({"GET", "lock"}), NIL());
  EXPECT_EQ(cmd({"EXISTS", "lock"}), I(0));
  EXPECT_EQ(cmd({"PTTL", "lock"}), I(-2));
  EXPECT_EQ(cmd({"SET", "lock", "b", "NX", "PX", "3000"}), ST("OK"));
  EXPECT_EQ(cmd({"GET", "lock"}), S("b"));
  // EX is in seconds; a plain SET clears the TTL, KEEPTTL keeps it.
  EXPECT_EQ(cmd({"SET", "lock", "c", "EX", "2"}), ST("OK"));
  EXPECT_EQ(cmd({"PTTL", "lock"}), I(2000));
  EXPECT_EQ(cmd({"SET", "lock", "d", "KEEPTTL"}), ST("OK"));
  EXPECT_EQ(cmd({"PTTL", "lock"}), I(2000));
  EXPECT_EQ(cmd({"SET", "lock", "e"}), ST("OK"));
  EXPECT_EQ(cmd({"PTTL", "lock"}), I(-1));
}

TEST_F(embedded_store_test, pexpire_and_pttl) {
  EXPECT_EQ(cmd({"PEXPIRE", "k", "100"}), I(0));
  EXPECT_EQ(cmd({"PTTL", "k"}), I(-2));
  EXPECT_EQ(cmd({"SET", "k", "v"}), ST("OK"));
  EXPECT_EQ(cmd({"PTTL", "k"}), I(-1));
  EXPECT_EQ(cmd({"PEXPIRE", "k", "100"}), I(1));
  EXPECT_EQ(cmd({"PTTL", "k"}), I(100));
  EXPECT_EQ(cmd({"PEXPIRE", "k", "50", "NX"}), I(0));
  EXPECT_EQ(cmd({"PEXPIRE", "k", "50", "GT"}), I(0));
  EXPECT_EQ(cmd({"PEXPIRE", "k", "500", "GT"}), I(1));
  EXPECT_EQ(cmd({"PTTL", "k"}), I(500));
  EXPECT_EQ(cmd({"PEXPIRE", "k", "5", "NX", "XX"}),
            ERR("ERR NX and XX, GT or LT options at the same time are not "
                "compatible"));
  // INCR keeps the TTL of its key.
  EXPECT_EQ(cmd({"SET", "n", "1", "PX", "100"}), ST("OK"));
  EXPECT_EQ(cmd({"INCR", "n"}), I(2));
  EXPECT_EQ(cmd({"PTTL", "n"}), I(100));
  now += 101;
  EXPECT_EQ(cmd({"INCR", "n"}), I(1));
  // A deadline in the past deletes the key at once.
  EXPECT_EQ(cmd({"PEXPIRE", "k", "0"}), I(1));
  EXPECT_EQ(cmd({"EXISTS", "k"}), I(0));
  // Expiry applies to every type.
  EXPECT_EQ(cmd({"ZADD", "z", "1", "a"}), I(1));
  EXPECT_EQ(cmd({"PEXPIRE", "z", "10"}), I(1));
  now += 11;
  EXPECT_EQ(cmd({"ZCARD", "z"}), I(0));
  EXPECT_EQ(cmd({"ZADD", "z", "1", "a"}), I(1));
}

// -- hashes ----------------------------------------------------------------------

TEST_F(embedded_store_test, hash_commands) {
  EXPECT_EQ(cmd({"HSET", "h", "a", "1", "b", "2"}), I(2));
  EXPECT_EQ(cmd({"HSET", "h", "a", "10", "c", "3"}), I(1));
  EXPECT_EQ(cmd({"HGET", "h", "a"}), S("10"));
  EXPECT_EQ(cmd({"HGET", "h", "x"}), NIL());
  EXPECT_EQ(cmd({"HGET", "nope", "x"}), NIL());
  EXPECT_EQ(cmd({"HEXISTS", "h", "b"}), I(1));
  EXPECT_EQ(cmd({"HEXISTS", "h", "x"}), I(0));
  EXPECT_EQ(cmd({"HLEN", "h"}), I(3));
  EXPECT_EQ(cmd({"HLEN", "nope"}), I(0));

  auto all = cmd({"HGETALL", "h"});
  ASSERT_EQ(all.type, kind::array);
  ASSERT_EQ(all.elements.size(), 6u);
  std::set<std::pair<std::string, std::string>> pairs;
  for (size_t i = 0; i < 6; i += 2)
    pairs.emplace(all.elements[i].str, all.elements[i + 1].str);
  EXPECT_EQ(pairs, (std::set<std::pair<std::string, std::string>>{
                     {"a", "10"}, {"b", "2"}, {"c", "3"}}));
  EXPECT_EQ(cmd({"HGETALL", "nope"}), A({}));

  EXPECT_EQ(cmd({"HDEL", "h", "a", "x", "b"}), I(2));
  EXPECT_EQ(cmd({"HDEL", "h", "c"}), I(1));
  EXPECT_EQ(cmd({"EXISTS", "h"}), I(0)); // an empty hash is no key
  EXPECT_EQ(cmd({"HSET", "h", "a"}),
            ERR("ERR wrong number of arguments for 'hset' command"));
  EXPECT_EQ(cmd({"HSET", "h", "a", "1", "b"}),
            ERR("ERR wrong number of arguments for 'hset' command"));
}

// -- sorted sets --------------------------------------------------------------------

TEST_F(embedded_store_test, zrange_orders_by_score_then_member) {
  EXPECT_EQ(cmd({"ZADD", "z", "2", "b", "1", "c", "1", "a", "3", "d"}), I(4));
  EXPECT_EQ(cmd({"ZRANGE", "z", "0", "-1"}), AS({"a", "c", "b", "d"}));
  EXPECT_EQ(cmd({"ZRANGE", "z", "0", "1"}), AS({"a", "c"}));
  EXPECT_EQ(cmd({"ZRANGE", "z", "-2", "-1"}), AS({"b", "d"}));
  EXPECT_EQ(cmd({"ZRANGE", "z", "1", "100"}), AS({"c", "b", "d"}));
  EXPECT_EQ(cmd({"ZRANGE", "z", "-100", "0"}), AS({"a"}));
  EXPECT_EQ(cmd({"ZRANGE", "z", "3", "3"}), AS({"d"}));
  EXPECT_EQ(cmd({"ZRANGE", "z", "4", "10"}), A({}));
  EXPECT_EQ(cmd({"ZRANGE", "z", "2", "1"}), A({}));
  EXPECT_EQ(cmd({"ZRANGE", "nope", "0", "-1"}), A({}));
  EXPECT_EQ(cmd({"ZRANGE", "z", "0", "-1", "REV"}), AS({"d", "b", "c", "a"}));
  EXPECT_EQ(cmd({"ZRANGE", "z", "0", "1", "WITHSCORES"}),
            AS({"a", "1", "c", "1"}));
  EXPECT_EQ(cmd({"ZRANGE", "z", "x", "1"}),
            ERR("ERR value is not an integer or out of range"));
  EXPECT_EQ(cmd({"ZRANGE", "z", "0", "1", "BOGUS"}), ERR("ERR syntax error"));

  // Re-adding an existing member only moves it; negative and fractional
  // scores order numerically, not as text.
  EXPECT_EQ(cmd({"ZADD", "z", "0", "d", "-1.5", "e", "10", "f"}), I(2));
  EXPECT_EQ(cmd({"ZRANGE", "z", "0", "-1"}),
            AS({"e", "d", "a", "c", "b", "f"}));
  EXPECT_EQ(cmd({"ZCARD", "z"}), I(6));
  EXPECT_EQ(cmd({"ZCARD", "nope"}), I(0));
}

TEST_F(embedded_store_test, zadd_options_and_scores) {
  EXPECT_EQ(cmd({"ZADD", "z", "1", "a"}), I(1));
  EXPECT_EQ(cmd({"ZADD", "z", "NX", "5", "a", "2", "b"}), I(1));
  EXPECT_EQ(cmd({"ZSCORE", "z", "a"}), S("1"));
  EXPECT_EQ(cmd({"ZADD", "z", "XX", "7", "a", "3", "c"}), I(0));
  EXPECT_EQ(cmd({"ZSCORE", "z", "a"}), S("7"));
  EXPECT_EQ(cmd({"ZSCORE", "z", "c"}), NIL());
  EXPECT_EQ(cmd({"ZADD", "z", "CH", "8", "a", "2", "b", "4", "d"}), I(2));
  EXPECT_EQ(cmd({"ZADD", "z", "GT", "CH", "1", "a"}), I(0));
  EXPECT_EQ(cmd({"ZADD", "z", "INCR", "0.5", "a"}), S("8.5"));
  EXPECT_EQ(cmd({"ZADD", "z", "0.1", "x", "1e20", "y", "-inf", "w"}), I(3));
  EXPECT_EQ(cmd({"ZSCORE", "z", "x"}), S("0.10000000000000001"));
  EXPECT_EQ(cmd({"ZSCORE", "z", "y"}), S("1e+20"));
  EXPECT_EQ(cmd({"ZSCORE", "z", "w"}), S("-inf"));
  EXPECT_EQ(cmd({"ZSCORE", "nope", "w"}), NIL());
  EXPECT_EQ(cmd({"ZADD", "z", "nan", "a"}),
            ERR("ERR value is not a valid float"));
  EXPECT_EQ(cmd({"ZADD", "z", "abc", "a"}),
            ERR("ERR value is not a valid float"));
  EXPECT_EQ(cmd({"ZADD", "z", "1", "a", "2"}), ERR("ERR syntax error"));
  EXPECT_EQ(cmd({"ZADD", "z", "1"}),
            ERR("ERR wrong number of arguments for 'zadd' command"));
  EXPECT_EQ(cmd({"ZADD", "z", "NX", "XX", "1", "a"}),
            ERR("ERR XX and NX options at the same time are not compatible"));
}

TEST_F(embedded_store_test, zrem_answers_one_only_when_the_member_was_there) {
  EXPECT_EQ(cmd({"ZADD", "z", "1", "a", "2", "b", "3", "c"}), I(3));
  EXPECT_EQ(cmd({"ZREM", "z", "a"}), I(1));
  EXPECT_EQ(cmd({"ZREM", "z", "a"}), I(0));
  EXPECT_EQ(cmd({"ZREM", "z", "x"}), I(0));
  EXPECT_EQ(cmd({"ZREM", "nope", "x"}), I(0));
  EXPECT_EQ(cmd({"ZREM", "z", "b", "x", "c", "b"}), I(2));
  EXPECT_EQ(cmd({"EXISTS", "z"}), I(0)); // an empty zset is no key
}

TEST_F(embedded_store_test, zrangebyscore_bounds_and_limit) {
  EXPECT_EQ(
    cmd({"ZADD", "z", "1", "a", "2", "b", "2", "c", "3", "d", "5", "e"}), I(5));
  EXPECT_EQ(cmd({"ZRANGEBYSCORE", "z", "-inf", "+inf"}),
            AS({"a", "b", "c", "d", "e"}));
  EXPECT_EQ(cmd({"ZRANGEBYSCORE", "z", "2", "3"}), AS({"b", "c", "d"}));
  EXPECT_EQ(cmd({"ZRANGEBYSCORE", "z", "(2", "3"}), AS({"d"}));
  EXPECT_EQ(cmd({"ZRANGEBYSCORE", "z", "-inf", "(3"}), AS({"a", "b", "c"}));
  EXPECT_EQ(cmd({"ZRANGEBYSCORE", "z", "(1", "(5"}), AS({"b", "c", "d"}));
  EXPECT_EQ(cmd({"ZRANGEBYSCORE", "z", "3", "2"}), A({}));
  EXPECT_EQ(cmd({"ZRANGEBYSCORE", "z", "(2", "2"}), A({}));
  EXPECT_EQ(cmd({"ZRANGEBYSCORE", "z", "-inf", "+inf", "LIMIT", "1", "2"}),
            AS({"b", "c"}));
  EXPECT_EQ(cmd({"ZRANGEBYSCORE", "z", "-inf", "+inf", "LIMIT", "3", "-1"}),
            AS({"d", "e"}));
  EXPECT_EQ(cmd({"ZRANGEBYSCORE", "z", "-inf", "+inf", "LIMIT", "1", "0"}),
            A({}));
  EXPECT_EQ(cmd({"ZRANGEBYSCORE", "z", "-inf", "+inf", "LIMIT", "-1", "2"}),
            A({}));
  EXPECT_EQ(
    cmd({"ZRANGEBYSCORE", "z", "2", "inf", "WITHSCORES", "LIMIT", "0", "2"}),
    AS({"b", "2", "c", "2"}));
  EXPECT_EQ(cmd({"ZRANGEBYSCORE", "nope", "-inf", "+inf"}), A({}));
  EXPECT_EQ(cmd({"ZRANGEBYSCORE", "z", "a", "b"}),
            ERR("ERR min or max is not a float"));
  EXPECT_EQ(cmd({"ZRANGEBYSCORE", "z", "1", "2", "LIMIT", "1"}),
            ERR("ERR syntax error"));
}

// -- streams ---------------------------------------------------------------------------

TEST_F(embedded_store_test, stream_commands) {
  EXPECT_EQ(cmd({"XLEN", "s"}), I(0));
  EXPECT_EQ(cmd({"XADD", "s", "*", "f", "v"}), S("1700000000123-0"));
  EXPECT_EQ(cmd({"XADD", "s", "*", "a", "b", "c", "d"}), S("1700000000123-1"));
  now += 5;
  EXPECT_EQ(cmd({"XADD", "s", "*", "x", "y"}), S("1700000000128-0"));
  now -= 100; // a clock going back never makes ids go back
  EXPECT_EQ(cmd({"XADD", "s", "*", "x", "z"}), S("1700000000128-1"));
  EXPECT_EQ(cmd({"XLEN", "s"}), I(4));
  EXPECT_EQ(cmd({"XRANGE", "s", "-", "+", "COUNT", "2"}),
            A({A({S("1700000000123-0"), AS({"f", "v"})}),
               A({S("1700000000123-1"), AS({"a", "b", "c", "d"})})}));
  auto all = cmd({"XRANGE", "s", "-", "+"});
  ASSERT_EQ(all.type, kind::array);
  ASSERT_EQ(all.elements.size(), 4u);
  EXPECT_EQ(all.elements[3], A({S("1700000000128-1"), AS({"x", "z"})}));
  EXPECT_EQ(cmd({"XRANGE", "s", "1700000000128", "+"}),
            A({A({S("1700000000128-0"), AS({"x", "y"})}),
               A({S("1700000000128-1"), AS({"x", "z"})})}));
  EXPECT_EQ(cmd({"XRANGE", "s", "(1700000000123-1", "1700000000128-0"}),
            A({A({S("1700000000128-0"), AS({"x", "y"})})}));
  EXPECT_EQ(cmd({"XRANGE", "nope", "-", "+"}), A({}));
  EXPECT_EQ(cmd({"XADD", "s", "5-1", "f", "v"}),
            ERR("ERR The ID specified in XADD is equal or smaller than the "
                "target stream top item"));
  EXPECT_EQ(cmd({"XADD", "s", "*", "f"}),
            ERR("ERR wrong number of arguments for 'xadd' command"));
  EXPECT_EQ(cmd({"XADD", "s2", "abc", "f", "v"}),
            ERR("ERR Invalid stream ID specified as stream command argument"));
  EXPECT_EQ(cmd({"XADD", "s2", "7-3", "f", "v"}), S("7-3"));
  EXPECT_EQ(cmd({"XADD", "s2", "7-*", "f", "v"}), S("7-4"));
}

TEST_F(embedded_store_test, xadd_trims_by_maxlen_and_minid) {
  for (int i = 1; i <= 5; ++i)
    EXPECT_EQ(
      cmd({"XADD", "s", std::to_string(i) + "-0", "f", std::to_string(i)}),
      S(std::to_string(i) + "-0"));
  // Exact and approximate MAXLEN both keep the newest N here.
  EXPECT_EQ(cmd({"XADD", "s", "MAXLEN", "3", "6-0", "f", "6"}), S("6-0"));
  EXPECT_EQ(cmd({"XLEN", "s"}), I(3));
  EXPECT_EQ(cmd({"XRANGE", "s", "-", "+", "COUNT", "1"}),
            A({A({S("4-0"), AS({"f", "4"})})}));
  EXPECT_EQ(cmd({"XADD", "s", "maxlen", "~", "2", "*", "f", "7"}).type,
            kind::string);
  EXPECT_EQ(cmd({"XLEN", "s"}), I(2));
  EXPECT_EQ(cmd({"XADD", "s", "MAXLEN", "=", "2", "*", "f", "8"}).type,
            kind::string);
  EXPECT_EQ(cmd({"XLEN", "s"}), I(2));
  // LIMIT caps what one approximate trim drops.
  for (int i = 0; i < 5; ++i)
    cmd({"XADD", "s", "*", "f", "x"});
  EXPECT_EQ(cmd({"XLEN", "s"}), I(7));
  EXPECT_EQ(
    cmd({"XADD", "s", "MAXLEN", "~", "1", "LIMIT", "3", "*", "f", "y"}).type,
    kind::string);
  EXPECT_EQ(cmd({"XLEN", "s"}), I(5));
  // MAXLEN 0 keeps the key (and its last id) but no entry.
  EXPECT_EQ(cmd({"XADD", "s", "MAXLEN", "0", "*", "f", "z"}).type,
            kind::string);
  EXPECT_EQ(cmd({"XLEN", "s"}), I(0));
  EXPECT_EQ(cmd({"XADD", "s", "1-0", "f", "v"}),
            ERR("ERR The ID specified in XADD is equal or smaller than the "
                "target stream top item"));
  // MINID drops the entries below it.
  for (int i = 1; i <= 4; ++i)
    cmd({"XADD", "m", std::to_string(i) + "-0", "f", "v"});
  EXPECT_EQ(cmd({"XADD", "m", "MINID", "3", "5-0", "f", "v"}), S("5-0"));
  EXPECT_EQ(cmd({"XRANGE", "m", "-", "+"}),
            A({A({S("3-0"), AS({"f", "v"})}), A({S("4-0"), AS({"f", "v"})}),
               A({S("5-0"), AS({"f", "v"})})}));
  // NOMKSTREAM: no stream is created.
  EXPECT_EQ(cmd({"XADD", "none", "NOMKSTREAM", "*", "f", "v"}), NIL());
  EXPECT_EQ(cmd({"EXISTS", "none"}), I(0));
  EXPECT_EQ(cmd({"XADD", "m", "NOMKSTREAM", "MAXLEN", "1", "*", "f", "v"}).type,
            kind::string);
  EXPECT_EQ(cmd({"XLEN", "m"}), I(1));
  // The refusals of bad options: stream_conformance (both stores).
  EXPECT_EQ(cmd({"XLEN", "m"}), I(1));
}

// -- errors ---------------------------------------------------------------------------------

TEST_F(embedded_store_test, wrong_type_unknown_command_and_arity) {
  EXPECT_EQ(cmd({"SET", "s", "x"}), ST("OK"));
  EXPECT_EQ(cmd({"HSET", "h", "f", "v"}), I(1));
  EXPECT_EQ(cmd({"ZADD", "z", "1", "m"}), I(1));
  EXPECT_EQ(cmd({"XADD", "x", "*", "f", "v"}).type, kind::string);
  const std::vector<store_command> wrong
    = {{"HGET", "s", "f"},
       {"HSET", "s", "f", "v"},
       {"HDEL", "s", "f"},
       {"HLEN", "s"},
       {"HEXISTS", "s", "f"},
       {"HGETALL", "z"},
       {"ZADD", "h", "1", "m"},
       {"ZREM", "s", "m"},
       {"ZSCORE", "h", "m"},
       {"ZCARD", "s"},
       {"ZRANGE", "h", "0", "-1"},
       {"ZRANGEBYSCORE", "s", "-inf", "+inf"},
       {"GET", "h"},
       {"INCR", "z"},
       {"XADD", "s", "*", "f", "v"},
       {"XLEN", "h"},
       {"XRANGE", "z", "-", "+"}};
  for (const auto& c : wrong)
    EXPECT_EQ(cmd(c), ERR(wrongtype)) << c[0];
  // The data is unchanged, and SET overwrites any type.
  EXPECT_EQ(cmd({"GET", "s"}), S("x"));
  EXPECT_EQ(cmd({"SET", "h", "now a string"}), ST("OK"));
  EXPECT_EQ(cmd({"GET", "h"}), S("now a string"));
  EXPECT_EQ(cmd({"DEL", "s", "z", "x"}), I(3));

  EXPECT_EQ(cmd({"FLUSHALL"}), ERR("ERR unknown command 'FLUSHALL'"));
  EXPECT_EQ(cmd({"GET"}), ERR("ERR wrong number of arguments for 'get' "
                              "command"));
  EXPECT_EQ(cmd({"HGET", "h", "f", "x"}),
            ERR("ERR wrong number of arguments for 'hget' command"));
}

// -- Lua: environment and type conversion ----------------------------------------

TEST_F(embedded_eval_test, redis_to_lua_conversion) {
  EXPECT_EQ(cmd({"SET", "k", "v"}), ST("OK"));
  EXPECT_EQ(eval("local r = redis.call('GET', 'nope')\n"
                 "return {type(r), tostring(r)}"),
            AS({"boolean", "false"}));
  EXPECT_EQ(eval("local r = redis.call('GET', 'k')\n"
                 "return {type(r), r}"),
            AS({"string", "v"}));
  EXPECT_EQ(eval("local r = redis.call('INCR', 'n')\n"
                 "return {type(r), tostring(r + 0.5)}"),
            AS({"number", "1.5"}));
  EXPECT_EQ(eval("local r = redis.call('SET', 'k', 'w')\n"
                 "return {type(r), r.ok}"),
            AS({"table", "OK"}));
  EXPECT_EQ(eval("local r = redis.call('TIME')\n"
                 "return {type(r), #r, r[1], r[2]}"),
            A({S("table"), I(2), S("1700000000"), S("123000")}));
  EXPECT_EQ(eval("redis.call('ZADD', 'z', 1, 'a', 2, 'b')\n"
                 "local r = redis.call('ZRANGE', 'z', 0, -1, 'WITHSCORES')\n"
                 "return {type(r), #r, r[1], r[2], r[3], r[4]}"),
            A({S("table"), I(4), S("a"), S("1"), S("b"), S("2")}));
  // Nested arrays (XRANGE) arrive as nested tables.
  EXPECT_EQ(eval("redis.call('XADD', 's', '*', 'f', 'v')\n"
                 "local r = redis.call('XRANGE', 's', '-', '+')\n"
                 "return {#r, r[1][1], r[1][2][1], r[1][2][2]}"),
            A({I(1), S("1700000000123-0"), S("f"), S("v")}));
  // An error reply: pcall gives a table {err=...}; call aborts the script.
  EXPECT_EQ(eval("local r = redis.pcall('HGET', 'k', 'f')\n"
                 "return {type(r), r.err}"),
            AS({"table", wrongtype}));
  EXPECT_EQ(eval("return redis.pcall('HGET', 'k', 'f')"), ERR(wrongtype));
  EXPECT_EQ(eval("redis.call('SET', 'before', '1')\n"
                 "redis.call('HGET', 'k', 'f')\n"
                 "redis.call('SET', 'after', '1')\n"
                 "return 'unreachable'"),
            ERR(wrongtype));
  // Like Redis: no rollback of what ran before the error.
  EXPECT_EQ(cmd({"GET", "before"}), S("1"));
  EXPECT_EQ(cmd({"GET", "after"}), NIL());
  // pcall also catches errors of an unknown command.
  EXPECT_EQ(eval("return redis.pcall('NOPE', 'x').err"),
            S("ERR unknown command 'NOPE'"));
}

TEST_F(embedded_eval_test, lua_numbers_become_redis_arguments_like_redis) {
  // Redis formats number arguments with "%.17g", not Lua's "%.14g".
  EXPECT_EQ(
    eval("redis.call('SET', 'a', 0.1)\n"
         "redis.call('SET', 'b', 1700000000123)\n"
         "redis.call('SET', 'c', 123456789012345678)\n"
         "return {redis.call('GET', 'a'), redis.call('GET', 'b'),"
         " redis.call('GET', 'c')}"),
    AS({"0.10000000000000001", "1700000000123", "1.2345678901234568e+17"}));
  EXPECT_EQ(eval("return redis.pcall('SET', 'a', {})"),
            ERR("ERR Lua redis lib command arguments must be strings or "
                "integers"));
  EXPECT_EQ(eval("return redis.pcall()").type, kind::error);
  EXPECT_EQ(eval("redis.call('SET', 'a', true)").type, kind::error);
}

TEST_F(embedded_eval_test, lua_to_redis_conversion) {
  EXPECT_EQ(eval("return 'x'"), S("x"));
  EXPECT_EQ(eval("return 42"), I(42));
  EXPECT_EQ(eval("return 3.99"), I(3));  // truncated
  EXPECT_EQ(eval("return -2.7"), I(-2)); // towards zero
  EXPECT_EQ(eval("return true"), I(1));
  EXPECT_EQ(eval("return false"), NIL());
  EXPECT_EQ(eval("return nil"), NIL());
  EXPECT_EQ(eval("return"), NIL());
  EXPECT_EQ(eval("return {}"), A({}));
  // Arrays stop at the first nil; false inside an array is a nil element.
  EXPECT_EQ(eval("return {1, 'a', nil, 'b'}"), A({I(1), S("a")}));
  EXPECT_EQ(eval("return {1, false, true, 2.5}"), A({I(1), NIL(), I(1), I(2)}));
  EXPECT_EQ(eval("return {'a', {'b', {3}}, {}}"),
            A({S("a"), A({S("b"), A({I(3)})}), A({})}));
  // Keys other than 1..n are ignored.
  EXPECT_EQ(eval("return {'a', x = 'y'}"), AS({"a"}));
  // Status and error tables.
  EXPECT_EQ(eval("return {ok = 'FINE'}"), ST("FINE"));
  EXPECT_EQ(eval("return redis.status_reply('QUEUED')"), ST("QUEUED"));
  EXPECT_EQ(eval("return {err = 'MY failure'}"), ERR("MY failure"));
  EXPECT_EQ(eval("return redis.error_reply('ERR bad thing')"),
            ERR("ERR bad thing"));
  EXPECT_EQ(eval("return {err = 'e', ok = 'o'}"), ERR("e"));
  EXPECT_EQ(eval("return {'a', redis.error_reply('inner'), {ok = 'fine'}}"),
            A({S("a"), ERR("inner"), ST("fine")}));
  // Round trip of a status reply through redis.call.
  EXPECT_EQ(eval("return redis.call('SET', 'k', 'v')"), ST("OK"));
}

TEST_F(embedded_eval_test, environment_is_like_redis) {
  EXPECT_EQ(eval("return {KEYS[1], KEYS[2], ARGV[1], #KEYS, #ARGV}",
                 {"k1", "k2"}, {"a1"}),
            A({S("k1"), S("k2"), S("a1"), I(2), I(1)}));
  // KEYS and ARGV are replaced per call.
  EXPECT_EQ(eval("return {#KEYS, #ARGV}"), A({I(0), I(0)}));
  // Safe libraries only.
  EXPECT_EQ(eval("return {type(rawget(_G, 'os')), type(rawget(_G, 'io')),"
                 " type(rawget(_G, 'dofile')), type(rawget(_G, 'loadfile')),"
                 " type(string.format), type(table.concat), type(math.floor),"
                 " type(redis.call)}"),
            AS({"nil", "nil", "nil", "nil", "function", "function", "function",
                "function"}));
  // Globals are protected; runtime errors become error replies.
  auto missing = eval("return undefined_thing");
  ASSERT_EQ(missing.type, kind::error);
  EXPECT_TRUE(starts_with(missing.str, "ERR user_script:1: Script attempted "
                                       "to access nonexistent global variable "
                                       "'undefined_thing'"))
    << missing.str;
  // Globals are read-only, new or existing, so no script can break the next.
  for (const char* assign :
       {"x = 1", "tostring = nil", "KEYS = nil", "redis = {}", "_G.y = 2"}) {
    auto refused = eval(assign);
    ASSERT_EQ(refused.type, kind::error) << assign;
    EXPECT_TRUE(starts_with(refused.str, "ERR user_script:1: Attempt to "
                                         "modify a readonly table"))
      << refused.str;
  }
  EXPECT_EQ(eval("setmetatable(_G, nil)").type, kind::error);
  EXPECT_EQ(eval("return {tostring(7), KEYS[1], type(redis.call)}", {"k"}),
            AS({"7", "k", "function"}));
  // Locals are fine, of course.
  EXPECT_EQ(eval("local x = 1\nx = x + 1\nreturn x"), I(2));
  auto runtime = eval("local t = nil\nreturn t.x");
  ASSERT_EQ(runtime.type, kind::error);
  EXPECT_TRUE(starts_with(runtime.str, "ERR user_script:2:")) << runtime.str;
  EXPECT_EQ(eval("error('boom', 0)"), ERR("ERR boom"));
  EXPECT_EQ(eval("error({err = 'CUSTOM raised'})"), ERR("CUSTOM raised"));
  auto syntax = eval("return (");
  ASSERT_EQ(syntax.type, kind::error);
  EXPECT_TRUE(starts_with(syntax.str, "ERR Error compiling script"))
    << syntax.str;
  // The engine still works after errors.
  EXPECT_EQ(eval("return redis.call('INCR', 'n')"), I(1));
}

// -- the scripts of lua/ ---------------------------------------------------------------

TEST_F(embedded_store_test, enqueue_creates_then_is_idempotent) {
  EXPECT_EQ(enqueue("u1", "t1"),
            AS({"created", "t1", "1", "1", std::to_string(t0 + 10000)}));
  EXPECT_EQ(enqueue("u1", "t1"), AS({"exists", "t1", "1", "1",
                                     std::to_string(t0 + 10000), "waiting"}));
  EXPECT_EQ(enqueue("u1", "t9"), AS({"duplicate", "t1"}));
  EXPECT_EQ(enqueue("u2", "t2"),
            AS({"created", "t2", "2", "2", std::to_string(t0 + 10000)}));
  EXPECT_EQ(enqueue("u3", "t3", "0"), AS({"invalid", "ttl"}));
  EXPECT_EQ(enqueue("bad user", "t3"), AS({"invalid", "user"}));
  EXPECT_EQ(cmd({"ZRANGE", "mm:{q}:waiting", "0", "-1", "WITHSCORES"}),
            AS({"t1", "1", "t2", "2"}));
  // Two records and their users' pointers ('#' .. user).
  EXPECT_EQ(cmd({"HGET", "mm:{q}:tickets", "#u1"}), S("t1"));
  EXPECT_EQ(cmd({"HLEN", "mm:{q}:tickets"}), I(4));
  EXPECT_EQ(cmd({"ZSCORE", "mm:{q}:deadlines", "t1"}),
            S(std::to_string(t0 + 10000)));
  EXPECT_EQ(cmd({"GET", "mm:{q}:seq"}), S("2"));
  // A ghost past its deadline makes room for the same user's new ticket.
  now += 10001;
  EXPECT_EQ(enqueue("u1", "t4"),
            AS({"created", "t4", "3", "3", std::to_string(now + 10000)}));
  EXPECT_EQ(cmd({"ZRANGE", "mm:{q}:waiting", "0", "-1"}), AS({"t2", "t4"}));
  // Queues are independent.
  EXPECT_EQ(script(script_id::enqueue, {"u1", "t1", "n1", "", "500"}, "other"),
            AS({"created", "t1", "1", "1", std::to_string(now + 500)}));
}

TEST_F(embedded_store_test, claim_heartbeat_requeue_release_cancel) {
  ASSERT_EQ(enqueue("u1", "t1").elements.at(0), S("created"));
  // heartbeat extends the presence deadline of the current token only.
  now += 1000;
  EXPECT_EQ(script(script_id::heartbeat, {"u1", "1", "20000"}),
            AS({"alive", "t1", "waiting", std::to_string(now + 20000)}));
  EXPECT_EQ(script(script_id::heartbeat, {"u1", "7", "20000"}), AS({"gone"}));
  EXPECT_EQ(script(script_id::heartbeat, {"u9", "1", "20000"}), AS({"gone"}));

  // claim: u2 takes u1's ticket.
  auto matched = script(script_id::claim,
                        {"u2", "t2", "n2", "b=2", "10000", "10", "30000", "0"});
  EXPECT_EQ(matched,
            AS({"matched", "t2", "2", "u1", "t1", "n1", "a=1", "1", "1", "0"}));
  EXPECT_EQ(cmd({"ZCARD", "mm:{q}:waiting"}), I(0));
  EXPECT_EQ(cmd({"ZSCORE", "mm:{q}:deadlines", "t1"}),
            S(std::to_string(now + 30000)));
  // A retried claim answers the same match; the claimed side learns it.
  EXPECT_EQ(script(script_id::claim,
                   {"u2", "t2", "n2", "b=2", "10000", "10", "30000", "0"}),
            matched);
  EXPECT_EQ(script(script_id::claim,
                   {"u1", "t1", "n1", "a=1", "10000", "10", "30000", "1"}),
            AS({"claimed", "t1", "1", "u2", "t2", "n2"}));
  EXPECT_EQ(script(script_id::heartbeat, {"u1", "1", "20000"}),
            AS({"alive", "t1", "claimed", std::to_string(now + 20000)}));
  // cancel of a claimed ticket is refused: the finalizer owns it.
  EXPECT_EQ(script(script_id::cancel, {"u1", "1"}),
            AS({"in_flight", "t1", "claimed", "n2"}));

  // requeue puts t1 back at its original score; again is a no-op.
  EXPECT_EQ(script(script_id::requeue, {"t1"}), AS({"requeued", "t1", "1"}));
  EXPECT_EQ(script(script_id::requeue, {"t1"}), AS({"waiting", "t1", "1"}));
  EXPECT_EQ(cmd({"ZRANGE", "mm:{q}:waiting", "0", "-1", "WITHSCORES"}),
            AS({"t1", "1"}));
  EXPECT_EQ(script(script_id::requeue, {"t9"}), AS({"gone"}));

  // release removes the claimer, never a waiting ticket.
  EXPECT_EQ(script(script_id::release, {"t2"}), AS({"released", "t2"}));
  EXPECT_EQ(script(script_id::release, {"t2"}), AS({"gone"}));
  EXPECT_EQ(script(script_id::release, {"t1"}), AS({"waiting", "t1"}));
  EXPECT_EQ(cmd({"HGET", "mm:{q}:tickets", "#u2"}), NIL());

  // cancel is compare-and-delete by token.
  EXPECT_EQ(script(script_id::cancel, {"u1", "2"}), AS({"stale_token", "t1"}));
  EXPECT_EQ(script(script_id::cancel, {"u1", "1"}), AS({"cancelled", "t1"}));
  EXPECT_EQ(script(script_id::cancel, {"u1", "1"}), AS({"not_found"}));
  EXPECT_EQ(script(script_id::cancel, {"u1", "x"}), AS({"invalid", "token"}));
  for (const char* key :
       {"mm:{q}:waiting", "mm:{q}:tickets", "mm:{q}:users", "mm:{q}:deadlines"})
    EXPECT_EQ(cmd({"EXISTS", key}), I(0)) << key;
}

TEST_F(embedded_store_test, claim_enqueues_when_nobody_is_waiting) {
  EXPECT_EQ(
    script(script_id::claim,
           {"u1", "t1", "n1", "", "5000", "10", "30000", "0"}),
    AS({"queued", "t1", "1", "1", std::to_string(t0 + 5000), "0", "0"}));
  // A stale candidate is removed and counted, then the caller queues.
  now += 5001;
  EXPECT_EQ(
    script(script_id::claim,
           {"u2", "t2", "n2", "", "5000", "10", "30000", "0"}),
    AS({"queued", "t2", "2", "2", std::to_string(now + 5000), "1", "0"}));
  EXPECT_EQ(cmd({"ZRANGE", "mm:{q}:waiting", "0", "-1"}), AS({"t2"}));
  EXPECT_EQ(script(script_id::claim,
                   {"u3", "t3", "n3", "", "5000", "0", "30000", "0"}),
            AS({"invalid", "scan"}));
}

TEST_F(embedded_store_test, sweep_removes_tickets_past_their_deadline) {
  EXPECT_EQ(script(script_id::sweep, {"10"}),
            AS({"swept", "0", "0", "0", "0"}));
  for (int i = 0; i < 3; ++i) {
    auto n = std::to_string(i);
    ASSERT_EQ(
      enqueue("u" + n, "t" + n, std::to_string(1000 * (i + 1))).elements.at(0),
      S("created"));
  }
  now += 2001; // t0 and t1 are past their deadlines, t2 is not
  // depth: what is left in the waiting set (t1, stale, is still there)
  EXPECT_EQ(script(script_id::sweep, {"1"}), AS({"swept", "1", "1", "2", "2"}));
  EXPECT_EQ(script(script_id::sweep, {"10"}),
            AS({"swept", "1", "0", "1", "1"}));
  EXPECT_EQ(cmd({"ZRANGE", "mm:{q}:waiting", "0", "-1"}), AS({"t2"}));
  EXPECT_EQ(cmd({"HLEN", "mm:{q}:tickets"}), I(2)); // t2 and #u2
  EXPECT_EQ(cmd({"HGET", "mm:{q}:tickets", "#u2"}), S("t2"));
  EXPECT_EQ(script(script_id::sweep, {"0"}), AS({"invalid", "batch"}));
}

TEST_F(embedded_store_test, run_answers_every_call_in_order) {
  auto keys = queue_keys("q");
  auto replies = store->run(
    {script_call{script_id::enqueue, keys, {"u1", "t1", "n1", "", "1000"}},
     script_call{script_id::enqueue, {}, {"u2", "t2", "n1", "", "1000"}},
     script_call{script_id::enqueue, keys, {"u2", "t2", "n1", "", "1000"}},
     script_call{static_cast<script_id>(200), keys, {}}});
  ASSERT_EQ(replies.size(), 4u);
  for (const auto& r : replies)
    EXPECT_EQ(r.code, errc::none);
  EXPECT_EQ(replies[0].value.elements.at(0), S("created"));
  // No keys: redis.call gets a nil key and fails; the script reply is an
  // error, the store itself is fine.
  EXPECT_EQ(replies[1].value.type, kind::error);
  EXPECT_EQ(replies[2].value.elements.at(0), S("created"));
  EXPECT_EQ(replies[3].value.type, kind::error);
  EXPECT_TRUE(store->run({}).empty());
}

TEST_F(embedded_store_test, concurrent_connections_run_scripts_atomically) {
  constexpr int per_thread = 200;
  std::vector<std::thread> threads;
  std::vector<std::vector<std::string>> tokens(4);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([this, t, &tokens] {
      auto conn = factory->connect();
      for (int i = 0; i < per_thread; ++i) {
        auto id = std::to_string(t) + "-" + std::to_string(i);
        auto r
          = conn->run({script_call{script_id::enqueue,
                                   queue_keys("q"),
                                   {"u" + id, "t" + id, "n", "", "60000"}}});
        if (r.size() == 1 && r[0].value.elements.size() > 2)
          tokens[t].push_back(r[0].value.elements[2].str);
      }
    });
  }
  for (auto& th : threads)
    th.join();
  std::set<std::string> unique;
  for (const auto& ts : tokens) {
    EXPECT_EQ(ts.size(), static_cast<size_t>(per_thread));
    unique.insert(ts.begin(), ts.end());
  }
  EXPECT_EQ(unique.size(), 4u * per_thread);
  EXPECT_EQ(cmd({"ZCARD", "mm:{q}:waiting"}), I(4 * per_thread));
  EXPECT_EQ(cmd({"GET", "mm:{q}:seq"}), S(std::to_string(4 * per_thread)));
}

} // namespace
