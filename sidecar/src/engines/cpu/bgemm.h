// The engine's bf16 GEMM (precision::bf16): a torch Linear weight rounded to bf16 once at load, the activation
// rows rounded to bf16 in the GEMM's prologue (after the optional LayerNorm A pass), products accumulated in
// fp32 and finished by gemm.h's epilogues. Kernels: AMX (tdpbf16ps, bgemm-amx.cpp) where the CPU has AMX-BF16
// and Linux grants the tile state, else AVX-512 BF16 (vdpbf16ps); a CPU with neither cannot run bf16.
#pragma once

#include "engines/cpu/gemm.h"
#include "engines/cpu/precision.h"

#include <cstdint>
#include <string>
#include <vector>

namespace rfdetr::cpu {

// Numerics (one definition for every kernel; bgemm_ref is its plain-loop form):
//   operands  bf16(x): round to nearest even, NaN kept (quiet), fp32 denormals to signed zero (what
//             vcvtne2ps2bf16 does: bgemm-test compares the two on 4104 bit patterns);
//   output    t[i,j] = sum over k pairs of bf16(a[i,k]) * bf16(w[j,k]), each product exact in fp32, the sum in fp32
//             (the kernels' own order: exact when every partial sum is exact in fp32), then gemm.h's epilogue.
inline uint16_t bf16_round(float x) {
    uint32_t u;
    __builtin_memcpy(&u, &x, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);  // NaN, quieted
    if ((u & 0x7f800000u) == 0) return static_cast<uint16_t>((u >> 16) & 0x8000u);        // zero, denormal
    return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
inline float bf16_to_float(uint16_t h) {
    const uint32_t u = static_cast<uint32_t>(h) << 16;
    float          x;
    __builtin_memcpy(&x, &u, 4);
    return x;
}

// k per AMX step: a bf16 A tile row is 64 bytes = 32 k; a B tile is 16 k pairs of 16 columns.
constexpr int k_bk_tile = 32;

// A weight [n, k] as ceil(n/32) panels of [kp/2][32][2] bf16 (2 consecutive k per column, the vdpbf16ps pair),
// zero-padded. The panel is also the AMX B operand as it stands: its rows are 128 bytes, columns 0-15 in the
// first 64 and 16-31 in the second, so a 16-row load at stride 128 is a VNNI-2 B tile of 16 columns (qweight's
// trick). kp pads k to a multiple of 32 so the AMX kernel needs no k tail.
struct bweight {
    std::vector<uint16_t, cache_line_allocator<uint16_t>> data;  // 64-byte aligned: each AMX tile row one cache line
    int                   n = 0, k = 0;
    int                   kp = 0;  // k rounded up to k_bk_tile
    const uint16_t *      panel(int p) const { return data.data() + static_cast<size_t>(p) * kp * k_gemm_nr; }
};
bweight to_bweight(const float * w, int n, int k, int ldw);
// The same as a packed_weight (gemm.h) carrying only the bf16 form: gemm_packed runs it through bgemm_packed.
packed_weight pack_weight_bf16(const float * w, int n, int k, int ldw);

// c[m, n] (ldc) = epi(bf16(LN?(a)) * bf16(w)^T); scratch as gemm_packed's (gemm_scratch_floats(k)). Only while
// bgemm_isa() is not "none" (bf16_supported()).
void bgemm_packed(int m, const float * a, int lda, const bweight & w, float * c, int ldc, const epilogue & e,
                  float * scratch, const a_layernorm * ln = nullptr);

// The MLP's hand-off in bf16 (fc1 -> fc2 without an fp32 round trip; the same numbers, since fc2 would round its
// rows to bf16 anyway): bgemm_packed_to_bf16 writes bf16(epi(...)) rows (e.kind store, bias, bias_relu or bias_gelu:
// no c input), and bgemm_packed_from_bf16 reads A as bf16 rows of w.k elements (lda elements apart) with w.k a
// multiple of k_bk_tile (throws otherwise). Same scratch as bgemm_packed.
void bgemm_packed_to_bf16(int m, const float * a, int lda, const bweight & w, uint16_t * c, int ldc, const epilogue & e,
                          float * scratch, const a_layernorm * ln = nullptr);
void bgemm_packed_from_bf16(int m, const uint16_t * a, int lda, const bweight & w, float * c, int ldc,
                            const epilogue & e, float * scratch);

// The plain-loop form (tests only): rounds `a` (already LayerNormed, if any) to bf16, sums the products of the
// packed weight in double, and applies the epilogue in scalar float to float(sum).
void bgemm_ref(int m, const float * a, int lda, const bweight & w, float * c, int ldc, const epilogue & e);

// Which bf16 kernel runs: "amx", "avx512bf16", or "none" (this CPU, or the RFDETR_CPU_ISA level, has neither).
const char * bgemm_isa();
// Test hook (and isa-level.h's cap): run the named kernel ("amx", "avx512bf16", "none") from now on; false (and
// no change) if this CPU lacks it (for "amx": or the OS refused its tile state) or the name is unknown.
bool bgemm_select_isa(const char * name);
// The kernel this CPU would pick with no cap ("amx", "avx512bf16" or "none").
const char * bgemm_best_isa();

// Whether precision::bf16 can run now (a bf16 kernel is selected). When not, `missing` names what is lacking:
// "AVX512-BF16 or AMX-BF16 instructions" on a CPU without them, else the kernel level that excludes them.
bool bf16_supported(std::string & missing);

// A weight [n, k] (row stride ldw) packed for gemm_packed in precision p: float (pack_weight), int8
// (pack_weight_int8) or bf16 (pack_weight_bf16).
packed_weight pack_weight_as(precision p, const float * w, int n, int k, int ldw);

}  // namespace rfdetr::cpu
