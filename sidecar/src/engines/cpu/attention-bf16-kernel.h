// The two products of attention-bf16.h for one block of k_attn_rows queries, as each kernel (AMX in
// attention-bf16-amx.cpp, AVX512-BF16 in attention-bf16-avx512.cpp) computes them, and the layouts they share.
//
// bf16 values are uint16_t. With nkp = nk rounded up to 32 (zero keys past nk):
//   qb  [k_attn_rows][d]                    the block's queries, rows past nq zero
//   K   [nkp / 16][d / 2][16][2]            per 16 keys, the d pairs of each key: a B tile per 32 d
//   V   [d / 16][nkp / 2][16][2]            per 16 columns, the key pairs of each column: a B tile per 32 keys
//   P   [k_attn_rows][ldp]                  bf16 probabilities, 0 past nk
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

namespace rfdetr::cpu {

constexpr int k_attn_rows = 32;  // queries per block: two 16-row tiles

struct attn_bf16_kernel {
    const char * name;
    // s[k_attn_rows][lds] (fp32) = qb K^T, all nkp columns, and mx[i] = the largest of row i's first nk (the
    // real keys'), taken while each 32 x 32 block is in L1 (a separate pass over s from L2 cost a quarter of the
    // softmax).
    void (*scores)(const uint16_t * qb, int d, const uint16_t * kp, int nkp, int nk, float * s, int lds, float * mx);
    // o[k_attn_rows][d] (fp32, row stride d) = P V over nkp keys.
    void (*pv)(const uint16_t * p, int ldp, const uint16_t * vp, int nkp, int d, float * o);
    // Before the first and after the last product of a call (tile configuration and release); may be null.
    void (*begin)();
    void (*end)();
};

// Row maxima of a 32 x 32 block of s (columns g.. g+31, the first `valid` of them real keys) into acc[32].
__attribute__((target("avx512f"))) inline void block_max(const float * s, int lds, int valid, __m512 * acc) {
    const __mmask16 m0 = valid >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << valid) - 1);
    const __mmask16 m1 = valid >= 32 ? 0xFFFF : valid <= 16 ? 0 : static_cast<__mmask16>((1u << (valid - 16)) - 1);
    for (int i = 0; i < k_attn_rows; ++i) {
        const float * r = s + static_cast<size_t>(i) * lds;
        acc[i]          = _mm512_mask_max_ps(acc[i], m0, acc[i], _mm512_loadu_ps(r));
        acc[i]          = _mm512_mask_max_ps(acc[i], m1, acc[i], _mm512_loadu_ps(r + 16));
    }
}

// The AVX512-BF16 kernel (always there on a CPU with AVX512-BF16).
extern const attn_bf16_kernel k_attn_avx512bf16;
// The AMX kernel; only after attn_amx_bf16_usable() returned true.
extern const attn_bf16_kernel k_attn_amx;
bool attn_amx_bf16_usable();

}  // namespace rfdetr::cpu
