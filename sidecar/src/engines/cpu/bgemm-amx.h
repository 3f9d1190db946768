// The AMX bf16 kernel: bgemm.h's numerics (the same bf16 rows and weights, fp32 sums, the same epilogue)
// computed on AMX tiles with tdpbf16ps.
#pragma once

#include "engines/cpu/bgemm.h"

namespace rfdetr::cpu {

// bgemm_packed's contract (scratch: gemm_scratch_floats(w.k) floats); only on a CPU with AMX-BF16 and
// AVX512-BF16 whose OS granted the tile state (amx_tile_permission).
void bgemm_amx(int m, const float * a, int lda, const bweight & w, float * c, int ldc, const epilogue & e,
               float * scratch, const a_layernorm * ln);

}  // namespace rfdetr::cpu
