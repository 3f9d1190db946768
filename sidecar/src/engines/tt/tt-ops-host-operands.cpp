#include "engines/tt/tt-ops-host-operands.h"

#include <cstdint>
#include <cstring>

namespace rfdetr {
namespace tt {

float tt_round_tf32(float x) {
    uint32_t u;
    std::memcpy(&u, &x, 4);
    if ((u & 0x7f800000u) != 0x7f800000u) {
        u += 0xfffu + ((u >> 13) & 1u);
        u &= 0xffffe000u;
    }
    float r;
    std::memcpy(&r, &u, 4);
    return r;
}

tt_operand_phases::tt_operand_phases(const float * a, size_t na, bool a_bf16, const float * b, size_t nb, bool b_bf16,
                                     tt_fidelity fidelity)
    : a_full(a, a + na), b_full(b, b + nb) {
    if (!a_bf16) {
        for (float & v : a_full) v = tt_round_tf32(v);
    }
    if (!b_bf16) {
        for (float & v : b_full) v = tt_truncate_mantissa(tt_round_tf32(v), 2 * k_srca_bits);
    }
    auto hi = [](const std::vector<float> & src, int bits) {
        std::vector<float> r(src.size());
        for (size_t i = 0; i < src.size(); ++i) r[i] = tt_truncate_mantissa(src[i], bits);
        return r;
    };
    switch (fidelity) {
    case TT_FIDELITY_LOFI:
        a_hi = hi(a_full, k_srcb_bits);
        b_hi = hi(b_full, k_srca_bits);
        phases.push_back({a_hi.data(), b_hi.data()});
        break;
    case TT_FIDELITY_HIFI2:
        a_hi = hi(a_full, k_srcb_bits);
        phases.push_back({a_hi.data(), b_full.data()});
        break;
    case TT_FIDELITY_HIFI3:
        a_hi = hi(a_full, k_srcb_bits);
        b_hi = hi(b_full, k_srca_bits);
        a_lo.resize(na);
        for (size_t i = 0; i < na; ++i) a_lo[i] = a_full[i] - a_hi[i];
        phases.push_back({a_hi.data(), b_full.data()});
        phases.push_back({a_lo.data(), b_hi.data()});
        break;
    case TT_FIDELITY_HIFI4:
        phases.push_back({a_full.data(), b_full.data()});
        break;
    }
}

}  // namespace tt
}  // namespace rfdetr
