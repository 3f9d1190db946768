#include "engines/cpu/gemm.h"

// GCC 12 reports its own AVX-512 intrinsics' _mm512_undefined_ps() operands as maybe-uninitialized
// (a false positive inside avx512fintrin.h); -Werror would turn it into a build failure.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include "engines/cpu/gemm-epilogue.h"
#include "engines/cpu/kernels.h"
#include "engines/cpu/bgemm.h"
#include "engines/cpu/qgemm.h"
#include "engines/cpu/simd-math.h"
#include "engines/cpu/tile256.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

namespace rfdetr::cpu {

using namespace simd;

namespace {

// A block of packed A rows is sized to stay in L2 next to the weight panel streaming past it: 96 K floats (384 KB),
// i.e. 252 rows at k = 384, 56 at k = 1536. L2 is 2 MB per core on Sapphire Rapids, 1 MB on Ice Lake server and
// Zen 4 (512 KB on Zen 3); blocks sized for 2 MB (192 K and 384 K floats) ran no faster on Sapphire Rapids (cpu
// README, "fp32 and threads on a Sapphire Rapids"), so one size that fits every one of these serves all of them.
constexpr size_t k_a_block_floats = 96 * 1024;
constexpr int    k_max_block_rows = 1024;

// gemm.h's blocked summation; costs one tile load/add/store per chunk.
constexpr int k_chunk = k_gemm_chunk;

// A tile's k range is summed one chunk (<= k_chunk terms) per call; `part` says where the chunk sits: the first
// chunk starts the running total t (R x 32 floats), the others add their total to it, the last one applies the
// epilogue and stores into c (a lone chunk goes straight from the registers to c). gemm_packed runs every row
// tile of a block through one chunk before the next, so the panel's k_chunk x 32 slice (16 KB) stays in L1
// while the tiles pass it; gemm_tile runs one tile's chunks in a row. Same additions in the same order either way.
constexpr int k_part_first = 1, k_part_last = 2;

// ---- AVX2 kernel: 6 rows x 16 columns per pass (12 accumulators), two passes per 32-column panel ----

template <int R>
void chunk256(int kc, const float * a, int as, const float * b, int ldb, float * t, int part, float * c, int ldc,
              int ncols, const epilogue & e, const char * pf) {
    for (int h = 0; h * 16 < ncols; ++h) {
        const int     nc = std::min(16, ncols - h * 16);
        const __m256i m0 = mask8(nc), m1 = mask8(nc - 8);
        const bool    f0 = nc >= 8, f1 = nc >= 16;
        __m256        c0[R], c1[R];
        tile256_zero<R>(c0, c1);
        const float * ap = a;
        const float * bp = b + h * 16;
        if (f1 && pf && h == 0) {
            // The next slice's lines from pf, one per four k steps (kc / 4 lines; asked for at four steps in a row,
            // the repeats find the line in flight), inside the loop. Issued before the loop, a line per k step, they
            // stalled it waiting for fill buffers: 4.8 % of this kernel's samples on a Zen 3 fell on the instruction
            // after the prefetch; a line per step inside the loop, 2.8 %; this way, ~2 % (README.md, "GEMM").
#pragma GCC unroll 4
            for (int kk = 0; kk < kc; ++kk, ap += as, bp += ldb) {
                _mm_prefetch(pf + 16 * kk, _MM_HINT_T0);
                tile256_step<R>(ap, bp, c0, c1);
            }
        } else if (f1) {
            tile256_run<R>(kc, ap, as, bp, ldb, c0, c1);
        } else {
            if (pf && h == 0) {
                for (int kk = 0; kk < kc; kk += 4) _mm_prefetch(pf + 16 * kk, _MM_HINT_T0);
            }
            for (int kk = 0; kk < kc; ++kk, ap += as, bp += ldb) {
                const __m256 b0 = f0 ? _mm256_loadu_ps(bp) : _mm256_maskload_ps(bp, m0);
                const __m256 b1 = _mm256_maskload_ps(bp + 8, m1);
#pragma GCC unroll 8
                for (int r = 0; r < R; ++r) {
                    const __m256 av = _mm256_broadcast_ss(ap + r);
                    c0[r]           = _mm256_fmadd_ps(av, b0, c0[r]);
                    c1[r]           = _mm256_fmadd_ps(av, b1, c1[r]);
                }
            }
        }
        float * th = t + h * 16;
        if (!(part & k_part_first)) {
#pragma GCC unroll 8
            for (int r = 0; r < R; ++r) {
                c0[r] = _mm256_add_ps(_mm256_loadu_ps(th + r * 32), c0[r]);
                c1[r] = _mm256_add_ps(_mm256_loadu_ps(th + r * 32 + 8), c1[r]);
            }
        }
        if (!(part & k_part_last)) {
#pragma GCC unroll 8
            for (int r = 0; r < R; ++r) {
                _mm256_storeu_ps(th + r * 32, c0[r]);
                _mm256_storeu_ps(th + r * 32 + 8, c1[r]);
            }
            continue;
        }
        // The sums leave the registers once, here: the epilogue loop below indexes rows at run time, and reading
        // c0[r]/c1[r] there made GCC 12 keep the accumulators on the stack, a store after every FMA of the k loop
        // (twelve 256-bit stores per k step: the GEMMs took 2.6x as long on Zen 3, which retires one such store
        // a cycle).
        alignas(32) float sums[R][16];
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
            _mm256_store_ps(sums[r], c0[r]);
            _mm256_store_ps(sums[r] + 8, c1[r]);
        }
        for (int r = 0; r < R; ++r) {
            float *      cr = c + static_cast<size_t>(r) * ldc + h * 16;
            const int    j  = h * 16;
            const __m256 v0 = epi256(_mm256_load_ps(sums[r]), cr, e, j, m0, f0);
            if (f0) _mm256_storeu_ps(cr, v0); else _mm256_maskstore_ps(cr, m0, v0);
            if (nc > 8) {
                const __m256 v1 = epi256(_mm256_load_ps(sums[r] + 8), cr + 8, e, j + 8, m1, f1);
                if (f1) _mm256_storeu_ps(cr + 8, v1); else _mm256_maskstore_ps(cr + 8, m1, v1);
            }
        }
    }
}

// ---- AVX-512 kernel: 14 rows x 32 columns (28 accumulators) ----

template <int R>
RFDETR_AVX512 void chunk512(int kc, const float * a, int as, const float * b, int ldb, float * t, int part, float * c,
                            int ldc, int ncols, const epilogue & e, const char * pf) {
    const __mmask16 m0 = ncols >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << ncols) - 1);
    const __mmask16 m1 = ncols >= 32 ? 0xFFFF : ncols <= 16 ? 0 : static_cast<__mmask16>((1u << (ncols - 16)) - 1);
    __m512          c0[R], c1[R];
#pragma GCC unroll 14
    for (int r = 0; r < R; ++r) c0[r] = c1[r] = _mm512_setzero_ps();
    const float * ap = a;
    const float * bp = b;
    if (ncols == 32 && pf) {
        for (int kk = 0; kk < kc; ++kk, ap += as, bp += ldb) {
            _mm_prefetch(pf + 64 * kk, _MM_HINT_T0);
            const __m512 b0 = _mm512_loadu_ps(bp), b1 = _mm512_loadu_ps(bp + 16);
#pragma GCC unroll 14
            for (int r = 0; r < R; ++r) {
                const __m512 av = _mm512_set1_ps(ap[r]);
                c0[r]           = _mm512_fmadd_ps(av, b0, c0[r]);
                c1[r]           = _mm512_fmadd_ps(av, b1, c1[r]);
            }
        }
    } else if (ncols == 32) {
        for (int kk = 0; kk < kc; ++kk, ap += as, bp += ldb) {
            const __m512 b0 = _mm512_loadu_ps(bp), b1 = _mm512_loadu_ps(bp + 16);
#pragma GCC unroll 14
            for (int r = 0; r < R; ++r) {
                const __m512 av = _mm512_set1_ps(ap[r]);
                c0[r]           = _mm512_fmadd_ps(av, b0, c0[r]);
                c1[r]           = _mm512_fmadd_ps(av, b1, c1[r]);
            }
        }
    } else {
        for (int kk = 0; kk < kc; ++kk, ap += as, bp += ldb) {
            const __m512 b0 = _mm512_maskz_loadu_ps(m0, bp), b1 = _mm512_maskz_loadu_ps(m1, bp + 16);
#pragma GCC unroll 14
            for (int r = 0; r < R; ++r) {
                const __m512 av = _mm512_set1_ps(ap[r]);
                c0[r]           = _mm512_fmadd_ps(av, b0, c0[r]);
                c1[r]           = _mm512_fmadd_ps(av, b1, c1[r]);
            }
        }
    }
    if (!(part & k_part_first)) {
#pragma GCC unroll 14
        for (int r = 0; r < R; ++r) {
            c0[r] = _mm512_add_ps(_mm512_loadu_ps(t + r * 32), c0[r]);
            c1[r] = _mm512_add_ps(_mm512_loadu_ps(t + r * 32 + 16), c1[r]);
        }
    }
    if (!(part & k_part_last)) {
#pragma GCC unroll 14
        for (int r = 0; r < R; ++r) {
            _mm512_storeu_ps(t + r * 32, c0[r]);
            _mm512_storeu_ps(t + r * 32 + 16, c1[r]);
        }
        return;
    }
    // The sums leave the registers once, here, as in chunk256: the epilogue loop indexes rows at run time, and
    // reading c0[r]/c1[r] there made GCC 12 keep the accumulators of the masked-column k loop on the stack, a store
    // after every FMA (tests/cpu/kernel-loop-check.sh). The epilogue's branches sit after the k loop, outside it.
    alignas(64) float sums[R][32];
#pragma GCC unroll 14
    for (int r = 0; r < R; ++r) {
        _mm512_store_ps(sums[r], c0[r]);
        _mm512_store_ps(sums[r] + 16, c1[r]);
    }
    for (int r = 0; r < R; ++r) {
        float * cr = c + static_cast<size_t>(r) * ldc;
        _mm512_mask_storeu_ps(cr, m0, epi512(_mm512_load_ps(sums[r]), cr, e, 0, m0));
        if (m1) _mm512_mask_storeu_ps(cr + 16, m1, epi512(_mm512_load_ps(sums[r] + 16), cr + 16, e, 16, m1));
    }
}

using chunk_fn = void (*)(int, const float *, int, const float *, int, float *, int, float *, int, int,
                          const epilogue &, const char *);

struct isa_kernels {
    const char * name;
    int          mr;
    int          steps_per_line;  // a kernel given pf prefetches one line of it per this many k steps
    chunk_fn     chunks[15];      // by rows, 1..mr
};

template <int... R> constexpr isa_kernels make256(std::integer_sequence<int, R...>) {
    return {"avx2", 6, 4, {nullptr, &chunk256<R + 1>...}};
}
template <int... R> constexpr isa_kernels make512(std::integer_sequence<int, R...>) {
    return {"avx512", 14, 1, {nullptr, &chunk512<R + 1>...}};
}

const isa_kernels k_avx2   = make256(std::make_integer_sequence<int, 6>{});
const isa_kernels k_avx512 = make512(std::make_integer_sequence<int, 14>{});

const isa_kernels * pick() {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") ? &k_avx512 : &k_avx2;
}

const isa_kernels *& active() {
    static const isa_kernels * a = pick();
    return a;
}

// 8x8 transpose of r[0..7] in place (r[i] lane j -> r[j] lane i).
inline void transpose8(__m256 r[8]) {
    const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
    const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
    const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
    const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
    const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
    const __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
    const __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
    const __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
    r[0] = _mm256_permute2f128_ps(u0, u4, 0x20);
    r[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
    r[2] = _mm256_permute2f128_ps(u2, u6, 0x20);
    r[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
    r[4] = _mm256_permute2f128_ps(u0, u4, 0x31);
    r[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
    r[6] = _mm256_permute2f128_ps(u2, u6, 0x31);
    r[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}

// Stores the first n (1..8) lanes of v without a masked store (vmaskmovps is microcoded on AMD cores:
// it made the packing 3.7 % of a forward).
inline void store_lanes(float * d, __m256 v, int n) {
    if (n == 8) {
        _mm256_storeu_ps(d, v);
        return;
    }
    __m128 x = _mm256_castps256_ps128(v);
    if (n >= 4) {
        _mm_storeu_ps(d, x);
        x = _mm256_extractf128_ps(v, 1);
        d += 4;
        n -= 4;
    }
    if (n >= 2) {
        _mm_storel_pi(reinterpret_cast<__m64 *>(d), x);
        x = _mm_movehl_ps(x, x);
        d += 2;
        n -= 2;
    }
    if (n) _mm_store_ss(d, x);
}

// 16x16 transpose of r[0..15] in place (r[i] lane j -> r[j] lane i): pairs, then quads within each 128-bit lane,
// then the lanes themselves in two shuffle_f32x4 steps.
RFDETR_AVX512 inline __m512 unpacklo_pairs(__m512 a, __m512 b) {
    return _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(a), _mm512_castps_pd(b)));
}
RFDETR_AVX512 inline __m512 unpackhi_pairs(__m512 a, __m512 b) {
    return _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(a), _mm512_castps_pd(b)));
}

RFDETR_AVX512 inline void transpose16(__m512 r[16]) {
    __m512 t[16];
    for (int i = 0; i < 16; i += 2) {
        t[i]     = _mm512_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 16; i += 4) {  // r[i + c]: column c of each 128-bit lane, rows i..i+3
        r[i]     = unpacklo_pairs(t[i], t[i + 2]);
        r[i + 1] = unpackhi_pairs(t[i], t[i + 2]);
        r[i + 2] = unpacklo_pairs(t[i + 1], t[i + 3]);
        r[i + 3] = unpackhi_pairs(t[i + 1], t[i + 3]);
    }
    for (int c = 0; c < 4; ++c) {
        t[c]      = _mm512_shuffle_f32x4(r[c], r[c + 4], 0x88);
        t[c + 4]  = _mm512_shuffle_f32x4(r[c], r[c + 4], 0xdd);
        t[c + 8]  = _mm512_shuffle_f32x4(r[c + 8], r[c + 12], 0x88);
        t[c + 12] = _mm512_shuffle_f32x4(r[c + 8], r[c + 12], 0xdd);
    }
    for (int c = 0; c < 4; ++c) {
        r[c]      = _mm512_shuffle_f32x4(t[c], t[c + 8], 0x88);
        r[c + 4]  = _mm512_shuffle_f32x4(t[c + 4], t[c + 12], 0x88);
        r[c + 8]  = _mm512_shuffle_f32x4(t[c], t[c + 8], 0xdd);
        r[c + 12] = _mm512_shuffle_f32x4(t[c + 4], t[c + 12], 0xdd);
    }
}

// transpose_rows with 16 rows x 16 columns per step: a 14-row panel is one group (the AVX2 form needs two 8x8
// transposes and split stores for its last 6 rows); masked loads for the k tail, masked stores for the rows.
RFDETR_AVX512 void transpose_rows512(const float * const * src, int n, int k, float * dst, int ldd) {
    for (int g = 0; g < n; g += 16) {
        const int       gn = std::min(16, n - g);
        const __mmask16 mr = static_cast<__mmask16>((1u << gn) - 1);
        for (int kk = 0; kk < k; kk += 16) {
            const int       kn = std::min(16, k - kk);
            const __mmask16 mk = static_cast<__mmask16>((1u << kn) - 1);
            __m512          r[16];
            for (int i = 0; i < 16; ++i) r[i] = i < gn ? _mm512_maskz_loadu_ps(mk, src[g + i] + kk) : _mm512_setzero_ps();
            transpose16(r);
            for (int j = 0; j < kn; ++j) _mm512_mask_storeu_ps(dst + static_cast<size_t>(kk + j) * ldd + g, mr, r[j]);
        }
    }
}

}  // namespace

// Groups of 8 rows go through 8x8 transposes (a scalar loop made the GEMM's packing 5 % of a forward);
// the k tail element by element. Where the AVX-512 kernel runs, 16x16 transposes (transpose_rows512).
void transpose_rows(const float * const * src, int n, int k, float * dst, int ldd) {
    if (active() == &k_avx512) {
        transpose_rows512(src, n, k, dst, ldd);
        return;
    }
    const __m256 zero = _mm256_setzero_ps();
    for (int g = 0; g < n; g += 8) {
        const int gn = std::min(8, n - g);
        int       kk = 0;
        for (; kk + 8 <= k; kk += 8) {
            __m256 r[8];
            for (int i = 0; i < 8; ++i) r[i] = i < gn ? _mm256_loadu_ps(src[g + i] + kk) : zero;
            transpose8(r);
            for (int i = 0; i < 8; ++i) store_lanes(dst + static_cast<size_t>(kk + i) * ldd + g, r[i], gn);
        }
        for (; kk < k; ++kk) {
            for (int i = 0; i < gn; ++i) dst[static_cast<size_t>(kk) * ldd + g + i] = src[g + i][kk];
        }
    }
}

namespace {

// Packs rows [0, rows) of a (lda) into panels of mr rows, each [k][mr]; a LayerNorm first if given,
// into `rowbuf` (mr * k floats) with kernels.h's layernorm arithmetic.
void pack_a(const float * a, int lda, int rows, int k, int mr, float * dst, float * rowbuf, const a_layernorm * ln) {
    const float * src[16];
    for (int i0 = 0; i0 < rows; i0 += mr) {
        const int n = std::min(mr, rows - i0);
        for (int r = 0; r < n; ++r) src[r] = a + static_cast<size_t>(i0 + r) * lda;
        if (ln) {
            float * y[16];
            for (int r = 0; r < n; ++r) y[r] = rowbuf + static_cast<size_t>(r) * k;
            layernorm_rows(src, y, n, k, ln->gamma, ln->beta, ln->eps);
            for (int r = 0; r < n; ++r) src[r] = y[r];
        }
        transpose_rows(src, n, k, dst + static_cast<size_t>(i0) * k, mr);  // rows n..mr-1 are never read
    }
}

}  // namespace

int gemm_mr() { return active()->mr; }
const char * gemm_isa() { return active()->name; }

bool gemm_select_isa(const char * name) {
    if (std::strcmp(name, "avx2") == 0) {
        active() = &k_avx2;
        return true;
    }
    if (std::strcmp(name, "avx512") == 0 && __builtin_cpu_supports("avx512f")) {
        active() = &k_avx512;
        return true;
    }
    return false;
}

packed_weight pack_weight(const float * w, int n, int k, int ldw) {
    packed_weight pw;
    pw.n              = n;
    pw.k              = k;
    const int panels  = (n + k_gemm_nr - 1) / k_gemm_nr;
    pw.data.assign(static_cast<size_t>(panels) * k * k_gemm_nr, 0.0f);
    for (int j = 0; j < n; ++j) {
        float * p = pw.data.data() + static_cast<size_t>(j / k_gemm_nr) * k * k_gemm_nr + j % k_gemm_nr;
        for (int kk = 0; kk < k; ++kk) p[static_cast<size_t>(kk) * k_gemm_nr] = w[static_cast<size_t>(j) * ldw + kk];
    }
    return pw;
}

int gemm_row_parts(int m, int threads) { return std::min(4 * threads, std::max(1, m / (2 * gemm_mr()))); }

void gemm_row_range(int m, int parts, int p, int & r0, int & r1) {
    const int mr = gemm_mr();
    r0           = m * p / parts / mr * mr;
    r1           = p + 1 == parts ? m : m * (p + 1) / parts / mr * mr;
}

// Scratch: [packed A block: max(96 K, 14 k)][LayerNorm rows: 14 k][running totals: a block's tiles x 14 x 32].
size_t gemm_scratch_floats(int k) {
    return std::max(k_a_block_floats, static_cast<size_t>(14) * k) + static_cast<size_t>(14) * k +
           static_cast<size_t>(k_max_block_rows + 14) * k_gemm_nr + 16;
}

void gemm_tile(int rows, int k, const float * a, int as, const float * b, int ldb, float * c, int ldc, int ncols,
               const epilogue & e) {
    const chunk_fn    f = active()->chunks[rows];
    alignas(64) float t[14 * k_gemm_nr];
    for (int k0 = 0; k0 < k || k0 == 0; k0 += k_chunk) {
        const int kc   = std::min(k_chunk, k - k0);
        const int part = (k0 == 0 ? k_part_first : 0) | (k0 + kc >= k ? k_part_last : 0);
        f(kc, a + static_cast<size_t>(k0) * as, as, b + static_cast<size_t>(k0) * ldb, ldb, t, part, c, ldc, ncols, e,
          nullptr);
    }
}

namespace {

// The blocked loop of gemm_packed over an m x w.k A that `pack(m0, rows, dst, rowbuf)` packs block by block (rows
// [m0, m0 + rows) into mr-row panels [k][mr] at dst; rowbuf: 14 k floats of scratch).
template <class Pack>
void gemm_blocks(int m, const packed_weight & w, float * c, int ldc, const epilogue & e, float * scratch, Pack pack) {
    const isa_kernels & isa = *active();
    const int           mr  = isa.mr;
    const int           k   = w.k;
    const int     mc     = std::max(mr, static_cast<int>(std::min<size_t>(k_max_block_rows, k_a_block_floats / k)) / mr * mr);
    const size_t  a_size = std::max(k_a_block_floats, static_cast<size_t>(14) * k);
    float *       row    = scratch + a_size;
    float *       totals = row + static_cast<size_t>(14) * k;
    const int     panels = (w.n + k_gemm_nr - 1) / k_gemm_nr;
    for (int m0 = 0; m0 < m; m0 += mc) {
        const int rows = std::min(mc, m - m0);
        pack(m0, rows, scratch, row);
        for (int p = 0; p < panels; ++p) {
            const int      j0    = p * k_gemm_nr;
            const epilogue ep    = epilogue_from_column(e, j0);
            const int      ncols = std::min(k_gemm_nr, w.n - j0);
            for (int k0 = 0; k0 < k || k0 == 0; k0 += k_chunk) {
                const int     kc   = std::min(k_chunk, k - k0);
                const int     part = (k0 == 0 ? k_part_first : 0) | (k0 + kc >= k ? k_part_last : 0);
                const float * b    = w.panel(p) + static_cast<size_t>(k0) * k_gemm_nr;
                // The panels are contiguous: the next pass's slice (2 k_chunk lines) starts where this one ends. The
                // first tiles of this pass fetch it into L1 (kc / steps_per_line lines each, spread over their k
                // loop), so no tile waits for it from L3.
                const char * next  = reinterpret_cast<const char *>(b + static_cast<size_t>(kc) * k_gemm_nr);
                const bool   more  = p + 1 < panels || k0 + kc < k;
                const int    lines = kc / isa.steps_per_line;
                for (int i0 = 0, t = 0; i0 < rows; i0 += mr, ++t) {
                    const int    n  = std::min(mr, rows - i0);
                    const bool   fetch = more && lines > 0 && t * lines < 2 * k_chunk;
                    const char * pf    = fetch ? next + static_cast<size_t>(64) * t * lines : nullptr;
                    isa.chunks[n](kc, scratch + static_cast<size_t>(i0) * k + static_cast<size_t>(k0) * mr, mr, b,
                                  k_gemm_nr, totals + static_cast<size_t>(i0) * k_gemm_nr, part,
                                  c + static_cast<size_t>(m0 + i0) * ldc + j0, ldc, ncols, ep, pf);
                }
            }
        }
    }
}

}  // namespace

void gemm_packed(int m, const float * a, int lda, const packed_weight & w, float * c, int ldc, const epilogue & e,
                 float * scratch, const a_layernorm * ln) {
    if (w.q) {
        qgemm_packed(m, a, lda, *w.q, c, ldc, e, scratch, ln);
        return;
    }
    if (w.b) {
        bgemm_packed(m, a, lda, *w.b, c, ldc, e, scratch, ln);
        return;
    }
    const int mr = gemm_mr();
    gemm_blocks(m, w, c, ldc, e, scratch, [&](int m0, int rows, float * dst, float * rowbuf) {
        pack_a(a + static_cast<size_t>(m0) * lda, lda, rows, w.k, mr, dst, rowbuf, ln);
    });
}

// The 3x3 convolution's A rows are im2col_3x3's, packed straight from the map: for each of the 9 taps, the mr
// pixels' shifted rows (a zero row where the tap falls in the padding) are transposed into the panel's k rows
// ci * 9 + tap, i.e. from row `tap` at a stride of 9 rows. The same floats in the same places as packing
// im2col_3x3's rows, without writing them (im2col's scatter at stride 9 had been ~1.5 % of a forward).
void gemm_conv3x3(const float * x, int ld, int h, int w, int ch, int p0, int m, const packed_weight & wt, float * c,
                  int ldc, const epilogue & e, float * scratch) {
    const int mr = gemm_mr();
    gemm_blocks(m, wt, c, ldc, e, scratch, [&](int m0, int rows, float * dst, float * rowbuf) {
        std::fill(rowbuf, rowbuf + ch, 0.0f);
        const float * src[16];
        for (int i0 = 0; i0 < rows; i0 += mr) {
            const int n     = std::min(mr, rows - i0);
            float *   panel = dst + static_cast<size_t>(i0) * wt.k;
            for (int tap = 0; tap < 9; ++tap) {
                const int dy = tap / 3 - 1, dx = tap % 3 - 1;
                for (int r = 0; r < n; ++r) {
                    const int pix = p0 + m0 + i0 + r, sy = pix / w + dy, sx = pix % w + dx;
                    src[r] = sy < 0 || sy >= h || sx < 0 || sx >= w ? rowbuf
                                                                    : x + (static_cast<size_t>(sy) * w + sx) * ld;
                }
                transpose_rows(src, n, ch, panel + static_cast<size_t>(tap) * mr, 9 * mr);
            }
        }
    });
}

}  // namespace rfdetr::cpu
