// The baseline tree's preprocessor behind three plain functions, for bench-preprocess's A/B in one process:
// compiled against the baseline's headers with `rfdetr` renamed (CMakeLists.txt), so both versions link.
#include "preprocess/preprocess.h"

void * baseline_preprocessor_new(int out_size, int level, bool use_helper) {
    return new rfdetr::preprocessor(out_size, static_cast<rfdetr::simd_level>(level), use_helper);
}

void baseline_preprocessor_run(void * p, const uint8_t * rgb, int width, int height, float * out) {
    static_cast<rfdetr::preprocessor *>(p)->run(rgb, width, height, out);
}

void baseline_preprocessor_free(void * p) {
    delete static_cast<rfdetr::preprocessor *>(p);
}
