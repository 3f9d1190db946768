// The plain-loop form of the bf16 GEMM's numerics (bgemm.h), used only by the tests: the rows rounded to bf16,
// the products of the packed bf16 weight summed in double, and the epilogue in scalar float.
#include "engines/cpu/bgemm.h"
#include "engines/cpu/kernels.h"

#include <vector>

namespace rfdetr::cpu {

void bgemm_ref(int m, const float * a, int lda, const bweight & w, float * c, int ldc, const epilogue & e) {
    const int          k = w.k;
    std::vector<float> ba(k);
    for (int i = 0; i < m; ++i) {
        const float * x = a + static_cast<size_t>(i) * lda;
        for (int kk = 0; kk < k; ++kk) ba[kk] = bf16_to_float(bf16_round(x[kk]));
        for (int j = 0; j < w.n; ++j) {
            const uint16_t * p   = w.panel(j / k_gemm_nr) + (j % k_gemm_nr) * 2;
            double           acc = 0.0;
            for (int kk = 0; kk < k; ++kk) {
                acc += static_cast<double>(ba[kk]) * bf16_to_float(p[static_cast<size_t>(kk / 2) * 2 * k_gemm_nr + kk % 2]);
            }
            const float t  = static_cast<float>(acc);
            float &     cv = c[static_cast<size_t>(i) * ldc + j];
            cv = ref::epilogue(e, j, t, cv);
        }
    }
}

}  // namespace rfdetr::cpu
