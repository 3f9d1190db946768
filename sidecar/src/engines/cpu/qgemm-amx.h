// The AMX int8 kernel: qgemm.h's numerics (the same quantised rows and weights, the same int32 sums, the same
// dequantising epilogue) computed on AMX tiles with tdpbusd, and the per-process permission Linux requires
// before a thread may touch the tile registers.
#pragma once

#include "engines/cpu/gemm.h"
#include "engines/cpu/qgemm.h"

#include <string>

namespace rfdetr::cpu {

// Whether Linux granted this process the AMX tile-data state (arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA),
// requested once, on the first call, for the whole process); `why` says why not. Only on a CPU with AMX-TILE.
// The int8 (qgemm_amx) and bf16 (bgemm-amx.cpp) AMX kernels share it.
bool amx_tile_permission(std::string & why);

// This thread's tile configuration, palette 1: all eight tiles 16 rows x 64 bytes (the int8 and bf16 kernels'
// shape), and back to the initial tile state (the kernel then skips the 8 KB of tile data on context switches).
// Only after amx_tile_permission() returned true on a CPU with AMX-TILE.
void amx_tiles_configure();
void amx_tiles_release();

// Whether the AMX kernel can run in this process: the CPU has AMX-TILE, AMX-INT8 and AVX-512F (the epilogue),
// and Linux granted the tile-data state (arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA), requested once,
// on the first call, for the whole process). On a CPU with AMX that the OS refused, `why` says so.
bool amx_usable(std::string & why);

// qgemm_packed's contract (scratch: gemm_scratch_floats(w.k) floats); only after amx_usable() returned true.
void qgemm_amx(int m, const float * a, int lda, const qweight & w, float * c, int ldc, const epilogue & e,
               float * scratch, const a_layernorm * ln);

}  // namespace rfdetr::cpu
