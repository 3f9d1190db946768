#include "engines/cpu/bgemm-amx.h"

// GCC 12 reports its own AVX-512 intrinsics' undefined operands as (maybe-)uninitialized (see qgemm.cpp).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include "engines/cpu/bgemm-kernel.h"
#include "engines/cpu/qgemm-amx.h"

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

// Only this file's functions carry the AMX-BF16 target; bgemm.cpp calls here only when the CPU has it.
#define RFDETR_AMX_BF16 __attribute__((target("avx512f,amx-tile,amx-bf16")))

namespace rfdetr::cpu {

namespace {

constexpr int k_tile_rows = 16;  // rows of an A or C tile (and k pairs of a B tile)
constexpr int k_tile_b    = 64;  // bytes per tile row

// The tile instructions are asm statements that do not tell the compiler which memory they read or write:
// a compiler barrier orders them against the ordinary stores of the bf16 rows and loads of the sums.
inline void memory_barrier() { __asm__ volatile("" ::: "memory"); }

// The A rows in tile layout: each 32-row slice holds, per 32-k step, its [32 rows][32 bf16] contiguously (2 KB: the
// step's two A tiles, rows 64 bytes apart), so a tile load reads 16 consecutive lines whatever k is. Read in place,
// rows 3072 bytes apart (fc2's k = 1536) fall into 4 of L1's 64 sets.
constexpr int k_step_elems = 32 * k_bk_tile;  // bf16 elements per k step of a slice

// Row i of a block in that layout (kt steps per slice); its k step q at + q * k_step_elems.
inline uint16_t * tile_row(uint16_t * ba, int i, int kt) {
    return ba + (static_cast<size_t>(i / 32) * kt) * k_step_elems + static_cast<size_t>(i % 32) * k_bk_tile;
}

// The sums of one 32 x 32 block into tmm0-3 (tmm2-3 only when Two): over kt steps of 32 k, a (a slice in tile
// layout) x b (a weight panel, [16 k pairs][32 columns][2] per step, rows of 128 bytes). Tiles as the int8
// kernel's (amx_tiles_configure): tmm0-3 the 2 x 2 C block, tmm4-5 two A row tiles, tmm6-7 the panel's halves.
// The sums stay in the tiles until store_sums, so the caller can run the previous block's epilogue while these
// tile products are in flight.
template <bool Two>
RFDETR_AMX_BF16 void block_sums(const uint16_t * a, const uint16_t * b, int kt) {
    constexpr long k_panel_row = 2 * 2 * k_gemm_nr;  // bytes per k pair of a weight panel
    _tile_zero(0);
    _tile_zero(1);
    if (Two) {
        _tile_zero(2);
        _tile_zero(3);
    }
    const uint8_t * a8 = reinterpret_cast<const uint8_t *>(a);
    const uint8_t * b8 = reinterpret_cast<const uint8_t *>(b);
    for (int q = 0; q < kt; ++q) {
        const uint8_t * ap = a8 + static_cast<size_t>(q) * k_step_elems * 2;
        const uint8_t * bp = b8 + static_cast<size_t>(q) * k_tile_rows * k_panel_row;
        _tile_loadd(4, ap, k_tile_b);
        _tile_loadd(6, bp, k_panel_row);
        _tile_loadd(7, bp + k_tile_b, k_panel_row);
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        if (Two) {
            _tile_loadd(5, ap + k_tile_rows * k_tile_b, k_tile_b);
            _tile_dpbf16ps(2, 5, 6);
            _tile_dpbf16ps(3, 5, 7);
        }
    }
}

// t[32][32] fp32 (rows 16-31 only when Two) = tmm0-3, block_sums' sums.
template <bool Two> RFDETR_AMX_BF16 void store_sums(float * t) {
    constexpr long k_t_row = 4 * 32;  // bytes per row of t
    memory_barrier();                 // the epilogue's reads of t's previous contents come first
    _tile_stored(0, t, k_t_row);
    _tile_stored(1, t + 16, k_t_row);
    if (Two) {
        _tile_stored(2, t + 16 * 32, k_t_row);
        _tile_stored(3, t + 16 * 32 + 16, k_t_row);
    }
    memory_barrier();
}

// A block whose sums wait in t for their epilogue: n rows of ncols columns at c (fp32 cf or bf16 cb) + o.
struct pending_block {
    int      n = 0, ncols = 0;
    size_t   o = 0;
    epilogue ep;
};

}  // namespace

void bgemm_amx(int m, const float * af, const uint16_t * ab, int lda, const bweight & w, float * cf, uint16_t * cb,
               int ldc, const epilogue & e, float * scratch, const a_layernorm * ln) {
    const int k    = w.k;
    const int kp   = w.kp;
    const int kt   = kp / k_bk_tile;  // 32-k steps
    const int rowb = kp * 2;          // bytes per bf16 row
    const int mc   = std::max(32, static_cast<int>(std::min<size_t>(1024, k_ba_block_bytes / rowb)) / 32 * 32);
    // scratch (gemm_scratch_floats(k) floats, >= 96 K + 28 k): [64-byte aligned bf16 rows in tile layout: mc * kp][LN row: k]
    uint16_t * ba  = reinterpret_cast<uint16_t *>((reinterpret_cast<uintptr_t>(scratch) + 63) & ~uintptr_t{63});
    float *    row = reinterpret_cast<float *>(ba + static_cast<size_t>(mc) * kp);
    const int  panels = (w.n + k_gemm_nr - 1) / k_gemm_nr;
    // Two sum buffers: block b's tiles are stored into t[b & 1] while block b - 1's epilogue reads the other.
    alignas(64) float t[2][32 * 32];
    int               cur = 0;
    pending_block     prev;
    bool              have_prev = false;
    auto              finish    = [&](const pending_block & d, const float * tb) {
        if (cf) {
            store_rows_f32(tb, d.n, cf + d.o, ldc, d.ncols, d.ep);
        } else {
            store_rows_bf16(tb, d.n, cb + d.o, ldc, d.ncols, d.ep);
        }
    };
    amx_tiles_configure();
    for (int m0 = 0; m0 < m; m0 += mc) {
        const int rows = std::min(mc, m - m0);
        // The A rows of this block in tile layout: rounded here from fp32 rows, or copied from the caller's bf16 rows.
        for (int i = 0; i < rows; ++i) {
            uint16_t * dst = tile_row(ba, i, kt);
            if (af) {
                round_row_bf16(b_a_row(af + static_cast<size_t>(m0 + i) * lda, row, k, ln), k, dst, kp, k_step_elems);
            } else {
                const uint16_t * src = ab + static_cast<size_t>(m0 + i) * lda;
                for (int q = 0; q < kt; ++q) std::memcpy(dst + static_cast<size_t>(q) * k_step_elems, src + q * k_bk_tile, k_tile_b);
            }
        }
        // The last A tile's rows past `rows` are read but never stored: zeros keep them defined.
        const int rows_tiled = (rows + k_tile_rows - 1) / k_tile_rows * k_tile_rows;
        for (int i = rows; i < rows_tiled; ++i) {
            uint16_t * dst = tile_row(ba, i, kt);
            for (int q = 0; q < kt; ++q) std::memset(dst + static_cast<size_t>(q) * k_step_elems, 0, k_tile_b);
        }
        memory_barrier();
        // Each 32-row slice of A (24 KB at k = 384: it stays in L1) meets every weight panel in turn (the weight
        // streams from L2). Panels outer, slices inner (the int8 kernel's order: the panel in L1, the A block from
        // L2) took 1.13-1.32x the int8 AMX kernel's time on qgemm-bench's shapes, this order 1.13-1.22x (3 runs).
        // Each block's tile products are issued before the previous block's epilogue runs, so the epilogue's
        // vector work overlaps them.
        for (int i0 = 0; i0 < rows; i0 += 32) {
            const int        n  = std::min(32, rows - i0);
            const uint16_t * as = tile_row(ba, i0, kt);
            for (int p = 0; p < panels; ++p) {
                const int j0 = p * k_gemm_nr;
                if (n > k_tile_rows) {
                    block_sums<true>(as, w.panel(p), kt);
                } else {
                    block_sums<false>(as, w.panel(p), kt);
                }
                if (have_prev) finish(prev, t[cur ^ 1]);
                if (n > k_tile_rows) {
                    store_sums<true>(t[cur]);
                } else {
                    store_sums<false>(t[cur]);
                }
                prev      = {n, std::min(k_gemm_nr, w.n - j0), static_cast<size_t>(m0 + i0) * ldc + j0,
                             epilogue_from_column(e, j0)};
                have_prev = true;
                cur ^= 1;
            }
        }
    }
    if (have_prev) finish(prev, t[cur ^ 1]);
    amx_tiles_release();
}

}  // namespace rfdetr::cpu
