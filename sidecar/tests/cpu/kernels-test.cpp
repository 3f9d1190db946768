// Every fast kernel against its plain-loop reference (kernels-ref.cpp), on odd sizes.
// GCC 12 reports its own AVX-512 intrinsics' _mm512_undefined_ps() operands as uninitialized (gemm.cpp).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include "engines/cpu/attention.h"
#include "engines/cpu/gemm.h"
#include "engines/cpu/kernels.h"
#include "engines/cpu/simd-math.h"
#include "engines/cpu/thread-pool.h"

#include "isa-test.h"
#include "random-vec.h"
#include "skip.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

using rfdetr::test::random_vec;

// NaN/Inf first, then max-abs against the bound.
void expect_close(const std::vector<float> & got, const std::vector<float> & want, double tol, const char * what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    double worst = 0.0;
    size_t at    = 0;
    for (size_t i = 0; i < got.size(); ++i) {
        ASSERT_TRUE(std::isfinite(got[i])) << what << ": non-finite value at " << i;
        const double d = std::fabs(static_cast<double>(got[i]) - want[i]);
        if (d > worst) worst = d, at = i;
    }
    EXPECT_LE(worst, tol) << what << ": max-abs " << worst << " at " << at << " (got " << got[at] << ", want "
                          << want[at] << ")";
}

TEST(cpu_kernels, layernorm_matches_reference_with_offset_rows) {
    const int rows = 13, dim = 43, ld = 47;
    auto      x = random_vec(static_cast<size_t>(rows) * ld, 4, -3.0f, 5.0f);
    const auto g = random_vec(dim, 5), b = random_vec(dim, 6);
    std::vector<float> y(static_cast<size_t>(rows) * ld, 0.0f), r = y;
    rfdetr::cpu::layernorm(x.data(), ld, y.data(), ld, rows, dim, g.data(), b.data(), 1e-6f);
    rfdetr::ref::layernorm(x.data(), ld, r.data(), ld, rows, dim, g.data(), b.data(), 1e-6f);
    expect_close(y, r, 2e-6, "layernorm");
    // In place gives the same result.
    rfdetr::cpu::layernorm(x.data(), ld, x.data(), ld, rows, dim, g.data(), b.data(), 1e-6f);
    for (int i = 0; i < rows; ++i) {
        for (int j = 0; j < dim; ++j) EXPECT_EQ(x[i * ld + j], y[i * ld + j]);
    }
}

// layernorm_row's arithmetic spelled out in scalars: per lane j % 8 a running sum in order, the 8 lanes reduced as
// hsum does ((l + h) pairs, then [0]+[2] and [1]+[3], then those two), the tail added after; the squares the same
// way with one FMA per value; the normalising multiply-add fused over the first dim/8*8 values, two roundings on
// the tail. The engine's LayerNorm must give these bits whatever rows it groups and whatever vector width it uses.
float no_fuse(float v) {
    asm volatile("" : "+x"(v));
    return v;
}
float hsum8(const float l[8]) {
    float a[4];
    for (int i = 0; i < 4; ++i) a[i] = l[i] + l[i + 4];
    const float b0 = a[0] + a[2], b1 = a[1] + a[3];
    return b0 + b1;
}
void layernorm_row_spelled(const float * x, float * y, int dim, const float * g, const float * b, float eps) {
    const int d8 = dim / 8 * 8;
    float     l[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int j = 0; j < d8; ++j) l[j % 8] = l[j % 8] + x[j];
    float sum = hsum8(l);
    for (int j = d8; j < dim; ++j) sum += x[j];
    const float mean = sum / static_cast<float>(dim);
    for (float & v : l) v = 0.0f;
    for (int j = 0; j < d8; ++j) {
        const float d = x[j] - mean;
        l[j % 8]      = std::fma(d, d, l[j % 8]);
    }
    float sq = hsum8(l);
    for (int j = d8; j < dim; ++j) sq += no_fuse((x[j] - mean) * (x[j] - mean));
    const float rstd = 1.0f / std::sqrt(sq / static_cast<float>(dim) + eps);
    for (int j = 0; j < d8; ++j) y[j] = std::fma((x[j] - mean) * rstd, g[j], b[j]);
    for (int j = d8; j < dim; ++j) y[j] = no_fuse((x[j] - mean) * rstd * g[j]) + b[j];
}

TEST(cpu_kernels, layernorm_rows_give_the_bits_of_the_row_arithmetic_in_every_grouping_and_width) {
    // Row counts cover every group split (8, 4, 2, 1 and mixes); dims cover no vector part, a tail only, an exact
    // number of 8- and 16-lane vectors, one 8-group past the 16s, and the model's 256/384 with a tail.
    const int dims[] = {1, 7, 8, 15, 16, 24, 43, 256, 389};
    int       widths = 0;
    for (const bool wide : {false, true}) {
        if (!rfdetr::cpu::layernorm_select_avx512(wide)) continue;
        ++widths;
        for (const int dim : dims) {
            for (int rows = 1; rows <= 15; ++rows) {
                const int  ld = dim + 5;
                const auto x  = random_vec(static_cast<size_t>(rows) * ld, 40 + dim + rows, -3.0f, 5.0f);
                const auto g = random_vec(dim, 41 + dim), b = random_vec(dim, 42 + dim);
                std::vector<float> want(static_cast<size_t>(rows) * ld, -7.0f), got = want, got2 = want;
                std::vector<const float *> xs;
                std::vector<float *>       ys;
                for (int r = 0; r < rows; ++r) {
                    layernorm_row_spelled(x.data() + r * ld, want.data() + r * ld, dim, g.data(), b.data(), 1e-6f);
                    xs.push_back(x.data() + r * ld);
                    ys.push_back(got.data() + r * ld);
                }
                rfdetr::cpu::layernorm_rows(xs.data(), ys.data(), rows, dim, g.data(), b.data(), 1e-6f);
                rfdetr::cpu::layernorm(x.data(), ld, got2.data(), ld, rows, dim, g.data(), b.data(), 1e-6f);
                for (size_t i = 0; i < want.size(); ++i) {
                    ASSERT_EQ(std::memcmp(&got[i], &want[i], 4), 0)
                        << "layernorm_rows, " << (wide ? "avx512" : "avx2") << " pass, dim " << dim << ", rows " << rows
                        << ": row " << i / ld << " column " << i % ld << " got " << got[i] << " want " << want[i]
                        << " (columns >= dim are guards that must stay -7)";
                    ASSERT_EQ(std::memcmp(&got2[i], &want[i], 4), 0)
                        << "layernorm, " << (wide ? "avx512" : "avx2") << " pass, dim " << dim << ", rows " << rows
                        << ": row " << i / ld << " column " << i % ld;
                }
            }
        }
    }
    rfdetr::cpu::layernorm_select_avx512(__builtin_cpu_supports("avx512f"));
    if (widths < 2) RFDETR_SKIP_OR_FAIL("this CPU lacks AVX-512 (avx512f in /proc/cpuinfo): only the AVX2 pass of the LayerNorm was checked");
}

class cpu_kernels_isa : public rfdetr::test::isa_test {};
RFDETR_FOR_EVERY_ISA(cpu_kernels_isa);

TEST_P(cpu_kernels_isa, gelu_epilogue_is_the_exact_erf_form) {
    // The GEMM's bias+GELU epilogue on a 1x1 identity weight, so the tile holds x exactly: a dense grid
    // over the range that matters plus the tails; the tanh approximation is 1e-3 away.
    std::vector<float> x;
    for (float v = -12.0f; v <= 12.0f; v += 0.00731f) x.push_back(v);
    const int   n   = static_cast<int>(x.size());
    const float one = 1.0f, zero = 0.0f;
    const auto  pw  = rfdetr::cpu::pack_weight(&one, 1, 1, 1);
    std::vector<float> scratch(rfdetr::cpu::gemm_scratch_floats(1));
    rfdetr::cpu::epilogue e;
    e.kind = rfdetr::cpu::epi::bias_gelu;
    e.bias = &zero;
    const char * isa = this->isa();
    {
        std::vector<float> got(x.size());
        rfdetr::cpu::gemm_packed(n, x.data(), 1, pw, got.data(), 1, e, scratch.data());
        double worst = 0.0;
        for (size_t i = 0; i < x.size(); ++i) {
            ASSERT_TRUE(std::isfinite(got[i])) << isa;
            const double want = rfdetr::ref::gelu(x[i]);
            worst = std::max(worst, std::fabs(static_cast<double>(got[i]) - want) / std::max(1.0, std::fabs(static_cast<double>(x[i]))));
        }
        EXPECT_LE(worst, 3e-7) << isa;
        // tanh GELU at x = 1 differs by ~1.5e-4 from erf GELU: this kernel must be on the erf side.
        float out = 0.0f;
        rfdetr::cpu::gemm_packed(1, &one, 1, pw, &out, 1, e, scratch.data());
        EXPECT_NEAR(out, 0.8413447460685429, 1e-6) << isa;
    }
}

TEST(cpu_kernels, silu_on_odd_blocks_leaves_the_row_padding) {
    const int rows = 5, n = 21, ld = 24;
    const auto x0 = random_vec(static_cast<size_t>(rows) * ld, 7, -4.0f, 4.0f);
    auto       s  = x0;
    rfdetr::cpu::silu(s.data(), ld, rows, n);
    for (int i = 0; i < rows; ++i) {
        for (int j = 0; j < ld; ++j) {
            const float v = x0[i * ld + j];
            if (j >= n) {  // outside the block: untouched
                EXPECT_EQ(s[i * ld + j], v);
                continue;
            }
            EXPECT_NEAR(s[i * ld + j], v / (1.0 + std::exp(-static_cast<double>(v))), 2e-6);
        }
    }
}

TEST(cpu_kernels, exp_and_erf_track_libm) {
    std::vector<float> x;
    for (float v = -80.0f; v < 80.0f; v += 0.0917f) x.push_back(v);
    x.push_back(0.0f);
    auto e = x;
    rfdetr::cpu::exp_inplace(e.data(), e.size());
    for (size_t i = 0; i < x.size(); ++i) {
        const double want = std::exp(static_cast<double>(x[i]));
        EXPECT_LE(std::fabs(e[i] - want), 4e-7 * want) << "exp(" << x[i] << ")";
    }
    std::vector<float> y;
    for (float v = -7.0f; v < 7.0f; v += 0.0013f) y.push_back(v);
    auto f = y;
    rfdetr::cpu::erf_inplace(f.data(), f.size());
    for (size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(f[i], std::erf(static_cast<double>(y[i])), 2e-7) << y[i];
}

// exp512 and exp512_nonpositive on 16 inputs each (the attention's softmax uses the second, on s - max <= 0).
RFDETR_AVX512 void exp512_both(const float * x, float * full, float * nonpos) {
    const __m512 v = _mm512_loadu_ps(x);
    _mm512_storeu_ps(full, rfdetr::cpu::simd::exp512(v));
    _mm512_storeu_ps(nonpos, rfdetr::cpu::simd::exp512_nonpositive(v));
}

TEST(cpu_kernels, exp512_nonpositive_is_exp512_bit_for_bit_on_nonpositive_inputs) {
    if (!__builtin_cpu_supports("avx512f")) {
        RFDETR_SKIP_OR_FAIL("this CPU lacks AVX-512F (see /proc/cpuinfo's flags); the AVX-512 softmax's exp runs on a CPU that has it");
    }
    // Every 331st float from -0 down to -110 (past the -87.3 clamp, through the denormal results), and the edges.
    std::vector<float> x = {-0.0f, 0.0f, -87.3f, -87.29f, -86.9f, -INFINITY, -1e-45f, -1e-30f};
    for (uint32_t b = 0x80000000u; b <= 0xC2DC0000u; b += 331) {
        float v;
        std::memcpy(&v, &b, sizeof v);
        x.push_back(v);
    }
    while (x.size() % 16) x.push_back(-1.0f);
    std::vector<float> full(x.size()), nonpos(x.size());
    for (size_t i = 0; i < x.size(); i += 16) exp512_both(x.data() + i, full.data() + i, nonpos.data() + i);
    size_t wrong = 0, first = 0;
    for (size_t i = 0; i < x.size(); ++i) {
        if (std::memcmp(&full[i], &nonpos[i], sizeof(float)) != 0 && wrong++ == 0) first = i;
    }
    EXPECT_EQ(wrong, 0u) << "of " << x.size() << " inputs; first exp(" << x[first] << ") = " << nonpos[first]
                         << " instead of exp512's " << full[first];
}

TEST(cpu_kernels, softmax_matches_reference_and_survives_large_logits) {
    const int rows = 7, cols = 37, ld = 41;
    auto      x = random_vec(static_cast<size_t>(rows) * ld, 9, -30.0f, 30.0f);
    x[3]        = 1e4f;  // max subtraction keeps this finite
    auto r = x;
    rfdetr::cpu::softmax_rows(x.data(), ld, rows, cols);
    rfdetr::ref::softmax_rows(r.data(), ld, rows, cols);
    expect_close(x, r, 1e-6, "softmax");
    for (int i = 0; i < rows; ++i) {
        double s = 0.0;
        for (int j = 0; j < cols; ++j) s += x[i * ld + j];
        EXPECT_NEAR(s, 1.0, 1e-5);
    }
}

TEST_P(cpu_kernels_isa, fused_attention_matches_reference_across_block_edges) {
    // nq spans three query blocks with a ragged last one, nk several key blocks with a ragged last one,
    // d not a multiple of the 32-column panels; strided q/k/v as in the fused QKV buffer. Then the
    // engine's shapes in small: one 101-token window, and large logits (online-softmax rescaling).
    struct shape_case {
        int   nq, nk, d;
        float spread;  // q values in [-spread, spread]
        double tol;
    };
    const char * isa = this->isa();
    {
        // The last case's scores reach ~100: their own float rounding (~100 * 2^-24 per term, any fp32
        // implementation) moves the exponentials by ~1e-5 relative against the double reference.
        for (const shape_case sc : {shape_case{2 * rfdetr::cpu::k_attention_block + 11, 349, 19, 2.0f, 2e-6},
                                    shape_case{101, 101, 64, 2.0f, 2e-6}, shape_case{7, 300, 32, 2.0f, 2e-6},
                                    shape_case{70, 257, 40, 30.0f, 3e-5}}) {
            SCOPED_TRACE(std::string(isa) + " nq=" + std::to_string(sc.nq) + " nk=" + std::to_string(sc.nk) + " d=" +
                         std::to_string(sc.d));
            const int  nq = sc.nq, nk = sc.nk, d = sc.d, ld = 3 * d + 2;
            const auto q  = random_vec(static_cast<size_t>(nq) * ld, 10, -sc.spread, sc.spread);
            const auto kv = random_vec(static_cast<size_t>(nk) * ld, 11, -2.0f, 2.0f);
            std::vector<float> o(static_cast<size_t>(nq) * (d + 1), 7.0f), r = o;
            rfdetr::ref::attention_head(q.data(), ld, kv.data() + d, ld, kv.data() + 2 * d, ld, r.data(), d + 1, nq, nk,
                                        d, 0.125f);
            std::vector<float> scratch(rfdetr::cpu::attention_head_scratch_floats(nk, d));
            rfdetr::cpu::attention_head(q.data(), ld, kv.data() + d, ld, kv.data() + 2 * d, ld, o.data(), d + 1, nq, nk,
                                        d, 0.125f, scratch.data());
            expect_close(o, r, sc.tol, "attention");  // the padding column (d) keeps its 7.0 in both
        }
    }
}

TEST(cpu_kernels, avx2_attention_tiles_give_the_exact_sums_on_odd_sizes) {
    // Small-integer operands make every product and partial sum exact in fp32 (and scale 1/8 is exact), so the tiles
    // must give the reference's bits. Every tile height 1..6, odd depths, one and two 16-query passes, both p v modes;
    // what lies past the tile (columns, bm lanes) must be left as it was. AVX2 is the build's baseline: no skip.
    std::mt19937                       rng(21);
    std::uniform_int_distribution<int> u(-4, 4);
    const auto ints = [&](size_t n) {
        std::vector<float> v(n);
        for (float & x : v) x = static_cast<float>(u(rng));
        return v;
    };
    const auto at = [](int r, int ld, int c) { return static_cast<size_t>(r) * ld + c; };
    const int  mr = 6;
    for (int rows = 1; rows <= mr; ++rows) {
        for (int d : {1, 19, 64}) {
            for (int passes : {1, 2}) {
                SCOPED_TRACE("scores rows=" + std::to_string(rows) + " d=" + std::to_string(d) + " passes=" +
                             std::to_string(passes));
                const int ldq = 35, ldst = 37;
                const auto kp = ints(at(d, mr, 0)), qt = ints(at(d, ldq, 0));
                std::vector<float> st(at(rows, ldst, 0), 99.0f), bm(ldq);
                for (int j = 0; j < ldq; ++j) bm[j] = j % 3 == 0 ? 1000.0f : -1000.0f;  // some lanes keep theirs
                const auto bm0 = bm;
                rfdetr::cpu::attention_scores_tile256(rows, d, kp.data(), mr, qt.data(), ldq, passes, 0.125f, st.data(),
                                                      ldst, bm.data());
                for (int j = 0; j < ldq; ++j) {
                    float mx = bm0[j];
                    for (int r = 0; r < rows; ++r) {
                        double sum = 0.0;
                        for (int kk = 0; kk < d; ++kk) sum += double(kp[at(kk, mr, r)]) * qt[at(kk, ldq, j)];
                        const float want = j < 16 * passes ? static_cast<float>(sum) * 0.125f : 99.0f;
                        ASSERT_EQ(st[at(r, ldst, j)], want) << "row " << r << " column " << j;
                        mx = std::max(mx, want);
                    }
                    ASSERT_EQ(bm[j], j < 16 * passes ? mx : bm0[j]) << "bm lane " << j;
                }
            }
        }
        for (int nkb : {1, 37}) {
            for (int d : {16, 48}) {
                for (bool first : {true, false}) {
                    SCOPED_TRACE("p v rows=" + std::to_string(rows) + " nkb=" + std::to_string(nkb) + " d=" +
                                 std::to_string(d) + (first ? " first" : " accumulate"));
                    const int  ldp = 7, ldv = d + 5, ldo = d + 3;
                    const auto p = ints(at(nkb, ldp, 0)), v = ints(at(nkb, ldv, 0)), o0 = ints(at(rows, ldo, 0));
                    auto       o = o0;
                    rfdetr::cpu::attention_pv_tile256(rows, nkb, p.data(), ldp, v.data(), ldv, d, o.data(), ldo, first);
                    for (int r = 0; r < rows; ++r) {
                        for (int c = 0; c < ldo; ++c) {
                            double sum = first ? 0.0 : o0[at(r, ldo, c)];
                            for (int kk = 0; kk < nkb; ++kk) sum += double(p[at(kk, ldp, r)]) * v[at(kk, ldv, c)];
                            ASSERT_EQ(o[at(r, ldo, c)], c < d ? static_cast<float>(sum) : o0[at(r, ldo, c)])
                                << "row " << r << " column " << c;
                        }
                    }
                }
            }
        }
    }
}

TEST(cpu_kernels, bilinear_sampling_matches_grid_sample_with_zero_padding) {
    // 7x9 map, 5 channels; locations inside, on the border and outside [0,1] (corners read 0 there).
    const int h = 7, w = 9, nc = 5, ld = 8;
    const auto hwc = random_vec(static_cast<size_t>(h) * w * ld, 12);
    std::vector<float> chw(static_cast<size_t>(nc) * h * w);
    for (int c = 0; c < nc; ++c)
        for (int p = 0; p < h * w; ++p) chw[static_cast<size_t>(c) * h * w + p] = hwc[static_cast<size_t>(p) * ld + c];
    std::mt19937                          rng(13);
    std::uniform_real_distribution<float> u(-0.3f, 1.3f);
    int                                   outside = 0;
    for (int t = 0; t < 400; ++t) {
        const float lx = t < 4 ? (t % 2 ? 1.0f : 0.0f) : u(rng), ly = t < 4 ? (t / 2 ? 1.0f : 0.0f) : u(rng);
        outside += lx < 0 || lx > 1 || ly < 0 || ly > 1;
        std::vector<float> got(nc, 0.25f), want(nc);
        rfdetr::cpu::bilinear_sample_accumulate(hwc.data(), ld, h, w, lx, ly, 0.5f, nc, got.data());
        rfdetr::ref::grid_sample_bilinear(chw.data(), nc, h, w, 2.0f * lx - 1.0f, 2.0f * ly - 1.0f, want.data());
        for (int c = 0; c < nc; ++c) ASSERT_NEAR(got[c], 0.25 + 0.5 * want[c], 1e-6) << lx << "," << ly << " c" << c;
    }
    EXPECT_GT(outside, 50);
    // Far outside: nothing added.
    std::vector<float> z(nc, 0.0f);
    rfdetr::cpu::bilinear_sample_accumulate(hwc.data(), ld, h, w, 1.5f, 0.5f, 1.0f, nc, z.data());
    for (float v : z) EXPECT_EQ(v, 0.0f);
}

TEST(cpu_kernels, bicubic_antialias_resize_matches_reference_up_and_down) {
    const int c = 3;
    for (auto dims : {std::vector<int>{37, 37, 40, 40}, std::vector<int>{11, 7, 5, 13}, std::vector<int>{9, 15, 9, 4}}) {
        const int  ih = dims[0], iw = dims[1], oh = dims[2], ow = dims[3];
        const auto src = random_vec(static_cast<size_t>(ih) * iw * c, 14);
        std::vector<float> got(static_cast<size_t>(oh) * ow * c), want = got, scratch(static_cast<size_t>(ih) * ow * c);
        rfdetr::cpu::resize_bicubic_aa(src.data(), ih, iw, c, got.data(), oh, ow, scratch.data());
        rfdetr::ref::resize_bicubic_aa(src.data(), ih, iw, c, want.data(), oh, ow);
        expect_close(got, want, 1e-6, "resize_bicubic_aa");
    }
    // Antialiased bicubic renormalises the truncated border taps: a constant image stays constant.
    std::vector<float> ones(37 * 37, 1.0f), out(40 * 40), scratch(37 * 40);
    rfdetr::cpu::resize_bicubic_aa(ones.data(), 37, 37, 1, out.data(), 40, 40, scratch.data());
    for (float v : out) EXPECT_NEAR(v, 1.0f, 1e-6);
}

TEST(cpu_kernels, conv3x3_as_im2col_gemm_matches_direct_convolution) {
    const int h = 7, w = 11, cin = 5, cout = 6;
    const auto x = random_vec(static_cast<size_t>(h) * w * cin, 15);
    const auto wt = random_vec(static_cast<size_t>(cout) * cin * 9, 16);
    std::vector<float> cols(static_cast<size_t>(h) * w * cin * 9), got(static_cast<size_t>(h) * w * cout), want = got;
    rfdetr::cpu::im2col_3x3(x.data(), cin, h, w, cin, cols.data(), 0, 3);
    rfdetr::cpu::im2col_3x3(x.data(), cin, h, w, cin, cols.data(), 3, h);  // two row bands, as the engine splits
    const auto pw = rfdetr::cpu::pack_weight(wt.data(), cout, cin * 9, cin * 9);
    std::vector<float> scratch(rfdetr::cpu::gemm_scratch_floats(cin * 9));
    rfdetr::cpu::gemm_packed(h * w, cols.data(), cin * 9, pw, got.data(), cout, rfdetr::cpu::epilogue{}, scratch.data());
    rfdetr::ref::conv3x3(x.data(), h, w, cin, wt.data(), cout, want.data());
    expect_close(got, want, 1e-5, "conv3x3");
}

TEST(cpu_kernels, topk_is_sorted_descending_with_ties_by_index) {
    for (int n : {1, 7, 1601}) {
        auto s = random_vec(n, 17);
        for (int i = 0; i + 3 < n; i += 5) s[i + 3] = s[i];  // exact ties
        const int             k = std::min(n, 301);
        std::vector<int32_t>  got(k), want(k), scratch(n);
        rfdetr::cpu::topk(s.data(), n, k, got.data(), scratch.data());
        rfdetr::ref::topk(s.data(), n, k, want.data());
        EXPECT_EQ(got, want) << "n=" << n;
    }
}

TEST(cpu_kernels, thread_pool_runs_every_task_once_across_many_regions) {
    rfdetr::thread_pool pool(3);
    std::array<std::atomic<bool>, 3> busy{};
    std::atomic<int>                 bad{0};
    std::mt19937                     rng(18);
    // Many short regions back to back: a late worker must never run a task of the wrong region, and no
    // thread index is used by two tasks at once (the engine gives each index its own scratch).
    for (int region = 0; region < 3000; ++region) {
        const int                     n = region < 4 ? region : static_cast<int>(rng() % 40);
        std::vector<std::atomic<int>> hits(n);
        pool.parallel_for(n, [&](int t, int thread) {
            if (thread < 0 || thread >= 3 || busy[thread].exchange(true)) bad++;
            hits[t]++;
            busy[thread] = false;
        });
        for (auto & h : hits) ASSERT_EQ(h.load(), 1) << "region " << region;
    }
    EXPECT_EQ(bad.load(), 0);
    EXPECT_GE(rfdetr::physical_core_count(), 1);
}

}  // namespace
