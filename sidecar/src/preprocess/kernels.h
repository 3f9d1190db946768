// The resize kernels behind preprocessor (preprocess.h), one set per instruction-set level, and the
// lane-major tap tables they read. Every level computes, per output, the same fmaf chain in the same order,
// so every level gives the reference's bits; the levels differ only in how many outputs run at once.
#pragma once

#include "preprocess/axis-weights.h"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace rfdetr {

enum class simd_level {
    SIMD_SCALAR,
    SIMD_AVX2,    // AVX2 + FMA: the build's baseline (CMakeLists.txt)
    SIMD_AVX512,  // AVX-512F + BW
};

const char * simd_level_name(simd_level l);
bool         simd_level_supported(simd_level l);  // this CPU can run it (__builtin_cpu_supports)
simd_level   simd_level_best();

constexpr int k_lanes = 16;  // outputs per block in the tables; AVX2 runs a block as two halves

// The width pass's taps, 16 outputs per block: block b has taps[b] taps; tap j of lane k reads the pixel
// at byte offset offset[base[b] + j*16 + k] of the row with weight weight[same]. Lanes past an output's
// own taps (and lanes past out_size) repeat a valid offset with weight 0: fmaf(a, 0, acc) == acc for the
// non-negative finite values of this resize, so padding leaves each chain's result unchanged.
struct width_plan {
    axis_weights         axis;  // the plain per-output taps (for kernels with lanes across rows)
    int                  in_size    = 0;
    int                  out_size   = 0;
    int                  out_padded = 0;  // out_size rounded up to 16
    std::vector<int32_t> taps;
    std::vector<int32_t> base;
    std::vector<int32_t> offset;
    std::vector<float>   weight;
    // The narrow form of the same taps, for scales up to ~1.8 (640 -> 560): block b's outputs read only the
    // 32 pixels from narrow_base[b], so tap j of lane k is pixel narrow_base[b] + lane_index[base[b] + j*16 + k]
    // of a channel's f32 row: a two-register permute instead of a gather. `narrow` is set when every block fits.
    bool                 narrow = false;
    std::vector<int32_t> narrow_base;
    std::vector<int32_t> lane_index;
};

constexpr int k_narrow_window = 32;  // pixels one block of the narrow form may span

width_plan width_plan_make(const axis_weights & a);

// Per level. width_row: one image row (u8 RGB, readable up to 4 bytes past its last pixel's first byte)
// -> three f32 rows of out_padded values. height_row: one output row of one channel from `n` consecutive
// intermediate rows (`src`, row stride `stride` floats) with weights w[0..n), normalised, `out_size` floats out.
//
// A level has exactly one of width_row and width_rows16 (the other is null). width_rows16: 16 image rows at
// once with lanes across rows, so the taps are plain loads instead of gathers. `rows[k]` is image row k (row_bytes = width*3 readable bytes);
// `scratch` holds width*3*16 bytes; output row k of each plane is at r/g/b + k*stride (out_padded values).
//
// width_row_narrow (null where a level has none; used only when p.narrow): one image row (row_bytes readable)
// through `planes`, 3 channel rows of narrow_plane_floats(p) floats, to r/g/b as width_row.
struct kernel_table {
    void (*width_row)(const width_plan & p, const uint8_t * row, float * r, float * g, float * b);
    void (*width_row_narrow)(const width_plan & p, const uint8_t * row, size_t row_bytes, float * planes, float * r,
                             float * g, float * b);
    void (*width_rows16)(const width_plan & p, const uint8_t * const * rows, size_t row_bytes, uint8_t * scratch,
                         float * r, float * g, float * b, size_t stride);
    void (*height_row)(const float * src, size_t stride, int n, const float * w, int out_size, float mean,
                       float std, float * out);
};

// One channel row of the narrow form's f32 copy: the width rounded up to 16, plus a window of slack.
inline size_t narrow_plane_floats(const width_plan & p) {
    return static_cast<size_t>((p.in_size + 15) / 16 * 16 + k_narrow_window);
}

const kernel_table & kernels_for(simd_level l);  // throws std::invalid_argument when this CPU cannot run l

extern const kernel_table k_kernels_scalar;
extern const kernel_table k_kernels_avx2;
extern const kernel_table k_kernels_avx512;

// height_row's std: the AVX-512 level divides by a reciprocal and an fma step, proved equal to the divide
// for the k_imagenet_std values only (preprocess-test levels.avx512_normalise_equals_the_divide); a new std
// needs that test run on it.
//
// The normalisation of one value, shared so every level spells it the same way (no FMA: built with
// -ffp-contract=off).
inline float normalise_value(float acc, float mean, float std) {
    const float inv255 = 1.0f / 255.0f;
    const float scaled = acc * inv255;
    const float centred = scaled - mean;
    return centred / std;
}

}  // namespace rfdetr
