// Strided N-d iteration over several operands that share one logical shape (each with its own
// element strides, 0 for broadcast dims). Dims of size 1 are dropped and dims that are
// contiguous with their neighbour in every operand are merged, so a dense tensor of any rank is
// walked as one row; kernels then run a plain loop over each row (stride 1 in every operand is
// the fast path the compiler vectorises).
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>

#include "runtime/base/tensor.h"
#include "runtime/base/thread_pool.h"

namespace vrun::cpu {

// Work (in elements or element-sized operations) below which a kernel runs inline: waking the
// pool costs more than a few microseconds of streaming.
constexpr int64_t kParallelMinWork = 1 << 15;

// Grain for parallel_for over n items costing `work_per_item` each: small jobs run inline.
inline int64_t parallel_grain(int64_t work_per_item) {
  return std::max<int64_t>(1, kParallelMinWork / std::max<int64_t>(1, work_per_item));
}

// Runs fn(begin, end) over [0, n), on the pool when the total work is worth it.
template <typename Fn>
void parallel_range(ThreadPool* pool, int64_t n, int64_t work_per_item, Fn&& fn) {
  if (n <= 0) return;
  const int64_t grain = parallel_grain(work_per_item);
  if (!pool || pool->size() <= 1 || n <= grain) {
    fn(int64_t{0}, n);
    return;
  }
  pool->parallel_for(n, grain, [&](int64_t b, int64_t e) { fn(b, e); });
}

template <int N>
class StridedIter {
 public:
  // strides[k] are operand k's element strides over `shape`.
  StridedIter(const Shape& shape, const std::array<Strides, N>& strides) {
    numel_ = shape.numel();
    rank_ = 0;
    for (int d = 0; d < shape.rank; ++d) {
      if (shape[d] == 1) continue;
      if (rank_ > 0) {
        bool merge = true;
        for (int k = 0; k < N; ++k)
          if (strides_[k][rank_ - 1] != strides[k][d] * shape[d]) merge = false;
        if (merge) {
          dims_[rank_ - 1] *= shape[d];
          for (int k = 0; k < N; ++k) strides_[k][rank_ - 1] = strides[k][d];
          continue;
        }
      }
      dims_[rank_] = shape[d];
      for (int k = 0; k < N; ++k) strides_[k][rank_] = strides[k][d];
      ++rank_;
    }
    if (rank_ == 0) {  // a scalar or all-ones shape: one row of one element
      rank_ = 1;
      dims_[0] = numel_ == 0 ? 0 : 1;
      for (int k = 0; k < N; ++k) strides_[k][0] = 1;
    }
  }

  int64_t numel() const { return numel_; }
  int rank() const { return rank_; }
  int64_t dim(int d) const { return dims_[d]; }
  int64_t stride(int k, int d) const { return strides_[k][d]; }
  int64_t inner_size() const { return dims_[rank_ - 1]; }
  // Element stride of operand k along the innermost (merged) dim.
  int64_t inner_stride(int k) const { return strides_[k][rank_ - 1]; }
  bool inner_contiguous() const {
    for (int k = 0; k < N; ++k)
      if (strides_[k][rank_ - 1] != 1) return false;
    return true;
  }

  // Calls fn(const int64_t* off, int64_t len) for consecutive pieces of rows covering the
  // row-major element range [begin, end): off[k] is operand k's element offset of the piece's
  // first element, and the piece continues with inner_stride(k).
  template <typename Fn>
  void for_range(int64_t begin, int64_t end, Fn&& fn) const {
    if (begin >= end) return;
    const int64_t inner = dims_[rank_ - 1];
    int64_t idx[kMaxRank] = {};
    int64_t rest = begin;
    for (int d = rank_ - 1; d >= 0; --d) {
      idx[d] = rest % dims_[d];
      rest /= dims_[d];
    }
    int64_t off[N];
    for (int k = 0; k < N; ++k) {
      off[k] = 0;
      for (int d = 0; d < rank_; ++d) off[k] += idx[d] * strides_[k][d];
    }
    int64_t pos = begin;
    while (pos < end) {
      const int64_t len = std::min(inner - idx[rank_ - 1], end - pos);
      fn(static_cast<const int64_t*>(off), len);
      pos += len;
      if (pos >= end) break;
      // Step to the start of the next row.
      for (int k = 0; k < N; ++k) off[k] += (len - 1) * strides_[k][rank_ - 1];
      idx[rank_ - 1] += len - 1;
      for (int d = rank_ - 1; d >= 0; --d) {
        if (++idx[d] < dims_[d]) {
          for (int k = 0; k < N; ++k) off[k] += strides_[k][d];
          break;
        }
        for (int k = 0; k < N; ++k) off[k] -= (dims_[d] - 1) * strides_[k][d];
        idx[d] = 0;
      }
    }
  }

  // for_range over all elements, split over the pool when large. work_per_elem scales the
  // parallel threshold for expensive element functions.
  template <typename Fn>
  void parallel(ThreadPool* pool, Fn&& fn, int64_t work_per_elem = 1) const {
    parallel_range(pool, numel_, work_per_elem, [&](int64_t b, int64_t e) { for_range(b, e, fn); });
  }

 private:
  int rank_ = 0;
  int64_t numel_ = 0;
  int64_t dims_[kMaxRank] = {};
  int64_t strides_[N][kMaxRank] = {};
};

// Byte pointer arithmetic helper: element `off` of a typed base.
template <typename T>
inline T* elem_ptr(void* base, int64_t off) {
  return static_cast<T*>(base) + off;
}
template <typename T>
inline const T* elem_ptr(const void* base, int64_t off) {
  return static_cast<const T*>(base) + off;
}

}  // namespace vrun::cpu
