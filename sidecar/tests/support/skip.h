// The one skip-or-fail rule for the C++ tests: a test whose subject this machine lacks (a large shared
// fixture, an instruction set) skips with a reason that says what is missing, which ctest reports as a skip
// (gtest_discover_tests matches "[  SKIPPED ]"); RFDETR_REQUIRE_ALL=1 turns every such skip into a failure.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

namespace rfdetr::test {

// RFDETR_REQUIRE_ALL=1: skips become failures. The only read of that variable in the C++ tests.
inline bool require_all() {
    const char * e = std::getenv("RFDETR_REQUIRE_ALL");
    return e && std::strcmp(e, "1") == 0;
}

}  // namespace rfdetr::test

// In a test body or SetUp(): skip with `reason`, or fail under RFDETR_REQUIRE_ALL=1. Returns from the function.
#define RFDETR_SKIP_OR_FAIL(reason)                                                          \
    do {                                                                                     \
        if (::rfdetr::test::require_all()) {                                                 \
            FAIL() << "RFDETR_REQUIRE_ALL=1 and this test would skip: " << (reason);         \
        }                                                                                    \
        GTEST_SKIP() << (reason);                                                            \
    } while (0)
