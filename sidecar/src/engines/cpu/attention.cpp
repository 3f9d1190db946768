#include "engines/cpu/attention.h"

// GCC 12 reports its own AVX-512 intrinsics' _mm512_undefined_ps() operands as maybe-uninitialized (gemm.cpp).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include "engines/cpu/gemm.h"
#include "engines/cpu/simd-math.h"
#include "engines/cpu/tile256.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

namespace rfdetr::cpu {

using namespace simd;

namespace {

size_t sz(int a, int b) { return static_cast<size_t>(a) * static_cast<size_t>(b); }

int round_up(int x, int m) { return (x + m - 1) / m * m; }

// Keys per online-softmax step: a multiple of the tile height near 112, so the score block
// [keys, queries] of a 64-query block is 28 KB and stays in L1 between its three passes.
int key_block() { return round_up(112, gemm_mr()); }

// ---- The AVX2 attention's own tiles (where the AVX-512 kernel is active, the attention runs on gemm_tile) ----
// gemm_tile's chunk256 serves every GEMM: its sums leave the registers through the stack into an epilogue chosen at
// run time (a jump table per row), and gemm_tile loops over k chunks. On the attention's short tiles (k = 64 for the
// scores, <= 114 for p v) that was ~20 % of the kernel's samples in the attention (README.md, "Attention"). These
// two have their epilogue fixed and write from the registers; the k loop and its order are chunk256's (a 6 x 16
// register tile, FMAs in k order from zero), so the sums are the same bits.

// R keys (one key panel [d][mr] at kp) against `passes` x 16 queries of qt (ldq): st's rows (ldst) = scale * k.q,
// and bm (per query) = max(bm, those R rows), which saves the softmax its pass over the block for the max.
template <int R>
void scores256(int d, const float * kp, int mr, const float * qt, int ldq, int passes, float scale, float * st, int ldst,
               float * bm) {
    const __m256 sc = _mm256_set1_ps(scale);
    for (int h = 0; h < passes; ++h) {
        __m256 c0[R], c1[R];
        tile256_zero<R>(c0, c1);
        tile256_run<R>(d, kp, mr, qt + h * 16, ldq, c0, c1);
        float * sh = st + h * 16;
        __m256  m0 = _mm256_loadu_ps(bm + h * 16), m1 = _mm256_loadu_ps(bm + h * 16 + 8);
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
            const __m256 v0 = _mm256_mul_ps(c0[r], sc), v1 = _mm256_mul_ps(c1[r], sc);
            _mm256_storeu_ps(sh + sz(r, ldst), v0);
            _mm256_storeu_ps(sh + sz(r, ldst) + 8, v1);
            m0 = _mm256_max_ps(m0, v0);
            m1 = _mm256_max_ps(m1, v1);
        }
        _mm256_storeu_ps(bm + h * 16, m0);
        _mm256_storeu_ps(bm + h * 16 + 8, m1);
    }
}

// o's R rows (ldo), columns [0, d) in 16s, (first ? = : +=) p v: p^T [nkb][ldp] (query r's weight for key kk at
// p[kk * ldp + r]), v [nkb][ldv].
template <int R>
void pv256(int nkb, const float * p, int ldp, const float * v, int ldv, int d, float * o, int ldo, bool first) {
    for (int c = 0; c < d; c += 16) {
        __m256 c0[R], c1[R];
        tile256_zero<R>(c0, c1);
        tile256_run<R>(nkb, p, ldp, v + c, ldv, c0, c1);
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
            float * orow = o + sz(r, ldo) + c;
            if (!first) {
                c0[r] = _mm256_add_ps(_mm256_loadu_ps(orow), c0[r]);
                c1[r] = _mm256_add_ps(_mm256_loadu_ps(orow + 8), c1[r]);
            }
            _mm256_storeu_ps(orow, c0[r]);
            _mm256_storeu_ps(orow + 8, c1[r]);
        }
    }
}

using scores_fn = void (*)(int, const float *, int, const float *, int, int, float, float *, int, float *);
using pv_fn     = void (*)(int, const float *, int, const float *, int, int, float *, int, bool);
constexpr scores_fn k_scores256[7] = {nullptr,         scores256<1>, scores256<2>, scores256<3>,
                                      scores256<4>,    scores256<5>, scores256<6>};
constexpr pv_fn     k_pv256[7]     = {nullptr, pv256<1>, pv256<2>, pv256<3>, pv256<4>, pv256<5>, pv256<6>};

// One key block's online-softmax step over the scores st [nkb][ldst] for queries [0, nq8), 8 per vector, given
// the block's max per query (bmax, from scores256): mx (running max), sm (running sum) updated,
// cr = exp(old max - new max), st = exp(st - new max).
void softmax_step256(float * st, int ldst, int nkb, int nq8, float * mx, float * sm, float * cr, const float * bmax) {
    for (int j = 0; j < nq8; j += 8) {
        const __m256 m  = _mm256_loadu_ps(mx + j);
        const __m256 mn = _mm256_max_ps(m, _mm256_loadu_ps(bmax + j));
        __m256       s  = _mm256_setzero_ps();
        for (int r = 0; r < nkb; ++r) {
            float *      p = st + sz(r, ldst) + j;
            const __m256 e = exp256(_mm256_sub_ps(_mm256_loadu_ps(p), mn));
            _mm256_storeu_ps(p, e);
            s = _mm256_add_ps(s, e);
        }
        const __m256 c = exp256(_mm256_sub_ps(m, mn));
        _mm256_storeu_ps(cr + j, c);
        _mm256_storeu_ps(sm + j, _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(sm + j), c), s));
        _mm256_storeu_ps(mx + j, mn);
    }
}

// The same step, 16 queries per vector: the same operations lane by lane (exp512 is exp256's sequence, and
// exp512_nonpositive exp512's results on s - max <= 0), so the same bits; half the instructions.
RFDETR_AVX512 void softmax_step512(float * st, int ldst, int nkb, int nq16, float * mx, float * sm, float * cr) {
    for (int j = 0; j < nq16; j += 16) {
        const __m512 m  = _mm512_loadu_ps(mx + j);
        __m512       bm = _mm512_set1_ps(-INFINITY);
        for (int r = 0; r < nkb; ++r) bm = _mm512_max_ps(bm, _mm512_loadu_ps(st + sz(r, ldst) + j));
        const __m512 mn = _mm512_max_ps(m, bm);
        __m512       s  = _mm512_setzero_ps();
        for (int r = 0; r < nkb; ++r) {
            float *      p = st + sz(r, ldst) + j;
            const __m512 e = exp512_nonpositive(_mm512_sub_ps(_mm512_loadu_ps(p), mn));
            _mm512_storeu_ps(p, e);
            s = _mm512_add_ps(s, e);
        }
        const __m512 c = exp512_nonpositive(_mm512_sub_ps(m, mn));
        _mm512_storeu_ps(cr + j, c);
        _mm512_storeu_ps(sm + j, _mm512_add_ps(_mm512_mul_ps(_mm512_loadu_ps(sm + j), c), s));
        _mm512_storeu_ps(mx + j, mn);
    }
}

RFDETR_AVX512 void scale_row512(float * x, int n, float f) {
    const __m512 v = _mm512_set1_ps(f);
    int          c = 0;
    for (; c + 16 <= n; c += 16) _mm512_storeu_ps(x + c, _mm512_mul_ps(_mm512_loadu_ps(x + c), v));
    if (c < n) {
        const __mmask16 m = static_cast<__mmask16>((1u << (n - c)) - 1);
        _mm512_mask_storeu_ps(x + c, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + c), v));
    }
}

// x[0, n) *= f.
void scale_row(float * x, int n, float f, bool wide) {
    if (wide) {
        scale_row512(x, n, f);
        return;
    }
    const __m256 v = _mm256_set1_ps(f);
    int          c = 0;
    for (; c + 8 <= n; c += 8) _mm256_storeu_ps(x + c, _mm256_mul_ps(_mm256_loadu_ps(x + c), v));
    for (; c < n; ++c) x[c] *= f;
}

}  // namespace

namespace {

size_t keys_floats(int nk, int d) { return sz(round_up(nk, gemm_mr()), d); }

}  // namespace

void attention_scores_tile256(int rows, int d, const float * kp, int mr, const float * qt, int ldq, int passes,
                              float scale, float * st, int ldst, float * bm) {
    k_scores256[rows](d, kp, mr, qt, ldq, passes, scale, st, ldst, bm);
}

void attention_pv_tile256(int rows, int nkb, const float * p, int ldp, const float * v, int ldv, int d, float * o,
                          int ldo, bool first) {
    k_pv256[rows](nkb, p, ldp, v, ldv, d, o, ldo, first);
}

size_t attention_kv_floats(int nk, int d) { return keys_floats(nk, d) + sz(nk, d); }

// Panel p holds keys [p*mr, p*mr + mr) as [d][mr] (the tile's A operand: one key per tile row); the
// rows of a short last panel are never read (its tiles ask for fewer rows). The values follow as [nk][d].
void attention_pack_kv(const float * k, int ldk, const float * v, int ldv, int nk, int d, float * kvp) {
    const int     mr = gemm_mr();
    const float * rows[16];
    for (int p0 = 0; p0 < nk; p0 += mr) {
        const int n = std::min(mr, nk - p0);
        for (int r = 0; r < n; ++r) rows[r] = k + sz(p0 + r, ldk);
        transpose_rows(rows, n, d, kvp + sz(p0, d), mr);
    }
    float * vp = kvp + keys_floats(nk, d);
    for (int r = 0; r < nk; ++r) std::memcpy(vp + sz(r, d), v + sz(r, ldv), sizeof(float) * static_cast<size_t>(d));
}

size_t attention_scratch_floats(int nq, int d) {
    const int qp = round_up(nq, k_gemm_nr);
    return sz(d, qp) + sz(key_block(), qp) + 4 * static_cast<size_t>(qp) + 16;
}

void attention_block(const float * q, int ldq, const float * kvp, int nk, float * o, int ldo, int nq, int d, float scale,
                     float * scratch) {
    const float * kp  = kvp;
    const float * v   = kvp + keys_floats(nk, d);
    const int     ldv = d;
    const int mr = gemm_mr();
    const int kb = key_block();
    const int qp = round_up(nq, k_gemm_nr);  // queries padded to whole 32-column panels
    float *   qt = scratch;                  // q^T [d][qp], the score tiles' B operand
    float *   st = qt + sz(d, qp);           // scores of one key block, [kb][qp]
    float *   mx = st + sz(kb, qp);          // running max per query
    float *   sm = mx + qp;                  // running sum per query
    float *   cr = sm + qp;                  // this step's rescale per query
    float *   bm = cr + qp;                  // this key block's max per query (the AVX2 tiles')
    const bool    wide = gemm_mr() == 14;   // the AVX-512 kernel is active: the softmax on 16-query vectors
    const bool    pv_tiles = !wide && d % 16 == 0;  // p v on pv256 (d in whole 16-column passes), else gemm_tile
    const int     nq8  = round_up(nq, 8);   // the AVX2 softmax's vectors cover queries [0, nq8)
    const int     nq16 = round_up(nq, 16);  // the AVX-512 one's [0, nq16) (<= qp)
    const float * qrows[8];
    for (int i0 = 0; i0 < nq; i0 += 8) {
        const int n = std::min(8, nq - i0);
        for (int r = 0; r < n; ++r) qrows[r] = q + sz(i0 + r, ldq);
        transpose_rows(qrows, n, d, qt + i0, qp);
    }
    for (int kk = 0; kk < d; ++kk) std::fill(qt + sz(kk, qp) + nq, qt + sz(kk, qp) + qp, 0.0f);
    for (int r = 0; r < kb; ++r) std::fill(st + sz(r, qp) + nq, st + sz(r, qp) + nq16, 0.0f);
    for (int i = 0; i < nq16; ++i) mx[i] = -INFINITY, sm[i] = 0.0f;

    epilogue scores;
    scores.alpha = scale;
    epilogue first;  // the first key block stores o, the others accumulate into it
    epilogue accumulate;
    accumulate.kind = epi::accumulate;
    for (int k0 = 0; k0 < nk; k0 += kb) {
        const int nkb = std::min(kb, nk - k0);
        // 1. s^T[key, query] = scale * k q^T, one tile per (key panel, 32 queries). The AVX2 tiles run whole
        //    16-query passes: q^T's columns past nq are zero, so st's are too, as the fill above left them.
        if (!wide) std::fill(bm, bm + qp, -INFINITY);
        for (int r0 = 0; r0 < nkb; r0 += mr) {
            const int rows = std::min(mr, nkb - r0);
            for (int j0 = 0; j0 < nq; j0 += k_gemm_nr) {
                const int ncols = std::min(k_gemm_nr, nq - j0);
                if (wide) {
                    gemm_tile(rows, d, kp + sz(k0 + r0, d), mr, qt + j0, qp, st + sz(r0, qp) + j0, qp, ncols, scores);
                } else {
                    attention_scores_tile256(rows, d, kp + sz(k0 + r0, d), mr, qt + j0, qp, (ncols + 15) / 16, scale,
                                             st + sz(r0, qp) + j0, qp, bm + j0);
                }
            }
        }
        // 2. Online softmax down each query's column: new max, rescale of what was summed so far, p = exp(s - max)
        //    in place, the running sum.
        if (wide) softmax_step512(st, qp, nkb, nq16, mx, sm, cr);
        else softmax_step256(st, qp, nkb, nq8, mx, sm, cr, bm);
        if (k0 > 0) {
            for (int i = 0; i < nq; ++i) {
                if (cr[i] != 1.0f) scale_row(o + sz(i, ldo), d, cr[i], wide);
            }
        }
        // 3. o += p v over this key block: the tile's A operand is p^T read with stride qp (one query per
        //    row), B is v in place.
        for (int i0 = 0; i0 < nq; i0 += mr) {
            const int rows = std::min(mr, nq - i0);
            if (pv_tiles) {
                attention_pv_tile256(rows, nkb, st + i0, qp, v + sz(k0, ldv), ldv, d, o + sz(i0, ldo), ldo, k0 == 0);
                continue;
            }
            for (int c0 = 0; c0 < d; c0 += k_gemm_nr) {
                gemm_tile(rows, nkb, st + i0, qp, v + sz(k0, ldv) + c0, ldv, o + sz(i0, ldo) + c0, ldo,
                          std::min(k_gemm_nr, d - c0), k0 == 0 ? first : accumulate);
            }
        }
    }
    for (int i = 0; i < nq; ++i) scale_row(o + sz(i, ldo), d, 1.0f / sm[i], wide);
}

size_t attention_head_scratch_floats(int nk, int d) {
    return attention_kv_floats(nk, d) + attention_scratch_floats(k_attention_block, d);
}

void attention_head(const float * q, int ldq, const float * k, int ldk, const float * v, int ldv, float * o, int ldo,
                    int nq, int nk, int d, float scale, float * scratch) {
    float * kvp = scratch;
    attention_pack_kv(k, ldk, v, ldv, nk, d, kvp);
    float * rest = kvp + attention_kv_floats(nk, d);
    for (int i0 = 0; i0 < nq; i0 += k_attention_block) {
        attention_block(q + sz(i0, ldq), ldq, kvp, nk, o + sz(i0, ldo), ldo, std::min(k_attention_block, nq - i0), d,
                        scale, rest);
    }
}

}  // namespace rfdetr::cpu
