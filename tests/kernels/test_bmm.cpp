// bmm against a float64 reference, with broadcast leading dims, transposed and offset views.
#include "kernel_test_util.h"

namespace vrun::test {
namespace {

// y[lead..., i, j] = sum_p a[lead_a..., i, p] * b[lead_b..., p, j], leading dims broadcast.
std::vector<double> ref_bmm(const TensorView& a, const TensorView& b, const Shape& y) {
  std::vector<double> out;
  const int ry = y.rank, ra = a.rank(), rb = b.rank();
  const int64_t k = a.shape[ra - 1];
  for_each_index(y, [&](const int64_t* idx) {
    int64_t ia[kMaxRank] = {}, ib[kMaxRank] = {};
    for (int d = 0; d < ra - 2; ++d) ia[d] = a.shape[d] == 1 ? 0 : idx[ry - ra + d];
    for (int d = 0; d < rb - 2; ++d) ib[d] = b.shape[d] == 1 ? 0 : idx[ry - rb + d];
    ia[ra - 2] = idx[ry - 2];
    ib[rb - 1] = idx[ry - 1];
    double s = 0;
    for (int64_t p = 0; p < k; ++p) {
      ia[ra - 1] = p;
      ib[rb - 2] = p;
      s += load_double(a, ia) * load_double(b, ib);
    }
    out.push_back(s);
  });
  return out;
}

void check(const TensorView& a, const TensorView& b, ThreadPool* pool, double tol, const char* what) {
  RunResult r = run_cpu(OpKind::bmm, {a, b}, Attrs(OpKind::bmm), pool);
  ASSERT_TRUE(r.status.is_ok()) << what << ": " << r.status.to_string();
  expect_close(to_doubles(r.outputs[0].view), ref_bmm(a, b, r.outputs[0].view.shape), tol, tol, what);
}

TEST(Bmm, BroadcastLeadingDims) {
  std::mt19937 rng(1);
  ThreadPool pool(2);
  HostTensor a = random_tensor(DType::f32, Shape{2, 3, 5, 7}, rng);
  HostTensor b = random_tensor(DType::f32, Shape{3, 7, 4}, rng);
  check(a.view, b.view, &pool, 1e-5, "a [2,3,5,7] b [3,7,4]");
  HostTensor b1 = random_tensor(DType::f32, Shape{1, 1, 7, 4}, rng);
  check(a.view, b1.view, &pool, 1e-5, "b [1,1,7,4]");
  HostTensor a2 = random_tensor(DType::f32, Shape{5, 7}, rng);
  check(a2.view, b.view, &pool, 1e-5, "a rank 2");
}

TEST(Bmm, TransposedAndOffsetViews) {
  std::mt19937 rng(2);
  ThreadPool pool(2);
  // b is k^T: a [2, 6, 16] @ k[2, 9, 16]^T, stored as [2, 9, 16].
  HostTensor a = random_strided(DType::f32, Shape{2, 6, 16}, {0, 1, 2}, 3, rng);
  HostTensor kt = random_strided(DType::f32, Shape{2, 16, 9}, {0, 2, 1}, 5, rng);
  check(a.view, kt.view, &pool, 1e-5, "transposed b");
  HostTensor at = random_strided(DType::f32, Shape{2, 6, 16}, {2, 1, 0}, 1, rng);
  check(at.view, kt.view, &pool, 1e-5, "fully permuted a");
  HostTensor row = random_tensor(DType::f32, Shape{1, 1, 16}, rng);
  check(broadcast_view(row.view, Shape{2, 6, 16}), kt.view, &pool, 1e-5, "0-stride a");
}

TEST(Bmm, LargeBatchesUseGemmAndHalfTypes) {
  std::mt19937 rng(3);
  ThreadPool pool(2);
  HostTensor a = random_tensor(DType::f32, Shape{2, 70, 80}, rng);
  HostTensor b = random_strided(DType::f32, Shape{2, 80, 65}, {0, 2, 1}, 0, rng);
  check(a.view, b.view, &pool, 1e-4, "large, b transposed");
  HostTensor b2 = random_tensor(DType::f32, Shape{2, 80, 65}, rng);
  check(a.view, b2.view, &pool, 1e-4, "large");
  for (DType t : {DType::f16, DType::bf16}) {
    HostTensor ah = random_tensor(t, Shape{3, 5, 33}, rng);
    HostTensor bh = random_tensor(t, Shape{3, 33, 6}, rng);
    // Output rounding to the 16-bit type dominates: bf16 keeps 8 bits of mantissa.
    check(ah.view, bh.view, &pool, t == DType::f16 ? 4e-3 : 3e-2, dtype_name(t));
  }
}

// rel_shift = 1: y [.., M, M] keeps (a @ b)[.., i, j - i + M - 1] of the full product's 2M - 1
// columns, compared with the shifted float64 product. M 1 and 5 (the one-thread path across
// batches), 70 and 130 (row blocks of 64 with a partial last block), b dense and as a
// transposed view (k^T as attention passes it), f16 operands.
TEST(Bmm, RelShiftKeepsTheShiftedProducts) {
  std::mt19937 rng(5);
  ThreadPool pool(2);
  for (DType t : {DType::f32, DType::f16})
    for (int64_t M : {1, 5, 70, 130})
      for (bool transposed : {false, true}) {
        const int64_t K = 24, N = 2 * M - 1;
        const std::string what = std::string("rel_shift ") + dtype_name(t) + " M=" + std::to_string(M) + (transposed ? " b^T" : "");
        SCOPED_TRACE(what);
        HostTensor a = random_tensor(t, Shape{2, 3, M, K}, rng);
        HostTensor b = transposed ? random_strided(t, Shape{2, 3, K, N}, {0, 1, 3, 2}, 0, rng) : random_tensor(t, Shape{2, 3, K, N}, rng);
        Attrs at(OpKind::bmm);
        at.set_i("rel_shift", 1);
        // Halves in, f32 scores out (dtype), as Parakeet's position term.
        const bool f32_out = t == DType::f16 && transposed;
        if (f32_out) at.set_s("dtype", "f32");
        RunResult r = run_cpu(OpKind::bmm, {a.view, b.view}, at, &pool);
        ASSERT_TRUE(r.status.is_ok()) << r.status.to_string();
        ASSERT_EQ(r.outputs[0].view.shape, (Shape{2, 3, M, M}));
        ASSERT_EQ(r.outputs[0].view.dtype, f32_out ? DType::f32 : t);
        const std::vector<double> full = ref_bmm(a.view, b.view, Shape{2, 3, M, N});
        std::vector<double> want;
        for (int64_t z = 0; z < 6; ++z)
          for (int64_t i = 0; i < M; ++i)
            for (int64_t j = 0; j < M; ++j) want.push_back(full[static_cast<size_t>((z * M + i) * N + j - i + M - 1)]);
        const double tol = t == DType::f16 && !f32_out ? 4e-3 : 1e-5;
        expect_close(to_doubles(r.outputs[0].view), want, tol, tol, what.c_str());
      }
  HostTensor a = random_tensor(DType::f32, Shape{4, 6}, rng);
  HostTensor b = random_tensor(DType::f32, Shape{6, 8}, rng);
  Attrs at(OpKind::bmm);
  at.set_i("rel_shift", 1);
  RunResult r = run_cpu(OpKind::bmm, {a.view, b.view}, at);
  EXPECT_EQ(r.status.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(r.status.message().find("rel_shift needs b's last dim = 2M - 1 = 7"), std::string::npos) << r.status.message();
}

TEST(Bmm, RejectsBadShapes) {
  std::mt19937 rng(4);
  HostTensor a = random_tensor(DType::f32, Shape{2, 3, 5}, rng);
  HostTensor b = random_tensor(DType::f32, Shape{2, 4, 6}, rng);
  RunResult r = run_cpu(OpKind::bmm, {a.view, b.view}, Attrs(OpKind::bmm));
  EXPECT_NE(r.status.message().find("disagree on K (5 vs 4)"), std::string::npos) << r.status.message();
  HostTensor b3 = random_tensor(DType::f32, Shape{3, 5, 6}, rng);
  r = run_cpu(OpKind::bmm, {a.view, b3.view}, Attrs(OpKind::bmm));
  EXPECT_NE(r.status.message().find("do not broadcast"), std::string::npos) << r.status.message();
  HostTensor bh = random_tensor(DType::f16, Shape{2, 5, 6}, rng);
  r = run_cpu(OpKind::bmm, {a.view, bh.view}, Attrs(OpKind::bmm));
  EXPECT_NE(r.status.message().find("share a dtype"), std::string::npos) << r.status.message();
  HostTensor v = random_tensor(DType::f32, Shape{5}, rng);
  r = run_cpu(OpKind::bmm, {a.view, v.view}, Attrs(OpKind::bmm));
  EXPECT_NE(r.status.message().find("rank >= 2"), std::string::npos) << r.status.message();
}

}  // namespace
}  // namespace vrun::test
