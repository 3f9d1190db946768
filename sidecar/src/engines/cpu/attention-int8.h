// Attention for one head in int8 on AVX-512 VNNI (vpdpbusd): o = softmax(scale * q k^T) v with q, k, v and o fp32
// (strided, as the qkv GEMM writes them and the proj GEMM reads them); int8 forwards run it in the ViT wherever the int8
// GEMM runs on AVX-512 VNNI (cpu-model.cpp, attention_in_int8). README.md, "Attention in int8", has the numbers.
//
// The numbers, one definition for the kernel and the reference (attention_int8_ref, bit for bit):
//   q rows and k rows per row, v per column, symmetric 8 bits as the int8 GEMM's rows: s = max|x| / 127,
//   x_q = nearbyint(x * (127 / max|x|)) clamped to +-127;
//   score[i][j] = float(sum_c q_q[i][c] k_q[j][c]) * (s_q[i] * (s_k[j] * scale));
//   per query row the exact two-pass softmax: m = max_j score, p[j] = nearbyint(e * 255) as u8 (the max key gives
//   255) with e = exp(score - m) as 2^t, t = fma(score, log2 e, -m log2 e), by simd-math.h's exp2_nonpositive512
//   (relative error < 3.6e-6), l = sum_j p[j] (an exact integer);
//   o[i][c] = (float(sum_j p[j] v_q[j][c]) * s_v[c]) / float(l).
// K and V are packed once per head (attention_int8_pack, the scale folded into the key scales) as the products'
// B operands; keys are padded to a multiple of 32 with zero keys whose p is 0.
#pragma once

#include <cstddef>

namespace rfdetr::cpu {

// Whether this CPU has the instructions (AVX-512 F, BW and VNNI).
bool attention_int8_supported();

// Head widths the kernel takes: a multiple of 32 up to 128 (the ViT's 64).
bool attention_int8_width_ok(int d);

// Floats holding a head's packed K and V for nk keys of width d, and the packing of k [nk, d] (row stride ldk) and
// v [nk, d] (ldv) into kv, for softmax(scale * q k^T).
size_t attention_int8_kv_floats(int nk, int d);
void   attention_int8_pack(const float * k, int ldk, const float * v, int ldv, int nk, int d, float scale, float * kv);

// Floats of scratch attention_int8_block needs against nk keys of width d (any nq).
size_t attention_int8_scratch_floats(int nk, int d);

// o[nq, d] (ldo) = softmax(scale * q k^T) v for nq query rows (ldq) against the nk keys packed in kv.
void attention_int8_block(const float * q, int ldq, const float * kv, int nk, float * o, int ldo, int nq, int d,
                          float * scratch);

// The whole head: packs k and v into scratch, then attention_int8_block.
size_t attention_int8_head_scratch_floats(int nk, int d);
void   attention_int8_head(const float * q, int ldq, const float * k, int ldk, const float * v, int ldv, float * o,
                           int ldo, int nq, int nk, int d, float scale, float * scratch);

// The same numbers in plain loops (the exact-result tests' reference; the exp is the kernel's, lane by lane).
void attention_int8_ref(const float * q, int ldq, const float * k, int ldk, const float * v, int ldv, float * o,
                        int ldo, int nq, int nk, int d, float scale);

}  // namespace rfdetr::cpu
