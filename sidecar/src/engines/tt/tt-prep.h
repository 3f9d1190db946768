// Host-side preparation for the RF-DETR device graph: the per-image im2col layout and every
// input-independent table the graph uploads once (patch kernel, cls/pos constant, shaping permutation,
// sine and grid tables, proposals), sized by the loaded variant's dims. Plain C++, compiled everywhere,
// tested against the per-stage goldens.
#pragma once

#include <cstdint>
#include <vector>

namespace rfdetr {

struct model_arch;

namespace tt {

constexpr int k_num_pos_feats = 128;  // sine features per box coordinate (d_model 256 = 2 x 128 for x, y)

// The sizes the graph and its tables take from the checkpoint's variant (Base: patch 14, grid 40, 4x4
// windows of 10x10, 1616 tokens, pos grid 37; Nano: patch 16, grid 24, 2x2 windows of 12x12, 580 tokens).
struct tt_dims {
    int patch       = 0;  // ViT patch side
    int grid        = 0;  // patches per image side
    int windows     = 0;  // windows per side
    int window_size = 0;  // patches per window side
    int num_windows = 0;  // windows^2
    int window_seq  = 0;  // cls + window_size^2
    int tokens      = 0;  // num_windows * window_seq
    int patches     = 0;  // grid^2
    int patch_k     = 0;  // 3 * patch^2
    int patch_k_pad = 0;  // padded to a multiple of 32 (tile width); the extra columns are zero
    int hidden      = 0;  // ViT width
    int pos_grid    = 0;  // the checkpoint's position grid side (interpolated to grid when different)
    int d_model     = 0;
    int cross_heads = 0;
    int cross_points = 0;
    int input_size() const { return grid * patch; }
};
tt_dims tt_dims_of(const model_arch & arch);

// pixel_values [3,S,S] -> [windows^2, window_seq, patch_k_pad] (Base [16,101,608]): window w = wy*windows+wx,
// row 0 zero (the cls slot), row 1+py*ws+px the patch at (wy*ws+py, wx*ws+px), columns c*p^2+ky*p+kx (the
// torch conv-kernel flattening), pad zero.
void tt_im2col(const tt_dims & d, const float * pixel_values, float * out);

// Patch conv weight [384,3,14,14] -> the matmul kernel [608,384] (transposed, zero rows 588..607).
std::vector<float> tt_patch_kernel(const tt_dims & d, const float * conv_weight);

// position_embeddings [1+pos_grid^2, hidden] -> [1+grid^2, hidden]: cls row kept, the grid interpolated to
// grid x grid with torch's bicubic antialias kernel (Keys a=-0.5, truncated renormalised taps), width pass first,
// f32 (Base 37 -> 40); used as is when pos_grid == grid (Nano..Large at their native resolution, as upstream).
std::vector<float> tt_pos_interp(const tt_dims & d, const float * pos_embed);

// The constant added to the patch matmul, [16,101,384]: cls + pos[0] on each window's row 0,
// pos_interp[patch] + conv_bias on the patch rows.
std::vector<float> tt_cls_pos(const tt_dims & d, const float * cls_token, const float * pos_interp, const float * conv_bias);

// The 0/1 feature-shaping matrix P[1600,1616]: P @ X[1616,384] drops each window's cls row and un-partitions
// the windows into raster order (row y*40+x).
std::vector<float> tt_shaping_perm(const tt_dims & d);
// The source row of each raster patch (what P selects): window*101 + 1 + py*10 + px.
int tt_shaping_source_row(const tt_dims & d, int raster_index);

// [rows, cols] -> [cols, rows].
std::vector<float> tt_transpose(const float * w, int rows, int cols);

// Sine embedding table T[4,512]: block b (128 wide) carries coordinate (1,0,2,3)[b] times 2*pi/dim_t[j],
// dim_t[j] = 10000^(2*floor(j/2)/128) (f32 pow). With even512 (1 on even columns): sine = where(even, sin, cos)(ref @ T).
std::vector<float> tt_sine_table();
std::vector<float> tt_sine_even_mask();  // [512]

// Sampling-grid tables over the flat [300,64] offsets layout (column j = head*4 + point*2 + xy):
// grid = ref @ T_xy2 - 1 + offsets * (ref @ T_wh_half) = 2*ref_xy - 1 + offsets * 0.5 * ref_wh.
std::vector<float> tt_grid_xy2(const tt_dims & d);      // [4,64] for Base
std::vector<float> tt_grid_wh_half(const tt_dims & d);  // [4,64]
std::vector<float> tt_grid_neg1(const tt_dims & d);     // [64]

// Box refinement tables: boxes = where(mask_xy, d, exp(d)) * (ref @ T_wh4) + ref @ T_xy0.
std::vector<float> tt_mask_xy();  // [4] = 1,1,0,0
std::vector<float> tt_t_xy0();    // [4,4] diag(1,1,0,0)
std::vector<float> tt_t_wh4();    // [4,4]: [x,y,w,h] -> [w,h,w,h]

// Two-stage proposals as the refinement tables: prop_xy0 [1600,4] = ((x+0.5)/40, (y+0.5)/40, 0, 0),
// prop_whd [1600,4] = 0.05 everywhere.
std::vector<float> tt_proposals_xy0(const tt_dims & d);
std::vector<float> tt_proposals_whd(const tt_dims & d);

}  // namespace tt
}  // namespace rfdetr
