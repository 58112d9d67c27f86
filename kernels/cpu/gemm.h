// Float GEMM/GEMV building blocks shared by linear, bmm, conv and lstm: OpenBLAS sgemm when
// available (blocked portable code otherwise), AVX2 dot products over f32/f16/bf16 rows, and
// row conversion helpers for strided views.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "runtime/base/tensor.h"
#include "runtime/base/thread_pool.h"

namespace vrun {

// Called on the thread that computed it with each finished block of C, rows [i0, i1) and columns
// [j0, j1), while the block is still in that core's cache: an epilogue (bias, activation,
// residual) fused into the product.
using GemmBlockFn = std::function<void(int64_t i0, int64_t i1, int64_t j0, int64_t j1)>;

// C[m, n] (rows ldc apart) = A[m, k] (rows lda apart) @ op(B), plus C when accumulate.
// b_trans: B is [n, k] (rows ldb apart), else [k, n]. Threads: the pool's size. after_block (may
// be null) sees every block of C once, the blocks covering C.
void sgemm(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb, bool b_trans,
           float* c, int64_t ldc, bool accumulate, ThreadPool* pool, const GemmBlockFn* after_block = nullptr);

// sum_i a[i] * b[i] with b stored as f32, f16 or bf16 (dense).
float dot_f32_any(const float* a, const void* b, DType b_type, int64_t n);

// y[i] += a * x[i] (dense f32).
void axpy_f32(float a, const float* x, float* y, int64_t n);
// y[i] *= a (dense f32).
void scale_f32(float a, float* y, int64_t n);

// n elements of a f32/f16/bf16 row with element stride `stride` into dense f32; the row may sit
// at any byte offset (checkpoint data), and dense f16/bf16 rows widen with AVX2 where there is
// AVX2. cpu::load_row_f32 (convert.h) is the version for every float and block dtype.
void load_row_f32(const void* src, DType t, int64_t stride, int64_t n, float* dst);
// n dense f32 into a dense f32/f16/bf16 row: cpu::store_row_f32, with every other dtype
// written as f32.
void store_row_f32(const float* src, void* dst, DType t, int64_t n);

// Element offsets of every row (all dims but the last, row-major) of a view.
std::vector<int64_t> row_offsets(const TensorView& v);

// The address of element `offset` (in elements) of a plain-dtype view.
inline const void* elem_ptr(const TensorView& v, int64_t offset) {
  return static_cast<const uint8_t*>(v.data) + offset * dtype_elem_size(v.dtype);
}

// Dense f32 copy of a plain float view (any strides).
std::vector<float> to_dense_f32(const TensorView& v);

}  // namespace vrun
