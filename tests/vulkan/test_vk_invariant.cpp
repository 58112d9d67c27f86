// batch_invariant = 1 on linear, bmm (rel_shift) and sdpa: a row's values, bit for bit, do not
// depend on how many rows, batch entries or (masked, padded) keys the call has, which is what
// Parakeet's batched encoder needs to give each file its transcript alone. On a GPU with tensor
// cores the kernel, tile and key split would otherwise follow the call's size.
#include <cstring>
#include <functional>

#include "tests/vulkan/vk_test_util.h"

namespace vrun::test {
namespace {

class VkInvariant : public VulkanTest {};

HostTensor filled(DType dt, const Shape& shape, const std::function<double(const int64_t*)>& value) {
  HostTensor t = make_tensor(dt, shape);
  for_each_index(shape, [&](const int64_t* i) { store_double(t.view, i, value(i)); });
  return t;
}

// Rows [first, first + n) of a dense [M, N] tensor, as raw bytes.
std::vector<uint8_t> row_bytes(const HostTensor& t, int64_t first, int64_t n) {
  const int64_t N = t.view.shape[t.view.shape.rank - 1];
  const size_t e = static_cast<size_t>(dtype_elem_size(t.view.dtype));
  const uint8_t* p = static_cast<const uint8_t*>(t.view.data) + static_cast<size_t>(first * N) * e;
  return std::vector<uint8_t>(p, p + static_cast<size_t>(n * N) * e);
}

// Elements of batch entry 0 in [H, rows, cols] whose values differ between two 4-d results.
int64_t differing(const HostTensor& a, const HostTensor& b, int64_t H, int64_t rows, int64_t cols) {
  int64_t n = 0;
  for (int64_t h = 0; h < H; ++h)
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) {
        const int64_t at[4] = {0, h, i, j};
        n += load_double(a.view, at) != load_double(b.view, at);
      }
  return n;
}

TEST_F(VkInvariant, LinearRowsAreTheSameAtAnyRowCount) {
  std::mt19937 rng(41);
  const int64_t R = 700, K = 512, N = 384;
  HostTensor x = random_tensor(DType::f32, Shape{R, K}, rng);
  HostTensor w = random_tensor(DType::f16, Shape{N, K}, rng, -0.1, 0.1);
  HostTensor b = random_tensor(DType::f32, Shape{N}, rng);
  HostTensor res = random_tensor(DType::f32, Shape{R, N}, rng);
  HostTensor g = random_tensor(DType::f32, Shape{K}, rng, 0.5, 1.5);
  HostTensor nb = random_tensor(DType::f32, Shape{K}, rng);
  for (const bool norm : {false, true}) {
    Attrs a(OpKind::linear);
    a.set_i("batch_invariant", 1);
    if (norm) a.set_s("norm", "layer");
    auto rows = [&](int64_t first, int64_t n) {
      HostTensor xs = filled(DType::f32, Shape{n, K}, [&](const int64_t* i) {
        const int64_t j[2] = {first + i[0], i[1]};
        return load_double(x.view, j);
      });
      HostTensor rs = filled(DType::f32, Shape{n, N}, [&](const int64_t* i) {
        const int64_t j[2] = {first + i[0], i[1]};
        return load_double(res.view, j);
      });
      auto out = run_gpu(OpKind::linear, {&xs, &w, &b, &rs, norm ? &g : nullptr, norm ? &nb : nullptr}, a);
      return out.empty() ? HostTensor{} : out[0];
    };
    const HostTensor all = rows(0, R);
    ASSERT_TRUE(all.storage);
    for (const auto& [first, n] : std::vector<std::pair<int64_t, int64_t>>{{0, 5}, {3, 37}, {100, 64}, {200, 250}}) {
      const HostTensor part = rows(first, n);
      ASSERT_TRUE(part.storage);
      EXPECT_TRUE(row_bytes(part, 0, n) == row_bytes(all, first, n)) << (norm ? "norm " : "") << "rows " << first << "+" << n;
    }
  }
}

// The relative-position scores of Parakeet's attention for one job of T frames alone, and padded
// to Tp frames as the first of three jobs: y[i, j] = q_i . P[j - i + T - 1] over the middle 2T - 1
// rows of one table of relative positions.
TEST_F(VkInvariant, RelShiftScoresAreTheSameWhenPaddedAndBatched) {
  std::mt19937 rng(42);
  const int64_t H = 2, D = 64, T = 45, Tp = 130, Bp = 3, span = 2 * Tp - 1;
  HostTensor q = random_tensor(DType::f16, Shape{Bp, H, Tp, D}, rng);
  HostTensor table = random_tensor(DType::f16, Shape{H, D, span}, rng);  // relative positions Tp-1 .. -(Tp-1)
  Attrs a(OpKind::bmm);
  a.set_i("rel_shift", 1);
  a.set_i("batch_invariant", 1);
  a.set_s("dtype", "f32");
  auto scores = [&](int64_t B, int64_t L) {
    HostTensor qs = filled(DType::f16, Shape{B, H, L, D}, [&](const int64_t* i) { return load_double(q.view, i); });
    // Column c of the middle 2L - 1: relative position L - 1 - c, the table's column Tp - L + c.
    HostTensor ps = filled(DType::f16, Shape{1, H, D, 2 * L - 1}, [&](const int64_t* i) {
      const int64_t j[3] = {i[1], i[2], Tp - L + i[3]};
      return load_double(table.view, j);
    });
    auto out = run_gpu(OpKind::bmm, {&qs, &ps}, a);
    return out.empty() ? HostTensor{} : out[0];
  };
  const HostTensor alone = scores(1, T), padded = scores(Bp, Tp);
  ASSERT_TRUE(alone.storage && padded.storage);
  EXPECT_EQ(differing(alone, padded, H, T, T), 0);
}

// Attention of one job of T frames alone, and padded to Tp as the first of three jobs, its padded
// keys masked with -10000 as Parakeet's key mask does.
TEST_F(VkInvariant, AttentionIsTheSameWhenPaddedAndBatched) {
  std::mt19937 rng(43);
  const int64_t H = 8, D = 64, T = 75, Tp = 300, Bp = 3;
  HostTensor q = random_tensor(DType::f16, Shape{Bp, H, Tp, D}, rng);
  HostTensor k = random_tensor(DType::f16, Shape{Bp, H, Tp, D}, rng);
  HostTensor v = random_tensor(DType::f16, Shape{Bp, H, Tp, D}, rng);
  HostTensor m = random_tensor(DType::f32, Shape{Bp, H, Tp, Tp}, rng, -2, 2);
  Attrs a(OpKind::sdpa);
  a.set_f("scale", 0.125);
  a.set_i("batch_invariant", 1);
  auto attend = [&](int64_t B, int64_t L) {
    auto part = [&](const HostTensor& t, DType dt, int64_t last) {
      return filled(dt, Shape{B, H, L, last}, [&](const int64_t* i) { return load_double(t.view, i); });
    };
    HostTensor qs = part(q, DType::f16, D), ks = part(k, DType::f16, D), vs = part(v, DType::f16, D);
    HostTensor ms = filled(DType::f32, Shape{B, H, L, L}, [&](const int64_t* i) {
      const bool padded_key = i[0] == 0 && i[3] >= T;
      return load_double(m.view, i) + (padded_key ? -10000.0 : 0.0);
    });
    auto out = run_gpu(OpKind::sdpa, {&qs, &ks, &vs, &ms}, a);
    return out.empty() ? HostTensor{} : out[0];
  };
  const HostTensor alone = attend(1, T), padded = attend(Bp, Tp);
  ASSERT_TRUE(alone.storage && padded.storage);
  EXPECT_EQ(differing(alone, padded, H, T, D), 0);
}

}  // namespace
}  // namespace vrun::test
