#include "engines/cpu/isa-level.h"

#include "engines/cpu/bgemm.h"
#include "engines/cpu/gemm.h"
#include "engines/cpu/qgemm.h"

namespace rfdetr::cpu {

std::string select_isa_level(const std::string & level) {
    struct entry {
        const char *name, *f32, *i8;
    };
    static const entry levels[] = {
        {"avx2", "avx2", "avx2"}, {"avxvnni", "avx2", "avxvnni"}, {"avx512", "avx512", "avx512vnni"}, {"amx", "avx512", "amx"}};
    for (const entry & l : levels) {
        if (level != l.name) continue;
        const std::string f32 = gemm_isa(), i8 = qgemm_isa();
        if (!gemm_select_isa(l.f32) || !qgemm_select_isa(l.i8)) {
            gemm_select_isa(f32.c_str());
            qgemm_select_isa(i8.c_str());
            std::string msg = "RFDETR_CPU_ISA=" + level + ": this CPU lacks the " + level + " kernels";
            if (level == "amx" && !qgemm_amx_note().empty()) msg += " (" + qgemm_amx_note() + ")";
            return msg + "; unset it or pick a lower level (avx2, avxvnni, avx512)";
        }
        // bf16 (bgemm.h) follows the level without failing it: none below avx512, AVX512-BF16 at avx512, AMX-BF16
        // (else AVX512-BF16) at amx, each only where the CPU has it.
        const bool amx = level == "amx", avx512 = amx || level == "avx512";
        if (!(amx && bgemm_select_isa("amx")) && !(avx512 && bgemm_select_isa("avx512bf16"))) bgemm_select_isa("none");
        return "";
    }
    return "RFDETR_CPU_ISA='" + level +
           "' is not a kernel level; expected avx2, avxvnni or avx512, or amx on a CPU with AMX-INT8 (or unset)";
}

}  // namespace rfdetr::cpu
