// The AMX kernel's fallback when Linux refuses the tile state: in a fresh child process whose arch_prctl
// ARCH_REQ_XCOMP_PERM is made to fail with EPERM (a seccomp filter, as a container policy would), the int8
// GEMM must pick the AVX-512 VNNI kernel, refuse "amx", and say why (qgemm_amx_note, which the engine puts in
// its device line). Needs a CPU with AMX-INT8; elsewhere a skip (a failure under RFDETR_REQUIRE_ALL=1).
#include "engines/cpu/qgemm.h"
#include "skip.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

namespace {

constexpr unsigned k_arch_req_xcomp_perm = 0x1023;

// arch_prctl(ARCH_REQ_XCOMP_PERM, ...) fails with EPERM from now on; everything else is allowed.
bool refuse_tile_permission() {
    sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_arch_prctl, 0, 3),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, args[0])),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, k_arch_req_xcomp_perm, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    sock_fprog prog{static_cast<unsigned short>(sizeof f / sizeof f[0]), f};
    return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 && prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) == 0;
}

// The child's body: exit status 0 when the fallback and its reason are right, else 1 with what was wrong.
int child_checks_fallback() {
    if (!refuse_tile_permission()) {
        std::fprintf(stderr, "could not install the seccomp filter: %s\n", std::strerror(errno));
        return 1;
    }
    const std::string isa = rfdetr::cpu::qgemm_isa();  // the first use: the permission request happens here
    std::fprintf(stderr, "kernel %s; note: %s\n", isa.c_str(), rfdetr::cpu::qgemm_amx_note().c_str());
    if (isa != "avx512vnni") return 1;
    if (rfdetr::cpu::qgemm_select_isa("amx")) return 1;
    return rfdetr::cpu::qgemm_amx_note().find("Operation not permitted") == std::string::npos;
}

TEST(cpu_qgemm_amx, refused_tile_state_falls_back_to_vnni_and_says_why) {
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("amx-int8") || !__builtin_cpu_supports("amx-tile")) {
        RFDETR_SKIP_OR_FAIL("this CPU has no AMX-INT8 (see /proc/cpuinfo's flags): nothing to fall back from");
    }
    // threadsafe: the child re-executes this binary, so the kernel choice is made afresh under the filter.
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    EXPECT_EXIT(std::exit(child_checks_fallback()), ::testing::ExitedWithCode(0),
                "kernel avx512vnni; note: AMX not used: Linux refused the tile state");
}

}  // namespace
