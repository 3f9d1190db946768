// What a Tensix matmul-type op reads of its operands at --precision bf16 (the host implementation's model of the
// device numerics, tt-ops-host.cpp): fp32 operands through the 19-bit source registers (tf32), and the mantissa
// bits each math-fidelity phase consumes (tt-metal tech_reports/matrix_engine/matrix_engine.md).
#pragma once

#include "engines/tt/tt-ops.h"

#include <cstddef>
#include <utility>
#include <vector>

namespace rfdetr {
namespace tt {

constexpr int k_srca_bits = 4;  // SrcA (in1, the weights) mantissa bits per fidelity phase
constexpr int k_srcb_bits = 6;  // SrcB (in0, the activations) mantissa bits per fidelity phase

// tf32 round-to-nearest-even (10 mantissa bits): how the FPU's source registers hold an fp32 operand.
float tt_round_tf32(float x);

// The (in0, in1) operand pairs whose products a matmul-type op sums at bf16 precision: an fp32 operand (not
// *_bf16) is read as tf32, an fp32 in1 keeps 8 mantissa bits (SrcA's two phases of 4); then each fidelity's
// phases: LoFi hi(a)·hi(b), HiFi2 hi(a)·b, HiFi3 hi(a)·b + lo(a)·hi(b), HiFi4 a·b.
struct tt_operand_phases {
    std::vector<float>                                   a_full, b_full, a_hi, a_lo, b_hi;
    std::vector<std::pair<const float *, const float *>> phases;

    tt_operand_phases(const float * a, size_t na, bool a_bf16, const float * b, size_t nb, bool b_bf16, tt_fidelity fidelity);
};

}  // namespace tt
}  // namespace rfdetr
