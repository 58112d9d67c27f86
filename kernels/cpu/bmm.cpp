// bmm: y[..., M, N] = a[..., M, K] @ b[..., K, N] with broadcast leading dims and any strides.
// Matrices whose rows (or, for b, columns: a transposed view of k) are unit-stride go to sgemm
// as they are; others are packed once per batch.
#include <algorithm>
#include <vector>

#include "kernels/cpu/cpu_kernel.h"
#include "kernels/cpu/gemm.h"

namespace vrun {

namespace {

// Below this many multiply-adds per batch entry, batches run in parallel on the pool with one
// thread each instead of one threaded sgemm per entry.
constexpr int64_t kSmallGemm = 1 << 18;

struct MatLayout {
  const float* data = nullptr;  // f32 view usable in place, or null when it must be packed
  int64_t ld = 0;
  bool trans = false;  // stored column-major (element (r, c) at c * ld + r)
};

// How a 2-D f32 slice with strides (rs, cs) can be passed to sgemm without a copy.
MatLayout layout_of(const void* p, DType t, int64_t rows, int64_t cols, int64_t rs, int64_t cs) {
  MatLayout l;
  if (t != DType::f32) return l;
  if ((cs == 1 || cols == 1) && rs >= std::max<int64_t>(cols, 1)) {
    l.data = static_cast<const float*>(p);
    l.ld = rs;
  } else if ((rs == 1 || rows == 1) && cs >= std::max<int64_t>(rows, 1)) {
    l.data = static_cast<const float*>(p);
    l.ld = cs;
    l.trans = true;
  }
  return l;
}

void pack(const void* p, DType t, int64_t rows, int64_t cols, int64_t rs, int64_t cs, float* dst) {
  for (int64_t r = 0; r < rows; ++r)
    load_row_f32(static_cast<const uint8_t*>(p) + r * rs * dtype_elem_size(t), t, cs, cols, dst + r * cols);
}

// C = A @ B on dense row-major f32 with one thread (small batch entries).
void gemm_serial(int64_t m, int64_t n, int64_t k, const float* a, const float* b, float* c) {
  for (int64_t i = 0; i < m; ++i) {
    float* ci = c + i * n;
    std::fill(ci, ci + n, 0.f);
    for (int64_t p = 0; p < k; ++p) {
      const float s = a[i * k + p];
      const float* bp = b + p * n;
      for (int64_t j = 0; j < n; ++j) ci[j] += s * bp[j];
    }
  }
}

}  // namespace

Status bmm_kernel(const KernelCall& call) {
  const TensorView& a = call.input(0);
  const TensorView& b = call.input(1);
  TensorView& y = call.out[0];
  const int ry = y.rank(), ra = a.rank(), rb = b.rank();
  const int64_t m = y.shape[ry - 2], n = y.shape[ry - 1], k = a.shape[ra - 1];
  Shape lead;
  lead.rank = ry - 2;
  for (int d = 0; d < lead.rank; ++d) lead[d] = y.shape[d];
  Shape la, lb;
  Strides sa0, sb0;
  la.rank = ra - 2;
  lb.rank = rb - 2;
  for (int d = 0; d < la.rank; ++d) la[d] = a.shape[d], sa0[d] = a.strides[d];
  for (int d = 0; d < lb.rank; ++d) lb[d] = b.shape[d], sb0[d] = b.strides[d];
  const Strides sa = broadcast_strides(la, sa0, lead), sb = broadcast_strides(lb, sb0, lead);
  const int64_t batches = lead.numel();
  if (batches == 0 || m == 0 || n == 0) return Status::ok();
  std::vector<int64_t> off_a(static_cast<size_t>(batches)), off_b(static_cast<size_t>(batches));
  {
    int64_t idx[kMaxRank] = {};
    for (int64_t t = 0; t < batches; ++t) {
      int64_t oa = 0, ob = 0;
      for (int d = 0; d < lead.rank; ++d) oa += idx[d] * sa[d], ob += idx[d] * sb[d];
      off_a[t] = oa;
      off_b[t] = ob;
      for (int d = lead.rank - 1; d >= 0; --d) {
        if (++idx[d] < lead[d]) break;
        idx[d] = 0;
      }
    }
  }
  // rel_shift: y [.., M, M] keeps (a @ b)[.., i, j - i + M - 1]; n below is b's 2M - 1 columns.
  const bool rel = call.attr().i("rel_shift") != 0;
  const int64_t bn = rel ? 2 * m - 1 : n;
  const int64_t ars = a.strides[ra - 2], acs = a.strides[ra - 1];
  const int64_t brs = b.strides[rb - 2], bcs = b.strides[rb - 1];
  const int64_t ye = dtype_elem_size(y.dtype);

  auto run_one = [&](int64_t t, ThreadPool* pool, std::vector<float>& pa, std::vector<float>& pb,
                     std::vector<float>& pc) {
    const void* ap = elem_ptr(a, off_a[t]);
    const void* bp = elem_ptr(b, off_b[t]);
    void* yp = static_cast<uint8_t*>(y.data) + t * m * n * ye;
    float* cf = y.dtype == DType::f32 ? static_cast<float*>(yp) : (pc.resize(static_cast<size_t>(m * n)), pc.data());
    if (!pool) {
      pa.resize(static_cast<size_t>(m * k));
      pb.resize(static_cast<size_t>(k * bn));
      pack(ap, a.dtype, m, k, ars, acs, pa.data());
      pack(bp, b.dtype, k, bn, brs, bcs, pb.data());
      if (!rel) {
        gemm_serial(m, n, k, pa.data(), pb.data(), cf);
      } else {
        std::vector<float> full(static_cast<size_t>(m * bn));
        gemm_serial(m, bn, k, pa.data(), pb.data(), full.data());
        for (int64_t i = 0; i < m; ++i) std::copy_n(full.data() + i * bn + (m - 1 - i), m, cf + i * m);
      }
    } else {
      // a as dense rows, b (bn columns) as sgemm takes it: in place where the strides allow.
      MatLayout la2 = layout_of(ap, a.dtype, m, k, ars, acs);
      if (!la2.data || la2.trans) {
        pa.resize(static_cast<size_t>(m * k));
        pack(ap, a.dtype, m, k, ars, acs, pa.data());
        la2 = {pa.data(), std::max<int64_t>(k, 1), false};
      }
      MatLayout lb2 = layout_of(bp, b.dtype, k, bn, brs, bcs);
      if (!lb2.data) {
        pb.resize(static_cast<size_t>(k * bn));
        pack(bp, b.dtype, k, bn, brs, bcs, pb.data());
        lb2 = {pb.data(), std::max<int64_t>(bn, 1), false};
      }
      if (!rel) {
        sgemm(m, n, k, la2.data, la2.ld, lb2.data, lb2.ld, lb2.trans, cf, n, false, pool);
      } else {
        // Blocks of rows: rows i0 .. i0 + r - 1 read b's columns m - i0 - r .. 2m - 2 - i0, a
        // window of m + r - 1, so the block's product is that much wider than its output.
        constexpr int64_t kRows = 64;
        std::vector<float> blk(static_cast<size_t>(std::min(kRows, m) * (m + kRows - 1)));
        for (int64_t i0 = 0; i0 < m; i0 += kRows) {
          const int64_t r = std::min(kRows, m - i0), lo = m - i0 - r, w = m + r - 1;
          const float* bcol = lb2.trans ? lb2.data + lo * lb2.ld : lb2.data + lo;
          sgemm(r, w, k, la2.data + i0 * la2.ld, la2.ld, bcol, lb2.ld, lb2.trans, blk.data(), w, false, pool);
          // Row i (block row i - i0) keeps columns m - 1 - i .. 2m - 2 - i, from (r - 1) - (i - i0) on.
          for (int64_t i = i0; i < i0 + r; ++i) std::copy_n(blk.data() + (i - i0) * w + (r - 1 - (i - i0)), m, cf + i * m);
        }
      }
    }
    if (y.dtype != DType::f32) store_row_f32(cf, yp, y.dtype, m * n);
  };

  if (m * n * k <= kSmallGemm && batches > 1) {
    call.pool->parallel_for(batches, 1, [&](int64_t t0, int64_t t1) {
      std::vector<float> pa, pb, pc;
      for (int64_t t = t0; t < t1; ++t) run_one(t, nullptr, pa, pb, pc);
    });
  } else {
    std::vector<float> pa, pb, pc;
    for (int64_t t = 0; t < batches; ++t) run_one(t, call.pool, pa, pb, pc);
  }
  return Status::ok();
}

}  // namespace vrun
