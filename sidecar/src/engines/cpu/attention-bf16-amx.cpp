// attention-bf16-kernel.h's products on AMX tiles (tdpbf16ps). Only these functions carry the AMX target;
// the dispatch in attention-bf16.cpp calls them only after attn_amx_bf16_usable().
// GCC 12 reports its own AVX-512 intrinsics' undefined operands as (maybe-)uninitialized (see qgemm.cpp).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include "engines/cpu/attention-bf16-kernel.h"
#include "engines/cpu/qgemm-amx.h"

#include <immintrin.h>

#include <cmath>
#include <cstring>
#include <string>

#define RFDETR_AMX_BF16 __attribute__((target("avx512f,amx-tile,amx-bf16")))

namespace rfdetr::cpu {

namespace {

constexpr int k_rows = 16;  // rows of a tile
constexpr int k_tb   = 64;  // bytes per tile row: 32 bf16 of A, 16 pairs of B, 16 fp32 of C

// The tile instructions are asm statements that do not tell the compiler which memory they touch.
inline void memory_barrier() { __asm__ volatile("" ::: "memory"); }

// Palette 1, eight tiles of 16 rows x 64 bytes: tmm0-3 the 2 x 2 fp32 C block, tmm4-5 the A row tiles,
// tmm6-7 the B column tiles. Built as bytes (see qgemm-amx.cpp's tiles_configure for why).
RFDETR_AMX_BF16 void configure() {
    alignas(64) uint8_t cfg[64] = {};
    cfg[0] = 1;
    for (int t = 0; t < 8; ++t) {
        cfg[16 + 2 * t] = k_tb;
        cfg[48 + t]     = k_rows;
    }
    memory_barrier();
    _tile_loadconfig(cfg);
}

RFDETR_AMX_BF16 void release() { _tile_release(); }

// s = qb K^T: per 32 keys, C[2 row tiles][2 key tiles] summed over d in steps of 32.
RFDETR_AMX_BF16 void scores(const uint16_t * qb, int d, const uint16_t * kp, int nkp, int nk, float * s, int lds,
                            float * mx) {
    __m512 acc[k_attn_rows];
    for (auto & a : acc) a = _mm512_set1_ps(-INFINITY);
    memory_barrier();
    const long sq = static_cast<long>(d) * 2;
    const long ss = static_cast<long>(lds) * 4;
    for (int g = 0; g < nkp; g += 32) {
        const uint16_t * k0 = kp + static_cast<size_t>(g) * d;  // key tile g/16: [d/2][16][2]
        const uint16_t * k1 = k0 + static_cast<size_t>(16) * d;
        _tile_zero(0);
        _tile_zero(1);
        _tile_zero(2);
        _tile_zero(3);
        for (int c = 0; c < d; c += 32) {
            _tile_loadd(4, qb + c, sq);
            _tile_loadd(5, qb + static_cast<size_t>(k_rows) * d + c, sq);
            _tile_loadd(6, k0 + static_cast<size_t>(c) * 16, k_tb);
            _tile_loadd(7, k1 + static_cast<size_t>(c) * 16, k_tb);
            _tile_dpbf16ps(0, 4, 6);
            _tile_dpbf16ps(1, 4, 7);
            _tile_dpbf16ps(2, 5, 6);
            _tile_dpbf16ps(3, 5, 7);
        }
        _tile_stored(0, s + g, ss);
        _tile_stored(1, s + g + 16, ss);
        _tile_stored(2, s + static_cast<size_t>(k_rows) * lds + g, ss);
        _tile_stored(3, s + static_cast<size_t>(k_rows) * lds + g + 16, ss);
        memory_barrier();
        block_max(s + g, lds, nk - g, acc);
    }
    for (int i = 0; i < k_attn_rows; ++i) mx[i] = _mm512_reduce_max_ps(acc[i]);
}

// o = P V: per 32 output columns, C[2 row tiles][2 column tiles] summed over the keys in steps of 32.
RFDETR_AMX_BF16 void pv(const uint16_t * p, int ldp, const uint16_t * vp, int nkp, int d, float * o) {
    memory_barrier();
    const long sp = static_cast<long>(ldp) * 2;
    const long so = static_cast<long>(d) * 4;
    const size_t col_tile = static_cast<size_t>(nkp) * 16;  // bf16 per 16-column block of V
    for (int c = 0; c < d; c += 32) {
        const uint16_t * v0 = vp + static_cast<size_t>(c / 16) * col_tile;
        const uint16_t * v1 = v0 + col_tile;
        _tile_zero(0);
        _tile_zero(1);
        _tile_zero(2);
        _tile_zero(3);
        for (int k = 0; k < nkp; k += 32) {
            _tile_loadd(4, p + k, sp);
            _tile_loadd(5, p + static_cast<size_t>(k_rows) * ldp + k, sp);
            _tile_loadd(6, v0 + static_cast<size_t>(k) * 16, k_tb);
            _tile_loadd(7, v1 + static_cast<size_t>(k) * 16, k_tb);
            _tile_dpbf16ps(0, 4, 6);
            _tile_dpbf16ps(1, 4, 7);
            _tile_dpbf16ps(2, 5, 6);
            _tile_dpbf16ps(3, 5, 7);
        }
        _tile_stored(0, o + c, so);
        _tile_stored(1, o + c + 16, so);
        _tile_stored(2, o + static_cast<size_t>(k_rows) * d + c, so);
        _tile_stored(3, o + static_cast<size_t>(k_rows) * d + c + 16, so);
    }
    memory_barrier();
}

}  // namespace

bool attn_amx_bf16_usable() {
    static const bool ok = [] {
        __builtin_cpu_init();
        std::string why;
        return __builtin_cpu_supports("amx-bf16") && __builtin_cpu_supports("avx512bf16") && amx_usable(why);
    }();
    return ok;
}

const attn_bf16_kernel k_attn_amx = {"amx", scores, pv, configure, release};

}  // namespace rfdetr::cpu
