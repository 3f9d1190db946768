#include "engines/tt/tt-prep.h"

#include "engines/engine.h"
#include "model/schema.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace rfdetr {
namespace tt {

tt_dims tt_dims_of(const model_arch & a) {
    if (a.levels() != 1) {
        throw error("tt_dims_of: the TT graph runs single-level (P4) RF-DETR variants; this checkpoint's projector has " +
                    std::to_string(a.levels()) + " levels (RF-DETR-LargeDeprecated's P3+P5 is not built yet)");
    }
    tt_dims d;
    d.patch        = a.patch_size;
    d.grid         = a.grid();
    d.windows      = a.num_windows;
    d.window_size  = a.window_side();
    d.num_windows  = a.num_windows * a.num_windows;
    d.window_seq   = 1 + d.window_size * d.window_size;
    d.tokens       = d.num_windows * d.window_seq;
    d.patches      = d.grid * d.grid;
    d.patch_k      = 3 * d.patch * d.patch;
    d.patch_k_pad  = (d.patch_k + 31) / 32 * 32;
    d.hidden       = a.vit_hidden;
    d.pos_grid     = a.pos_grid;
    d.d_model      = a.d_model;
    d.cross_heads  = a.ca_heads;
    d.cross_points = a.dec_points;
    return d;
}

void tt_im2col(const tt_dims & d, const float * px, float * out) {
    const int S = d.input_size(), P = d.patch, WS = d.window_size;
    std::memset(out, 0, sizeof(float) * d.tokens * d.patch_k_pad);
    for (int w = 0; w < d.num_windows; ++w) {
        int wy = w / d.windows, wx = w % d.windows;
        for (int t = 0; t < WS * WS; ++t) {
            int     gy = wy * WS + t / WS, gx = wx * WS + t % WS;
            float * row = out + ((int64_t)w * d.window_seq + 1 + t) * d.patch_k_pad;
            for (int c = 0; c < 3; ++c) {
                for (int ky = 0; ky < P; ++ky) {
                    const float * src = px + ((int64_t)c * S + gy * P + ky) * S + gx * P;
                    std::memcpy(row + c * P * P + ky * P, src, sizeof(float) * P);
                }
            }
        }
    }
}

std::vector<float> tt_patch_kernel(const tt_dims & d, const float * conv_weight) {
    std::vector<float> k((size_t)d.patch_k_pad * d.hidden, 0.0f);
    for (int o = 0; o < d.hidden; ++o) {
        for (int i = 0; i < d.patch_k; ++i) {
            k[(size_t)i * d.hidden + o] = conv_weight[(size_t)o * d.patch_k + i];
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

std::vector<float> tt_pos_interp(const tt_dims & d, const float * pos) {
    const int G = d.pos_grid, O = d.grid, C = d.hidden;
    if (G == O) {
        return std::vector<float>(pos, pos + (size_t)(1 + O * O) * C);
    }
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

int tt_shaping_source_row(const tt_dims & d, int r) {
    int y = r / d.grid, x = r % d.grid;
    int w = (y / d.window_size) * d.windows + x / d.window_size;
    return w * d.window_seq + 1 + (y % d.window_size) * d.window_size + x % d.window_size;
}

std::vector<float> tt_cls_pos(const tt_dims & d, const float * cls, const float * pos_interp, const float * conv_bias) {
    std::vector<float> out((size_t)d.tokens * d.hidden);
    for (int w = 0; w < d.num_windows; ++w) {
        float * row0 = out.data() + (size_t)w * d.window_seq * d.hidden;
        for (int c = 0; c < d.hidden; ++c) {
            row0[c] = cls[c] + pos_interp[c];
        }
    }
    for (int r = 0; r < d.patches; ++r) {
        float *       o = out.data() + (size_t)tt_shaping_source_row(d, r) * d.hidden;
        const float * p = pos_interp + (size_t)(1 + r) * d.hidden;
        for (int c = 0; c < d.hidden; ++c) {
            o[c] = p[c] + conv_bias[c];
        }
    }
    return out;
}

std::vector<float> tt_shaping_perm(const tt_dims & d) {
    std::vector<float> p((size_t)d.patches * d.tokens, 0.0f);
    for (int r = 0; r < d.patches; ++r) {
        p[(size_t)r * d.tokens + tt_shaping_source_row(d, r)] = 1.0f;
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

std::vector<float> tt_grid_xy2(const tt_dims & d) {
    const int          n = 2 * d.cross_heads * d.cross_points;
    std::vector<float> t((size_t)4 * n, 0.0f);
    for (int j = 0; j < n; ++j) {
        t[(size_t)(j % 2) * n + j] = 2.0f;
    }
    return t;
}

std::vector<float> tt_grid_wh_half(const tt_dims & d) {
    const int          n = 2 * d.cross_heads * d.cross_points;
    std::vector<float> t((size_t)4 * n, 0.0f);
    for (int j = 0; j < n; ++j) {
        // loc = ref_xy + off / n_points * ref_wh * 0.5, so 2*loc carries off * ref_wh * (0.5 / n_points) * 2.
        t[(size_t)(2 + j % 2) * n + j] = 2.0f * 0.5f / (float)d.cross_points;
    }
    return t;
}

std::vector<float> tt_grid_neg1(const tt_dims & d) {
    return std::vector<float>(2 * d.cross_heads * d.cross_points, -1.0f);
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

std::vector<float> tt_proposals_xy0(const tt_dims & d) {
    std::vector<float> t((size_t)d.patches * 4, 0.0f);
    for (int y = 0; y < d.grid; ++y) {
        for (int x = 0; x < d.grid; ++x) {
            float * r = t.data() + ((size_t)y * d.grid + x) * 4;
            r[0]      = ((float)x + 0.5f) / (float)d.grid;
            r[1]      = ((float)y + 0.5f) / (float)d.grid;
        }
    }
    return t;
}

std::vector<float> tt_proposals_whd(const tt_dims & d) {
    return std::vector<float>((size_t)d.patches * 4, 0.05f);
}

}  // namespace tt
}  // namespace rfdetr
