#include "engines/cpu/qgemm-amx.h"

// GCC 12 reports its own AVX-512 intrinsics' undefined operands as (maybe-)uninitialized (see qgemm.cpp).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include "engines/cpu/kernels.h"
#include "engines/cpu/qgemm-kernel.h"

#include <immintrin.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <utility>

#ifdef __linux__
#include <sys/syscall.h>
#include <unistd.h>
#endif

// Only this file's functions carry the AMX target; the rest of the build stays at its AVX2 baseline, so the
// binary runs on CPUs without AMX (the dispatch in qgemm.cpp never calls here there).
#define RFDETR_AMX __attribute__((target("avx512f,amx-tile,amx-int8")))

namespace rfdetr::cpu {

namespace {

// Linux's arch_prctl codes for the dynamically enabled XSAVE features (asm/prctl.h, Linux 5.16+) and the
// tile-data feature number (XFEATURE_XTILEDATA, arch/x86/include/asm/fpu/types.h), spelled out because
// older kernel headers lack them.
constexpr int k_arch_req_xcomp_perm = 0x1023;
constexpr int k_xfeature_xtiledata  = 18;

constexpr int k_tile_rows = 16;  // rows of an A or C tile (and k groups of a B tile)
constexpr int k_tile_b    = 64;  // bytes per tile row

// The tile instructions are asm statements that do not tell the compiler which memory they read or write:
// a compiler barrier orders them against the ordinary stores of the quantised rows and loads of the sums.
inline void memory_barrier() { __asm__ volatile("" ::: "memory"); }

// The 64-byte LDTILECFG operand, palette 1: eight tiles of 16 rows x 64 bytes (tmm0-3 the 2 x 2 int32 C
// block, tmm4-5 two A row tiles, tmm6-7 the two 16-column halves of a weight panel). Built as bytes
// (palette at 0, the u16 bytes per row of tile t at 16 + 2t, its rows at 48 + t): the intrinsic reads it
// through its own struct type, and stores through another struct type were dropped as dead under strict
// aliasing (the tiles stayed unconfigured: #UD on the first tilezero).
}  // namespace

RFDETR_AMX void amx_tiles_configure() {
    alignas(64) uint8_t cfg[64] = {};
    cfg[0] = 1;
    for (int t = 0; t < 8; ++t) {
        cfg[16 + 2 * t] = k_tile_b;  // little-endian u16, high byte 0
        cfg[48 + t]     = k_tile_rows;
    }
    memory_barrier();
    _tile_loadconfig(cfg);
}

namespace {

// The sums of one 32 x 32 block into tmm0-3 (tmm2-3 only when Two): over kt steps of 64 k, a[rows][64 bytes] (row
// stride lda bytes) x b (a weight panel, [16 k groups][32 columns][4] per step, rows of 128 bytes). They stay in
// the tiles until store_sums, so the caller can run the previous block's epilogue while these products are in flight.
template <bool Two>
RFDETR_AMX void block_sums(const uint8_t * a, int lda, const int8_t * b, int kt) {
    constexpr long k_panel_row = 4 * k_gemm_nr;  // bytes per k group of a weight panel
    _tile_zero(0);
    _tile_zero(1);
    if (Two) {
        _tile_zero(2);
        _tile_zero(3);
    }
    const long sa = lda;
    for (int q = 0; q < kt; ++q) {
        const uint8_t * ap = a + static_cast<size_t>(q) * k_tile_b;
        const int8_t *  bp = b + static_cast<size_t>(q) * k_tile_rows * k_panel_row;
        _tile_loadd(4, ap, sa);
        _tile_loadd(6, bp, k_panel_row);
        _tile_loadd(7, bp + k_tile_b, k_panel_row);
        _tile_dpbusd(0, 4, 6);
        _tile_dpbusd(1, 4, 7);
        if (Two) {
            _tile_loadd(5, ap + static_cast<size_t>(k_tile_rows) * lda, sa);
            _tile_dpbusd(2, 5, 6);
            _tile_dpbusd(3, 5, 7);
        }
    }
}

// t[32][32] int32 (rows 16-31 only when Two) = tmm0-3, block_sums' sums.
template <bool Two> RFDETR_AMX void store_sums(int32_t * t) {
    constexpr long k_t_row = 4 * 32;  // bytes per row of t
    memory_barrier();                 // the epilogue's reads of t's previous contents come first
    _tile_stored(0, t, k_t_row);
    _tile_stored(1, t + 16, k_t_row);
    if (Two) {
        _tile_stored(2, t + 16 * 32, k_t_row);
        _tile_stored(3, t + 16 * 32 + 16, k_t_row);
    }
    memory_barrier();
}

// quantize_row's numerics (the same max, the same x * (127 / max) rounded to nearest even and clamped, u8 =
// q + 128) on 16 floats per step, writing the row contiguously up to kpad bytes (q = 0 past k): the AMX A
// layout. quantize_row's AVX2 loop and its 4-byte group stores took 6 % of an AMX int8 forward (perf).
RFDETR_AVX512 float quantize_row_contiguous(const float * x, int k, uint8_t * dst, int kpad) {
    __m512 mx = _mm512_setzero_ps();
    for (int kk = 0; kk < k; kk += 16) {
        const __mmask16 m = k - kk >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << (k - kk)) - 1);
        mx                = _mm512_max_ps(mx, _mm512_abs_ps(_mm512_maskz_loadu_ps(m, x + kk)));
    }
    const float   amax = _mm512_reduce_max_ps(mx);
    const float   inv  = amax > 0.0f ? static_cast<float>(k_qa_max) / amax : 0.0f;
    const __m512  vinv = _mm512_set1_ps(inv);
    const __m512i lo = _mm512_set1_epi32(-k_qa_max), hi = _mm512_set1_epi32(k_qa_max), off = _mm512_set1_epi32(128);
    for (int kk = 0; kk < kpad; kk += 16) {  // kpad is a multiple of 64
        const int       left = k - kk;
        const __mmask16 m    = left >= 16 ? 0xFFFF : left <= 0 ? 0 : static_cast<__mmask16>((1u << left) - 1);
        __m512i q = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + kk), vinv));  // nearest even
        q         = _mm512_add_epi32(_mm512_min_epi32(_mm512_max_epi32(q, lo), hi), off);
        _mm_storeu_si128(reinterpret_cast<__m128i *>(dst + kk), _mm512_cvtepi32_epi8(q));
    }
    return amax / static_cast<float>(k_qa_max);
}

RFDETR_AVX512 void store_block(const int32_t * t, int rows, const float * sa, const float * sw, const int32_t * comp,
                               float * c, int ldc, int ncols, const epilogue & e) {
    const __mmask16 m0 = cols_mask_lo(ncols), m1 = cols_mask_hi(ncols);
    const __m512    sw0 = _mm512_loadu_ps(sw), sw1 = _mm512_loadu_ps(sw + 16);
    const __m512i   q0 = _mm512_loadu_si512(comp), q1 = _mm512_loadu_si512(comp + 16);
    for (int r = 0; r < rows; ++r) {
        dequant_row512(t + r * 32, sa[r], sw0, sw1, q0, q1, c + static_cast<size_t>(r) * ldc, e, m0, m1);
    }
}

}  // namespace

RFDETR_AMX void amx_tiles_release() { _tile_release(); }

bool amx_tile_permission(std::string & why) {
    static const std::pair<bool, std::string> state = []() -> std::pair<bool, std::string> {
#ifdef __linux__
        if (syscall(SYS_arch_prctl, k_arch_req_xcomp_perm, k_xfeature_xtiledata) != 0) {
            const int err = errno;
            return {false, std::string("AMX not used: Linux refused the tile state (arch_prctl(ARCH_REQ_XCOMP_PERM, "
                                       "XFEATURE_XTILEDATA): ") +
                               std::strerror(err) + "; a kernel before 5.16 or a seccomp policy blocking arch_prctl)"};
        }
        return {true, ""};
#else
        return {false, "AMX not used: only Linux's tile-state permission request is implemented"};
#endif
    }();
    why = state.second;
    return state.first;
}

bool amx_usable(std::string & why) {
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("amx-tile") || !__builtin_cpu_supports("amx-int8") || !__builtin_cpu_supports("avx512f")) {
        why.clear();
        return false;
    }
    return amx_tile_permission(why);
}

void qgemm_amx(int m, const float * a, int lda, const qweight & w, float * c, int ldc, const epilogue & e,
               float * scratch, const a_layernorm * ln) {
    const int k    = w.k;
    const int kt   = w.kqp / k_tile_rows;  // 64-k steps
    const int kpad = w.kqp * 4;            // bytes per quantised row (k padded to the steps)
    const int mc   = std::max(32, static_cast<int>(std::min<size_t>(1024, k_qa_block_bytes / kpad)) / 32 * 32);
    // scratch (gemm_scratch_floats(k) floats, >= 96 K + 28 k): [64-byte aligned u8 rows: mc * kpad][s_a: mc][LN row: k]
    uint8_t * qa = reinterpret_cast<uint8_t *>((reinterpret_cast<uintptr_t>(scratch) + 63) & ~uintptr_t{63});
    float *   sa = reinterpret_cast<float *>(qa + static_cast<size_t>(mc) * kpad);
    float *   row = sa + mc;
    const int panels = (w.n + k_gemm_nr - 1) / k_gemm_nr;
    // Two sum buffers: block b's tiles are stored into t[b & 1] while block b - 1's epilogue reads the other (the
    // epilogue runs after the next block's tile products are issued, so its vector work overlaps them).
    alignas(64) int32_t t[2][32 * 32];
    int                 cur = 0;
    struct {
        int      n = 0, i0 = 0, j0 = 0, ncols = 0;
        float *  c = nullptr;
        epilogue ep;
    } prev;
    bool have_prev = false;
    auto finish    = [&]() {
        store_block(t[cur ^ 1], prev.n, sa + prev.i0, w.scale.data() + prev.j0, w.comp.data() + prev.j0, prev.c, ldc,
                    prev.ncols, prev.ep);
    };
    amx_tiles_configure();
    for (int m0 = 0; m0 < m; m0 += mc) {
        // The row scales sa of the previous row block's last block are still to be read: its epilogue first.
        if (have_prev) finish();
        have_prev = false;
        const int rows = std::min(mc, m - m0);
        for (int i = 0; i < rows; ++i) {
            const float * x = a_row(a + static_cast<size_t>(m0 + i) * lda, row, k, ln);
            sa[i]           = quantize_row_contiguous(x, k, qa + static_cast<size_t>(i) * kpad, kpad);
        }
        // The last A tile's rows past `rows` are read but never stored: q = 0 keeps them defined.
        const int rows_tiled = (rows + k_tile_rows - 1) / k_tile_rows * k_tile_rows;
        std::memset(qa + static_cast<size_t>(rows) * kpad, 128, static_cast<size_t>(rows_tiled - rows) * kpad);
        memory_barrier();
        for (int i0 = 0; i0 < rows; i0 += 32) {
            const int n = std::min(32, rows - i0);
            for (int p = 0; p < panels; ++p) {
                const int j0 = p * k_gemm_nr;
                if (n > k_tile_rows) {
                    block_sums<true>(qa + static_cast<size_t>(i0) * kpad, kpad, w.panel(p), kt);
                } else {
                    block_sums<false>(qa + static_cast<size_t>(i0) * kpad, kpad, w.panel(p), kt);
                }
                if (have_prev) finish();
                if (n > k_tile_rows) {
                    store_sums<true>(t[cur]);
                } else {
                    store_sums<false>(t[cur]);
                }
                prev      = {n, i0, j0, std::min(k_gemm_nr, w.n - j0), c + static_cast<size_t>(m0 + i0) * ldc + j0,
                             epilogue_from_column(e, j0)};
                have_prev = true;
                cur ^= 1;
            }
        }
    }
    if (have_prev) finish();
    // Back to the initial tile state: the kernel then skips the 8 KB of tile data on every context switch.
    amx_tiles_release();
}

}  // namespace rfdetr::cpu
