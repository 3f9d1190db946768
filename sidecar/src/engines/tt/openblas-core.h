// OpenBLAS's kernels for the tt-host engine's matmuls: which core OpenBLAS chose, and, where it chose a generic one on
// a CPU it did not recognise, the restart that gives it the CPU's own (Debian's OpenBLAS 0.3.21 runs a Xeon of CPUID
// model 207 on its SSE3 "Prescott" kernels, ~5x slower than with OPENBLAS_CORETYPE=SkylakeX; SERVING.md).
#pragma once

namespace rfdetr {

// What the CPU can run, for the choice below.
struct cpu_vector_units {
    bool avx512_skx = false;  // AVX-512 F, CD, BW, DQ and VL: OpenBLAS's SkylakeX kernels
    bool avx2_fma   = false;  // AVX2 and FMA: its Haswell kernels
};
cpu_vector_units cpu_vector_units_here();

// The OPENBLAS_CORETYPE to restart with when OpenBLAS chose `chosen` (openblas_get_corename()) on a CPU with `units`:
// "SkylakeX" or "Haswell" where `chosen` is a core without AVX2 (OpenBLAS's fallback for a CPU it does not know) and
// the CPU has those units; nullptr where its choice stands (a core with AVX2 or better, or a CPU without them).
const char * openblas_core_upgrade(const char * chosen, const cpu_vector_units & units);

// The core OpenBLAS runs in this process (openblas_get_corename()).
const char * openblas_core();

// The tt-host engine's process setup (engine_entry::process_setup): unless OPENBLAS_CORETYPE is set (the operator's
// choice), where openblas_core_upgrade names a core, logs it on stderr, sets OPENBLAS_CORETYPE and re-executes the
// process with the same arguments (OpenBLAS picks its core when it is loaded, before main); the restarted process says
// which core OpenBLAS runs then. Returns if the exec fails, after saying so, to carry on with the generic kernels.
void openblas_process_setup(char ** argv);

}  // namespace rfdetr
