// The AVX-512 (F+BW) kernels: 16 values per instruction, each lane its own ascending fmaf chain. The width
// pass runs 16 image rows at once with lanes across rows (the rows transposed first), so its taps are plain
// loads: on the 2-core EPYC this took 4000x3000 -> 560 from 18 ms (lanes across outputs, one 4-byte gather
// per tap) to 11 ms of CPU. The transposed columns stay bytes and each tap widens its 16 bytes to floats as
// it loads them (a column is read by about two outputs): 0.76-0.80x the CPU of storing them as floats, which
// wrote and re-read 4x the bytes and spent a third of its shuffles extracting lanes; bench/preprocess.
// Scales up to ~1.9 (widths to 1054 for 560) take the narrow form instead: lanes across outputs from a
// per-row f32 copy through a two-register permute, with no transposes (640x480: 0.87 -> 0.65 ms of CPU, one
// thread, same run, loaded host).
#include "preprocess/kernels.h"

// GCC 12's avx512fintrin.h initialises _mm512_undefined_ps() from itself, which -Wmaybe-uninitialized flags
// inside every inlined conversion (a header false positive, GCC bug 105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#define RFDETR_AVX512 __attribute__((target("avx512f,avx512bw")))

namespace rfdetr {

namespace {

// Transposes 16 rows of 64 bytes (four 16x16 byte blocks, one per 128-bit lane) and stores each byte
// column as 16 bytes: scratch[(b0 + col) * 16 + k] = rows[k][b0 + col], for col < count (<= 64).
RFDETR_AVX512 void transpose_u8(const uint8_t * const * rows, size_t b0, size_t count, uint8_t * scratch) {
    const __mmask64 m = count >= 64 ? ~__mmask64{0} : ((__mmask64{1} << count) - 1);
    __m512i         r[16];
    for (int k = 0; k < 16; k++) {
        r[k] = _mm512_maskz_loadu_epi8(m, rows[k] + b0);  // masked: no read past a row's last byte
    }
    __m512i a[16];
    for (int k = 0; k < 8; k++) {  // a[2k + h]: bytes (row 2k, row 2k+1) for columns h*8 .. h*8+7
        a[2 * k]     = _mm512_unpacklo_epi8(r[2 * k], r[2 * k + 1]);
        a[2 * k + 1] = _mm512_unpackhi_epi8(r[2 * k], r[2 * k + 1]);
    }
    __m512i b[16];
    for (int p = 0; p < 4; p++) {  // b[4p + q]: rows 4p..4p+3 for columns q*4 .. q*4+3
        for (int h = 0; h < 2; h++) {
            b[4 * p + 2 * h]     = _mm512_unpacklo_epi16(a[4 * p + h], a[4 * p + 2 + h]);
            b[4 * p + 2 * h + 1] = _mm512_unpackhi_epi16(a[4 * p + h], a[4 * p + 2 + h]);
        }
    }
    __m512i c[16];
    for (int g = 0; g < 2; g++) {  // c[8g + m]: rows 8g..8g+7 for columns m*2, m*2+1
        for (int q = 0; q < 4; q++) {
            c[8 * g + 2 * q]     = _mm512_unpacklo_epi32(b[8 * g + q], b[8 * g + 4 + q]);
            c[8 * g + 2 * q + 1] = _mm512_unpackhi_epi32(b[8 * g + q], b[8 * g + 4 + q]);
        }
    }
    for (int mm = 0; mm < 8; mm++) {  // rows 0..15 for columns 2m (lo) and 2m+1 (hi), in each 128-bit lane
        const __m512i col[2] = {_mm512_unpacklo_epi64(c[mm], c[8 + mm]), _mm512_unpackhi_epi64(c[mm], c[8 + mm])};
        for (int h = 0; h < 2; h++) {
            const __m128i lanes[4] = {_mm512_extracti32x4_epi32(col[h], 0), _mm512_extracti32x4_epi32(col[h], 1),
                                      _mm512_extracti32x4_epi32(col[h], 2), _mm512_extracti32x4_epi32(col[h], 3)};
            for (int lane = 0; lane < 4; lane++) {
                const size_t cc = static_cast<size_t>(lane) * 16 + 2 * mm + h;
                if (cc < count) {
                    _mm_storeu_si128(reinterpret_cast<__m128i *>(scratch + (b0 + cc) * 16), lanes[lane]);
                }
            }
        }
    }
}

// How far ahead in each of the 16 rows the transpose asks for its input: the rows stream from memory (36 MB
// at 4000x3000) and the hardware does not keep 16 streams ahead. 256 and 512: 0.86-0.93x the CPU without
// (8 alternating runs, load 7-9); 1536: 0.96-0.97x.
constexpr size_t k_prefetch_bytes = 256;

// One transposed column: 16 rows' bytes as floats.
RFDETR_AVX512 inline __m512 column(const uint8_t * p) {
    return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p))));
}

// 16x16 float transpose: in[i] holds element k of column i at lane k; out[k] holds lane i = in[i][k].
RFDETR_AVX512 void transpose_16x16(__m512 * r) {
    __m512 t[16];
    for (int i = 0; i < 8; i++) {
        t[2 * i]     = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 4; i++) {
        r[4 * i]     = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], _MM_SHUFFLE(1, 0, 1, 0));
        r[4 * i + 1] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], _MM_SHUFFLE(3, 2, 3, 2));
        r[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], _MM_SHUFFLE(1, 0, 1, 0));
        r[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], _MM_SHUFFLE(3, 2, 3, 2));
    }
    for (int i = 0; i < 4; i++) {
        t[i]      = _mm512_shuffle_f32x4(r[i], r[4 + i], 0x88);
        t[4 + i]  = _mm512_shuffle_f32x4(r[i], r[4 + i], 0xdd);
        t[8 + i]  = _mm512_shuffle_f32x4(r[8 + i], r[12 + i], 0x88);
        t[12 + i] = _mm512_shuffle_f32x4(r[8 + i], r[12 + i], 0xdd);
    }
    for (int i = 0; i < 8; i++) {
        r[i]     = _mm512_shuffle_f32x4(t[i], t[8 + i], 0x88);
        r[8 + i] = _mm512_shuffle_f32x4(t[i], t[8 + i], 0xdd);
    }
}

// Lanes across 16 rows: every output's taps are contiguous vector loads from the transposed rows, and each
// lane's chain is that row's ascending fmaf chain; 16 outputs of a channel are transposed back to rows.
RFDETR_AVX512 void width_rows16_avx512(const width_plan & p, const uint8_t * const * rows, size_t row_bytes,
                                       uint8_t * bytes, float * r, float * g, float * b, size_t stride) {
    for (size_t b0 = 0; b0 < row_bytes; b0 += 64) {
        if (b0 + k_prefetch_bytes < row_bytes) {
            for (int k = 0; k < 16; k++) {
                _mm_prefetch(reinterpret_cast<const char *>(rows[k]) + b0 + k_prefetch_bytes, _MM_HINT_T0);
            }
        }
        transpose_u8(rows, b0, row_bytes - b0 < 64 ? row_bytes - b0 : 64, bytes);
    }
    const axis_weights & a       = p.axis;
    float * const        planes[3] = {r, g, b};
    for (int x0 = 0; x0 < p.out_padded; x0 += 16) {
        __m512 acc[3][16];
        // Two outputs at a time: six independent chains hide the FMA latency that three would expose.
        for (int k = 0; k < 16; k += 2) {
            __m512        v[2][3];
            const float * w[2];
            const uint8_t * src[2];
            int           n[2];
            for (int e = 0; e < 2; e++) {
                const int x = x0 + k + e;
                for (int ch = 0; ch < 3; ch++) {
                    v[e][ch] = _mm512_setzero_ps();
                }
                n[e]   = x < a.out_size ? a.count[x] : 0;
                w[e]   = x < a.out_size ? a.weights.data() + static_cast<size_t>(x) * a.max_taps : nullptr;
                src[e] = x < a.out_size ? bytes + static_cast<size_t>(a.start[x]) * 3 * 16 : nullptr;
            }
            const int both = n[0] < n[1] ? n[0] : n[1];
            int       j    = 0;
            for (; j < both; j++) {
                const __m512 w0 = _mm512_set1_ps(w[0][j]);
                const __m512 w1 = _mm512_set1_ps(w[1][j]);
                for (int ch = 0; ch < 3; ch++) {
                    v[0][ch] = _mm512_fmadd_ps(column(src[0] + (j * 3 + ch) * 16), w0, v[0][ch]);
                    v[1][ch] = _mm512_fmadd_ps(column(src[1] + (j * 3 + ch) * 16), w1, v[1][ch]);
                }
            }
            for (int e = 0; e < 2; e++) {
                for (int jj = j; jj < n[e]; jj++) {
                    const __m512 we = _mm512_set1_ps(w[e][jj]);
                    for (int ch = 0; ch < 3; ch++) {
                        v[e][ch] = _mm512_fmadd_ps(column(src[e] + (jj * 3 + ch) * 16), we, v[e][ch]);
                    }
                }
                for (int ch = 0; ch < 3; ch++) {
                    acc[ch][k + e] = v[e][ch];
                }
            }
        }
        for (int ch = 0; ch < 3; ch++) {
            transpose_16x16(acc[ch]);
            for (int k = 0; k < 16; k++) {
                _mm512_storeu_ps(planes[ch] + k * stride + x0, acc[ch][k]);
            }
        }
    }
}

// k_pick[c]: in every 128-bit lane, byte 4p is byte 3p + c of the lane (pixel p's channel c), the rest zero.
struct alignas(64) pick_table {
    int8_t b[64];
};
constexpr pick_table pick_make(int c) {
    pick_table t{};
    for (int i = 0; i < 64; i++) {
        t.b[i] = i % 4 == 0 ? static_cast<int8_t>((i % 16) / 4 * 3 + c) : int8_t{-1};
    }
    return t;
}
constexpr pick_table k_pick[3] = {pick_make(0), pick_make(1), pick_make(2)};

// One image row to three f32 channel rows (R, G, B; 16 pixels per step, the row's tail zero-filled): each
// 128-bit lane gets the 12 bytes of its 4 pixels (a dword permute), then one byte shuffle per channel puts
// each pixel's byte in the low byte of its dword, zeros above.
RFDETR_AVX512 void row_to_planes(const uint8_t * row, size_t row_bytes, float * planes, size_t plane) {
    const __m512i spread = _mm512_setr_epi32(0, 1, 2, 2, 3, 4, 5, 5, 6, 7, 8, 8, 9, 10, 11, 11);
    const __m512i pick[3] = {_mm512_load_si512(k_pick[0].b), _mm512_load_si512(k_pick[1].b),
                             _mm512_load_si512(k_pick[2].b)};
    for (size_t b0 = 0, x = 0; b0 < row_bytes; b0 += 48, x += 16) {
        const size_t    left = row_bytes - b0;
        const __mmask64 m    = left >= 48 ? (__mmask64{1} << 48) - 1 : (__mmask64{1} << left) - 1;
        const __m512i   v    = _mm512_permutexvar_epi32(spread, _mm512_maskz_loadu_epi8(m, row + b0));
        for (int c = 0; c < 3; c++) {
            _mm512_storeu_ps(planes + c * plane + x, _mm512_cvtepi32_ps(_mm512_shuffle_epi8(v, pick[c])));
        }
    }
}

// Lanes across 16 outputs of one channel: every tap of the block lies in a 32-pixel window of the channel's
// f32 row, so one two-register permute replaces the gather; each lane is its output's ascending fmaf chain.
RFDETR_AVX512 void width_row_narrow_avx512(const width_plan & p, const uint8_t * row, size_t row_bytes,
                                           float * planes, float * r, float * g, float * b) {
    const size_t plane = narrow_plane_floats(p);
    row_to_planes(row, row_bytes, planes, plane);
    float * const out[3] = {r, g, b};
    const int     blocks = p.out_padded / k_lanes;
    for (int bl = 0; bl < blocks; bl++) {
        const int32_t * idx = p.lane_index.data() + p.base[bl];
        const float *   wt  = p.weight.data() + p.base[bl];
        __m512          lo[3], hi[3], acc[3];
        for (int c = 0; c < 3; c++) {
            lo[c]  = _mm512_loadu_ps(planes + c * plane + p.narrow_base[bl]);
            hi[c]  = _mm512_loadu_ps(planes + c * plane + p.narrow_base[bl] + 16);
            acc[c] = _mm512_setzero_ps();
        }
        for (int j = 0; j < p.taps[bl]; j++) {
            const __m512i ix = _mm512_loadu_si512(idx + j * k_lanes);
            const __m512  w  = _mm512_loadu_ps(wt + j * k_lanes);
            for (int c = 0; c < 3; c++) {
                acc[c] = _mm512_fmadd_ps(_mm512_permutex2var_ps(lo[c], ix, hi[c]), w, acc[c]);
            }
        }
        for (int c = 0; c < 3; c++) {
            _mm512_storeu_ps(out[c] + bl * k_lanes, acc[c]);
        }
    }
}

RFDETR_AVX512 void height_row_avx512(const float * src, size_t stride, int n, const float * w, int out_size,
                                     float mean, float std, float * out) {
    const __m512 inv255 = _mm512_set1_ps(1.0f / 255.0f);
    const __m512 vmean  = _mm512_set1_ps(mean);
    const __m512 vstd   = _mm512_set1_ps(std);
    const __m512 vrcp   = _mm512_set1_ps(1.0f / std);
    // Rows are padded to a multiple of 16, so the last block's loads stay inside; its store is masked.
    for (int x = 0; x < out_size; x += 16) {
        __m512 acc = _mm512_setzero_ps();
        for (int j = 0; j < n; j++) {
            acc = _mm512_fmadd_ps(_mm512_loadu_ps(src + j * stride + x), _mm512_set1_ps(w[j]), acc);
        }
        // centred / std, correctly rounded, without the divide (a third of this pass at 640x480): q = c*(1/std)
        // is within an ulp, and one fma step (c - q*std exact, times 1/std, plus q) rounds to the quotient
        // itself for every float c in +-[2^-30, 1] and these three stds (checked exhaustively: preprocess-test
        // levels.avx512_normalise_equals_the_divide). centred is 0 or at least 2^-26 in size (scaled and mean
        // are floats near 0.2-1, so a difference under half of either is exact, Sterbenz) and below 0.6.
        const __m512    c    = _mm512_sub_ps(_mm512_mul_ps(acc, inv255), vmean);
        const __m512    q    = _mm512_mul_ps(c, vrcp);
        const __m512    v    = _mm512_fmadd_ps(_mm512_fnmadd_ps(q, vstd, c), vrcp, q);
        const int       left = out_size - x;
        const __mmask16 m    = left >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << left) - 1);
        _mm512_mask_storeu_ps(out + x, m, v);
    }
}

}  // namespace

const kernel_table k_kernels_avx512 = {nullptr, width_row_narrow_avx512, width_rows16_avx512, height_row_avx512};

}  // namespace rfdetr

#pragma GCC diagnostic pop
