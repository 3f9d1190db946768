#include "engines/cpu/attention-int8.h"

// GCC 12 reports its own AVX-512 intrinsics' undefined operands as (maybe-)uninitialized (see qgemm.cpp).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include "engines/cpu/qgemm-kernel.h"
#include "engines/cpu/simd-math.h"

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

// Every function that runs an AVX-512 instruction carries this target and is called only behind
// attention_int8_supported() (the engine's choice, or a test's skip).
#define RFDETR_I8ATT __attribute__((target("avx512f,avx512bw,avx512vnni")))

namespace rfdetr::cpu {

using namespace simd;

namespace {

constexpr int   k_rows = 14;  // query rows per tile: 28 zmm accumulators, as the int8 GEMM's AVX-512 VNNI kernel
constexpr int   k_qmax = 127;
constexpr float k_pmax = 255.0f;  // p = exp(s - max) in [0, 1] as u8
constexpr float k_log2e = 1.44269504088896341f;  // exp(s - max) = 2^(s log2 e - max log2 e), one fmadd
constexpr int   k_max_width = 128;  // head widths up to this (attention_int8_width_ok)

size_t sz(int a, int b) { return static_cast<size_t>(a) * static_cast<size_t>(b); }
int    pad32(int n) { return (n + 31) / 32 * 32; }
size_t pad16f(size_t floats) { return (floats + 15) / 16 * 16; }

// A packed head in float units: [K panels: nkp * d bytes][V panels: nkp * d bytes][s_k * scale: nkp][compensation
// 128 * sum_c k_q: nkp int32][s_v: d]. K panel p (keys 32p..32p+31) is [d/4][32][4] (4 consecutive channels of a key,
// vpdpbusd's group); V panel cp (channels 32cp..) is [nkp/4][32][4] (4 consecutive keys of a channel).
struct kv_layout {
    int    nkp;
    size_t v, sks, comp, sv, floats;
};
kv_layout layout(int nk, int d) {
    kv_layout l{};
    l.nkp  = pad32(nk);
    l.v    = sz(l.nkp, d) / 4;
    l.sks  = 2 * l.v;
    l.comp = l.sks + l.nkp;
    l.sv   = l.comp + l.nkp;
    l.floats = pad16f(l.sv + d);
    return l;
}

// Scratch of a block: [q rows: [d/4][k_rows][4] u8][s_q: 16][scores: k_rows * nkp][p: [nkp/4][k_rows][4] u8][l: 16].
struct scratch_layout {
    size_t sq, s, p, l, floats;
};
scratch_layout scratch_parts(int nk, int d) {
    const int      nkp = pad32(nk);
    scratch_layout l{};
    l.sq     = pad16f(sz(k_rows, d) / 4);
    l.s      = l.sq + 16;
    l.p      = l.s + sz(k_rows, nkp);
    l.l      = l.p + pad16f(sz(k_rows, nkp) / 4);
    l.floats = l.l + 16;
    return l;
}

RFDETR_I8ATT inline __mmask16 lanes(int n) {
    return n >= 16 ? static_cast<__mmask16>(0xFFFF) : n <= 0 ? 0 : static_cast<__mmask16>((1u << n) - 1);
}

// nearbyint(x * inv) clamped to +-127, 16 lanes.
RFDETR_I8ATT inline __m512i quantize16(__m512 x, __m512 inv) {
    const __m512i q = _mm512_cvtps_epi32(_mm512_mul_ps(x, inv));  // round to nearest even
    return _mm512_min_epi32(_mm512_max_epi32(q, _mm512_set1_epi32(-k_qmax)), _mm512_set1_epi32(k_qmax));
}

// The four 4-byte groups of 16 bytes to dst, dst + stride, dst + 2 stride, dst + 3 stride.
RFDETR_I8ATT inline void store_groups(__m128i b, uint8_t * dst, size_t stride) {
    _mm_storeu_si32(dst, b);
    _mm_storeu_si32(dst + stride, _mm_bsrli_si128(b, 4));
    _mm_storeu_si32(dst + 2 * stride, _mm_bsrli_si128(b, 8));
    _mm_storeu_si32(dst + 3 * stride, _mm_bsrli_si128(b, 12));
}

// R rows of a ([kq][k_rows][4] u8) times one 32-column panel b ([kq][32][4] s8): t[R][32] = the int32 sums (the int8
// GEMM's k loop, qgemm-kernel.h).
template <int R>
RFDETR_I8ATT void dot_tile(int kq, const uint8_t * a, const int8_t * b, int32_t * t) {
    vnni_sums512<R>(kq, a, k_rows, b, t);
}

using dot_fn = void (*)(int, const uint8_t *, const int8_t *, int32_t *);
template <int... R> constexpr auto make_tiles(std::integer_sequence<int, R...>) {
    return std::array<dot_fn, k_rows + 1>{nullptr, &dot_tile<R + 1>...};
}
const auto k_tiles = make_tiles(std::make_integer_sequence<int, k_rows>{});

RFDETR_I8ATT void pack_impl(const float * k, int ldk, const float * v, int ldv, int nk, int d, float scale, float * kv) {
    const kv_layout L   = layout(nk, d);
    int8_t *        kp  = reinterpret_cast<int8_t *>(kv);
    int8_t *        vp  = reinterpret_cast<int8_t *>(kv + L.v);
    float *         sks = kv + L.sks;
    int32_t *       cmp = reinterpret_cast<int32_t *>(kv + L.comp);
    float *         sv  = kv + L.sv;
    std::memset(kv, 0, sizeof(float) * L.sv);  // padded keys: zero K and V, s_k 0, compensation 0
    const int kq = d / 4, nc = d / 16;
    // One pass over the keys: each k row quantised, and v's column maxima (nc running maxima). The rows are the qkv
    // GEMM's, 3 widths apart: the loads of a row were the packing's stall (perf), so rows 8 ahead are prefetched.
    __m512 vmax[k_max_width / 16];
    for (int c = 0; c < nc; ++c) vmax[c] = _mm512_setzero_ps();
    for (int j = 0; j < nk; ++j) {
        if (j + 8 < nk) {
            for (int c = 0; c < d; c += 16) {
                _mm_prefetch(reinterpret_cast<const char *>(k + sz(j + 8, ldk) + c), _MM_HINT_T0);
                _mm_prefetch(reinterpret_cast<const char *>(v + sz(j + 8, ldv) + c), _MM_HINT_T0);
            }
        }
        for (int c = 0; c < nc; ++c) vmax[c] = _mm512_max_ps(vmax[c], _mm512_abs_ps(_mm512_loadu_ps(v + sz(j, ldv) + 16 * c)));
        const float * x    = k + sz(j, ldk);
        const float   amax = row_absmax(x, d);
        const __m512  inv  = _mm512_set1_ps(amax > 0.0f ? static_cast<float>(k_qmax) / amax : 0.0f);
        sks[j]             = amax / static_cast<float>(k_qmax) * scale;
        __m512i sum        = _mm512_setzero_si512();
        uint8_t * dst = reinterpret_cast<uint8_t *>(kp) + (sz(j / 32, kq) * 32 + j % 32) * 4;
        for (int c = 0; c < d; c += 16) {
            const __m512i q = quantize16(_mm512_loadu_ps(x + c), inv);
            sum             = _mm512_add_epi32(sum, q);
            store_groups(_mm512_cvtepi32_epi8(q), dst + sz(c / 4, 128), 128);
        }
        cmp[j] = 128 * _mm512_reduce_add_epi32(sum);
    }
    // V per channel (the column maxima above), 4 keys at a time into [key group][32 channels][4].
    for (int c = 0; c < nc; ++c) _mm512_storeu_ps(sv + 16 * c, vmax[c]);
    alignas(64) float inv[k_max_width];
    for (int c = 0; c < d; ++c) {
        const float amax = sv[c];
        inv[c]           = amax > 0.0f ? static_cast<float>(k_qmax) / amax : 0.0f;
        sv[c]            = amax / static_cast<float>(k_qmax);
    }
    const int groups = (nk + 3) / 4;
    for (int g = 0; g < groups; ++g) {
        for (int c = 0; c < d; c += 16) {
            const __m512 vi = _mm512_loadu_ps(inv + c);
            __m512i      w  = _mm512_setzero_si512();
            for (int e = 0; e < 4 && 4 * g + e < nk; ++e) {
                const __m512i q = quantize16(_mm512_loadu_ps(v + sz(4 * g + e, ldv) + c), vi);
                w = _mm512_or_si512(w, _mm512_slli_epi32(_mm512_and_si512(q, _mm512_set1_epi32(0xFF)), 8 * e));
            }
            _mm512_storeu_si512(vp + (sz(c / 32, L.nkp / 4) + g) * 128 + (c % 32) * 4, w);
        }
    }
}

RFDETR_I8ATT void block_impl(const float * q, int ldq, const float * kv, int nk, float * o, int ldo, int nq, int d,
                             float * scratch) {
    const kv_layout      L   = layout(nk, d);
    const scratch_layout S   = scratch_parts(nk, d);
    const int8_t *       kp  = reinterpret_cast<const int8_t *>(kv);
    const int8_t *       vp  = reinterpret_cast<const int8_t *>(kv + L.v);
    const float *        sks = kv + L.sks;
    const int32_t *      cmp = reinterpret_cast<const int32_t *>(kv + L.comp);
    const float *        sv  = kv + L.sv;
    uint8_t *            qa  = reinterpret_cast<uint8_t *>(scratch);
    float *              sq  = scratch + S.sq;
    float *              st  = scratch + S.s;
    uint8_t *            pa  = reinterpret_cast<uint8_t *>(scratch + S.p);
    int32_t *            ls  = reinterpret_cast<int32_t *>(scratch + S.l);
    const int            nkp = L.nkp, kq = d / 4, kpan = nkp / 32;
    alignas(64) int32_t  t[k_rows * 32];
    for (int i0 = 0; i0 < nq; i0 += k_rows) {
        const int R = std::min(k_rows, nq - i0);
        // The next tile's query rows arrive while this one's scores run (their loads were a third of this function's
        // samples, perf).
        for (int r = i0 + k_rows; r < std::min(nq, i0 + 2 * k_rows); ++r) {
            for (int c = 0; c < d; c += 16) _mm_prefetch(reinterpret_cast<const char *>(q + sz(r, ldq) + c), _MM_HINT_T0);
        }
        // The query rows as u8 = q + 128 by the int8 GEMM's row quantiser (vpdpbusd's unsigned operand; the keys'
        // compensation removes the 128), in the tiles' A layout.
        for (int r = 0; r < R; ++r) sq[r] = quantize_row(q + sz(i0 + r, ldq), d, qa + 4 * r, 4 * k_rows);
        // Scores, and each row's running maximum over the real keys.
        __m512 mx[k_rows];
        for (int r = 0; r < R; ++r) mx[r] = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
        for (int p = 0; p < kpan; ++p) {
            k_tiles[R](kq, qa, kp + sz(p, kq) * 128, t);
            const int       j0 = 32 * p;
            const __mmask16 m0 = lanes(nk - j0), m1 = lanes(nk - j0 - 16);
            const __m512i   c0 = _mm512_loadu_si512(cmp + j0), c1 = _mm512_loadu_si512(cmp + j0 + 16);
            const __m512    k0 = _mm512_loadu_ps(sks + j0), k1 = _mm512_loadu_ps(sks + j0 + 16);
            for (int r = 0; r < R; ++r) {
                const __m512 s  = _mm512_set1_ps(sq[r]);
                const __m512 v0 = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_load_si512(t + r * 32), c0)),
                                                _mm512_mul_ps(s, k0));
                const __m512 v1 = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_load_si512(t + r * 32 + 16), c1)),
                                                _mm512_mul_ps(s, k1));
                _mm512_storeu_ps(st + sz(r, nkp) + j0, v0);
                _mm512_storeu_ps(st + sz(r, nkp) + j0 + 16, v1);
                mx[r] = _mm512_mask_max_ps(mx[r], m0, mx[r], v0);
                mx[r] = _mm512_mask_max_ps(mx[r], m1, mx[r], v1);
            }
        }
        // p = nearbyint(exp(s - max) * 255) as u8 in the tiles' A layout, l = sum p; the padded keys' p are 0.
        for (int r = 0; r < R; ++r) {
            const __m512 m   = _mm512_set1_ps(-_mm512_reduce_max_ps(mx[r]) * k_log2e);
            __m512i      sum = _mm512_setzero_si512();
            for (int j = 0; j < nkp; j += 16) {
                const __mmask16 mk = lanes(nk - j);
                const __m512    e  = exp2_nonpositive512(
                    _mm512_fmadd_ps(_mm512_maskz_loadu_ps(mk, st + sz(r, nkp) + j), _mm512_set1_ps(k_log2e), m));
                const __m512i   pq = _mm512_maskz_cvtps_epi32(mk, _mm512_mul_ps(e, _mm512_set1_ps(k_pmax)));
                sum                = _mm512_add_epi32(sum, pq);
                store_groups(_mm512_cvtepi32_epi8(pq), pa + (sz(j / 4, k_rows) + r) * 4, 4 * k_rows);
            }
            ls[r] = _mm512_reduce_add_epi32(sum);
        }
        // o = (float(p v) * s_v) / l.
        for (int cp = 0; cp < d / 32; ++cp) {
            k_tiles[R](nkp / 4, pa, vp + sz(cp, nkp / 4) * 128, t);
            const __m512 s0 = _mm512_loadu_ps(sv + 32 * cp), s1 = _mm512_loadu_ps(sv + 32 * cp + 16);
            for (int r = 0; r < R; ++r) {
                const __m512 l  = _mm512_set1_ps(static_cast<float>(ls[r]));
                float *      or_ = o + sz(i0 + r, ldo) + 32 * cp;
                _mm512_storeu_ps(or_, _mm512_div_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_load_si512(t + r * 32)), s0), l));
                _mm512_storeu_ps(or_ + 16,
                                 _mm512_div_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_load_si512(t + r * 32 + 16)), s1), l));
            }
        }
    }
}

// exp(s - m) as the kernel computes it, for one value (lane 0), for the reference.
RFDETR_I8ATT float exp_from_max(float s, float m) {
    return _mm512_cvtss_f32(exp2_nonpositive512(_mm512_set1_ps(std::fma(s, k_log2e, -m * k_log2e))));
}

int quantize1(float x, float inv) {
    return std::clamp(static_cast<int>(std::nearbyint(x * inv)), -k_qmax, k_qmax);
}

}  // namespace

bool attention_int8_supported() {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vnni");
}

bool attention_int8_width_ok(int d) { return d > 0 && d % 32 == 0 && d <= k_max_width; }

size_t attention_int8_kv_floats(int nk, int d) { return layout(nk, d).floats; }

void attention_int8_pack(const float * k, int ldk, const float * v, int ldv, int nk, int d, float scale, float * kv) {
    pack_impl(k, ldk, v, ldv, nk, d, scale, kv);
}

size_t attention_int8_scratch_floats(int nk, int d) { return scratch_parts(nk, d).floats; }

void attention_int8_block(const float * q, int ldq, const float * kv, int nk, float * o, int ldo, int nq, int d,
                          float * scratch) {
    block_impl(q, ldq, kv, nk, o, ldo, nq, d, scratch);
}

size_t attention_int8_head_scratch_floats(int nk, int d) {
    return attention_int8_kv_floats(nk, d) + attention_int8_scratch_floats(nk, d);
}

void attention_int8_head(const float * q, int ldq, const float * k, int ldk, const float * v, int ldv, float * o,
                         int ldo, int nq, int nk, int d, float scale, float * scratch) {
    attention_int8_pack(k, ldk, v, ldv, nk, d, scale, scratch);
    attention_int8_block(q, ldq, scratch, nk, o, ldo, nq, d, scratch + attention_int8_kv_floats(nk, d));
}

void attention_int8_ref(const float * q, int ldq, const float * k, int ldk, const float * v, int ldv, float * o,
                        int ldo, int nq, int nk, int d, float scale) {
    auto row_scale = [](const float * x, int n, int step) {
        float amax = 0.0f;
        for (int c = 0; c < n; ++c) amax = std::max(amax, std::fabs(x[sz(c, step)]));
        return amax;
    };
    std::vector<int>   kq(sz(nk, d)), vq(sz(nk, d));
    std::vector<float> sks(static_cast<size_t>(nk)), sv(static_cast<size_t>(d));
    for (int j = 0; j < nk; ++j) {
        const float amax = row_scale(k + sz(j, ldk), d, 1);
        const float inv  = amax > 0.0f ? static_cast<float>(k_qmax) / amax : 0.0f;
        sks[j]           = amax / static_cast<float>(k_qmax) * scale;
        for (int c = 0; c < d; ++c) kq[sz(j, d) + c] = quantize1(k[sz(j, ldk) + c], inv);
    }
    for (int c = 0; c < d; ++c) {
        const float amax = row_scale(v + c, nk, ldv);
        const float inv  = amax > 0.0f ? static_cast<float>(k_qmax) / amax : 0.0f;
        sv[c]            = amax / static_cast<float>(k_qmax);
        for (int j = 0; j < nk; ++j) vq[sz(j, d) + c] = quantize1(v[sz(j, ldv) + c], inv);
    }
    std::vector<int>   qq(static_cast<size_t>(d)), p(static_cast<size_t>(nk));
    std::vector<float> s(static_cast<size_t>(nk));
    for (int i = 0; i < nq; ++i) {
        const float amax = row_scale(q + sz(i, ldq), d, 1);
        const float inv  = amax > 0.0f ? static_cast<float>(k_qmax) / amax : 0.0f;
        const float sq   = amax / static_cast<float>(k_qmax);
        for (int c = 0; c < d; ++c) qq[c] = quantize1(q[sz(i, ldq) + c], inv);
        float m = -std::numeric_limits<float>::infinity();
        for (int j = 0; j < nk; ++j) {
            int32_t acc = 0;
            for (int c = 0; c < d; ++c) acc += qq[c] * kq[sz(j, d) + c];
            s[j] = static_cast<float>(acc) * (sq * sks[j]);
            m    = std::max(m, s[j]);
        }
        int32_t l = 0;
        for (int j = 0; j < nk; ++j) {
            p[j] = static_cast<int>(std::nearbyint(exp_from_max(s[j], m) * k_pmax));
            l += p[j];
        }
        for (int c = 0; c < d; ++c) {
            int32_t acc = 0;
            for (int j = 0; j < nk; ++j) acc += p[j] * vq[sz(j, d) + c];
            o[sz(i, ldo) + c] = static_cast<float>(acc) * sv[c] / static_cast<float>(l);
        }
    }
}

}  // namespace rfdetr::cpu
