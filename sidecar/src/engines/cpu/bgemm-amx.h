// The AMX bf16 kernel: bgemm.h's numerics (the same bf16 rows and weights, fp32 sums, the same epilogue)
// computed on AMX tiles with tdpbf16ps.
#pragma once

#include "engines/cpu/bgemm.h"

namespace rfdetr::cpu {

// bgemm_packed's contract (scratch: gemm_scratch_floats(w.k) floats); only on a CPU with AMX-BF16 and
// AVX512-BF16 whose OS granted the tile state (amx_tile_permission).
// A is fp32 rows `af` (rounded in the prologue, after the LayerNorm if ln) or, when af is null, bf16 rows `ab`
// (read in place; w.k a multiple of 32); c is fp32 `cf` or, when cf is null, bf16 `cb` (store_rows_bf16).
void bgemm_amx(int m, const float * af, const uint16_t * ab, int lda, const bweight & w, float * cf, uint16_t * cb,
               int ldc, const epilogue & e, float * scratch, const a_layernorm * ln);

}  // namespace rfdetr::cpu
