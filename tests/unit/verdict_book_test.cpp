// The finalizer's book of ticket fates (actors/verdict_book.hpp): what a
// late cancel is told, for how long, and what a ticket claimed again drops.

#include <gtest/gtest.h>

#include "actors/verdict_book.hpp"

using namespace mm;
using namespace std::chrono_literals;

namespace {

const cancel_verdict matched{false, "s1"};
const cancel_verdict honoured{true, {}};
const cancel_verdict back_in_queue{false, {}};

struct book_fixture : ::testing::Test {
  // Two TTLs apart, so that one used for the other shows.
  verdict_book book{15000ms, 2000ms};
  verdict_book::steady_time t0{};
};

} // namespace

TEST_F(book_fixture, a_final_verdict_answers_until_it_ages_out) {
  book.record("k", matched, t0);
  auto* v = book.final_verdict("k", t0 + 14999ms);
  ASSERT_NE(v, nullptr);
  EXPECT_FALSE(v->honoured);
  EXPECT_EQ(v->session_id, "s1");
  EXPECT_EQ(book.final_verdict("k", t0 + 15000ms), nullptr);
}

TEST_F(book_fixture, a_later_final_verdict_replaces_the_kept_one) {
  book.record("k", matched, t0);
  book.record("k", honoured, t0 + 1ms);
  auto* v = book.final_verdict("k", t0 + 2ms);
  ASSERT_NE(v, nullptr);
  EXPECT_TRUE(v->honoured);
}

TEST_F(book_fixture, back_in_the_queue_is_no_verdict_but_a_mark_used_once) {
  book.record("k", back_in_queue, t0);
  EXPECT_EQ(book.final_verdict("k", t0), nullptr);
  EXPECT_TRUE(book.take_requeued("k", t0 + 1ms));
  EXPECT_FALSE(book.take_requeued("k", t0 + 2ms));
}

TEST_F(book_fixture, a_requeue_mark_lapses) {
  book.record("k", back_in_queue, t0);
  EXPECT_TRUE(book.take_requeued("k", t0 + 1999ms));
  book.record("k", back_in_queue, t0);
  EXPECT_FALSE(book.take_requeued("k", t0 + 2000ms));
}

TEST_F(book_fixture, a_ticket_in_flight_is_never_told_to_retry_at_the_queue) {
  book.enter("k", false); // an undo holds it
  book.record("k", back_in_queue, t0);
  EXPECT_FALSE(book.take_requeued("k", t0));
  book.leave("k");
  EXPECT_FALSE(book.in_flight("k"));
  EXPECT_FALSE(book.take_requeued("k", t0)); // no mark made in flight
  book.record("k", back_in_queue, t0);
  book.enter("k", false);
  EXPECT_FALSE(book.take_requeued("k", t0)); // in flight again
  book.leave("k");
  EXPECT_TRUE(book.take_requeued("k", t0)); // the mark was kept meanwhile
}

TEST_F(book_fixture, an_undo_keeps_the_final_verdict) {
  book.record("k", honoured, t0);
  book.enter("k", false);
  EXPECT_NE(book.final_verdict("k", t0), nullptr);
  book.leave("k");
  EXPECT_NE(book.final_verdict("k", t0), nullptr);
}

TEST_F(book_fixture, claimed_again_drops_what_was_known_before) {
  book.record("a", matched, t0);
  book.record("b", back_in_queue, t0);
  book.enter("a", true);
  book.enter("b", true);
  EXPECT_EQ(book.final_verdict("a", t0), nullptr);
  book.leave("b");
  EXPECT_FALSE(book.take_requeued("b", t0));
}

TEST_F(book_fixture, entries_count_and_leave_balances) {
  book.enter("k", false);
  book.enter("k", true);
  book.leave("k");
  EXPECT_TRUE(book.in_flight("k"));
  book.leave("k");
  EXPECT_FALSE(book.in_flight("k"));
  book.leave("k"); // one leave too many changes nothing
  EXPECT_FALSE(book.in_flight("k"));
}

// The bound holds after every prune: max_kept - 1 entries stay, the next
// one pushes the oldest out.
TEST_F(book_fixture, the_verdicts_kept_are_bounded_whatever_their_age) {
  auto key = [](size_t i) { return "k" + std::to_string(i); };
  for (size_t i = 0; i + 1 < verdict_book::max_kept; ++i)
    book.record(key(i), matched, t0);
  EXPECT_NE(book.final_verdict("k0", t0), nullptr);
  book.record(key(verdict_book::max_kept - 1), matched, t0);
  EXPECT_EQ(book.final_verdict("k0", t0), nullptr); // the oldest made room
  EXPECT_NE(book.final_verdict(key(verdict_book::max_kept - 1), t0), nullptr);
}

TEST_F(book_fixture, the_requeue_marks_are_bounded_too) {
  auto key = [](size_t i) { return "k" + std::to_string(i); };
  for (size_t i = 0; i < verdict_book::max_kept; ++i)
    book.record(key(i), back_in_queue, t0);
  EXPECT_FALSE(book.take_requeued("k0", t0));
  EXPECT_TRUE(book.take_requeued(key(verdict_book::max_kept - 1), t0));
}
