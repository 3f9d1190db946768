// Attention for one head in bf16 on the matrix units: o = softmax(scale * q k^T) v with q, k, v and o fp32
// (strided, as the qkv GEMM writes them and the proj GEMM reads them), the two products in bf16 with fp32
// sums: AMX tdpbf16ps ("amx") or AVX512-BF16 vdpbf16ps ("avx512bf16"), picked at run time.
//
// Per block of 32 queries the whole score rows S = q k^T (fp32, [32][nk]) are computed, then an exact two-pass
// softmax in fp32 (max; p = exp(scale * s - scale * max) rounded to bf16 and summed as rounded), then
// O = P V, divided by the sum at the store. K and V are packed once per head (attention_bf16_pack) as the
// tiles' B operands; keys are padded to a multiple of 32 with zero keys whose P is exactly 0.
// README.md, "Attention in bf16", has the numbers that chose this.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace rfdetr::cpu {

// Whether a bf16 attention kernel runs on this CPU (AVX512-BF16 at least); when not, `why` says what is missing.
bool attention_bf16_supported(std::string & why);
// The kernel that runs: "amx" (AMX-BF16, when Linux granted the tile state), "avx512bf16", or "" (none).
const char * attention_bf16_isa();
// Run the named kernel from now on; false (and no change) if this CPU lacks it or the name is unknown.
bool attention_bf16_select_isa(const char * name);

// Head widths the kernels take: a multiple of 32 (the ViT's 64, the decoder's 32).
bool attention_bf16_width_ok(int d);

// Floats holding a head's packed K and V (bf16) for nk keys of width d, and the packing: k [nk, d] (row
// stride ldk) and v [nk, d] (ldv) into kv (64-byte aligned).
size_t attention_bf16_kv_floats(int nk, int d);
void   attention_bf16_pack(const float * k, int ldk, const float * v, int ldv, int nk, int d, float * kv);

// Floats of scratch attention_bf16_block needs against nk keys of width d (any nq).
size_t attention_bf16_scratch_floats(int nk, int d);

// o[nq, d] (ldo) = softmax(scale * q k^T) v for nq query rows (ldq) against the nk keys packed in kv.
// scratch: attention_bf16_scratch_floats(nk, d) floats, 64-byte aligned.
void attention_bf16_block(const float * q, int ldq, const float * kv, int nk, float * o, int ldo, int nq, int d,
                          float scale, float * scratch);

// The whole head: packs k and v into scratch, then attention_bf16_block. scratch:
// attention_bf16_head_scratch_floats(nk, d) floats, 64-byte aligned.
size_t attention_bf16_head_scratch_floats(int nk, int d);
void   attention_bf16_head(const float * q, int ldq, const float * k, int ldk, const float * v, int ldv, float * o,
                           int ldo, int nq, int nk, int d, float scale, float * scratch);

}  // namespace rfdetr::cpu
