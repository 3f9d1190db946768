#include "engines/cpu/gemm.h"

// GCC 12 reports its own AVX-512 intrinsics' _mm512_undefined_ps() operands as maybe-uninitialized
// (a false positive inside avx512fintrin.h); -Werror would turn it into a build failure.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include "engines/cpu/gemm-epilogue.h"
#include "engines/cpu/kernels.h"
#include "engines/cpu/bgemm.h"
#include "engines/cpu/qgemm.h"
#include "engines/cpu/simd-math.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

namespace rfdetr::cpu {

using namespace simd;

namespace {

// A block of packed A rows is sized to stay in the 1 MB L2 next to the weight panel streaming past it:
// 96 K floats (384 KB), i.e. 252 rows at k = 384, 56 at k = 1536.
constexpr size_t k_a_block_floats = 96 * 1024;

// The reduction is summed in chunks of k_chunk terms, each chunk's total then added to the running
// one: blocked summation, whose rounding error grows with k_chunk + k / k_chunk rather than with k
// (the fc2 reductions are 1536 long). Costs one tile load/add/store per chunk.
constexpr int k_chunk = 128;

// ---- AVX2 kernel: 6 rows x 16 columns per pass (12 accumulators), two passes per 32-column panel ----

template <int R>
void tile256(int k, const float * a, int as, const float * b, int ldb, float * c, int ldc, int ncols,
             const epilogue & e) {
    for (int h = 0; h * 16 < ncols; ++h) {
        const int     nc = std::min(16, ncols - h * 16);
        const __m256i m0 = mask8(nc), m1 = mask8(nc - 8);
        const bool    f0 = nc >= 8, f1 = nc >= 16;
        alignas(32) float t[R * 16];
        int               k0 = 0;
        do {
            const int k1 = std::min(k, k0 + k_chunk);
            __m256    c0[R], c1[R];
#pragma GCC unroll 8
            for (int r = 0; r < R; ++r) c0[r] = c1[r] = _mm256_setzero_ps();
            const float * ap = a + static_cast<size_t>(k0) * as;
            const float * bp = b + static_cast<size_t>(k0) * ldb + h * 16;
            if (f1) {
                for (int kk = k0; kk < k1; ++kk, ap += as, bp += ldb) {
                    const __m256 b0 = _mm256_loadu_ps(bp), b1 = _mm256_loadu_ps(bp + 8);
#pragma GCC unroll 8
                    for (int r = 0; r < R; ++r) {
                        const __m256 av = _mm256_broadcast_ss(ap + r);
                        c0[r]           = _mm256_fmadd_ps(av, b0, c0[r]);
                        c1[r]           = _mm256_fmadd_ps(av, b1, c1[r]);
                    }
                }
            } else {
                for (int kk = k0; kk < k1; ++kk, ap += as, bp += ldb) {
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
#pragma GCC unroll 8
            for (int r = 0; r < R; ++r) {
                if (k0 > 0) {
                    c0[r] = _mm256_add_ps(_mm256_load_ps(t + r * 16), c0[r]);
                    c1[r] = _mm256_add_ps(_mm256_load_ps(t + r * 16 + 8), c1[r]);
                }
                _mm256_store_ps(t + r * 16, c0[r]);
                _mm256_store_ps(t + r * 16 + 8, c1[r]);
            }
            k0 = k1;
        } while (k0 < k);
        for (int r = 0; r < R; ++r) {
            float *   cr = c + static_cast<size_t>(r) * ldc + h * 16;
            const int j  = h * 16;
            const __m256 v0 = epi256(_mm256_load_ps(t + r * 16), cr, e, j, m0, f0);
            if (f0) _mm256_storeu_ps(cr, v0); else _mm256_maskstore_ps(cr, m0, v0);
            if (nc > 8) {
                const __m256 v1 = epi256(_mm256_load_ps(t + r * 16 + 8), cr + 8, e, j + 8, m1, f1);
                if (f1) _mm256_storeu_ps(cr + 8, v1); else _mm256_maskstore_ps(cr + 8, m1, v1);
            }
        }
    }
}

// ---- AVX-512 kernel: 14 rows x 32 columns (28 accumulators) ----

template <int R>
RFDETR_AVX512 void tile512(int k, const float * a, int as, const float * b, int ldb, float * c, int ldc, int ncols,
                           const epilogue & e) {
    const __mmask16 m0 = ncols >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << ncols) - 1);
    const __mmask16 m1 = ncols >= 32 ? 0xFFFF : ncols <= 16 ? 0 : static_cast<__mmask16>((1u << (ncols - 16)) - 1);
    alignas(64) float t[R * 32];
    int               k0 = 0;
    do {
        const int k1 = std::min(k, k0 + k_chunk);
        __m512    c0[R], c1[R];
#pragma GCC unroll 14
        for (int r = 0; r < R; ++r) c0[r] = c1[r] = _mm512_setzero_ps();
        const float * ap = a + static_cast<size_t>(k0) * as;
        const float * bp = b + static_cast<size_t>(k0) * ldb;
        if (ncols == 32) {
            for (int kk = k0; kk < k1; ++kk, ap += as, bp += ldb) {
                const __m512 b0 = _mm512_loadu_ps(bp), b1 = _mm512_loadu_ps(bp + 16);
#pragma GCC unroll 14
                for (int r = 0; r < R; ++r) {
                    const __m512 av = _mm512_set1_ps(ap[r]);
                    c0[r]           = _mm512_fmadd_ps(av, b0, c0[r]);
                    c1[r]           = _mm512_fmadd_ps(av, b1, c1[r]);
                }
            }
        } else {
            for (int kk = k0; kk < k1; ++kk, ap += as, bp += ldb) {
                const __m512 b0 = _mm512_maskz_loadu_ps(m0, bp), b1 = _mm512_maskz_loadu_ps(m1, bp + 16);
#pragma GCC unroll 14
                for (int r = 0; r < R; ++r) {
                    const __m512 av = _mm512_set1_ps(ap[r]);
                    c0[r]           = _mm512_fmadd_ps(av, b0, c0[r]);
                    c1[r]           = _mm512_fmadd_ps(av, b1, c1[r]);
                }
            }
        }
        // The accumulators leave the registers once per chunk (into t, the running total), so the
        // epilogue's branches cannot make the compiler keep them in memory inside the k loop.
#pragma GCC unroll 14
        for (int r = 0; r < R; ++r) {
            if (k0 > 0) {
                c0[r] = _mm512_add_ps(_mm512_load_ps(t + r * 32), c0[r]);
                c1[r] = _mm512_add_ps(_mm512_load_ps(t + r * 32 + 16), c1[r]);
            }
            _mm512_store_ps(t + r * 32, c0[r]);
            _mm512_store_ps(t + r * 32 + 16, c1[r]);
        }
        k0 = k1;
    } while (k0 < k);
    for (int r = 0; r < R; ++r) {
        float * cr = c + static_cast<size_t>(r) * ldc;
        _mm512_mask_storeu_ps(cr, m0, epi512(_mm512_load_ps(t + r * 32), cr, e, 0, m0));
        if (m1) _mm512_mask_storeu_ps(cr + 16, m1, epi512(_mm512_load_ps(t + r * 32 + 16), cr + 16, e, 16, m1));
    }
}

using tile_fn = void (*)(int, const float *, int, const float *, int, float *, int, int, const epilogue &);

struct isa_kernels {
    const char * name;
    int          mr;
    tile_fn      tiles[15];  // by rows, 1..mr
};

template <int... R> constexpr isa_kernels make256(std::integer_sequence<int, R...>) {
    return {"avx2", 6, {nullptr, &tile256<R + 1>...}};
}
template <int... R> constexpr isa_kernels make512(std::integer_sequence<int, R...>) {
    return {"avx512", 14, {nullptr, &tile512<R + 1>...}};
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

}  // namespace

// Groups of 8 rows go through 8x8 transposes (a scalar loop made the GEMM's packing 5 % of a forward);
// the k tail element by element.
void transpose_rows(const float * const * src, int n, int k, float * dst, int ldd) {
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
        for (int r = 0; r < n; ++r) {
            src[r] = a + static_cast<size_t>(i0 + r) * lda;
            if (ln) {
                float * y = rowbuf + static_cast<size_t>(r) * k;
                layernorm_row(src[r], y, k, ln->gamma, ln->beta, ln->eps);
                src[r] = y;
            }
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

size_t gemm_scratch_floats(int k) {
    return std::max(k_a_block_floats, static_cast<size_t>(14) * k) + static_cast<size_t>(14) * k + 16;
}

void gemm_tile(int rows, int k, const float * a, int as, const float * b, int ldb, float * c, int ldc, int ncols,
               const epilogue & e) {
    active()->tiles[rows](k, a, as, b, ldb, c, ldc, ncols, e);
}

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
    const isa_kernels & isa = *active();
    const int           mr  = isa.mr;
    const int           k   = w.k;
    const int  mc = std::max(mr, static_cast<int>(std::min<size_t>(1024, k_a_block_floats / k)) / mr * mr);
    float *    row    = scratch + std::max(k_a_block_floats, static_cast<size_t>(14) * k);
    const int  panels = (w.n + k_gemm_nr - 1) / k_gemm_nr;
    for (int m0 = 0; m0 < m; m0 += mc) {
        const int rows = std::min(mc, m - m0);
        pack_a(a + static_cast<size_t>(m0) * lda, lda, rows, k, mr, scratch, row, ln);
        for (int p = 0; p < panels; ++p) {
            const int j0    = p * k_gemm_nr;
            const epilogue ep = epilogue_from_column(e, j0);
            const int ncols = std::min(k_gemm_nr, w.n - j0);
            for (int i0 = 0; i0 < rows; i0 += mr) {
                const int n = std::min(mr, rows - i0);
                isa.tiles[n](k, scratch + static_cast<size_t>(i0) * k, mr, w.panel(p), k_gemm_nr,
                             c + static_cast<size_t>(m0 + i0) * ldc + j0, ldc, ncols, ep);
            }
        }
    }
}

}  // namespace rfdetr::cpu
