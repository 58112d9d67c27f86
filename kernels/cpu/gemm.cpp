#include "kernels/cpu/gemm.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/cpu/avx2_util.h"
#include "kernels/cpu/blas_core.h"
#include "runtime/base/convert.h"
#include "runtime/base/cpu_features.h"

#ifdef VRUN_HAVE_OPENBLAS
#include <cblas.h>
#endif

namespace vrun {

namespace {

const bool kHaveAvx2 = cpu_has_avx2();

using cpu::hsum8;
using cpu::load8;

#ifdef VRUN_HAVE_OPENBLAS
// Below this many multiply-adds a product runs on one thread (splitting costs more than it saves).
constexpr int64_t kParallelGemmWork = int64_t{1} << 20;
// Fewest rows (or columns) of C a thread's block gets: each block packs the other operand again.
constexpr int64_t kGemmBlock = 64;
#endif

// Element i of a row; memcpy because checkpoint data (e.g. whisper.cpp's unpadded tensors) may
// sit at any byte offset.
inline float load1(const void* p, DType t, int64_t i) {
  const auto* b = static_cast<const uint8_t*>(p);
  switch (t) {
    case DType::f16:
    case DType::bf16: {
      uint16_t h;
      std::memcpy(&h, b + 2 * i, 2);
      return t == DType::f16 ? f16_to_f32(h) : bf16_to_f32(h);
    }
    default: {
      float f;
      std::memcpy(&f, b + 4 * i, 4);
      return f;
    }
  }
}

template <DType T>
VRUN_AVX2 float dot_avx2(const float* a, const void* b, int64_t n) {
  __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps(), s2 = _mm256_setzero_ps(), s3 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), load8<T>(b, i), s0);
    s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), load8<T>(b, i + 8), s1);
    s2 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 16), load8<T>(b, i + 16), s2);
    s3 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 24), load8<T>(b, i + 24), s3);
  }
  for (; i + 8 <= n; i += 8) s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), load8<T>(b, i), s0);
  float s = hsum8(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
  for (; i < n; ++i) s += a[i] * load1(b, T, i);
  return s;
}

VRUN_AVX2 void axpy_avx2(float a, const float* x, float* y, int64_t n) {
  const __m256 va = _mm256_set1_ps(a);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
  for (; i < n; ++i) y[i] += a * x[i];
}

#ifndef VRUN_HAVE_OPENBLAS
// Portable GEMM: rows of C in parallel; the B-transposed case is a dot per element, the other
// an axpy of B's rows (both unit-stride inner loops the compiler vectorises).
void sgemm_portable(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb,
                    bool b_trans, float* c, int64_t ldc, bool accumulate, ThreadPool* pool,
                    const GemmBlockFn* after_block) {
  auto rows = [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const float* ai = a + i * lda;
      float* ci = c + i * ldc;
      if (b_trans) {
        for (int64_t j = 0; j < n; ++j) {
          const float d = dot_f32_any(ai, b + j * ldb, DType::f32, k);
          ci[j] = accumulate ? ci[j] + d : d;
        }
      } else {
        if (!accumulate) std::fill(ci, ci + n, 0.f);
        for (int64_t p = 0; p < k; ++p) {
          const float s = ai[p];
          const float* bp = b + p * ldb;
          for (int64_t j = 0; j < n; ++j) ci[j] += s * bp[j];
        }
      }
    }
    if (after_block) (*after_block)(i0, i1, 0, n);
  };
  if (pool)
    pool->parallel_for(m, 1, rows);
  else
    rows(0, m);
}
#endif

}  // namespace

void sgemm(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb, bool b_trans,
           float* c, int64_t ldc, bool accumulate, ThreadPool* pool, const GemmBlockFn* after_block) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {
    if (!accumulate)
      for (int64_t i = 0; i < m; ++i) std::fill(c + i * ldc, c + i * ldc + n, 0.f);
    if (after_block) (*after_block)(0, m, 0, n);
    return;
  }
#ifdef VRUN_HAVE_OPENBLAS
  // OpenBLAS runs single-threaded (prepare_blas) and the pool splits the product into row (or
  // column) blocks. OpenBLAS's own threads would sit beside the pool's, both waiting by spinning
  // and then yielding: with as many threads as cores (2-core Whisper encode) the two sets took
  // turns on the cores, ~12% of the time in the scheduler.
  prepare_blas();
  auto blas = [&](int64_t rows, int64_t cols, const float* ap, const float* bp, float* cp) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, b_trans ? CblasTrans : CblasNoTrans, static_cast<int>(rows),
                static_cast<int>(cols), static_cast<int>(k), 1.f, ap, static_cast<int>(lda), bp, static_cast<int>(ldb),
                accumulate ? 1.f : 0.f, cp, static_cast<int>(ldc));
  };
  const int threads = pool ? pool->size() : 1;
  if (threads <= 1 || m * n * k < kParallelGemmWork || std::max(m, n) < 2 * kGemmBlock) {
    blas(m, n, a, b, c);
    if (after_block) (*after_block)(0, m, 0, n);
    return;
  }
  // Two blocks per thread: a thread that loses its core leaves at most one to the others.
  const int64_t split = std::max(m, n);
  const int64_t grain = std::max<int64_t>(kGemmBlock, (split + 2 * threads - 1) / (2 * threads));
  if (m >= n) {
    pool->parallel_for(m, grain, [&](int64_t i0, int64_t i1) {
      blas(i1 - i0, n, a + i0 * lda, b, c + i0 * ldc);
      if (after_block) (*after_block)(i0, i1, 0, n);
    });
  } else {
    pool->parallel_for(n, grain, [&](int64_t j0, int64_t j1) {
      blas(m, j1 - j0, a, b_trans ? b + j0 * ldb : b + j0, c + j0);
      if (after_block) (*after_block)(0, m, j0, j1);
    });
  }
#else
  sgemm_portable(m, n, k, a, lda, b, ldb, b_trans, c, ldc, accumulate, pool, after_block);
#endif

}

float dot_f32_any(const float* a, const void* b, DType t, int64_t n) {
  if (kHaveAvx2) {
    switch (t) {
      case DType::f16: return dot_avx2<DType::f16>(a, b, n);
      case DType::bf16: return dot_avx2<DType::bf16>(a, b, n);
      default: return dot_avx2<DType::f32>(a, b, n);
    }
  }
  float s = 0;
  for (int64_t i = 0; i < n; ++i) s += a[i] * load1(b, t, i);
  return s;
}

void axpy_f32(float a, const float* x, float* y, int64_t n) {
  if (kHaveAvx2) {
    axpy_avx2(a, x, y, n);
    return;
  }
  for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

void scale_f32(float a, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] *= a;
}

namespace {

// Dense f16/bf16 rows widen 8 at a time (attention packs whole f16 KV-cache rows every decode step).
// src may be misaligned (unaligned vector loads; the tail goes through load1).
VRUN_AVX2 void widen_f16_avx2(const void* src, float* dst, int64_t n) {
  const auto* s = static_cast<const uint8_t*>(src);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 2 * i))));
  for (; i < n; ++i) dst[i] = load1(src, DType::f16, i);
}

VRUN_AVX2 void widen_bf16_avx2(const void* src, float* dst, int64_t n) {
  const auto* s = static_cast<const uint8_t*>(src);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 2 * i)));
    _mm256_storeu_ps(dst + i, _mm256_castsi256_ps(_mm256_slli_epi32(w, 16)));
  }
  for (; i < n; ++i) dst[i] = load1(src, DType::bf16, i);
}

}  // namespace

void load_row_f32(const void* src, DType t, int64_t stride, int64_t n, float* dst) {
  if (stride == 1) {
    if (t == DType::f32) {
      std::memcpy(dst, src, static_cast<size_t>(n) * 4);
      return;
    }
    if (kHaveAvx2 && t == DType::f16) {
      widen_f16_avx2(src, dst, n);
      return;
    }
    if (kHaveAvx2 && t == DType::bf16) {
      widen_bf16_avx2(src, dst, n);
      return;
    }
  }
  for (int64_t i = 0; i < n; ++i) dst[i] = load1(src, t, i * stride);
}

void store_row_f32(const float* src, void* dst, DType t, int64_t n) {
  // Any dtype but f16 and bf16 gets the f32 bits, as this function always did (its callers only
  // pass float outputs).
  cpu::store_row_f32(src, t == DType::f16 || t == DType::bf16 ? t : DType::f32, dst, n);
}

std::vector<int64_t> row_offsets(const TensorView& v) {
  const int lead = std::max(0, v.rank() - 1);
  int64_t rows = 1;
  for (int d = 0; d < lead; ++d) rows *= v.shape[d];
  std::vector<int64_t> out(static_cast<size_t>(std::max<int64_t>(rows, 0)));
  int64_t idx[kMaxRank] = {};
  int64_t off = 0;
  for (int64_t r = 0; r < rows; ++r) {
    out[static_cast<size_t>(r)] = off;
    for (int d = lead - 1; d >= 0; --d) {
      off += v.strides[d];
      if (++idx[d] < v.shape[d]) break;
      off -= v.strides[d] * v.shape[d];
      idx[d] = 0;
    }
  }
  return out;
}

std::vector<float> to_dense_f32(const TensorView& v) {
  std::vector<float> out(static_cast<size_t>(v.numel()));
  if (v.numel() == 0) return out;
  const int64_t n = v.rank() ? v.shape[v.rank() - 1] : 1;
  const int64_t st = v.rank() ? v.strides[v.rank() - 1] : 1;
  const auto offs = row_offsets(v);
  for (size_t r = 0; r < offs.size(); ++r) load_row_f32(elem_ptr(v, offs[r]), v.dtype, st, n, out.data() + r * n);
  return out;
}

}  // namespace vrun
