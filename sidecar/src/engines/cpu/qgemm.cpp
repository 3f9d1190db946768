#include "engines/cpu/qgemm.h"

// GCC 12 reports its own AVX-512 intrinsics' undefined operands (_mm512_undefined_*) as (maybe-)uninitialized,
// a false positive inside avx512fintrin.h, as in gemm.cpp.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include "engines/cpu/gemm-epilogue.h"
#include "engines/cpu/kernels.h"
#include "engines/cpu/qgemm-amx.h"
#include "engines/cpu/qgemm-kernel.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <utility>

namespace rfdetr::cpu {

namespace {

// ---- dequantisation + epilogue of one 16-column half (two 8-float vectors), shared by the ymm kernels ----

inline void store_half256(__m256i acc0, __m256i acc1, float sa, const float * sw, const int32_t * comp, float * cr,
                          const epilogue & e, int j, int nc) {
    const __m256  s  = _mm256_set1_ps(sa);
    const __m256i m0 = mask8(nc), m1 = mask8(nc - 8);
    const bool    f0 = nc >= 8, f1 = nc >= 16;
    const __m256  t0 = _mm256_mul_ps(
        _mm256_cvtepi32_ps(_mm256_sub_epi32(acc0, _mm256_loadu_si256(reinterpret_cast<const __m256i *>(comp + j)))),
        _mm256_mul_ps(_mm256_loadu_ps(sw + j), s));
    const __m256 v0 = epi256(t0, cr, e, j, m0, f0);
    if (f0) _mm256_storeu_ps(cr, v0); else _mm256_maskstore_ps(cr, m0, v0);
    if (nc > 8) {
        const __m256 t1 = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(
                                            acc1, _mm256_loadu_si256(reinterpret_cast<const __m256i *>(comp + j + 8)))),
                                        _mm256_mul_ps(_mm256_loadu_ps(sw + j + 8), s));
        const __m256 v1 = epi256(t1, cr + 8, e, j + 8, m1, f1);
        if (f1) _mm256_storeu_ps(cr + 8, v1); else _mm256_maskstore_ps(cr + 8, m1, v1);
    }
}

// ---- the R rows of one 16-column pass out of the accumulators, shared by the ymm kernels (an AVX2 helper:
// GCC inlines it into the AVX-VNNI kernel, whose target is a superset) ----

template <int R>
inline void store_rows256(const __m256i (&c0)[R], const __m256i (&c1)[R], float * c, int ldc, int ncols, int h,
                          const float * sa, const float * sw, const int32_t * comp, const epilogue & e) {
    alignas(32) int32_t t[R * 16];  // out of the registers once (see the AVX-512 kernel)
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
        _mm256_store_si256(reinterpret_cast<__m256i *>(t + r * 16), c0[r]);
        _mm256_store_si256(reinterpret_cast<__m256i *>(t + r * 16 + 8), c1[r]);
    }
    const int nc = std::min(16, ncols - h * 16);
    for (int r = 0; r < R; ++r) {
        store_half256(_mm256_load_si256(reinterpret_cast<const __m256i *>(t + r * 16)),
                      _mm256_load_si256(reinterpret_cast<const __m256i *>(t + r * 16 + 8)), sa[r], sw, comp,
                      c + static_cast<size_t>(r) * ldc + h * 16, e, h * 16, nc);
    }
}

// ---- AVX2: R rows x 16 columns per pass. vpmaddubsw takes u8 x s8 pairs into a saturating int16, which
// u8 = q_a + 128 would overflow with 8-bit weights (255*127*2 > 2^15); so the rows enter as |q_a| x sign(q_w, q_a)
// (vpsignb): the same products, each pair at most 127*127*2 = 32258 < 2^15, exact. The rows are packed for this
// kernel as q_a (s8) and |q_a| per k group (quantize_row_signed, 8 bytes per row and group), so the k loop spends
// no vpxor or vpabsb per row (8 of the 40 vector operations of a 4-row k step; the int8 GEMMs of a forward
// 8-12 % faster on a Zen 3, README.md "int8"). The accumulators start at comp = 128 * sum q_w, so the sums are
// those of the u8 kernels (sum (q_a + 128) q_w) and share their dequantising store. Pairs summed to int32 by
// vpmaddwd with ones ----

template <int R>
void qtile_avx2(int kq, const uint8_t * a, int mr, const int8_t * b, float * c, int ldc, int ncols, const float * sa,
                const float * sw, const int32_t * comp, const epilogue & e) {
    const __m256i ones = _mm256_set1_epi16(1);
    for (int h = 0; h * 16 < ncols; ++h) {
        __m256i       c0[R], c1[R];
        const __m256i k0 = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(comp + h * 16));
        const __m256i k1 = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(comp + h * 16 + 8));
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) c0[r] = k0, c1[r] = k1;
        const uint8_t * ap = a;
        const int8_t *  bp = b + h * 64;
        for (int q = 0; q < kq; ++q, ap += mr * 8, bp += 4 * k_gemm_nr) {
            const __m256i b0 = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(bp));
            const __m256i b1 = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(bp + 32));
#pragma GCC unroll 8
            for (int r = 0; r < R; ++r) {
                const __m256i as = _mm256_set1_epi32(load4(ap + 8 * r));      // q_a
                const __m256i aa = _mm256_set1_epi32(load4(ap + 8 * r + 4));  // |q_a|
                c0[r] = _mm256_add_epi32(c0[r], _mm256_madd_epi16(_mm256_maddubs_epi16(aa, _mm256_sign_epi8(b0, as)), ones));
                c1[r] = _mm256_add_epi32(c1[r], _mm256_madd_epi16(_mm256_maddubs_epi16(aa, _mm256_sign_epi8(b1, as)), ones));
            }
        }
        store_rows256<R>(c0, c1, c, ldc, ncols, h, sa, sw, comp, e);
    }
}

// ---- AVX-VNNI: the same tile with vpdpbusd (u8 x s8, four products per int32 lane, no saturation) ----
// The k loop is written out rather than shared with qtile_avx2 through a template: the vpdpbusd needs this
// function's target("avxvnni"), and GCC refuses to inline a target-specific helper into a body compiled without it.

template <int R>
__attribute__((target("avxvnni"))) void qtile_avxvnni(int kq, const uint8_t * a, int mr, const int8_t * b, float * c,
                                                      int ldc, int ncols, const float * sa, const float * sw,
                                                      const int32_t * comp, const epilogue & e) {
    for (int h = 0; h * 16 < ncols; ++h) {
        __m256i c0[R], c1[R];
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) c0[r] = c1[r] = _mm256_setzero_si256();
        const uint8_t * ap = a;
        const int8_t *  bp = b + h * 64;
        for (int q = 0; q < kq; ++q, ap += mr * 4, bp += 4 * k_gemm_nr) {
            const __m256i b0 = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(bp));
            const __m256i b1 = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(bp + 32));
#pragma GCC unroll 8
            for (int r = 0; r < R; ++r) {
                const __m256i av = _mm256_set1_epi32(load4(ap + 4 * r));
                c0[r]            = _mm256_dpbusd_avx_epi32(c0[r], av, b0);
                c1[r]            = _mm256_dpbusd_avx_epi32(c1[r], av, b1);
            }
        }
        store_rows256<R>(c0, c1, c, ldc, ncols, h, sa, sw, comp, e);
    }
}

// ---- AVX-512 VNNI: R rows x 32 columns (2R zmm accumulators) ----

template <int R>
__attribute__((target("avx512f,avx512vnni"))) void qtile_avx512vnni(int kq, const uint8_t * a, int mr, const int8_t * b,
                                                                    float * c, int ldc, int ncols, const float * sa,
                                                                    const float * sw, const int32_t * comp,
                                                                    const epilogue & e) {
    alignas(64) int32_t t[R * 32];
    vnni_sums512<R>(kq, a, mr, b, t);
    const __mmask16 m0 = cols_mask_lo(ncols), m1 = cols_mask_hi(ncols);
    const __m512    sw0 = _mm512_loadu_ps(sw), sw1 = _mm512_loadu_ps(sw + 16);
    const __m512i   q0 = _mm512_loadu_si512(comp), q1 = _mm512_loadu_si512(comp + 16);
    for (int r = 0; r < R; ++r) {
        dequant_row512(t + r * 32, sa[r], sw0, sw1, q0, q1, c + static_cast<size_t>(r) * ldc, e, m0, m1);
    }
}


// quantize_row's numerics for the AVX2 kernel's form: per k group, the four q_a as s8 at dst + g * stride and
// their absolute values in the four bytes after them (8 bytes per group), the k tail padded with q = 0.
float quantize_row_signed(const float * x, int k, uint8_t * dst, int stride) {
    const float   amax = row_absmax(x, k);
    const float   inv  = amax > 0.0f ? static_cast<float>(k_qa_max) / amax : 0.0f;
    const __m256  vinv = _mm256_set1_ps(inv);
    const __m256i lo = _mm256_set1_epi32(-k_qa_max), hi = _mm256_set1_epi32(k_qa_max);
    // byte 0 of each int32 into the low 4 bytes of each 128-bit lane
    const __m256i pick = _mm256_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 0, 4, 8, 12, -1,
                                          -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
    int kk = 0;
    for (; kk + 8 <= k; kk += 8) {
        const __m256i q = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + kk), vinv));  // round to nearest even
        const __m256i c = _mm256_min_epi32(_mm256_max_epi32(q, lo), hi);
        // per 128-bit lane: the group's q_a in bytes 0-3, |q_a| in bytes 4-7
        const __m256i g = _mm256_unpacklo_epi32(_mm256_shuffle_epi8(c, pick), _mm256_shuffle_epi8(_mm256_abs_epi32(c), pick));
        uint8_t *     d = dst + static_cast<size_t>(kk / 4) * stride;
        _mm_storel_epi64(reinterpret_cast<__m128i *>(d), _mm256_castsi256_si128(g));
        _mm_storel_epi64(reinterpret_cast<__m128i *>(d + stride), _mm256_extracti128_si256(g, 1));
    }
    const int kp = (k + 3) / 4 * 4;
    for (; kk < kp; ++kk) {
        const float v = kk < k ? std::nearbyint(x[kk] * inv) : 0.0f;
        const int   q = std::clamp(static_cast<int>(v), -k_qa_max, k_qa_max);
        dst[static_cast<size_t>(kk / 4) * stride + kk % 4]     = static_cast<uint8_t>(static_cast<int8_t>(q));
        dst[static_cast<size_t>(kk / 4) * stride + 4 + kk % 4] = static_cast<uint8_t>(std::abs(q));
    }
    return amax / static_cast<float>(k_qa_max);
}

using qtile_fn = void (*)(int, const uint8_t *, int, const int8_t *, float *, int, int, const float *, const float *,
                          const int32_t *, const epilogue &);

using qdriver_fn = void (*)(int, const float *, int, const qweight &, float *, int, const epilogue &, float *,
                            const a_layernorm *);

struct qisa {
    const char * name;
    const char * cpu_feature;  // __builtin_cpu_supports name
    int          mr;
    qtile_fn     tiles[15];        // by rows, 1..mr
    qdriver_fn   driver = nullptr;  // a kernel with its own blocking (AMX) runs the whole call instead
    // How the tiles want the quantised rows: bytes per row and k group, and the quantiser writing that form.
    int          group_bytes = 4;
    float (*quantize)(const float * x, int k, uint8_t * dst, int stride) = &quantize_row;
};

template <int... R> constexpr qisa make_avx2(std::integer_sequence<int, R...>) {
    return {"avx2", "avx2", 4, {nullptr, &qtile_avx2<R + 1>...}, nullptr, 8, &quantize_row_signed};
}
template <int... R> constexpr qisa make_avxvnni(std::integer_sequence<int, R...>) {
    return {"avxvnni", "avxvnni", 6, {nullptr, &qtile_avxvnni<R + 1>...}};
}
template <int... R> constexpr qisa make_avx512vnni(std::integer_sequence<int, R...>) {
    return {"avx512vnni", "avx512vnni", 14, {nullptr, &qtile_avx512vnni<R + 1>...}};
}

// Register budget: AVX2 keeps 2R accumulators + 2 weight vectors + the broadcast + ones + a temporary in
// 16 ymm (R = 4 leaves room for the compiler's temporaries); AVX-VNNI needs no temporaries (R = 6, as the
// float AVX2 kernel); AVX-512 has 32 zmm (R = 14, as the float kernel).
const qisa k_q_avx2       = make_avx2(std::make_integer_sequence<int, 4>{});
const qisa k_q_avxvnni    = make_avxvnni(std::make_integer_sequence<int, 6>{});
const qisa k_q_avx512vnni = make_avx512vnni(std::make_integer_sequence<int, 14>{});
// AMX blocks rows by 32 (two 16-row tiles) in its own driver; mr only names the row quantum.
const qisa k_q_amx{"amx", "amx-int8", 32, {}, &qgemm_amx};
const qisa * const k_q_all[] = {&k_q_amx, &k_q_avx512vnni, &k_q_avxvnni, &k_q_avx2};

bool cpu_has(const qisa & i) {
    __builtin_cpu_init();
    if (&i == &k_q_amx) {
        std::string why;
        return amx_usable(why);
    }
    if (i.cpu_feature == k_q_avx512vnni.cpu_feature) {
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vnni");
    }
    if (i.cpu_feature == k_q_avxvnni.cpu_feature) return __builtin_cpu_supports("avxvnni");
    return true;  // the build's baseline
}

const qisa *& qactive() {
    static const qisa * a = [] {
        for (const qisa * i : k_q_all) {
            if (cpu_has(*i)) return i;
        }
        return &k_q_avx2;
    }();
    return a;
}

}  // namespace

// max_k |x[k]|: the row's quantisation scale times 127 (the int8 row quantisers' and the int8 attention's). Four running maxima: one chain
// waited on vmaxps's latency (4 cycles per 8 floats) and was ~60 % of quantize_row's samples in an AVX-512 VNNI
// int8 forward (perf annotate). A max is exact in any order, so the result is the same.
float row_absmax(const float * x, int k) {
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    __m256       m0 = _mm256_setzero_ps(), m1 = m0, m2 = m0, m3 = m0;
    int          kk = 0;
    for (; kk + 32 <= k; kk += 32) {
        m0 = _mm256_max_ps(m0, _mm256_and_ps(_mm256_loadu_ps(x + kk), absmask));
        m1 = _mm256_max_ps(m1, _mm256_and_ps(_mm256_loadu_ps(x + kk + 8), absmask));
        m2 = _mm256_max_ps(m2, _mm256_and_ps(_mm256_loadu_ps(x + kk + 16), absmask));
        m3 = _mm256_max_ps(m3, _mm256_and_ps(_mm256_loadu_ps(x + kk + 24), absmask));
    }
    for (; kk + 8 <= k; kk += 8) m0 = _mm256_max_ps(m0, _mm256_and_ps(_mm256_loadu_ps(x + kk), absmask));
    float amax = simd::hmax(_mm256_max_ps(_mm256_max_ps(m0, m1), _mm256_max_ps(m2, m3)));
    for (; kk < k; ++kk) amax = std::max(amax, std::fabs(x[kk]));
    return amax;
}

float quantize_row(const float * x, int k, uint8_t * dst, int stride) {
    const float   amax = row_absmax(x, k);
    const float   inv  = amax > 0.0f ? static_cast<float>(k_qa_max) / amax : 0.0f;
    const __m256  vinv = _mm256_set1_ps(inv);
    const __m256i lo = _mm256_set1_epi32(-k_qa_max), hi = _mm256_set1_epi32(k_qa_max), off = _mm256_set1_epi32(128);
    // byte 0 of each int32 into the low 4 bytes of each 128-bit lane
    const __m256i pick = _mm256_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 0, 4, 8, 12, -1,
                                          -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
    int kk = 0;
    for (; kk + 8 <= k; kk += 8) {
        __m256i q = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + kk), vinv));  // round to nearest even
        q         = _mm256_add_epi32(_mm256_min_epi32(_mm256_max_epi32(q, lo), hi), off);
        q         = _mm256_shuffle_epi8(q, pick);
        const int32_t g0 = _mm256_extract_epi32(q, 0), g1 = _mm256_extract_epi32(q, 4);
        std::memcpy(dst + static_cast<size_t>(kk / 4) * stride, &g0, 4);
        std::memcpy(dst + static_cast<size_t>(kk / 4 + 1) * stride, &g1, 4);
    }
    const int kp = (k + 3) / 4 * 4;
    for (; kk < kp; ++kk) {
        const float v = kk < k ? std::nearbyint(x[kk] * inv) : 0.0f;
        const int   q = std::clamp(static_cast<int>(v), -k_qa_max, k_qa_max);
        dst[static_cast<size_t>(kk / 4) * stride + kk % 4] = static_cast<uint8_t>(q + 128);
    }
    return amax / static_cast<float>(k_qa_max);
}

qweight quantize_weight(const float * w, int n, int k, int ldw) {
    qweight q;
    q.n              = n;
    q.k              = k;
    q.kq             = (k + 3) / 4;
    q.kqp            = (q.kq + k_qk_tile - 1) / k_qk_tile * k_qk_tile;
    const int panels = (n + k_gemm_nr - 1) / k_gemm_nr;
    q.data.assign(static_cast<size_t>(panels) * q.kqp * 4 * k_gemm_nr, 0);
    q.scale.assign(static_cast<size_t>(panels) * k_gemm_nr, 0.0f);
    q.comp.assign(static_cast<size_t>(panels) * k_gemm_nr, 0);
    for (int j = 0; j < n; ++j) {
        const float * wr   = w + static_cast<size_t>(j) * ldw;
        float         amax = 0.0f;
        for (int kk = 0; kk < k; ++kk) amax = std::max(amax, std::fabs(wr[kk]));
        const float inv = amax > 0.0f ? static_cast<float>(k_qw_max) / amax : 0.0f;
        int8_t *    p   = q.data.data() + static_cast<size_t>(j / k_gemm_nr) * q.kqp * 4 * k_gemm_nr + (j % k_gemm_nr) * 4;
        int32_t     sum = 0;
        for (int kk = 0; kk < k; ++kk) {
            const int v = std::clamp(static_cast<int>(std::nearbyint(wr[kk] * inv)), -k_qw_max, k_qw_max);
            p[static_cast<size_t>(kk / 4) * 4 * k_gemm_nr + kk % 4] = static_cast<int8_t>(v);
            sum += v;
        }
        q.scale[j] = amax / static_cast<float>(k_qw_max);
        q.comp[j]  = 128 * sum;
    }
    return q;
}

packed_weight pack_weight_int8(const float * w, int n, int k, int ldw) {
    packed_weight pw;
    pw.n = n;
    pw.k = k;
    pw.q = std::make_shared<const qweight>(quantize_weight(w, n, k, ldw));
    return pw;
}

const char * qgemm_isa() { return qactive()->name; }

const std::string & qgemm_amx_note() {
    static const std::string note = [] {
        std::string why;
        amx_usable(why);
        return why;
    }();
    return note;
}

bool qgemm_select_isa(const char * name) {
    for (const qisa * i : k_q_all) {
        if (std::strcmp(name, i->name) == 0 && cpu_has(*i)) {
            qactive() = i;
            return true;
        }
    }
    return false;
}

void qgemm_packed(int m, const float * a, int lda, const qweight & w, float * c, int ldc, const epilogue & e,
                  float * scratch, const a_layernorm * ln) {
    const qisa & isa = *qactive();
    if (isa.driver) {
        isa.driver(m, a, lda, w, c, ldc, e, scratch, ln);
        return;
    }
    const int    mr  = isa.mr;
    const int    k   = w.k;
    const int    gb  = isa.group_bytes;
    const int    kp  = w.kq * gb;  // bytes per packed row
    const int    mc  = std::max(mr, static_cast<int>(std::min<size_t>(1024, k_qa_block_bytes / kp)) / mr * mr);
    // scratch (gemm_scratch_floats(k) floats, >= 96 K + 28 k): [packed rows: mc * kp][s_a: mc][LN row: k]
    uint8_t * qa     = reinterpret_cast<uint8_t *>(scratch);
    float *   sa     = scratch + (static_cast<size_t>(mc) * kp + 3) / 4;
    float *   row    = sa + mc;
    const int panels = (w.n + k_gemm_nr - 1) / k_gemm_nr;
    for (int m0 = 0; m0 < m; m0 += mc) {
        const int rows = std::min(mc, m - m0);
        for (int i = 0; i < rows; ++i) {
            const float * x = a_row(a + static_cast<size_t>(m0 + i) * lda, row, k, ln);
            // row i of panel i / mr: [kq][mr][gb]
            sa[i] = isa.quantize(x, k, qa + static_cast<size_t>(i / mr) * mr * kp + (i % mr) * gb, mr * gb);
        }
        for (int p = 0; p < panels; ++p) {
            const int j0    = p * k_gemm_nr;
            const epilogue ep = epilogue_from_column(e, j0);
            const int ncols = std::min(k_gemm_nr, w.n - j0);
            for (int i0 = 0; i0 < rows; i0 += mr) {
                const int n = std::min(mr, rows - i0);
                isa.tiles[n](w.kq, qa + static_cast<size_t>(i0) * kp, mr, w.panel(p), c + static_cast<size_t>(m0 + i0) * ldc + j0,
                             ldc, ncols, sa + i0, w.scale.data() + j0, w.comp.data() + j0, ep);
            }
        }
    }
}

}  // namespace rfdetr::cpu
