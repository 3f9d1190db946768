// Which kernel level this CPU runs, and the width pass's lane-major tap tables.
#include "preprocess/kernels.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace rfdetr {

const char * simd_level_name(simd_level l) {
    switch (l) {
        case simd_level::SIMD_SCALAR: return "scalar";
        case simd_level::SIMD_AVX2: return "avx2";
        case simd_level::SIMD_AVX512: return "avx512";
    }
    return "unknown";
}

bool simd_level_supported(simd_level l) {
    __builtin_cpu_init();
    switch (l) {
        case simd_level::SIMD_SCALAR: return true;
        case simd_level::SIMD_AVX2: return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
        case simd_level::SIMD_AVX512: return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
    }
    return false;
}

simd_level simd_level_best() {
    for (simd_level l : {simd_level::SIMD_AVX512, simd_level::SIMD_AVX2}) {
        if (simd_level_supported(l)) {
            return l;
        }
    }
    return simd_level::SIMD_SCALAR;
}

const kernel_table & kernels_for(simd_level l) {
    if (!simd_level_supported(l)) {
        throw std::invalid_argument(std::string("preprocess: this CPU cannot run the ") + simd_level_name(l) +
                                    " kernels; use simd_level_best()");
    }
    switch (l) {
        case simd_level::SIMD_SCALAR: return k_kernels_scalar;
        case simd_level::SIMD_AVX2: return k_kernels_avx2;
        case simd_level::SIMD_AVX512: return k_kernels_avx512;
    }
    return k_kernels_scalar;
}

width_plan width_plan_make(const axis_weights & a) {
    width_plan p;
    p.axis          = a;
    p.in_size       = a.in_size;
    p.out_size      = a.out_size;
    p.out_padded    = (a.out_size + k_lanes - 1) / k_lanes * k_lanes;
    const int blocks = p.out_padded / k_lanes;
    p.narrow         = true;
    for (int bl = 0; bl < blocks; bl++) {
        int taps = 1;
        for (int k = 0; k < k_lanes; k++) {
            const int x = bl * k_lanes + k;
            if (x < a.out_size) {
                taps = std::max(taps, static_cast<int>(a.count[x]));
            }
        }
        p.taps.push_back(taps);
        p.base.push_back(static_cast<int32_t>(p.offset.size()));
        const int32_t first = a.start[bl * k_lanes];  // starts ascend: the block's lowest pixel
        p.narrow_base.push_back(first);
        for (int j = 0; j < taps; j++) {
            for (int k = 0; k < k_lanes; k++) {
                const int x = bl * k_lanes + k;
                int32_t   off = 0;
                float     w   = 0.0f;
                if (x < a.out_size) {
                    const int n = a.count[x];
                    off         = (a.start[x] + std::min(j, n - 1)) * 3;
                    w           = j < n ? a.weights[static_cast<size_t>(x) * a.max_taps + j] : 0.0f;
                }
                p.offset.push_back(off);
                p.weight.push_back(w);
                const int32_t lane = x < a.out_size ? off / 3 - first : 0;
                p.narrow           = p.narrow && lane < k_narrow_window;
                p.lane_index.push_back(lane);
            }
        }
    }
    return p;
}

}  // namespace rfdetr
