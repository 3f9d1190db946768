// The kernel levels RFDETR_CPU_ISA names: one level picks the float GEMM's and the int8 GEMM's kernels
// together, so a newer CPU can run (and bench) the kernels an older one would.
#pragma once

#include <string>

namespace rfdetr::cpu {

// Runs the level's kernels from now on: "avx2" (float AVX2, int8 vpmaddubsw), "avxvnni" (float AVX2, int8
// AVX-VNNI), "avx512" (float AVX-512, int8 AVX-512 VNNI), "amx" (float AVX-512, int8 AMX). bf16 (bgemm.h) runs
// AVX512-BF16 at avx512, AMX-BF16 at amx (each where the CPU has it), and nothing below avx512. Returns "" on
// success, else what was wrong and what to do (nothing changes then).
std::string select_isa_level(const std::string & level);

}  // namespace rfdetr::cpu
