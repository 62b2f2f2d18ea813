// The parameter instantiation of the match store conformance suite, once
// for the whole binary: every TEST_P of match_store_conformance (in the
// match_store_*_test.cpp files) runs on the memory store and on PostgreSQL.

#include "tests/conformance/match_store_fixture.hpp"

using namespace mm;
using namespace mm::test;
using namespace mm::test::store_conformance;

namespace {

INSTANTIATE_TEST_SUITE_P(stores, match_store_conformance,
                         ::testing::Values("memory", "postgres"),
                         [](const auto& info) { return info.param; });

} // namespace
