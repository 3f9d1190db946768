// Fused attention for one head: o = softmax(scale * q k^T) v, computed per block of queries with an
// online (flash-style) softmax over blocks of keys, on the GEMM's register-tile micro-kernel (gemm.h):
// the scores of a key block are a [keys, queries] tile in L1, exponentiated in place and multiplied into
// o straight away, so no [nq, nk] score matrix exists and nothing goes through a library call per tile.
// K and V are packed once per head (attention_pack_kv) and shared by every query block.
// Sizes are parameters (nq, nk, d); README.md, "Attention", has the numbers.
#pragma once

#include <cstddef>

namespace rfdetr::cpu {

// Query rows per block in the engine's global-attention tasks.
constexpr int k_attention_block = 64;

// Floats of a head's packed keys and values, and the packing itself: k [nk, d] (row stride ldk) into key panels,
// then v [nk, d] (row stride ldv) as contiguous rows. The p·v tiles read v one key row per k step: in place those
// rows are the qkv GEMM's (4.6 KB apart in the ViT), each step an L2 miss the stride prefetcher does not follow.
size_t attention_kv_floats(int nk, int d);
void   attention_pack_kv(const float * k, int ldk, const float * v, int ldv, int nk, int d, float * kvp);

// Floats of scratch attention_block needs for nq queries of width d.
size_t attention_scratch_floats(int nq, int d);

// o[nq, d] (ldo) = softmax(scale * q k^T) v for nq query rows against all nk packed keys and values (kvp). scale
// multiplies q k^T after the product (exact when it is a power of two, as the ViT's 1/8).
void attention_block(const float * q, int ldq, const float * kvp, int nk, float * o, int ldo, int nq, int d, float scale,
                     float * scratch);

// The whole head: packs k and v into scratch, then attention_block over query blocks of k_attention_block rows.
// scratch: attention_head_scratch_floats(nk, d) floats.
size_t attention_head_scratch_floats(int nk, int d);
void   attention_head(const float * q, int ldq, const float * k, int ldk, const float * v, int ldv, float * o, int ldo,
                      int nq, int nk, int d, float scale, float * scratch);

// The AVX2 path's two tiles (attention.cpp), exposed for their exact-result tests; attention_block calls them
// where the AVX2 kernel is active. Keys' rows 1..6 of one key panel kp ([d][mr]) against passes x 16 queries of
// qt ([d][ldq]): st (ldst) = scale * k.q, bm[j] = max(bm[j], those rows' column j). And o's rows 1..6 (ldo),
// columns [0, d) (d a multiple of 16) = (first ? 0 : o) + p v for p^T [nkb][ldp], v [nkb][ldv]. Sums in k order.
void attention_scores_tile256(int rows, int d, const float * kp, int mr, const float * qt, int ldq, int passes,
                              float scale, float * st, int ldst, float * bm);
void attention_pv_tile256(int rows, int nkb, const float * p, int ldp, const float * v, int ldv, int d, float * o,
                          int ldo, bool first);

}  // namespace rfdetr::cpu
