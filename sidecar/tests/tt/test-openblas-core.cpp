// openblas_core_upgrade: which OpenBLAS cores the tt-host sidecar restarts away from, and to what (openblas-core.h).
// The restart itself is the server tests' (engine-facts-test.cpp).
#include "engines/tt/openblas-core.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>

namespace {

using rfdetr::cpu_vector_units;
using rfdetr::openblas_core_upgrade;

std::string upgrade(const char * chosen, bool avx512, bool avx2) {
    cpu_vector_units u;
    u.avx512_skx     = avx512;
    u.avx2_fma       = avx2;
    const char * out = openblas_core_upgrade(chosen, u);
    return out ? out : "(stands)";
}

TEST(openblas_core, a_generic_core_gives_way_to_the_kernels_of_the_cpus_widest_units) {
    // OpenBLAS 0.3.21's choice for a Xeon of CPUID model 207 it does not know, and its other pre-AVX2 cores.
    for (const char * generic : {"Prescott", "Unknown", "Core2", "Nehalem", "Sandybridge", "Barcelona", "Atom"}) {
        EXPECT_EQ(upgrade(generic, true, true), "SkylakeX") << generic;
        EXPECT_EQ(upgrade(generic, false, true), "Haswell") << generic;
        EXPECT_EQ(upgrade(generic, false, false), "(stands)") << generic << " on a CPU without AVX2: nothing better";
    }
}

TEST(openblas_core, a_core_openblas_matched_to_the_cpu_stands) {
    for (const char * matched : {"Haswell", "Zen", "SkylakeX", "Cooperlake", "SapphireRapids", "Excavator"}) {
        EXPECT_EQ(upgrade(matched, true, true), "(stands)") << matched;
    }
    EXPECT_EQ(upgrade(nullptr, true, true), "(stands)");
    EXPECT_EQ(upgrade("prescott", true, true), "(stands)") << "OpenBLAS's names are matched exactly";
}

}  // namespace
