// Host-side preparation for the RF-DETR-base device graph: the per-image im2col layout and every
// input-independent table the graph uploads once (patch kernel, cls/pos constant, shaping permutation,
// sine and grid tables, proposals). Plain C++, compiled everywhere, tested against the per-stage goldens.
#pragma once

#include <cstdint>
#include <vector>

namespace rfdetr {
namespace tt {

constexpr int k_patch        = 14;    // DINOv2-S/14
constexpr int k_grid         = 40;    // 560 / 14
constexpr int k_windows      = 4;     // 4x4 windows
constexpr int k_window_size  = 10;    // 10x10 patches per window
constexpr int k_num_windows  = 16;
constexpr int k_window_seq   = 101;   // cls + 100 patches
constexpr int k_tokens       = 1616;  // 16 windows x 101
constexpr int k_patches      = 1600;  // 40 x 40
constexpr int k_patch_k      = 588;   // 3 x 14 x 14
constexpr int k_patch_k_pad  = 608;   // padded to a multiple of 32 (tile width); columns 588..607 are zero
constexpr int k_hidden       = 384;
constexpr int k_pos_grid     = 37;    // the checkpoint's position grid (1369 + cls = 1370)
constexpr int k_d_model      = 256;
constexpr int k_num_pos_feats = 128;
constexpr int k_cross_heads  = 16;
constexpr int k_cross_points = 2;

// pixel_values [3,560,560] -> [16,101,608]: window w = wy*4+wx, row 0 zero (the cls slot), row 1+py*10+px
// the patch at (wy*10+py, wx*10+px), columns c*196+ky*14+kx (the torch conv-kernel flattening), pad zero.
void tt_im2col(const float * pixel_values, float * out);

// Patch conv weight [384,3,14,14] -> the matmul kernel [608,384] (transposed, zero rows 588..607).
std::vector<float> tt_patch_kernel(const float * conv_weight);

// position_embeddings [1370,384] (cls + 37x37) -> [1601,384]: cls row kept, the grid interpolated to 40x40
// with torch's bicubic antialias kernel (Keys a=-0.5, truncated renormalised taps), width pass first, f32.
std::vector<float> tt_pos_interp(const float * pos_embed);

// The constant added to the patch matmul, [16,101,384]: cls + pos[0] on each window's row 0,
// pos_interp[patch] + conv_bias on the patch rows.
std::vector<float> tt_cls_pos(const float * cls_token, const float * pos_interp, const float * conv_bias);

// The 0/1 feature-shaping matrix P[1600,1616]: P @ X[1616,384] drops each window's cls row and un-partitions
// the windows into raster order (row y*40+x).
std::vector<float> tt_shaping_perm();
// The source row of each raster patch (what P selects): window*101 + 1 + py*10 + px.
int tt_shaping_source_row(int raster_index);

// [rows, cols] -> [cols, rows].
std::vector<float> tt_transpose(const float * w, int rows, int cols);

// Sine embedding table T[4,512]: block b (128 wide) carries coordinate (1,0,2,3)[b] times 2*pi/dim_t[j],
// dim_t[j] = 10000^(2*floor(j/2)/128) (f32 pow). With even512 (1 on even columns): sine = where(even, sin, cos)(ref @ T).
std::vector<float> tt_sine_table();
std::vector<float> tt_sine_even_mask();  // [512]

// Sampling-grid tables over the flat [300,64] offsets layout (column j = head*4 + point*2 + xy):
// grid = ref @ T_xy2 - 1 + offsets * (ref @ T_wh_half) = 2*ref_xy - 1 + offsets * 0.5 * ref_wh.
std::vector<float> tt_grid_xy2();      // [4,64]
std::vector<float> tt_grid_wh_half();  // [4,64]
std::vector<float> tt_grid_neg1();     // [64]

// Box refinement tables: boxes = where(mask_xy, d, exp(d)) * (ref @ T_wh4) + ref @ T_xy0.
std::vector<float> tt_mask_xy();  // [4] = 1,1,0,0
std::vector<float> tt_t_xy0();    // [4,4] diag(1,1,0,0)
std::vector<float> tt_t_wh4();    // [4,4]: [x,y,w,h] -> [w,h,w,h]

// Two-stage proposals as the refinement tables: prop_xy0 [1600,4] = ((x+0.5)/40, (y+0.5)/40, 0, 0),
// prop_whd [1600,4] = 0.05 everywhere.
std::vector<float> tt_proposals_xy0();
std::vector<float> tt_proposals_whd();

}  // namespace tt
}  // namespace rfdetr
