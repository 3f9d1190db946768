// The two products of attention-bf16.h for one block of k_attn_rows queries, as each kernel (AMX in
// attention-bf16-amx.cpp, AVX512-BF16 in attention-bf16-avx512.cpp) computes them, and the layouts they share.
//
// bf16 values are uint16_t. With nkp = nk rounded up to 32 (zero keys past nk):
//   qb  [k_attn_rows][d]                    the block's queries, rows past nq zero
//   K   [nkp / 16][d / 2][16][2]            per 16 keys, the d pairs of each key: a B tile per 32 d
//   V   [d / 16][nkp / 2][16][2]            per 16 columns, the key pairs of each column: a B tile per 32 keys
//   P   [k_attn_rows][ldp]                  bf16 probabilities, 0 past nk
#pragma once

#include <cstddef>
#include <cstdint>

namespace rfdetr::cpu {

constexpr int k_attn_rows = 32;  // queries per block: two 16-row tiles

struct attn_bf16_kernel {
    const char * name;
    // s[k_attn_rows][lds] (fp32) = qb K^T, all nkp columns.
    void (*scores)(const uint16_t * qb, int d, const uint16_t * kp, int nkp, float * s, int lds);
    // o[k_attn_rows][d] (fp32, row stride d) = P V over nkp keys.
    void (*pv)(const uint16_t * p, int ldp, const uint16_t * vp, int nkp, int d, float * o);
    // Before the first and after the last product of a call (tile configuration and release); may be null.
    void (*begin)();
    void (*end)();
};

// The AVX512-BF16 kernel (always there on a CPU with AVX512-BF16).
extern const attn_bf16_kernel k_attn_avx512bf16;
// The AMX kernel; only after attn_amx_bf16_usable() returned true.
extern const attn_bf16_kernel k_attn_amx;
bool attn_amx_bf16_usable();

}  // namespace rfdetr::cpu
