#include "engines/cpu/attention-bf16.h"

// GCC 12 reports its own AVX-512 intrinsics' undefined operands as (maybe-)uninitialized (see qgemm.cpp).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include "engines/cpu/attention-bf16-kernel.h"
#include "engines/cpu/simd-math.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

// The conversions and the softmax use AVX512-BF16 (vcvtne2ps2bf16, round to nearest even) and AVX512-BW;
// every kernel needs them, so they are called only when a kernel was selected.
#define RFDETR_BF16 __attribute__((target("avx512f,avx512bw,avx512bf16")))
#define RFDETR_BF16_LAMBDA __attribute__((target("avx512f,avx512bw,avx512bf16"), always_inline))

namespace rfdetr::cpu {

namespace {

size_t sz(int a, int b) { return static_cast<size_t>(a) * static_cast<size_t>(b); }
int    pad32(int n) { return (n + 31) / 32 * 32; }
size_t pad16f(size_t floats) { return (floats + 15) / 16 * 16; }  // each scratch part a whole number of 64 bytes

const attn_bf16_kernel *& active() {
    static const attn_bf16_kernel * a = [] () -> const attn_bf16_kernel * {
        __builtin_cpu_init();
        if (!__builtin_cpu_supports("avx512bf16") || !__builtin_cpu_supports("avx512bw")) return nullptr;
        return attn_amx_bf16_usable() ? &k_attn_amx : &k_attn_avx512bf16;
    }();
    return a;
}

RFDETR_BF16 inline __mmask16 lanes(int n) {
    return n >= 16 ? static_cast<__mmask16>(0xFFFF) : n <= 0 ? 0 : static_cast<__mmask16>((1u << n) - 1);
}

// The operands come as fp32 (rounded here to bf16, nearest even: vcvtne2ps2bf16) or already as bf16 rows
// (uint16_t, the bf16 GEMM's hand-off); the output goes out as fp32 or rounded to bf16 the same way.
// 16 values (the first n, the rest 0) as bf16.
RFDETR_BF16 inline __m256i load16(const float * x, int n) {
    return (__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(lanes(n), x));
}
RFDETR_BF16 inline __m256i load16(const uint16_t * x, int n) {
    const __mmask32 m = n >= 16 ? 0xFFFF : n <= 0 ? 0 : static_cast<__mmask32>((1u << n) - 1);
    return _mm512_castsi512_si256(_mm512_maskz_loadu_epi16(m, x));
}
// 32 values as bf16, in order (16 pairs).
RFDETR_BF16 inline __m512i load32(const float * x) {
    return (__m512i)_mm512_cvtne2ps_pbh(_mm512_loadu_ps(x + 16), _mm512_loadu_ps(x));
}
RFDETR_BF16 inline __m512i load32(const uint16_t * x) { return _mm512_loadu_si512(x); }
RFDETR_BF16 inline void store16(float * o, __m512 v) { _mm512_storeu_ps(o, v); }
RFDETR_BF16 inline void store16(uint16_t * o, __m512 v) {
    _mm256_storeu_si256(reinterpret_cast<__m256i *>(o), (__m256i)_mm512_cvtneps_pbh(v));
}

// The block's queries as qb [k_attn_rows][d], rows past nq zero.
template <class T>
RFDETR_BF16 void pack_queries(const T * q, int ldq, int nq, int d, uint16_t * qb) {
    for (int i = 0; i < k_attn_rows; ++i) {
        uint16_t * dst = qb + sz(i, d);
        for (int c = 0; c < d; c += 16) {
            const __m256i v = i < nq ? load16(q + sz(i, ldq) + c, 16) : _mm256_setzero_si256();
            _mm256_storeu_si256(reinterpret_cast<__m256i *>(dst + c), v);
        }
    }
}

// P = exp(scale * (s - mx)) = 2^(s log2(e) scale - mx log2(e) scale) in bf16 for the first nk columns (0 up to
// nkp), and the sum of P as rounded. 32 columns per step: one vcvtne2ps2bf16 rounds both halves, and the
// rounded values come back as floats with one AND (odd bf16 of each 32-bit pair) and one shift (even).
RFDETR_BF16 void softmax_rows(const float * s, int lds, const float * mx, int rows, int nk, int nkp, float scale,
                              uint16_t * p, int ldp, float * sums) {
    const float   c    = scale * 1.44269504088896341f;
    const __m512  vc   = _mm512_set1_ps(c);
    const __m512i high = _mm512_set1_epi32(static_cast<int>(0xFFFF0000u));
    const int     full = nk / 32 * 32;  // columns of whole unmasked steps
    for (int i = 0; i < rows; ++i) {
        const float * sr = s + sz(i, lds);
        uint16_t *    pr = p + sz(i, ldp);
        const __m512  m  = _mm512_set1_ps(-mx[i] * c);
        __m512       s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
        auto         step = [&](int j, __mmask16 l0, __mmask16 l1) RFDETR_BF16_LAMBDA {
            const __m512  t0 = _mm512_fmadd_ps(_mm512_loadu_ps(sr + j), vc, m);
            const __m512  t1 = _mm512_fmadd_ps(_mm512_loadu_ps(sr + j + 16), vc, m);
            const __m512  e0 = _mm512_maskz_mov_ps(l0, simd::exp2_nonpositive512(t0));
            const __m512  e1 = _mm512_maskz_mov_ps(l1, simd::exp2_nonpositive512(t1));
            const __m512i b  = (__m512i)_mm512_cvtne2ps_pbh(e1, e0);
            _mm512_storeu_si512(pr + j, b);
            s0 = _mm512_add_ps(s0, _mm512_castsi512_ps(_mm512_and_si512(b, high)));
            s1 = _mm512_add_ps(s1, _mm512_castsi512_ps(_mm512_slli_epi32(b, 16)));
        };
        for (int j = 0; j < full; j += 32) step(j, 0xFFFF, 0xFFFF);
        if (full < nkp) step(full, lanes(nk - full), lanes(nk - full - 16));
        sums[i] = _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
    }
}

// o rows (ldo) = acc rows x (1 / sum): one division per row (a vdivps per 16 columns was 10 % of a window head).
template <class T>
RFDETR_BF16 void store_rows(const float * acc, int d, const float * sum, int rows, T * o, int ldo) {
    for (int i = 0; i < rows; ++i) {
        const __m512 r = _mm512_set1_ps(1.0f / sum[i]);
        for (int c = 0; c < d; c += 16) store16(o + sz(i, ldo) + c, _mm512_mul_ps(_mm512_loadu_ps(acc + sz(i, d) + c), r));
    }
}

// The 16 x 16 32-bit matrix r transposed in place: pairs, then 64-bit pairs within 128-bit lanes, then lanes.
RFDETR_BF16 inline void transpose16(__m512i * r) {
    __m512i t[16], u[16];
    for (int i = 0; i < 16; i += 2) {
        t[i]     = _mm512_unpacklo_epi32(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
    }
    for (int g = 0; g < 16; g += 4) {
        u[g]     = _mm512_unpacklo_epi64(t[g], t[g + 2]);
        u[g + 1] = _mm512_unpackhi_epi64(t[g], t[g + 2]);
        u[g + 2] = _mm512_unpacklo_epi64(t[g + 1], t[g + 3]);
        u[g + 3] = _mm512_unpackhi_epi64(t[g + 1], t[g + 3]);
    }
    // u[4g + c] lane L: rows 4g..4g+3 of column 4L + c.
    for (int c = 0; c < 4; ++c) {
        const __m512i x0 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0x88), x1 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0xDD);
        const __m512i y0 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0x88);
        const __m512i y1 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0xDD);
        r[c]      = _mm512_shuffle_i32x4(x0, y0, 0x88);
        r[8 + c]  = _mm512_shuffle_i32x4(x0, y0, 0xDD);
        r[4 + c]  = _mm512_shuffle_i32x4(x1, y1, 0x88);
        r[12 + c] = _mm512_shuffle_i32x4(x1, y1, 0xDD);
    }
}

template <class T>
RFDETR_BF16 void pack(const T * k, int ldk, const T * v, int ldv, int nk, int d, uint16_t * kp, uint16_t * vp) {
    const int nkp = pad32(nk);
    // K: per 16 keys and 32 d, the keys' 16 pairs (32 bits each) as 16 rows, transposed so that row r holds pair
    // r of the 16 keys (a 16-key block's [d/2][16][2]). A scatter per key took 20 % of a window head.
    for (int j0 = 0; j0 < nkp; j0 += 16) {
        for (int c = 0; c < d; c += 32) {
            __m512i r[16];
            for (int i = 0; i < 16; ++i) {
                r[i] = j0 + i < nk ? load32(k + sz(j0 + i, ldk) + c) : _mm512_setzero_si512();
            }
            transpose16(r);
            uint16_t * dst = kp + sz(j0, d) + sz(c / 2, 32);
            for (int i = 0; i < 16; ++i) _mm512_storeu_si512(dst + sz(i, 32), r[i]);
        }
    }
    // V: key pair (2j, 2j+1) of columns [c, c + 16) interleaved, one 64-byte row of block c / 16.
    const __m512i inter = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22, 6,
                                           21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    for (int c = 0; c < d; c += 16) {
        uint16_t * blk = vp + sz(c / 16, nkp * 16);
        for (int j = 0; j < nkp; j += 2) {
            const __m256i a  = load16(v + sz(std::min(j, nk - 1), ldv) + c, j < nk ? 16 : 0);
            const __m256i b  = load16(v + sz(std::min(j + 1, nk - 1), ldv) + c, j + 1 < nk ? 16 : 0);
            const __m512i ab = _mm512_inserti64x4(_mm512_castsi256_si512(a), b, 1);
            _mm512_storeu_si512(blk + sz(j, 16), _mm512_permutexvar_epi16(inter, ab));
        }
    }
}

}  // namespace

bool attention_bf16_supported(std::string & why) {
    if (active()) return true;
    why = "bf16 attention needs AVX512-BF16 (and AVX512-BW); this CPU lacks it (see /proc/cpuinfo's avx512_bf16 flag)";
    return false;
}

const char * attention_bf16_isa() { return active() ? active()->name : ""; }

bool attention_bf16_select_isa(const char * name) {
    std::string why;
    if (!attention_bf16_supported(why)) return false;
    if (std::strcmp(name, "avx512bf16") == 0) {
        active() = &k_attn_avx512bf16;
        return true;
    }
    if (std::strcmp(name, "amx") == 0 && attn_amx_bf16_usable()) {
        active() = &k_attn_amx;
        return true;
    }
    return false;
}

bool attention_bf16_width_ok(int d) { return d > 0 && d % 32 == 0; }

size_t attention_bf16_kv_floats(int nk, int d) { return sz(pad32(nk), d); }  // 2 nkp d bf16

void attention_bf16_pack(const float * k, int ldk, const float * v, int ldv, int nk, int d, float * kv) {
    uint16_t * kp = reinterpret_cast<uint16_t *>(kv);
    pack(k, ldk, v, ldv, nk, d, kp, kp + sz(pad32(nk), d));
}

void attention_bf16_pack(const uint16_t * k, int ldk, const uint16_t * v, int ldv, int nk, int d, float * kv) {
    uint16_t * kp = reinterpret_cast<uint16_t *>(kv);
    pack(k, ldk, v, ldv, nk, d, kp, kp + sz(pad32(nk), d));
}

size_t attention_bf16_scratch_floats(int nk, int d) {
    const int nkp = pad32(nk);
    return pad16f(sz(k_attn_rows, nkp)) + pad16f(sz(k_attn_rows, nkp) / 2) + pad16f(sz(k_attn_rows, d) / 2) +
           pad16f(sz(k_attn_rows, d)) + 2 * pad16f(k_attn_rows);
}

namespace {

template <class In, class Out>
void block(const In * q, int ldq, const float * kv, int nk, Out * o, int ldo, int nq, int d, float scale, float * scratch) {
    const attn_bf16_kernel & kr  = *active();
    const int                nkp = pad32(nk);
    const uint16_t *         kp  = reinterpret_cast<const uint16_t *>(kv);
    const uint16_t *         vp  = kp + sz(nkp, d);
    float *                  s   = scratch;                                  // [32][nkp] fp32 scores
    uint16_t * p   = reinterpret_cast<uint16_t *>(s + pad16f(sz(k_attn_rows, nkp)));  // [32][nkp] bf16
    uint16_t * qb  = p + 2 * pad16f(sz(k_attn_rows, nkp) / 2);                        // [32][d] bf16
    float *    acc = reinterpret_cast<float *>(qb + 2 * pad16f(sz(k_attn_rows, d) / 2));  // [32][d] fp32
    float *    sum = acc + pad16f(sz(k_attn_rows, d));
    float *    mx  = sum + pad16f(k_attn_rows);
    if (kr.begin) kr.begin();
    for (int i0 = 0; i0 < nq; i0 += k_attn_rows) {
        const int rows = std::min(k_attn_rows, nq - i0);
        pack_queries(q + sz(i0, ldq), ldq, rows, d, qb);
        kr.scores(qb, d, kp, nkp, nk, s, nkp, mx);
        softmax_rows(s, nkp, mx, rows, nk, nkp, scale, p, nkp, sum);
        // Rows past `rows` of P are multiplied but never stored: zero keeps them finite.
        if (rows < k_attn_rows) std::memset(p + sz(rows, nkp), 0, sz(k_attn_rows - rows, nkp) * 2);
        kr.pv(p, nkp, vp, nkp, d, acc);
        store_rows(acc, d, sum, rows, o + sz(i0, ldo), ldo);
    }
    if (kr.end) kr.end();
}

}  // namespace

void attention_bf16_block(const float * q, int ldq, const float * kv, int nk, float * o, int ldo, int nq, int d,
                          float scale, float * scratch) {
    block(q, ldq, kv, nk, o, ldo, nq, d, scale, scratch);
}

void attention_bf16_block(const uint16_t * q, int ldq, const float * kv, int nk, uint16_t * o, int ldo, int nq, int d,
                          float scale, float * scratch) {
    block(q, ldq, kv, nk, o, ldo, nq, d, scale, scratch);
}

size_t attention_bf16_head_scratch_floats(int nk, int d) {
    return pad16f(attention_bf16_kv_floats(nk, d)) + attention_bf16_scratch_floats(nk, d);
}

void attention_bf16_head(const float * q, int ldq, const float * k, int ldk, const float * v, int ldv, float * o,
                         int ldo, int nq, int nk, int d, float scale, float * scratch) {
    attention_bf16_pack(k, ldk, v, ldv, nk, d, scratch);
    attention_bf16_block(q, ldq, scratch, nk, o, ldo, nq, d, scale,
                         scratch + pad16f(attention_bf16_kv_floats(nk, d)));
}

void attention_bf16_head(const uint16_t * q, int ldq, const uint16_t * k, int ldk, const uint16_t * v, int ldv,
                         uint16_t * o, int ldo, int nq, int nk, int d, float scale, float * scratch) {
    attention_bf16_pack(k, ldk, v, ldv, nk, d, scratch);
    attention_bf16_block(q, ldq, scratch, nk, o, ldo, nq, d, scale,
                         scratch + pad16f(attention_bf16_kv_floats(nk, d)));
}

}  // namespace rfdetr::cpu
