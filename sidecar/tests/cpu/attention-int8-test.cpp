// The int8 attention (attention-int8.h) on AVX-512 VNNI; a CPU without it is a skip (a failure under
// RFDETR_REQUIRE_ALL=1). On odd sizes (nq 1..101 and a 64-query block of a 1616-key global head, nk 1..1616,
// d 32 and 64), with strided inputs whose gaps hold NaN (a read outside a row poisons the result), an output whose
// gaps hold a guard value (a store outside a row fails), rows and columns of zeros (a scale of 0) and peaked score
// rows (most p round to 0):
//   - exact: the head (K and V packed in its scratch) and pack + block give attention_int8_ref's numbers bit for bit
//     (the same quantisation, exact integer sums, the same float operations in the same order);
//   - bounded: against the fp32 attention within a loose bound of int8's rounding, which a broken path exceeds.
#include "engines/cpu/attention-int8.h"
#include "engines/cpu/attention.h"

#include "random-vec.h"
#include "skip.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

namespace {

namespace cpu = rfdetr::cpu;
using rfdetr::test::random_vec;

constexpr float k_guard = 1234.5f;

struct shape {
    int   nq, nk, d;
    float scale;
};
const shape k_shapes[] = {{1, 1, 32, 0.125f},   {5, 3, 64, 0.125f},    {13, 37, 32, 0.125f}, {14, 101, 64, 0.125f},
                          {15, 101, 64, 1.0f},  {29, 300, 32, 0.125f}, {101, 101, 64, 0.125f},
                          {64, 1616, 64, 0.125f}};

// q, k and v as one row per token with a gap of NaN after each (the qkv GEMM's output is strided as well), some
// rows and one column of v zero.
struct operands {
    int                ld;
    std::vector<float> q, k, v;
};
operands make(const shape & s, uint32_t seed) {
    operands   x;
    const int  n = std::max(s.nq, s.nk);
    x.ld         = 3 * s.d + 5;
    const auto r = random_vec(static_cast<size_t>(n) * x.ld * 3, seed, -2.0f, 2.0f);
    x.q.assign(static_cast<size_t>(n) * x.ld, std::numeric_limits<float>::quiet_NaN());
    x.k = x.q;
    x.v = x.q;
    for (int i = 0; i < n; ++i) {
        for (int c = 0; c < s.d; ++c) {
            const size_t at = static_cast<size_t>(i) * x.ld + c;
            x.q[at]         = r[3 * at];
            x.k[at]         = r[3 * at + 1] * (i % 7 == 3 ? 6.0f : 1.0f);  // a few keys dominate their score rows
            x.v[at]         = c == 1 ? 0.0f : r[3 * at + 2];
        }
    }
    for (int c = 0; c < s.d; ++c) {
        if (s.nq > 2) x.q[static_cast<size_t>(2) * x.ld + c] = 0.0f;
        if (s.nk > 4) x.k[static_cast<size_t>(4) * x.ld + c] = 0.0f;
    }
    return x;
}

class attention_int8 : public ::testing::Test {
  protected:
    void SetUp() override {
        if (!cpu::attention_int8_supported()) {
            RFDETR_SKIP_OR_FAIL("this CPU lacks AVX-512 VNNI (see /proc/cpuinfo's flags: avx512f, avx512bw, "
                                "avx512_vnni); the int8 attention runs on a CPU that has them");
        }
    }
};

// o's rows [nq][ldo] with the gaps holding the guard; the gaps checked after the call.
struct output {
    int                ldo;
    std::vector<float> o;
    output(int nq, int d) : ldo(d + 3), o(static_cast<size_t>(nq) * (d + 3), k_guard) {}
    void expect_gaps_kept(int nq, int d) const {
        for (int i = 0; i < nq; ++i) {
            for (int c = d; c < ldo; ++c) ASSERT_EQ(o[static_cast<size_t>(i) * ldo + c], k_guard) << "row " << i;
        }
    }
};

void expect_same_bits(const output & got, const output & want, const shape & s, const char * what) {
    for (int i = 0; i < s.nq; ++i) {
        for (int c = 0; c < s.d; ++c) {
            const float a = got.o[static_cast<size_t>(i) * got.ldo + c], b = want.o[static_cast<size_t>(i) * want.ldo + c];
            uint32_t    ua, ub;
            std::memcpy(&ua, &a, 4);
            std::memcpy(&ub, &b, 4);
            ASSERT_EQ(ua, ub) << what << " nq " << s.nq << " nk " << s.nk << " d " << s.d << ": o[" << i << "][" << c
                              << "] = " << a << ", the reference " << b;
        }
    }
}

// attention_int8_ref's o for x.
output reference(const shape & s, const operands & x) {
    output want(s.nq, s.d);
    cpu::attention_int8_ref(x.q.data(), x.ld, x.k.data(), x.ld, x.v.data(), x.ld, want.o.data(), want.ldo, s.nq, s.nk,
                            s.d, s.scale);
    return want;
}

// The int8 head's o for x (its scratch holding NaN before: a read of scratch it did not write poisons the result).
output int8_head(const shape & s, const operands & x) {
    output             got(s.nq, s.d);
    std::vector<float> scratch(cpu::attention_int8_head_scratch_floats(s.nk, s.d), std::nanf(""));
    cpu::attention_int8_head(x.q.data(), x.ld, x.k.data(), x.ld, x.v.data(), x.ld, got.o.data(), got.ldo, s.nq, s.nk,
                             s.d, s.scale, scratch.data());
    return got;
}

// got has the reference's bits and left o's gaps alone.
void expect_the_references(const output & got, const shape & s, const operands & x, const char * what) {
    expect_same_bits(got, reference(s, x), s, what);
    got.expect_gaps_kept(s.nq, s.d);
}

TEST_F(attention_int8, head_gives_the_references_bits_on_odd_sizes) {
    uint32_t seed = 11;
    for (const shape & s : k_shapes) {
        const operands x = make(s, seed++);
        expect_the_references(int8_head(s, x), s, x, "head");
    }
}

TEST_F(attention_int8, pack_then_block_gives_the_references_bits_on_odd_sizes) {
    uint32_t seed = 101;
    for (const shape & s : k_shapes) {
        const operands     x = make(s, seed++);
        output             got(s.nq, s.d);
        std::vector<float> kv(cpu::attention_int8_kv_floats(s.nk, s.d), std::nanf(""));
        std::vector<float> scratch(cpu::attention_int8_scratch_floats(s.nk, s.d), std::nanf(""));
        cpu::attention_int8_pack(x.k.data(), x.ld, x.v.data(), x.ld, s.nk, s.d, s.scale, kv.data());
        // The queries in two calls, as the model's tasks split a global head's queries.
        const int half = s.nq / 2;
        cpu::attention_int8_block(x.q.data(), x.ld, kv.data(), s.nk, got.o.data(), got.ldo, half, s.d, scratch.data());
        cpu::attention_int8_block(x.q.data() + static_cast<size_t>(half) * x.ld, x.ld, kv.data(), s.nk,
                                  got.o.data() + static_cast<size_t>(half) * got.ldo, got.ldo, s.nq - half, s.d,
                                  scratch.data());
        expect_the_references(got, s, x, "pack + block");
    }
}

// int8's rounding moves o by up to 0.14 max |v| here (measured on these shapes: v's step is max |v| / 127 per channel,
// p's 1/255 per weight, and the rows whose few large keys score ~8 carry q's and k's rounding through exp); a wrong
// compensation, scale, layout or mask moves it by O(max |v|).
TEST_F(attention_int8, stays_within_int8_rounding_of_the_fp32_attention) {
    uint32_t seed = 201;
    for (const shape & s : k_shapes) {
        const operands     x = make(s, seed++);
        output             want(s.nq, s.d);
        std::vector<float> f32_scratch(cpu::attention_head_scratch_floats(s.nk, s.d));
        cpu::attention_head(x.q.data(), x.ld, x.k.data(), x.ld, x.v.data(), x.ld, want.o.data(), want.ldo, s.nq, s.nk,
                            s.d, s.scale, f32_scratch.data());
        const output got = int8_head(s, x);
        float vmax = 0.0f, err = 0.0f;
        for (int j = 0; j < s.nk; ++j) {
            for (int c = 0; c < s.d; ++c) vmax = std::max(vmax, std::fabs(x.v[static_cast<size_t>(j) * x.ld + c]));
        }
        for (int i = 0; i < s.nq; ++i) {
            for (int c = 0; c < s.d; ++c) {
                err = std::max(err, std::fabs(got.o[static_cast<size_t>(i) * got.ldo + c] -
                                              want.o[static_cast<size_t>(i) * want.ldo + c]));
            }
        }
        EXPECT_LE(err, 0.2f * vmax) << "nq " << s.nq << " nk " << s.nk << " d " << s.d << " scale " << s.scale;
        std::printf("int8 attention nq %3d nk %4d d %2d scale %.3f: max |o - o_fp32| = %.4f of max |v| %.3f\n", s.nq,
                    s.nk, s.d, s.scale, err, vmax);
    }
}

}  // namespace
