#include "engines/tt/openblas-core.h"

#include <cblas.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unistd.h>

namespace rfdetr {

cpu_vector_units cpu_vector_units_here() {
    cpu_vector_units u;
    u.avx512_skx = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
                   __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
                   __builtin_cpu_supports("avx512vl");
    u.avx2_fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    return u;
}

const char * openblas_core_upgrade(const char * chosen, const cpu_vector_units & units) {
    // OpenBLAS's x86-64 cores whose kernels stop short of AVX2 (its dynamic.c names); every other name (Haswell, Zen,
    // SkylakeX, Cooperlake, SapphireRapids, ...) is a core OpenBLAS matched to the CPU, and stands.
    static const char * const k_generic[] = {"Unknown", "Katmai",  "Coppermine", "Northwood", "Prescott",
                                             "Banias",  "Atom",    "Core2",      "Penryn",    "Dunnington",
                                             "Nehalem", "Athlon",  "Opteron",    "Opteron(SSE3)",
                                             "Barcelona", "Bobcat", "Sandybridge", "Bulldozer", "Nano"};
    if (!chosen) return nullptr;
    bool generic = false;
    for (const char * g : k_generic) generic = generic || std::strcmp(chosen, g) == 0;
    if (!generic) return nullptr;
    if (units.avx512_skx) return "SkylakeX";
    if (units.avx2_fma) return "Haswell";
    return nullptr;
}

const char * openblas_core() { return openblas_get_corename(); }

void openblas_process_setup(char ** argv) {
    if (const char * was = std::getenv("RFDETR_OPENBLAS_RESTART")) {  // the process restarted below
        std::fprintf(stderr, "rfdetr-sidecar: restarted: OpenBLAS runs its %s kernels (it had chosen %s)\n",
                     openblas_core(), was);
        unsetenv("RFDETR_OPENBLAS_RESTART");
        return;
    }
    if (std::getenv("OPENBLAS_CORETYPE")) return;
    const char * chosen = openblas_core();
    const char * better = openblas_core_upgrade(chosen, cpu_vector_units_here());
    if (!better) return;
    std::fprintf(stderr,
                 "rfdetr-sidecar: OpenBLAS did not recognise this CPU and chose its generic %s kernels for tt-host's "
                 "matmuls; restarting with OPENBLAS_CORETYPE=%s, the kernels this CPU's vector units run (set "
                 "OPENBLAS_CORETYPE to choose the core yourself)\n",
                 chosen, better);
    std::fflush(stderr);
    if (setenv("OPENBLAS_CORETYPE", better, 1) == 0 && setenv("RFDETR_OPENBLAS_RESTART", chosen, 1) == 0) {
        execv("/proc/self/exe", argv);
    }
    std::fprintf(stderr, "rfdetr-sidecar: cannot restart (%s); carrying on with OpenBLAS's %s kernels\n",
                 std::strerror(errno), chosen);
    unsetenv("OPENBLAS_CORETYPE");
    unsetenv("RFDETR_OPENBLAS_RESTART");
}

}  // namespace rfdetr
