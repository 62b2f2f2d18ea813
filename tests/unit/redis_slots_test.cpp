// Redis Cluster's key-to-slot rule and slot map (persistence/queue/
// redis_slots.hpp), against the values the cluster specification gives.
// tests/integration/redis_cluster_test.cpp checks the same rule against a
// real cluster's CLUSTER KEYSLOT.

#include <gtest/gtest.h>

#include "persistence/queue/queue_codec.hpp"
#include "persistence/queue/redis_slots.hpp"

using namespace mm;
using namespace mm::redis_slots;

TEST(redis_slots, crc16_is_xmodem) {
  EXPECT_EQ(crc16("123456789"), 0x31C3);
  EXPECT_EQ(crc16(""), 0);
}

TEST(redis_slots, hash_tags_as_the_spec_defines_them) {
  EXPECT_EQ(hash_tag("foo"), "foo");
  EXPECT_EQ(hash_tag("{user1000}.following"), "user1000");
  EXPECT_EQ(hash_tag("foo{}{bar}"), "foo{}{bar}"); // empty first tag: all
  EXPECT_EQ(hash_tag("foo{{bar}}zap"), "{bar");
  EXPECT_EQ(hash_tag("foo{bar}{zap}"), "bar");
  EXPECT_EQ(hash_tag("{"), "{");
  EXPECT_EQ(hash_tag("a{b"), "a{b");
  EXPECT_EQ(key_slot("{user1000}.following"), key_slot("user1000"));
  EXPECT_EQ(key_slot("123456789"), 12739);
}

TEST(redis_slots, every_key_of_a_queue_shares_one_slot) {
  for (const char* q : {"default", "eu-ranked", "q-1", "x"}) {
    auto keys = codec::queue_keys(q);
    ASSERT_FALSE(keys.empty());
    for (const auto& k : keys)
      EXPECT_EQ(key_slot(k), key_slot(keys.front())) << q << " " << k;
  }
}

TEST(redis_slots, redirects_parse_and_garbage_does_not) {
  auto m = parse_redirect("MOVED 3999 127.0.0.1:6381");
  ASSERT_TRUE(m);
  EXPECT_FALSE(m->ask);
  EXPECT_EQ(m->slot, 3999);
  EXPECT_EQ(m->to.host, "127.0.0.1");
  EXPECT_EQ(m->to.port, 6381);
  auto a = parse_redirect("ASK 0 [::1]:7000");
  ASSERT_TRUE(a);
  EXPECT_TRUE(a->ask);
  EXPECT_EQ(a->to.host, "::1");
  for (const char* bad :
       {"MOVED", "MOVED 16384 h:1", "MOVED x h:1", "MOVED 1 h", "MOVED 1 h:0",
        "MOVED 1 :1", "ASK 1 h:99999", "ERR MOVED 1 h:1", "moved 1 h:1"})
    EXPECT_FALSE(parse_redirect(bad)) << bad;
  EXPECT_TRUE(transient_error("TRYAGAIN Multiple keys request during "
                              "rehashing of slot"));
  EXPECT_TRUE(transient_error("CLUSTERDOWN The cluster is down"));
  EXPECT_FALSE(transient_error("ERR unknown command"));
}

namespace {

store_value integer(int64_t v) {
  store_value x;
  x.type = store_value::kind::integer;
  x.integer = v;
  return x;
}

store_value str(std::string s) {
  store_value x;
  x.type = store_value::kind::string;
  x.str = std::move(s);
  return x;
}

store_value arr(std::vector<store_value> e) {
  store_value x;
  x.type = store_value::kind::array;
  x.elements = std::move(e);
  return x;
}

store_value range(int64_t a, int64_t b, const char* host, int64_t port) {
  return arr({integer(a), integer(b),
              arr({str(host), integer(port), str("id")}),
              arr({str(host), integer(port + 1), str("replica")})});
}

} // namespace

TEST(redis_slots, the_map_follows_cluster_slots_and_moved) {
  slot_map m;
  EXPECT_FALSE(m.node_of(0));
  auto ok = m.assign(arr({range(0, 5460, "127.0.0.1", 7000),
                          range(5461, 10922, "127.0.0.1", 7002),
                          range(10923, 16383, "127.0.0.1", 7004)}));
  ASSERT_TRUE(ok) << ok.error().detail;
  EXPECT_EQ(m.nodes().size(), 3u);
  EXPECT_EQ(m.node_of(0)->port, 7000);
  EXPECT_EQ(m.node_of(5461)->port, 7002);
  EXPECT_EQ(m.node_of(16383)->port, 7004);
  m.move(5461, address{"127.0.0.1", 7000});
  EXPECT_EQ(m.node_of(5461)->port, 7000);
  EXPECT_EQ(m.node_of(5462)->port, 7002);
  m.move(1, address{"127.0.0.1", 7010}); // a node not seen before
  EXPECT_EQ(m.node_of(1)->port, 7010);
  EXPECT_EQ(m.nodes().size(), 4u);
}

TEST(redis_slots, an_incomplete_or_odd_map_is_refused_and_keeps_the_old) {
  slot_map m;
  ASSERT_TRUE(m.assign(arr({range(0, 16383, "127.0.0.1", 7000)})));
  // A slot nobody serves (a cluster being created).
  auto gap = m.assign(arr({range(0, 100, "127.0.0.1", 7001)}));
  EXPECT_FALSE(gap);
  EXPECT_EQ(gap.error().code, errc::protocol_error);
  EXPECT_FALSE(m.assign(str("nope")));
  EXPECT_FALSE(m.assign(
    arr({arr({integer(0), integer(16384), arr({str("h"), integer(1)})})})));
  EXPECT_FALSE(m.assign(
    arr({arr({integer(0), integer(16383), arr({str(""), integer(1)})})})));
  EXPECT_EQ(m.node_of(5)->port, 7000); // unchanged
}

TEST(redis_slots, commands_route_by_their_first_key) {
  EXPECT_EQ(command_slot({"GET", "{q}x"}), key_slot("q"));
  EXPECT_EQ(command_slot({"xadd", "mm:events", "*", "k", "v"}),
            key_slot("mm:events"));
  EXPECT_FALSE(command_slot({"PING"}));
  EXPECT_FALSE(command_slot({"cluster", "slots"}));
  EXPECT_FALSE(command_slot({"INFO", "commandstats"}));
  script_call c{script_id{}, {"mm:{q}:waiting", "mm:{q}:tickets"}, {}};
  EXPECT_EQ(call_slot(c), key_slot("q"));
  EXPECT_FALSE(call_slot(script_call{script_id{}, {}, {}}));
}
