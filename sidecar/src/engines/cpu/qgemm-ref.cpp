// The plain-loop form of the int8 GEMM's numerics (qgemm.h), used only by the tests: the per-row
// quantisation, the exact integer products read from the packed weight, and the epilogue in scalar float.
#include "engines/cpu/kernels.h"
#include "engines/cpu/qgemm.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace rfdetr::cpu {

void qgemm_ref(int m, const float * a, int lda, const qweight & w, float * c, int ldc, const epilogue & e) {
    const int        k = w.k;
    std::vector<int> qa(k);
    for (int i = 0; i < m; ++i) {
        const float * x    = a + static_cast<size_t>(i) * lda;
        float         amax = 0.0f;
        for (int kk = 0; kk < k; ++kk) amax = std::max(amax, std::fabs(x[kk]));
        const float inv = amax > 0.0f ? static_cast<float>(k_qa_max) / amax : 0.0f;
        const float sa  = amax / static_cast<float>(k_qa_max);
        for (int kk = 0; kk < k; ++kk) qa[kk] = std::clamp(static_cast<int>(std::nearbyint(x[kk] * inv)), -k_qa_max, k_qa_max);
        for (int j = 0; j < w.n; ++j) {
            const int8_t * p   = w.panel(j / k_gemm_nr) + (j % k_gemm_nr) * 4;
            long long      acc = 0;
            for (int kk = 0; kk < k; ++kk) acc += static_cast<long long>(qa[kk]) * p[static_cast<size_t>(kk / 4) * 4 * k_gemm_nr + kk % 4];
            const float t  = static_cast<float>(static_cast<int32_t>(acc)) * (w.scale[j] * sa);
            float &     cv = c[static_cast<size_t>(i) * ldc + j];
            cv = ref::epilogue(e, j, t, cv);
        }
    }
}

}  // namespace rfdetr::cpu
