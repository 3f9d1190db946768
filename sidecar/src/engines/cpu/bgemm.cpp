#include "engines/cpu/bgemm.h"

#include "engines/cpu/qgemm-amx.h"
#include "engines/cpu/qgemm.h"

#include <cstring>

namespace rfdetr::cpu {

namespace {

bool cpu_has_avx512bf16() {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512bf16");
}

// AMX-BF16 with the OS's tile permission; the A rows are rounded with vcvtne2ps2bf16 (AVX512-BF16).
bool cpu_has_amx_bf16() {
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("amx-tile") || !__builtin_cpu_supports("amx-bf16") || !cpu_has_avx512bf16()) {
        return false;
    }
    std::string why;
    return amx_tile_permission(why);
}

bool cpu_has(const char * name) {
    if (std::strcmp(name, "amx") == 0) return cpu_has_amx_bf16();
    if (std::strcmp(name, "avx512bf16") == 0) return cpu_has_avx512bf16();
    return std::strcmp(name, "none") == 0;
}

const char *& bactive() {
    static const char * a = bgemm_best_isa();
    return a;
}

}  // namespace

const char * bgemm_best_isa() {
    static const char * best = cpu_has_amx_bf16() ? "amx" : cpu_has_avx512bf16() ? "avx512bf16" : "none";
    return best;
}

const char * bgemm_isa() { return bactive(); }

bool bgemm_select_isa(const char * name) {
    for (const char * n : {"amx", "avx512bf16", "none"}) {
        if (std::strcmp(name, n) == 0 && cpu_has(n)) {
            bactive() = n;
            return true;
        }
    }
    return false;
}

packed_weight pack_weight_as(precision p, const float * w, int n, int k, int ldw) {
    return p == precision::int8 ? pack_weight_int8(w, n, k, ldw) : pack_weight(w, n, k, ldw);
}

bool bf16_supported(std::string & missing) {
    if (std::strcmp(bgemm_isa(), "none") != 0) {
        missing.clear();
        return true;
    }
    missing = std::strcmp(bgemm_best_isa(), "none") == 0
                  ? "AVX512-BF16 or AMX-BF16 instructions"
                  : "the bf16 kernels, which the RFDETR_CPU_ISA level excludes (avx512 or amx include them)";
    return false;
}

}  // namespace rfdetr::cpu
