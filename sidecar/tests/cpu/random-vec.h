// Seeded uniform test data for the kernel tests (deterministic: a failure reproduces).
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace rfdetr::test {

inline std::vector<float> random_vec(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
    std::mt19937                          rng(seed);
    std::uniform_real_distribution<float> u(lo, hi);
    std::vector<float>                    v(n);
    for (auto & x : v) x = u(rng);
    return v;
}

}  // namespace rfdetr::test
