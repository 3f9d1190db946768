// A kernel test run once per GEMM kernel ("avx2", "avx512"): a kernel this CPU cannot run is a skip (or a
// failure under RFDETR_REQUIRE_ALL=1), never a pass. The CPU's default kernel is selected again afterwards.
#pragma once

#include "engines/cpu/gemm.h"
#include "skip.h"

#include <gtest/gtest.h>

#include <string>

namespace rfdetr::test {

class isa_test : public ::testing::TestWithParam<const char *> {
  protected:
    const char * isa() const { return GetParam(); }
    void         SetUp() override {
        if (!rfdetr::cpu::gemm_select_isa(isa())) {
            RFDETR_SKIP_OR_FAIL(std::string("this CPU lacks the instructions of the ") + isa() +
                                " GEMM kernel (see /proc/cpuinfo's flags); it runs on a CPU that has them");
        }
    }
    void TearDown() override { rfdetr::cpu::gemm_select_isa(__builtin_cpu_supports("avx512f") ? "avx512" : "avx2"); }
};

inline std::string isa_name(const ::testing::TestParamInfo<const char *> & info) { return info.param; }

}  // namespace rfdetr::test

// Instantiates the isa_test fixture `suite` for every GEMM kernel.
#define RFDETR_FOR_EVERY_ISA(suite) \
    INSTANTIATE_TEST_SUITE_P(isa, suite, ::testing::Values("avx2", "avx512"), ::rfdetr::test::isa_name)
