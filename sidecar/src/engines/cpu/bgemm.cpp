#include "engines/cpu/bgemm.h"

// GCC 12 reports its own AVX-512 intrinsics' undefined operands as (maybe-)uninitialized (see qgemm.cpp).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include "engines/cpu/bgemm-amx.h"
#include "engines/cpu/bgemm-kernel.h"
#include "engines/cpu/qgemm-amx.h"
#include "engines/cpu/qgemm.h"

#include <immintrin.h>

#include "common/error.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <memory>
#include <utility>

namespace rfdetr::cpu {

namespace {

bool cpu_has_avx512bf16() {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512bf16");
}

// AMX-BF16 with the OS's tile permission; the A rows are rounded with vcvtne2ps2bf16 (AVX512-BF16).
bool cpu_has_amx_bf16() {
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("amx-tile") || !__builtin_cpu_supports("amx-bf16") || !cpu_has_avx512bf16()) {
        return false;
    }
    std::string why;
    return amx_tile_permission(why);
}

bool cpu_has(const char * name) {
    if (std::strcmp(name, "amx") == 0) return cpu_has_amx_bf16();
    if (std::strcmp(name, "avx512bf16") == 0) return cpu_has_avx512bf16();
    return std::strcmp(name, "none") == 0;
}

const char *& bactive() {
    static const char * a = bgemm_best_isa();
    return a;
}

// ---- AVX512-BF16: R rows x 32 columns (2R zmm accumulators), one vdpbf16ps per row and half per k pair;
// A as bf16 rows lda elements apart (a row's k pair is one broadcast dword, read in place), B the weight panel ----

template <int R>
RFDETR_AVX512BF16 void btile_avx512(int kh, const uint16_t * a, int lda, const uint16_t * b, float * c, uint16_t * cb,
                                    int ldc, int ncols, const epilogue & e) {
    __m512 c0[R], c1[R];
    const uint16_t * ar[R];
#pragma GCC unroll 14
    for (int r = 0; r < R; ++r) {
        c0[r] = c1[r] = _mm512_setzero_ps();
        ar[r]         = a + static_cast<size_t>(r) * lda;
    }
    const uint16_t * bp = b;
    for (int q = 0; q < kh; ++q, bp += 2 * k_gemm_nr) {
        const __m512bh b0 = (__m512bh)_mm512_loadu_si512(bp), b1 = (__m512bh)_mm512_loadu_si512(bp + 32);
#pragma GCC unroll 14
        for (int r = 0; r < R; ++r) {
            const __m512bh av = (__m512bh)_mm512_set1_epi32(load4(ar[r] + 2 * q));
            c0[r]             = _mm512_dpbf16_ps(c0[r], av, b0);
            c1[r]             = _mm512_dpbf16_ps(c1[r], av, b1);
        }
    }
    // The sums leave the registers once (see qgemm.cpp's AVX-512 VNNI tile: the epilogue's branches reading the
    // accumulators directly made GCC keep them on the stack in the k loop).
    alignas(64) float t[R * 32];
#pragma GCC unroll 14
    for (int r = 0; r < R; ++r) {
        _mm512_store_ps(t + r * 32, c0[r]);
        _mm512_store_ps(t + r * 32 + 16, c1[r]);
    }
    if (c) {
        store_rows_f32(t, R, c, ldc, ncols, e);
    } else {
        store_rows_bf16(t, R, cb, ldc, ncols, e);
    }
}

using btile_fn = void (*)(int, const uint16_t *, int, const uint16_t *, float *, uint16_t *, int, int, const epilogue &);

template <int... R> constexpr std::array<btile_fn, 15> make_btiles(std::integer_sequence<int, R...>) {
    return {nullptr, &btile_avx512<R + 1>...};
}
constexpr int k_bmr = 14;  // rows per tile: 28 accumulators + 2 weight vectors + the broadcast in 32 zmm
const std::array<btile_fn, 15> k_btiles = make_btiles(std::make_integer_sequence<int, k_bmr>{});

// bgemm_amx's contract (A fp32 af or bf16 ab, c fp32 cf or bf16 cb) on the AVX512-BF16 register tile. bf16 A rows are
// read where they are; fp32 ones are rounded (after the LayerNorm, if any) into a block of bf16 rows kp apart. Until
// 8 Dec the rows were repacked [kp/2][14][2] for the tile (one 4-byte copy per k pair: 2 % of a bf16 forward's CPU
// on Zen 4, perf) and the tile read the 14 rows' pairs from one line; it reads them from 14 rows now, in L1 alike.
void bgemm_avx512(int m, const float * af, const uint16_t * ab, int lda, const bweight & w, float * cf, uint16_t * cb,
                  int ldc, const epilogue & e, float * scratch, const a_layernorm * ln) {
    const int mr = k_bmr, k = w.k, kp = w.kp;
    const int mc = std::max(mr, static_cast<int>(std::min<size_t>(1024, k_ba_block_bytes / (2 * kp))) / mr * mr);
    // scratch (gemm_scratch_floats(k) floats, >= 96 K + 14 k): [bf16 rows: mc * kp][LN row: k]
    uint16_t * ba     = reinterpret_cast<uint16_t *>(scratch);
    float *    row    = reinterpret_cast<float *>(ba + static_cast<size_t>(mc) * kp);
    const int  panels = (w.n + k_gemm_nr - 1) / k_gemm_nr;
    for (int m0 = 0; m0 < m; m0 += mc) {
        const int        rows = std::min(mc, m - m0);
        const uint16_t * a    = ab ? ab + static_cast<size_t>(m0) * lda : ba;
        const int        as   = ab ? lda : kp;
        if (!ab) {
            for (int i = 0; i < rows; ++i) {
                round_row_bf16(b_a_row(af + static_cast<size_t>(m0 + i) * lda, row, k, ln), k, ba + static_cast<size_t>(i) * kp, kp);
            }
        }
        for (int p = 0; p < panels; ++p) {
            const int      j0    = p * k_gemm_nr;
            const epilogue ep    = epilogue_from_column(e, j0);
            const int      ncols = std::min(k_gemm_nr, w.n - j0);
            for (int i0 = 0; i0 < rows; i0 += mr) {
                const int n = std::min(mr, rows - i0);
                const size_t o = static_cast<size_t>(m0 + i0) * ldc + j0;
                k_btiles[n](kp / 2, a + static_cast<size_t>(i0) * as, as, w.panel(p), cf ? cf + o : nullptr,
                            cf ? nullptr : cb + o, ldc, ncols, ep);
            }
        }
    }
}

}  // namespace

const char * bgemm_best_isa() {
    static const char * best = cpu_has_amx_bf16() ? "amx" : cpu_has_avx512bf16() ? "avx512bf16" : "none";
    return best;
}

const char * bgemm_isa() { return bactive(); }

bool bgemm_select_isa(const char * name) {
    for (const char * n : {"amx", "avx512bf16", "none"}) {
        if (std::strcmp(name, n) == 0 && cpu_has(n)) {
            bactive() = n;
            return true;
        }
    }
    return false;
}

bool bf16_supported(std::string & missing) {
    if (std::strcmp(bgemm_isa(), "none") != 0) {
        missing.clear();
        return true;
    }
    missing = std::strcmp(bgemm_best_isa(), "none") == 0
                  ? "AVX512-BF16 or AMX-BF16 instructions"
                  : "the bf16 kernels, which the RFDETR_CPU_ISA level excludes (avx512 or amx include them)";
    return false;
}

bweight to_bweight(const float * w, int n, int k, int ldw) {
    bweight b;
    b.n              = n;
    b.k              = k;
    b.kp             = (k + k_bk_tile - 1) / k_bk_tile * k_bk_tile;
    const int panels = (n + k_gemm_nr - 1) / k_gemm_nr;
    b.data.assign(static_cast<size_t>(panels) * b.kp * k_gemm_nr, 0);
    for (int j = 0; j < n; ++j) {
        const float * wr = w + static_cast<size_t>(j) * ldw;
        uint16_t *    p  = b.data.data() + static_cast<size_t>(j / k_gemm_nr) * b.kp * k_gemm_nr + (j % k_gemm_nr) * 2;
        for (int kk = 0; kk < k; ++kk) p[static_cast<size_t>(kk / 2) * 2 * k_gemm_nr + kk % 2] = bf16_round(wr[kk]);
    }
    return b;
}

packed_weight pack_weight_bf16(const float * w, int n, int k, int ldw) {
    packed_weight pw;
    pw.n = n;
    pw.k = k;
    pw.b = std::make_shared<const bweight>(to_bweight(w, n, k, ldw));
    return pw;
}

packed_weight pack_weight_as(precision p, const float * w, int n, int k, int ldw) {
    switch (p) {
        case precision::int8: return pack_weight_int8(w, n, k, ldw);
        case precision::bf16: return pack_weight_bf16(w, n, k, ldw);
        case precision::fp32: break;
    }
    return pack_weight(w, n, k, ldw);
}

namespace {

void bgemm_run(int m, const float * af, const uint16_t * ab, int lda, const bweight & w, float * cf, uint16_t * cb,
               int ldc, const epilogue & e, float * scratch, const a_layernorm * ln) {
    const char * isa = bgemm_isa();
    if (std::strcmp(isa, "amx") == 0) {
        bgemm_amx(m, af, ab, lda, w, cf, cb, ldc, e, scratch, ln);
    } else if (std::strcmp(isa, "avx512bf16") == 0) {
        bgemm_avx512(m, af, ab, lda, w, cf, cb, ldc, e, scratch, ln);
    } else {
        throw error("bgemm_packed: no bf16 kernel runs here (bgemm_isa() is \"none\": this CPU or the RFDETR_CPU_ISA "
                    "level lacks AVX512-BF16 and AMX-BF16); check bf16_supported() before packing bf16 weights");
    }
}

}  // namespace

void bgemm_packed(int m, const float * a, int lda, const bweight & w, float * c, int ldc, const epilogue & e,
                  float * scratch, const a_layernorm * ln) {
    bgemm_run(m, a, nullptr, lda, w, c, nullptr, ldc, e, scratch, ln);
}

void bgemm_packed_to_bf16(int m, const float * a, int lda, const bweight & w, uint16_t * c, int ldc, const epilogue & e,
                          float * scratch, const a_layernorm * ln) {
    if (e.kind != epi::store && e.kind != epi::bias && e.kind != epi::bias_relu && e.kind != epi::bias_gelu) {
        throw error("bgemm_packed_to_bf16: epilogue " + std::to_string(static_cast<int>(e.kind)) +
                    " reads c; only store, bias, bias_relu and bias_gelu write bf16 rows");
    }
    bgemm_run(m, a, nullptr, lda, w, nullptr, c, ldc, e, scratch, ln);
}

void bgemm_packed_from_bf16(int m, const uint16_t * a, int lda, const bweight & w, float * c, int ldc,
                            const epilogue & e, float * scratch) {
    if (w.k != w.kp) {
        throw error("bgemm_packed_from_bf16: k = " + std::to_string(w.k) + " is not a multiple of " +
                    std::to_string(k_bk_tile) + "; bf16 A rows need whole 32-k steps (use bgemm_packed on fp32 rows)");
    }
    bgemm_run(m, nullptr, a, lda, w, c, nullptr, ldc, e, scratch, nullptr);
}

}  // namespace rfdetr::cpu
