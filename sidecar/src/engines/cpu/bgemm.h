// The engine's bf16 GEMM (precision::bf16): a torch Linear weight rounded to bf16 once at load, the activation
// rows rounded to bf16 in the GEMM's prologue (after the optional LayerNorm A pass), products accumulated in
// fp32 and finished by gemm.h's epilogues. Kernels: AMX (tdpbf16ps, bgemm-amx.cpp) where the CPU has AMX-BF16
// and Linux grants the tile state, else AVX-512 BF16 (vdpbf16ps); a CPU with neither cannot run bf16.
#pragma once

#include "engines/cpu/gemm.h"
#include "engines/cpu/precision.h"

#include <string>

namespace rfdetr::cpu {

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
// (pack_weight_int8) or bf16. Until the bf16 kernels land, bf16 packs (and runs) the float form.
packed_weight pack_weight_as(precision p, const float * w, int n, int k, int ldw);

}  // namespace rfdetr::cpu
