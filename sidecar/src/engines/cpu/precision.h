// The arithmetic the cpu engine's weight GEMMs run: fp32 (the default), bf16 (bgemm.h: weights packed to bf16 at
// load, activations rounded to bf16, fp32 accumulation) or int8 (qgemm.h). One value chosen at load for the model.
#pragma once

#include <string>

namespace rfdetr::cpu {

enum class precision { fp32, bf16, int8 };

// "fp32", "bf16", "int8": the names --precision, the registry and the hello use.
inline const char * to_string(precision p) {
    switch (p) {
        case precision::fp32: return "fp32";
        case precision::bf16: return "bf16";
        case precision::int8: return "int8";
    }
    return "fp32";
}

// The precision named `s` into `p`; false (p unchanged) for any other text.
inline bool precision_from_string(const std::string & s, precision & p) {
    for (precision q : {precision::fp32, precision::bf16, precision::int8}) {
        if (s == to_string(q)) {
            p = q;
            return true;
        }
    }
    return false;
}

}  // namespace rfdetr::cpu
