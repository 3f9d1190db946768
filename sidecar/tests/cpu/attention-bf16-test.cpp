// The bf16 attention (attention-bf16.h), each kernel (AMX, AVX512-BF16; a kernel this CPU lacks is a skip, a
// failure under RFDETR_REQUIRE_ALL=1) on odd sizes (nq 1..101, nk 1..300, d 32 and 64) with strided inputs
// whose gaps hold NaN (a read outside a row poisons the result) and an output whose gaps hold a guard value
// (a store outside a row fails):
//   - exact: one key per query dominates its score row so every other P is (under bf16) negligible and that
//     one is exactly 1: o is that key's v row rounded to bf16, bit for bit; also with every real score far
//     below the 0 a padded key would score (the row maximum must skip the padding);
//   - random: against a double reference on the bf16-rounded q, k, v with P rounded to bf16, within the
//     bound of what may round differently (the P values within 2^-14 of a bf16 rounding midpoint, each
//     moving o by at most its ulp) plus the fp32 sums' rounding.
#include "engines/cpu/attention-bf16.h"

#include "random-vec.h"
#include "skip.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace {

namespace cpu = rfdetr::cpu;
using rfdetr::test::random_vec;

constexpr float k_guard = 1234.5f;

float bf16(float x) {  // round to nearest even, as vcvtneps2bf16 (finite inputs)
    uint32_t u;
    std::memcpy(&u, &x, 4);
    u += 0x7FFF + ((u >> 16) & 1);
    u &= 0xFFFF0000u;
    std::memcpy(&x, &u, 4);
    return x;
}

class attention_bf16 : public ::testing::TestWithParam<const char *> {
  protected:
    void SetUp() override {
        before_ = cpu::attention_bf16_isa();
        if (!cpu::attention_bf16_select_isa(GetParam())) {
            RFDETR_SKIP_OR_FAIL(std::string("this CPU lacks the instructions of the ") + GetParam() +
                                " bf16 attention kernel (or the OS refused AMX's tile state; see /proc/cpuinfo's "
                                "flags); it runs on a CPU that has them");
        }
    }
    void TearDown() override {
        if (!before_.empty()) cpu::attention_bf16_select_isa(before_.c_str());
    }
    std::string before_;
};

// q [nq, ldq], k and v [nk, ld*] with NaN in the gaps; o [nq, ldo] with k_guard in the gaps.
struct head {
    int                nq, nk, d, ldq, ldk, ldv, ldo;
    std::vector<float> q, k, v, o;
    head(int nq_, int nk_, int d_) : nq(nq_), nk(nk_), d(d_), ldq(d_ + 3), ldk(d_ + 5), ldv(d_ + 7), ldo(d_ + 9) {
        const float nan = std::numeric_limits<float>::quiet_NaN();
        q.assign(static_cast<size_t>(nq) * ldq, nan);
        k.assign(static_cast<size_t>(nk) * ldk, nan);
        v.assign(static_cast<size_t>(nk) * ldv, nan);
        o.assign(static_cast<size_t>(nq) * ldo, k_guard);
    }
    float & Q(int i, int c) { return q[static_cast<size_t>(i) * ldq + c]; }
    float & K(int j, int c) { return k[static_cast<size_t>(j) * ldk + c]; }
    float & V(int j, int c) { return v[static_cast<size_t>(j) * ldv + c]; }
    float & O(int i, int c) { return o[static_cast<size_t>(i) * ldo + c]; }
    float   scale() const { return d == 64 ? 0.125f : 1.0f; }  // the ViT's and the decoder's
    void    run() {
        std::vector<float> scratch(cpu::attention_bf16_head_scratch_floats(nk, d) + 16);
        float * s = reinterpret_cast<float *>((reinterpret_cast<uintptr_t>(scratch.data()) + 63) & ~uintptr_t{63});
        cpu::attention_bf16_head(q.data(), ldq, k.data(), ldk, v.data(), ldv, o.data(), ldo, nq, nk, d, scale(), s);
    }
    void check_guards() {
        for (int i = 0; i < nq; ++i) {
            for (int c = d; c < ldo; ++c) ASSERT_EQ(O(i, c), k_guard) << "store past row " << i << " at column " << c;
        }
    }
};

const int k_nq[] = {1, 15, 17, 33, 101};
const int k_nk[] = {1, 31, 33, 101, 300};
const int k_d[]  = {32, 64};

// Keys: distinct +-1 sign vectors; query i = 512 x key t(i). Its score against t(i) is 512 d, against any other
// key at most 512 (d - 2): after the scale (1/8 or 1) a gap of 128 or more, so exp gives 1 for t(i) and < 2e-38
// for the rest (nothing at bf16 next to 1 and |v|). low: the last dimension holds k = 1 for every key and q =
// -32768, so every real score is below -15000 while a padded key's would be 0: a row maximum taken over the
// padding would underflow the whole row.
void dominant_key_case(int nq, int nk, int d, bool low) {
    head                  h(nq, nk, d);
    std::mt19937          rng(static_cast<uint32_t>(nq * 1000 + nk * 10 + d));
    const int             bits_used = low ? d - 1 : d;
    const uint64_t        mask      = bits_used == 64 ? ~0ull : (1ull << bits_used) - 1;
    std::vector<uint64_t> seen;
    for (int j = 0; j < nk; ++j) {
        uint64_t bits;
        do bits = ((static_cast<uint64_t>(rng()) << 32) | rng()) & mask;
        while (std::find(seen.begin(), seen.end(), bits) != seen.end());
        seen.push_back(bits);
        for (int c = 0; c < d; ++c) h.K(j, c) = (bits >> c) & 1 ? 1.0f : -1.0f;
        if (low) h.K(j, d - 1) = 1.0f;
    }
    const std::vector<float> vals = random_vec(static_cast<size_t>(nk) * d, 7, 0.25f, 2.0f);
    for (int j = 0; j < nk; ++j) {
        for (int c = 0; c < d; ++c) h.V(j, c) = (c % 2 ? -1.0f : 1.0f) * vals[static_cast<size_t>(j) * d + c];
    }
    std::vector<int> target(nq);
    for (int i = 0; i < nq; ++i) {
        target[i] = (i * 7 + 3) % nk;
        for (int c = 0; c < d; ++c) h.Q(i, c) = 512.0f * h.K(target[i], c);
        if (low) h.Q(i, d - 1) = -32768.0f;
    }
    h.run();
    h.check_guards();
    for (int i = 0; i < nq; ++i) {
        for (int c = 0; c < d; ++c) {
            ASSERT_EQ(h.O(i, c), bf16(h.V(target[i], c))) << "query " << i << " column " << c << " (key " << target[i] << ")";
        }
    }
}

TEST_P(attention_bf16, one_dominant_key_gives_its_v_row_exactly) {
    for (int d : k_d) {
        for (int nk : k_nk) {
            for (int nq : k_nq) {
                SCOPED_TRACE(std::string(GetParam()) + " nq=" + std::to_string(nq) + " nk=" + std::to_string(nk) +
                             " d=" + std::to_string(d));
                dominant_key_case(nq, nk, d, false);
            }
        }
    }
}

TEST_P(attention_bf16, scores_far_below_zero_are_not_lost_to_the_padding) {
    for (int d : k_d) {
        for (int nk : k_nk) {
            for (int nq : {1, 33}) {
                SCOPED_TRACE(std::string(GetParam()) + " nq=" + std::to_string(nq) + " nk=" + std::to_string(nk) +
                             " d=" + std::to_string(d));
                dominant_key_case(nq, nk, d, true);
            }
        }
    }
}

TEST_P(attention_bf16, random_inputs_match_a_double_reference_on_bf16_operands) {
    double worst = 0;  // largest error as a fraction of its bound
    for (int d : k_d) {
        for (int nk : k_nk) {
            for (int nq : k_nq) {
                SCOPED_TRACE(std::string(GetParam()) + " nq=" + std::to_string(nq) + " nk=" + std::to_string(nk) +
                             " d=" + std::to_string(d));
                head       h(nq, nk, d);
                const auto rq = random_vec(static_cast<size_t>(nq) * d, 11 + nq, -1.5f, 1.5f);
                const auto rk = random_vec(static_cast<size_t>(nk) * d, 13 + nk, -1.5f, 1.5f);
                const auto rv = random_vec(static_cast<size_t>(nk) * d, 17 + nk, -1.0f, 1.0f);
                for (int i = 0; i < nq; ++i) {
                    for (int c = 0; c < d; ++c) h.Q(i, c) = rq[static_cast<size_t>(i) * d + c];
                }
                for (int j = 0; j < nk; ++j) {
                    for (int c = 0; c < d; ++c) {
                        h.K(j, c) = rk[static_cast<size_t>(j) * d + c];
                        h.V(j, c) = rv[static_cast<size_t>(j) * d + c];
                    }
                }
                h.run();
                h.check_guards();
                std::vector<double> s(nk), pb(nk), amb(nk);
                for (int i = 0; i < nq; ++i) {
                    double m = -INFINITY;
                    for (int j = 0; j < nk; ++j) {
                        double acc = 0;
                        for (int c = 0; c < d; ++c) acc += static_cast<double>(bf16(h.Q(i, c))) * bf16(h.K(j, c));
                        s[j] = acc * h.scale();
                        m    = std::max(m, s[j]);
                    }
                    double sum = 0;
                    for (int j = 0; j < nk; ++j) {
                        const double p  = std::exp(s[j] - m);
                        const double lo = bf16(static_cast<float>(p * (1 - 0x1p-14)));
                        const double hi = bf16(static_cast<float>(p * (1 + 0x1p-14)));
                        pb[j]           = bf16(static_cast<float>(p));
                        amb[j]          = hi - lo;  // one bf16 ulp where p is near a rounding midpoint, else 0
                        sum += pb[j];
                    }
                    for (int c = 0; c < d; ++c) {
                        double ref = 0;
                        for (int j = 0; j < nk; ++j) ref += pb[j] * bf16(h.V(j, c));
                        ref /= sum;
                        double bound = (nk + 16) * 0x1p-23 + 1e-6;  // |v| <= 1: the fp32 sums and the division
                        // A flipped p_j moves o by dp (v_j - o) / (sum + dp), |dp| <= 2^-7 sum.
                        for (int j = 0; j < nk; ++j) {
                            bound += amb[j] * (std::fabs(bf16(h.V(j, c))) + std::fabs(ref)) / (sum * (1 - 0x1p-7));
                        }
                        const double err = std::fabs(h.O(i, c) - ref);
                        ASSERT_LE(err, bound) << "query " << i << " column " << c << ": " << h.O(i, c) << " vs " << ref;
                        worst = std::max(worst, err / bound);
                    }
                }
            }
        }
    }
    std::printf("[ %s ] largest error / bound: %.3f\n", GetParam(), worst);
}

INSTANTIATE_TEST_SUITE_P(isa, attention_bf16, ::testing::Values("amx", "avx512bf16"),
                         [](const ::testing::TestParamInfo<const char *> & info) { return std::string(info.param); });

}  // namespace
