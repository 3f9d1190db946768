#include "engines/tt/tt-prep.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace rfdetr {
namespace tt {

void tt_im2col(const float * px, float * out) {
    constexpr int S = k_grid * k_patch;  // 560
    std::memset(out, 0, sizeof(float) * k_num_windows * k_window_seq * k_patch_k_pad);
    for (int w = 0; w < k_num_windows; ++w) {
        int wy = w / k_windows, wx = w % k_windows;
        for (int t = 0; t < k_window_size * k_window_size; ++t) {
            int     gy = wy * k_window_size + t / k_window_size, gx = wx * k_window_size + t % k_window_size;
            float * row = out + ((int64_t)w * k_window_seq + 1 + t) * k_patch_k_pad;
            for (int c = 0; c < 3; ++c) {
                for (int ky = 0; ky < k_patch; ++ky) {
                    const float * src = px + ((int64_t)c * S + gy * k_patch + ky) * S + gx * k_patch;
                    std::memcpy(row + c * k_patch * k_patch + ky * k_patch, src, sizeof(float) * k_patch);
                }
            }
        }
    }
}

std::vector<float> tt_patch_kernel(const float * conv_weight) {
    std::vector<float> k((size_t)k_patch_k_pad * k_hidden, 0.0f);
    for (int o = 0; o < k_hidden; ++o) {
        for (int i = 0; i < k_patch_k; ++i) {
            k[(size_t)i * k_hidden + o] = conv_weight[(size_t)o * k_patch_k + i];
        }
    }
    return k;
}

namespace {

// torch's antialiased bicubic filter (Keys, a = -0.5).
float cubic_aa(float x) {
    const float a = -0.5f;
    x             = std::fabs(x);
    if (x < 1.0f) {
        return ((a + 2.0f) * x - (a + 3.0f)) * x * x + 1.0f;
    }
    if (x < 2.0f) {
        return ((a * x - 5.0f * a) * x + 8.0f * a) * x - 4.0f * a;
    }
    return 0.0f;
}

struct aa_taps {
    std::vector<int>                xmin;
    std::vector<std::vector<float>> w;
};

// Per-output taps of torch's separable antialias resample (interp_size 4), f32 weights normalised by the sum.
aa_taps aa_bicubic_taps(int in, int out) {
    aa_taps t;
    float   scale   = (float)in / (float)out;
    float   support = scale >= 1.0f ? 2.0f * scale : 2.0f;
    float   invs    = scale >= 1.0f ? 1.0f / scale : 1.0f;
    for (int i = 0; i < out; ++i) {
        float center = scale * ((float)i + 0.5f);
        int   xmin   = std::max((int)(center - support + 0.5f), 0);
        int   xmax   = std::min((int)(center + support + 0.5f), in);
        std::vector<float> w;
        float              total = 0.0f;
        for (int j = 0; j < xmax - xmin; ++j) {
            float v = cubic_aa(((float)(j + xmin) - center + 0.5f) * invs);
            w.push_back(v);
            total += v;
        }
        for (float & v : w) {
            v = total != 0.0f ? v / total : v;
        }
        t.xmin.push_back(xmin);
        t.w.push_back(std::move(w));
    }
    return t;
}

}  // namespace

std::vector<float> tt_pos_interp(const float * pos) {
    const int G = k_pos_grid, O = k_grid, C = k_hidden;
    aa_taps   taps = aa_bicubic_taps(G, O);
    // width pass: [G rows][O cols][C]
    std::vector<float> tmp((size_t)G * O * C);
    for (int y = 0; y < G; ++y) {
        for (int x = 0; x < O; ++x) {
            float * o = tmp.data() + ((size_t)y * O + x) * C;
            for (int c = 0; c < C; ++c) {
                float acc = 0.0f;
                for (size_t j = 0; j < taps.w[x].size(); ++j) {
                    acc = std::fma(pos[(1 + (size_t)y * G + taps.xmin[x] + j) * C + c], taps.w[x][j], acc);
                }
                o[c] = acc;
            }
        }
    }
    std::vector<float> out((size_t)(1 + O * O) * C);
    std::memcpy(out.data(), pos, sizeof(float) * C);  // cls row kept
    for (int y = 0; y < O; ++y) {
        for (int x = 0; x < O; ++x) {
            float * o = out.data() + (1 + (size_t)y * O + x) * C;
            for (int c = 0; c < C; ++c) {
                float acc = 0.0f;
                for (size_t j = 0; j < taps.w[y].size(); ++j) {
                    acc = std::fma(tmp[((taps.xmin[y] + j) * O + x) * C + c], taps.w[y][j], acc);
                }
                o[c] = acc;
            }
        }
    }
    return out;
}

int tt_shaping_source_row(int r) {
    int y = r / k_grid, x = r % k_grid;
    int w = (y / k_window_size) * k_windows + x / k_window_size;
    return w * k_window_seq + 1 + (y % k_window_size) * k_window_size + x % k_window_size;
}

std::vector<float> tt_cls_pos(const float * cls, const float * pos_interp, const float * conv_bias) {
    std::vector<float> out((size_t)k_tokens * k_hidden);
    for (int w = 0; w < k_num_windows; ++w) {
        float * row0 = out.data() + (size_t)w * k_window_seq * k_hidden;
        for (int c = 0; c < k_hidden; ++c) {
            row0[c] = cls[c] + pos_interp[c];
        }
    }
    for (int r = 0; r < k_patches; ++r) {
        float *       o = out.data() + (size_t)tt_shaping_source_row(r) * k_hidden;
        const float * p = pos_interp + (size_t)(1 + r) * k_hidden;
        for (int c = 0; c < k_hidden; ++c) {
            o[c] = p[c] + conv_bias[c];
        }
    }
    return out;
}

std::vector<float> tt_shaping_perm() {
    std::vector<float> p((size_t)k_patches * k_tokens, 0.0f);
    for (int r = 0; r < k_patches; ++r) {
        p[(size_t)r * k_tokens + tt_shaping_source_row(r)] = 1.0f;
    }
    return p;
}

std::vector<float> tt_transpose(const float * w, int rows, int cols) {
    std::vector<float> t((size_t)rows * cols);
    for (int r = 0; r < rows; ++r) {
        for (int c = 0; c < cols; ++c) {
            t[(size_t)c * rows + r] = w[(size_t)r * cols + c];
        }
    }
    return t;
}

std::vector<float> tt_sine_table() {
    const int          F = k_num_pos_feats;
    std::vector<float> t((size_t)4 * 4 * F, 0.0f);
    const int          coord_of_block[4] = {1, 0, 2, 3};  // (y, x, w, h)
    const float        two_pi            = (float)(2.0 * M_PI);
    for (int b = 0; b < 4; ++b) {
        for (int j = 0; j < F; ++j) {
            float dim_t = std::pow(10000.0f, (float)(2 * (j / 2)) / (float)F);
            t[(size_t)coord_of_block[b] * 4 * F + b * F + j] = two_pi / dim_t;
        }
    }
    return t;
}

std::vector<float> tt_sine_even_mask() {
    std::vector<float> m(4 * k_num_pos_feats);
    for (size_t j = 0; j < m.size(); ++j) {
        m[j] = j % 2 == 0 ? 1.0f : 0.0f;
    }
    return m;
}

std::vector<float> tt_grid_xy2() {
    const int          n = 2 * k_cross_heads * k_cross_points;
    std::vector<float> t((size_t)4 * n, 0.0f);
    for (int j = 0; j < n; ++j) {
        t[(size_t)(j % 2) * n + j] = 2.0f;
    }
    return t;
}

std::vector<float> tt_grid_wh_half() {
    const int          n = 2 * k_cross_heads * k_cross_points;
    std::vector<float> t((size_t)4 * n, 0.0f);
    for (int j = 0; j < n; ++j) {
        // loc = ref_xy + off / n_points * ref_wh * 0.5, so 2*loc carries off * ref_wh * (0.5 / n_points) * 2.
        t[(size_t)(2 + j % 2) * n + j] = 2.0f * 0.5f / (float)k_cross_points;
    }
    return t;
}

std::vector<float> tt_grid_neg1() {
    return std::vector<float>(2 * k_cross_heads * k_cross_points, -1.0f);
}

std::vector<float> tt_mask_xy() {
    return {1.0f, 1.0f, 0.0f, 0.0f};
}

std::vector<float> tt_t_xy0() {
    std::vector<float> t(16, 0.0f);
    t[0 * 4 + 0] = 1.0f;
    t[1 * 4 + 1] = 1.0f;
    return t;
}

std::vector<float> tt_t_wh4() {
    std::vector<float> t(16, 0.0f);
    t[2 * 4 + 0] = 1.0f;
    t[3 * 4 + 1] = 1.0f;
    t[2 * 4 + 2] = 1.0f;
    t[3 * 4 + 3] = 1.0f;
    return t;
}

std::vector<float> tt_proposals_xy0() {
    std::vector<float> t((size_t)k_patches * 4, 0.0f);
    for (int y = 0; y < k_grid; ++y) {
        for (int x = 0; x < k_grid; ++x) {
            float * r = t.data() + ((size_t)y * k_grid + x) * 4;
            r[0]      = ((float)x + 0.5f) / (float)k_grid;
            r[1]      = ((float)y + 0.5f) / (float)k_grid;
        }
    }
    return t;
}

std::vector<float> tt_proposals_whd() {
    return std::vector<float>((size_t)k_patches * 4, 0.05f);
}

}  // namespace tt
}  // namespace rfdetr
