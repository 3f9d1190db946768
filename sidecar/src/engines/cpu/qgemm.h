// The engine's int8 GEMM (W8A8 dynamic): a torch Linear weight quantised once at load per output channel,
// the activation rows quantised per row in the GEMM's prologue (after the optional LayerNorm A pass),
// products accumulated exactly in int32 and dequantised in the float epilogue of gemm.h (bias, ReLU/GELU,
// LayerScale + residual). Kernels: AMX (tdpbusd on 16x64-byte tiles, qgemm-amx.cpp), AVX-512 VNNI (vpdpbusd),
// AVX-VNNI, and AVX2 (vpmaddubsw + vpmaddwd), picked at run time; all four produce the same int32 sums, so the
// same outputs.
//
// Numerics (one definition for every kernel, qgemm_ref is its plain-loop form):
//   weights  q_w[j,k] = round(w[j,k] * (127 / max_k |w[j,k]|)) in [-127, 127], scale s_w[j] = max/127;
//   rows     q_a[i,k] = round(x[i,k] * (127 / max_k |x[i,k]|)) in [-127, 127], scale s_a[i] = max/127,
//            stored as u8 q_a + 128 (the u8 x s8 instructions; the AVX2 kernel's rows as q_a and |q_a|), the
//            +128 removed by 128 * sum_k q_w[j,k];
//   output   t[i,j] = float(sum_k q_a q_w) * (s_w[j] * s_a[i]), then the epilogue.
// Weights take 8 bits: with 7 (±63) int8's logit PCC against fp32 (fp32's top-k held) was 0.99956 on the worst
// Base case, with 8 0.99974 (README.md, "int8"). The AVX2 kernel feeds vpmaddubsw |q_a| x sign(q_w, q_a) so its
// int16 pair sums (at most 127 * 127 * 2 = 32258) never saturate: it stays exact and matches the VNNI and AMX
// kernels bit for bit.
#pragma once

#include "engines/cpu/gemm.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace rfdetr::cpu {

constexpr int k_qw_max = 127;  // weight levels per sign (8 bits)
constexpr int k_qa_max = 127;  // activation levels per sign (8 bits)

// k groups per AMX tile: a tile row is 64 bytes, i.e. 16 groups of 4 k (the tdpbusd reduction per step).
constexpr int k_qk_tile = 16;

// A weight [n, k] as ceil(n/32) panels of [kqp][32][4] int8 (4 consecutive k per column, the vpdpbusd group),
// zero-padded; per column the scale and the +128 compensation, padded to the panels. The panel is also the AMX
// B operand as it stands: its rows are 128 bytes, columns 0-15 in the first 64 and 16-31 in the second, so a
// 16-row load at stride 128 is a VNNI-4 B tile of 16 columns. kqp pads the groups to whole tiles (k to a
// multiple of 64) so the AMX kernel needs no k tail; the model's k (256, 384, 640, 768, 1152, 1536, 2048)
// are already multiples of 64, so the padding costs them nothing.
struct qweight {
    std::vector<int8_t, cache_line_allocator<int8_t>> data;  // 64-byte aligned: each AMX tile row one cache line
    std::vector<float>   scale;  // s_w[j]
    std::vector<int32_t> comp;   // 128 * sum_k q_w[j,k]
    int                  n = 0, k = 0;
    int                  kq  = 0;  // ceil(k/4): the groups holding k
    int                  kqp = 0;  // kq rounded up to k_qk_tile: the groups stored per panel
    const int8_t *       panel(int p) const { return data.data() + static_cast<size_t>(p) * kqp * 4 * k_gemm_nr; }
};
qweight quantize_weight(const float * w, int n, int k, int ldw);
// The same as a packed_weight (gemm.h) carrying only the int8 form: gemm_packed runs it through qgemm_packed.
packed_weight pack_weight_int8(const float * w, int n, int k, int ldw);

// Which int8 kernel runs: "amx", "avx512vnni", "avxvnni" or "avx2" (the best this CPU has unless selected).
const char * qgemm_isa();
// Run the named int8 kernel from now on; false (and no change) if this CPU lacks it (for "amx": or the OS
// refused its tile state) or the name is unknown.
bool qgemm_select_isa(const char * name);
// Why the AMX kernel does not run on a CPU that has AMX-INT8 (the OS refused the tile state), for the
// engine's device line; empty when it runs or the CPU has no AMX.
const std::string & qgemm_amx_note();

// c[m, n] (ldc) = epi(dequant(quant(LN?(a)) * q_w^T)); scratch as gemm_packed's (gemm_scratch_floats(k)).
void qgemm_packed(int m, const float * a, int lda, const qweight & w, float * c, int ldc, const epilogue & e,
                  float * scratch, const a_layernorm * ln = nullptr);

// The plain-loop form of the same numerics (tests only): quantises `a` (already LayerNormed, if any) row by
// row and applies the epilogue in scalar float.
void qgemm_ref(int m, const float * a, int lda, const qweight & w, float * c, int ldc, const epilogue & e);

}  // namespace rfdetr::cpu
