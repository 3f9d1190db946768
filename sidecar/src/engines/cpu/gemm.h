// The engine's GEMM: weights repacked once at load into 32-column panels, activations packed per call
// into row panels, one register-tile micro-kernel (AVX-512 where the CPU has it, else AVX2; chosen at
// run time) whose epilogue applies the bias, ReLU/GELU or LayerScale+residual on the tile before it is
// stored, and whose A pass can apply a LayerNorm. Single-threaded: callers split rows over the pool.
// Sizes are parameters everywhere (no model constants). README.md, "GEMM", has the numbers that chose it.
#pragma once

#include <cstddef>
#include <memory>
#include <new>
#include <vector>

namespace rfdetr::cpu {

constexpr int k_gemm_nr = 32;  // columns per weight panel (two 16-float vectors)
// Every output's reduction is summed in chunks of k_gemm_chunk terms (fused multiply-adds in k order from zero),
// the chunk totals added to the running one in order: blocked summation, whose rounding grows with
// k_gemm_chunk + k / k_gemm_chunk rather than with k (fc2's k is 1536). Both kernels and gemm_tile keep this order
// exactly, so their results are bit for bit what that order gives (tests/cpu/gemm-test.cpp).
constexpr int k_gemm_chunk = 128;

// Rows per micro-tile of the kernel this CPU runs (14 with AVX-512, 6 with AVX2).
int gemm_mr();
// "avx512" or "avx2": the kernel gemm_mr() belongs to.
const char * gemm_isa();
// Test hook: run the "avx2" or "avx512" kernel from now on; false (and no change) if this CPU lacks it.
bool gemm_select_isa(const char * name);

struct qweight;  // qgemm.h
struct bweight;  // bgemm.h

// std::allocator on 64-byte boundaries: a weight panel's row is two 64-byte vectors, and std::vector's 16-byte
// alignment made every one of them a cache-line-split load (README.md, "GEMM").
template <class T> struct cache_line_allocator {
    using value_type = T;
    cache_line_allocator() = default;
    template <class U> cache_line_allocator(const cache_line_allocator<U> &) {}
    T *  allocate(size_t n) { return static_cast<T *>(::operator new(n * sizeof(T), std::align_val_t{64})); }
    void deallocate(T * p, size_t) { ::operator delete(p, std::align_val_t{64}); }
    template <class U> bool operator==(const cache_line_allocator<U> &) const { return true; }
    template <class U> bool operator!=(const cache_line_allocator<U> &) const { return false; }
};

// A torch Linear weight [n, k] (row stride ldw) as ceil(n/32) panels of [k][32] floats, zero-padded; or,
// when q is set (the int8 precision), only its int8 form (data empty) and gemm_packed runs qgemm_packed; or,
// when b is set (bf16), only its bf16 form and gemm_packed runs bgemm_packed.
struct packed_weight {
    std::vector<float, cache_line_allocator<float>> data;
    std::shared_ptr<const qweight>                  q;
    std::shared_ptr<const bweight> b;
    int                            n = 0, k = 0;
    const float *      panel(int p) const { return data.data() + static_cast<size_t>(p) * k * k_gemm_nr; }
};
packed_weight pack_weight(const float * w, int n, int k, int ldw);

// What happens to a finished tile t = sum_k a[r,k] b[k,j] before it is stored into c.
enum class epi {
    store,           // c = alpha * t
    accumulate,      // c = c + t
    bias,            // c = t + bias
    bias_relu,       // c = relu(t + bias)
    bias_gelu,       // c = gelu(t + bias), exact-erf form (kernels.h's erf)
    bias_scale_add,  // c = (t + bias) * scale + c   (LayerScale + residual, the reference's rounding order)
    bias_residual,   // c = (t + bias) + c
    bias_gelu_add,   // c = gelu(t + bias) + c   (RF-DETR Seg's depthwise-conv block: x + GELU(pwconv))
};
struct epilogue {
    epi           kind  = epi::store;
    const float * bias  = nullptr;  // [n]
    const float * scale = nullptr;  // [n]
    float         alpha = 1.0f;
};

// Optional transform of A's rows while they are packed: y = LN(x) * gamma + beta (kernels.h's layernorm).
struct a_layernorm {
    const float * gamma = nullptr;
    const float * beta  = nullptr;
    float         eps   = 0.0f;
};

// How an m-row GEMM is split over a pool of `threads`: gemm_row_parts parts (four per thread, taken dynamically,
// whole micro-tiles of gemm_mr() rows, at least two tiles each); part p is rows [r0, r1). Smaller parts cost the
// GEMM nothing (it streams a weight once per row block of at most 252 rows anyway), and a thread the scheduler
// preempts holds up a quarter of what it held with 2 parts per thread.
int  gemm_row_parts(int m, int threads);
void gemm_row_range(int m, int parts, int p, int & r0, int & r1);

// Floats of per-thread scratch gemm_packed needs for reduction depth k.
size_t gemm_scratch_floats(int k);

// c[m, n] (ldc) = epi(LN?(a)[m, k] (lda) * W^T). scratch: gemm_scratch_floats(w.k) floats.
void gemm_packed(int m, const float * a, int lda, const packed_weight & w, float * c, int ldc, const epilogue & e,
                 float * scratch, const a_layernorm * ln = nullptr);

// A 3x3, pad 1, stride 1 convolution of the pixel-major map x [h*w, ld] (ch channels) as gemm_packed over
// im2col_3x3's rows for the m output pixels p0.. (row-major), without the im2col buffer: c[m, n] (ldc) =
// epi(im2col(x)[p0 .. p0+m) * W^T) with W packed from the conv weight [n][ch][3][3] (k = 9 ch), bit for bit
// gemm_packed's result on those rows. fp32 weights only (w.q, w.b unset). scratch: gemm_scratch_floats(9 ch).
void gemm_conv3x3(const float * x, int ld, int h, int w, int ch, int p0, int m, const packed_weight & wt, float * c,
                  int ldc, const epilogue & e, float * scratch);

// dst[c * ldd + r] = src[r][c] for r < n, c < k: the packing transpose (AVX2 8x8 blocks), shared with
// the attention's q and key packing.
void transpose_rows(const float * const * src, int n, int k, float * dst, int ldd);

// One micro-tile: c[r, j] = epi(sum_kk a[kk*as + r] * b[kk*ldb + j]) for r < rows <= gemm_mr(),
// j < ncols <= 32. The building block of gemm_packed and of the fused attention (kernels.h). bias/scale
// of e are indexed from the tile's first column.
void gemm_tile(int rows, int k, const float * a, int as, const float * b, int ldb, float * c, int ldc, int ncols,
               const epilogue & e);

}  // namespace rfdetr::cpu
