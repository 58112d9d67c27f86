// sdpa (causal with a cache offset, float and bool masks, grouped-query heads, strided K/V read
// in place, long key ranges, local windows with band masks) and rope (half and interleaved) against float64 math.
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "tests/vulkan/vk_test_util.h"

namespace vrun::test {
namespace {

class VkAttention : public VulkanTest {};

// Reference attention in float64 over logical (already broadcast) index functions. Query i sits
// at position p = Lk - Lq + i and sees every key (causal: up to p), or with a window (left >= 0)
// the keys p - left .. p + right that exist, its mask (broadcast to [B, Hq, Lq, left + right + 1])
// column c holding key p - left + c. Rows without keys give zeros.
std::vector<double> sdpa_ref(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView* mask,
                             double scale, bool causal, int64_t left = -1, int64_t right = -1) {
  const bool windowed = left >= 0;
  const int64_t B = q.shape[0], Hq = q.shape[1], Lq = q.shape[2], D = q.shape[3];
  const int64_t Hkv = k.shape[1], Lk = k.shape[2], Dv = v.shape[3];
  std::vector<double> y;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < Hq; ++h)
      for (int64_t i = 0; i < Lq; ++i) {
        const int64_t hk = h / (Hq / Hkv), p = Lk - Lq + i;
        std::vector<int64_t> keys;
        std::vector<double> s;
        double mx = -INFINITY;
        const int64_t lo = windowed ? std::max<int64_t>(0, p - left) : 0, hi = windowed ? std::min(Lk - 1, p + right) : Lk - 1;
        for (int64_t j = lo; j <= hi; ++j) {
          if (causal && j > p) break;
          double d = 0;
          for (int64_t c = 0; c < D; ++c) {
            int64_t qi[4] = {b, h, i, c}, ki[4] = {b, hk, j, c};
            d += load_double(q, qi) * load_double(k, ki);
          }
          d *= scale;
          if (mask) {
            int64_t mi[4] = {b, h, i, windowed ? j - (p - left) : j};
            const double m = load_double(*mask, mi);
            if (mask->dtype == DType::bool_) d = m != 0 ? d : -INFINITY;
            else d += m;
          }
          keys.push_back(j);
          s.push_back(d);
          mx = std::max(mx, d);
        }
        double sum = 0;
        for (auto& x : s) sum += (x = mx == -INFINITY ? 0.0 : std::exp(x - mx));
        for (int64_t c = 0; c < Dv; ++c) {
          double acc = 0;
          for (size_t u = 0; u < keys.size(); ++u) {
            int64_t vi[4] = {b, hk, keys[u], c};
            acc += s[u] * load_double(v, vi);
          }
          y.push_back(sum > 0 ? acc / sum : 0.0);
        }
      }
  return y;
}

// Random q [B, Hq, Lq, D] and k, v [B, Hkv, Lk, D or Dv] of one dtype, drawn in that order.
struct Qkv {
  HostTensor q, k, v;
};
Qkv random_qkv(DType dt, const Shape& q, const Shape& k, int64_t dv, std::mt19937& rng) {
  Shape vs = k;
  vs[3] = dv;
  Qkv t;
  t.q = random_tensor(dt, q, rng);
  t.k = random_tensor(dt, k, rng);
  t.v = random_tensor(dt, vs, rng);
  return t;
}

TEST_F(VkAttention, SdpaCausalGqaStridedCache) {
  std::mt19937 rng(20);
  for (DType dt : {DType::f32, DType::f16}) {
    // Cache [B, Hkv, Lmax, D] of which the first Lk positions are live: a strided view in place.
    const int64_t B = 2, Hq = 6, Hkv = 2, Lq = 7, Lk = 77, Lmax = 100, D = 40;
    HostTensor q = random_strided(dt, Shape{B, Hq, Lq, D}, {0, 2, 1, 3}, 1, rng);  // [B, L, H, D] storage
    HostTensor kc = random_tensor(dt, Shape{B, Hkv, Lmax, D}, rng);
    HostTensor vc = random_tensor(dt, Shape{B, Hkv, Lmax, D}, rng);
    HostTensor k = kc, v = vc;
    k.view.shape = v.view.shape = Shape{B, Hkv, Lk, D};
    Attrs a(OpKind::sdpa);
    a.set_i("causal", 1);
    auto out = run_gpu(OpKind::sdpa, {&q, &k, &v, nullptr}, a);
    ASSERT_EQ(out[0].view.shape, (Shape{B, Hq, Lq, D}));
    expect_close(to_doubles(out[0].view), sdpa_ref(q.view, k.view, v.view, nullptr, 1 / std::sqrt(40.0), true), 1e-5,
                 rtol_for(dt) + 1e-5, (std::string("sdpa causal ") + dtype_name(dt)).c_str());
  }
}

// Decode-like shapes (few query rows, long cache) take the split-K path with a combine pass
// (under VRUN_SDPA=decode the one-kernel decode kernel, see VkSdpa.DecodeOneKernel).
TEST_F(VkAttention, SdpaSplitKeysCausalDecode) {
  std::mt19937 rng(23);
  const int64_t B = 1, Hq = 4, Hkv = 1, Lq = 2, Lk = 1500, D = 64;
  auto [q, k, v] = random_qkv(DType::f16, Shape{B, Hq, Lq, D}, Shape{B, Hkv, Lk, D}, D, rng);
  Attrs a(OpKind::sdpa);
  a.set_i("causal", 1);
  auto out = run_gpu(OpKind::sdpa, {&q, &k, &v, nullptr}, a);
  expect_close(to_doubles(out[0].view), sdpa_ref(q.view, k.view, v.view, nullptr, 1 / std::sqrt(64.0), true), 1e-5, 2e-3,
               "sdpa split causal decode");
}

TEST_F(VkAttention, SdpaMasksAndLongKeys) {
  std::mt19937 rng(21);
  const int64_t B = 1, H = 2, Lq = 3, Lk = 4097, D = 16, Dv = 24;
  auto [q, k, v] = random_qkv(DType::f32, Shape{B, H, Lq, D}, Shape{B, H, Lk, D}, Dv, rng);
  // Float mask broadcast over heads ([Lq, Lk]), bool mask [B, 1, Lq, Lk] keeping most keys.
  HostTensor fm = random_tensor(DType::f32, Shape{Lq, Lk}, rng, -4, 0);
  HostTensor bm = random_tensor(DType::bool_, Shape{B, 1, Lq, Lk}, rng, 0, 1.3);
  for (int64_t i = 0; i < Lq; ++i) store_double(bm.view, std::array<int64_t, 4>{0, 0, i, 0}.data(), 1);
  Attrs a(OpKind::sdpa);
  a.set_f("scale", 0.3);
  {
    auto out = run_gpu(OpKind::sdpa, {&q, &k, &v, &fm}, a);
    HostTensor fm4 = fm;
    fm4.view.shape = Shape{1, 1, Lq, Lk};
    fm4.view.strides = contiguous_strides(fm4.view.shape);
    const TensorView mv = broadcast_view(fm4.view, Shape{B, H, Lq, Lk});
    expect_close(to_doubles(out[0].view), sdpa_ref(q.view, k.view, v.view, &mv, 0.3, false), 1e-5, 1e-4, "sdpa float mask");
  }
  {
    auto out = run_gpu(OpKind::sdpa, {&q, &k, &v, &bm}, a);
    const TensorView mv = broadcast_view(bm.view, Shape{B, H, Lq, Lk});
    expect_close(to_doubles(out[0].view), sdpa_ref(q.view, k.view, v.view, &mv, 0.3, false), 1e-5, 1e-4, "sdpa bool mask");
  }
}

// One sdpa case at awkward sizes against float64 math: q as a [B, L, H, D] storage permuted to
// [B, H, L, D], K/V as a strided window of a longer cache, an optional mask broadcast over heads.
struct SdpaCase {
  DType dt;
  int64_t B, Hq, Hkv, Lq, Lk, D, Dv;
  bool causal;
  DType mask = DType::u8;  // u8: none
  double scale = 0;
  int64_t q_offset = 1;  // elements before q's storage: 8 keeps rows aligned for the tensor-core kernel
  int64_t cap = 0;  // > 0: k/v hold a cache of cap keys and the queries' position Lk - Lq comes as sdpa's pos input
  double atol = 0;  // > 0: instead of the dtype's
};

class VkSdpa : public VulkanTest {
 protected:
  void check(const SdpaCase& c, uint32_t seed) {
    std::mt19937 rng(seed);
    const int64_t Lmax = std::max(c.Lk, c.cap) + 3;
    HostTensor q = random_strided(c.dt, Shape{c.B, c.Hq, c.Lq, c.D}, {0, 2, 1, 3}, c.q_offset, rng);
    HostTensor k = random_tensor(c.dt, Shape{c.B, c.Hkv, Lmax, c.D}, rng);
    HostTensor v = random_tensor(c.dt, Shape{c.B, c.Hkv, Lmax, c.Dv}, rng);
    k.view.shape = Shape{c.B, c.Hkv, c.Lk, c.D};
    v.view.shape = Shape{c.B, c.Hkv, c.Lk, c.Dv};
    // Where the device has tensor cores, prefill-shaped f32 Q/K/V go through them rounded to
    // halves (the kernel's documented rounding): the inputs are made exact halves so that the
    // float64 reference sees the operands the kernel multiplies, and the softmax weights' own
    // rounding to half sets the tolerance as for f16.
    const bool halves = c.dt == DType::f32 && c.Lq >= 32 && ctx().coopmat() != vulkan::Context::CoopMat::kNone &&
                        !ctx().exact_f32();
    if (halves)
      for (HostTensor* t : {&q, &k, &v}) round_to_halves(*t);
    HostTensor m;
    const bool has_mask = c.mask != DType::u8;
    if (has_mask) {
      m = c.mask == DType::bool_ ? random_tensor(c.mask, Shape{c.B, 1, c.Lq, c.Lk}, rng, 0, 1.3)
                                 : random_tensor(c.mask, Shape{c.B, 1, c.Lq, c.Lk}, rng, -3, 0);
      // Row 0 of a bool mask keeps no key at all: the output row is zeros (the CPU kernel's rule).
      if (c.mask == DType::bool_)
        for (int64_t b = 0; b < c.B; ++b)
          for (int64_t j = 0; j < c.Lk; ++j) store_double(m.view, std::array<int64_t, 4>{b, 0, 0, j}.data(), 0);
    }
    Attrs a(OpKind::sdpa);
    a.set_i("causal", c.causal ? 1 : 0);
    a.set_f("scale", c.scale);
    std::vector<HostTensor> out;
    if (c.cap > 0) {
      // The whole capacity goes in (keys past Lk hold random values the kernel must not read).
      ASSERT_FALSE(has_mask);
      HostTensor kcap = k, vcap = v, pos = make_tensor(DType::i32, Shape{1});
      kcap.view.shape[2] = vcap.view.shape[2] = c.cap;
      pos.view.ptr<int32_t>()[0] = static_cast<int32_t>(c.Lk - c.Lq);
      out = run_gpu(OpKind::sdpa, {&q, &kcap, &vcap, nullptr, &pos}, a);
    } else {
      out = run_gpu(OpKind::sdpa, {&q, &k, &v, has_mask ? &m : nullptr}, a);
    }
    ASSERT_EQ(out[0].view.shape, (Shape{c.B, c.Hq, c.Lq, c.Dv}));
    const TensorView mv = has_mask ? broadcast_view(m.view, Shape{c.B, c.Hq, c.Lq, c.Lk}) : TensorView{};
    const double scale = c.scale != 0 ? c.scale : 1 / std::sqrt(static_cast<double>(c.D));
    std::vector<double> want = sdpa_ref(q.view, k.view, v.view, has_mask ? &mv : nullptr, scale, c.causal);
    for (auto& x : want)
      if (std::isnan(x)) x = 0;  // fully masked rows
    char what[160];
    std::snprintf(what, sizeof what, "sdpa %s B%lld Hq%lld Hkv%lld Lq%lld Lk%lld D%lld Dv%lld causal %d mask %s cap %lld",
                  dtype_name(c.dt), static_cast<long long>(c.B), static_cast<long long>(c.Hq),
                  static_cast<long long>(c.Hkv), static_cast<long long>(c.Lq), static_cast<long long>(c.Lk),
                  static_cast<long long>(c.D), static_cast<long long>(c.Dv), c.causal ? 1 : 0,
                  has_mask ? dtype_name(c.mask) : "none", static_cast<long long>(c.cap));
    // f16: the tensor-core kernel rounds the softmax weights to half for the P.V product.
    const bool f16_class = c.dt == DType::f16 || halves;
    expect_close(to_doubles(out[0].view), want, c.atol > 0 ? c.atol : f16_class ? 1e-4 : 2e-5,
                 rtol_for(f16_class ? DType::f16 : c.dt) + 1e-5, what);
  }
};

// Prefill shapes (32+ query rows) take the tiled kernel: partial row blocks (33, 65), key tiles
// with tails (33, 65, 130), head dims 64 / 80 / 128, GQA, causal with a cache offset, masks.
TEST_F(VkSdpa, TiledTailsHeadDimsAndMasks) {
  // Each dtype / mask / causal / head-dim class is a pipeline that takes lavapipe seconds to
  // compile: five classes (Llama prefill, Whisper encoder, masked f16 and f32, bf16), several shapes
  // each. On GPUs with cooperative matrices the f16 ones take the tensor-core kernel.
  const std::vector<SdpaCase> cases = {
      {DType::f16, 1, 4, 1, 65, 130, 128, 128, true},
      {DType::f16, 2, 4, 2, 33, 65, 80, 80, true},
      {DType::f16, 1, 2, 2, 33, 33, 64, 64, false},
      {DType::f16, 2, 2, 1, 130, 7, 64, 64, false},
      {DType::f16, 1, 4, 2, 65, 33, 128, 128, false, DType::bool_},
      {DType::f32, 1, 2, 1, 65, 65, 64, 40, false, DType::bool_, 0.2},
      // Aligned q: the tensor-core kernel where the device has one (f32 rounded to halves).
      {DType::f32, 2, 4, 4, 70, 70, 128, 128, false, DType::f32, 0, 8},  // Parakeet's position term
      {DType::f32, 1, 4, 2, 33, 97, 64, 64, true, DType::u8, 0, 8},
      {DType::f16, 1, 4, 1, 65, 130, 128, 128, true, DType::u8, 0, 8},
      // Few row blocks over many keys: the tensor-core kernel splits the keys (4 and 2 chunks,
      // the last one short) and sdpa_combine merges them.
      {DType::f32, 1, 2, 2, 70, 1100, 128, 128, false, DType::f32, 0, 8},
      {DType::f16, 1, 2, 1, 40, 600, 128, 128, false, DType::bool_, 0, 8},
      {DType::bf16, 1, 2, 2, 33, 130, 128, 128, true, DType::f16},
  };
  for (size_t i = 0; i < cases.size(); ++i) check(cases[i], 30 + static_cast<uint32_t>(i));
}

// Short-prompt shapes (and a few query blocks over a long cache) take the row kernel (split over
// key chunks past 64 keys, merged by its last workgroup, or by the combine pass under
// VRUN_SDPA=combine), and so do decode shapes of GQA groups
// (VRUN_SDPA=rows: those with one query row per KV head too): 1 / 7 query rows, 1 / 7 / 33 / 130 /
// 1500 keys, GQA groups of 4, head dims 64 / 80 / 128 / 256, masks.
TEST_F(VkSdpa, RowKernelDecodeSplitsAndHeadDims) {
  setenv("VRUN_SDPA", "rows", 1);
  const std::vector<SdpaCase> cases = {
      {DType::f16, 1, 8, 2, 1, 1500, 128, 128, true},
      {DType::f16, 1, 32, 8, 1, 1500, 64, 64, true},
      {DType::f16, 2, 4, 1, 7, 130, 64, 64, true, DType::bool_},
      {DType::f16, 1, 4, 4, 1, 7, 80, 80, false},
      {DType::f32, 1, 2, 1, 7, 33, 256, 200, false, DType::f32},
      {DType::bf16, 1, 3, 3, 1, 1, 128, 128, false},
      {DType::f32, 1, 4, 2, 31, 300, 128, 128, true, DType::f32},
      {DType::f16, 1, 2, 1, 32, 300, 64, 64, true},  // a query block over a long cache
  };
  for (size_t i = 0; i < cases.size(); ++i) check(cases[i], 40 + static_cast<uint32_t>(i));
  // The split keys merged by the separate combine pass instead of the kernel's last workgroup.
  setenv("VRUN_SDPA", "combine", 1);
  for (size_t i : {0, 1, 2}) check(cases[i], 80 + static_cast<uint32_t>(i));
  // f16 decode chunks streamed rather than loaded whole at their start (VRUN_SDPA_ROWS's PRE 0),
  // and loaded whole on 8 KiB K tiles (several tiles a chunk) where the row blocks are many
  // (PRE 1, which the default keeps to decode shapes); the chunks of 64 keys past an odd count.
  setenv("VRUN_SDPA", "rows", 1);
  setenv("VRUN_SDPA_ROWS", "0,0,0,0", 1);
  for (size_t i : {0, 1, 2, 7}) check(cases[i], 120 + static_cast<uint32_t>(i));
  setenv("VRUN_SDPA_ROWS", "0,8,0,1", 1);
  for (size_t i : {0, 1, 2, 7}) check(cases[i], 130 + static_cast<uint32_t>(i));
  setenv("VRUN_SDPA_ROWS", "64,16,0,1", 1);
  for (size_t i : {0, 1}) check(cases[i], 140 + static_cast<uint32_t>(i));
  unsetenv("VRUN_SDPA_ROWS");
  unsetenv("VRUN_SDPA");
}

// Decode shapes with one query row per KV head, and under VRUN_SDPA=decode all decode shapes (at
// most 8 query rows per KV head, head dims up to 128), take
// the one-kernel decode kernel (keys split over workgroups past 64, the last one merging): Llama-3.2-1B (32 / 8 heads of 64) and Whisper (6 / 6) over 1 to 4097 keys of a strided
// f16 / f32 cache, head dim 128, masks, causal with 2-4 query rows (as many as keys: the first sees one),
// unaligned rows and bf16 read element by element.
TEST_F(VkSdpa, DecodeOneKernel) {
  setenv("VRUN_SDPA", "decode", 1);
  const std::vector<SdpaCase> cases = {
      {DType::f16, 1, 32, 8, 1, 1, 64, 64, true},
      {DType::f16, 1, 32, 8, 1, 7, 64, 64, true},
      {DType::f16, 1, 32, 8, 1, 33, 64, 64, true},
      {DType::f16, 1, 32, 8, 1, 257, 64, 64, true},
      {DType::f16, 1, 32, 8, 1, 1500, 64, 64, true},
      {DType::f16, 1, 32, 8, 1, 4097, 64, 64, true},
      {DType::f16, 2, 6, 6, 1, 448, 64, 64, false},
      {DType::f32, 1, 6, 6, 1, 1500, 64, 64, false},
      {DType::f32, 1, 32, 8, 1, 4097, 64, 64, true},
      {DType::f16, 1, 8, 2, 1, 4097, 128, 128, true},
      {DType::f32, 1, 8, 2, 1, 257, 128, 128, false},
      {DType::f16, 2, 2, 1, 1, 33, 128, 128, false},
      {DType::f16, 1, 6, 6, 1, 1500, 64, 64, false, DType::f32},
      {DType::f16, 1, 32, 8, 1, 257, 64, 64, false, DType::bool_},
      {DType::f16, 1, 8, 2, 2, 257, 64, 64, true},
      {DType::f32, 1, 4, 2, 4, 33, 64, 64, true},
      {DType::f16, 1, 6, 6, 3, 1500, 64, 64, true},
      {DType::f16, 1, 4, 4, 3, 3, 64, 64, true},
      {DType::f32, 1, 4, 2, 2, 130, 40, 40, true},
      {DType::bf16, 1, 6, 6, 1, 257, 64, 64, false},
      // Batches large enough that a workgroup takes 4 / 8 / 4 query rows of a KV head (2 blocks
      // of 4 for the last: head dim 128 keeps 4 rows' values per lane at most).
      {DType::f16, 40, 32, 8, 1, 33, 64, 64, true},
      {DType::f32, 64, 8, 4, 3, 20, 64, 64, true},
      {DType::f16, 64, 8, 2, 2, 9, 128, 128, true, DType::f32},
  };
  for (size_t i = 0; i < cases.size(); ++i) check(cases[i], 60 + static_cast<uint32_t>(i));
  unsetenv("VRUN_SDPA");
}

// The queries' position read on the device (sdpa's pos input, a Llama decode step's): k/v are a
// cache's whole capacity, the row kernel cuts its key chunks from the position at run time, and
// the combine pass reads only the chunks used. Llama-3.2-1B and SmolLM2 decode over caches of
// 1024 / 4100 keys at 1 .. all of them, a chunk of 7 queries (causal), f32 and non-causal.
TEST_F(VkSdpa, PositionOnTheDevice) {
  const std::vector<SdpaCase> cases = {
      {DType::f16, 1, 32, 8, 1, 1, 64, 64, true, DType::u8, 0, 1, 1024},
      {DType::f16, 1, 32, 8, 1, 77, 64, 64, true, DType::u8, 0, 1, 1024},
      {DType::f16, 1, 32, 8, 1, 1000, 64, 64, true, DType::u8, 0, 1, 1024},
      {DType::f16, 1, 32, 8, 1, 1024, 64, 64, true, DType::u8, 0, 1, 1024},
      {DType::f16, 1, 9, 3, 1, 333, 64, 64, true, DType::u8, 0, 1, 4100},
      {DType::f16, 1, 4, 2, 7, 77, 64, 64, true, DType::u8, 0, 1, 100},
      {DType::f32, 1, 4, 1, 2, 50, 40, 40, false, DType::u8, 0, 1, 300},
  };
  for (size_t i = 0; i < cases.size(); ++i) check(cases[i], 90 + static_cast<uint32_t>(i));
  setenv("VRUN_SDPA", "combine", 1);
  for (size_t i : {1, 4}) check(cases[i], 100 + static_cast<uint32_t>(i));
  // The one-kernel decode kernel with its chunks cut on the device (grouped-query rows; the
  // cases whose rows fit it).
  setenv("VRUN_SDPA", "decode", 1);
  for (size_t i : {0, 1, 2, 3, 4, 6}) check(cases[i], 110 + static_cast<uint32_t>(i));
  unsetenv("VRUN_SDPA");
}

// VRUN_SDPA=rows / tile force the row kernel / the portable tiled kernel on prefill shapes (the
// comparison switches on a GPU, where the default may be the cooperative-matrix kernel): they
// must give the same answers.
TEST_F(VkSdpa, ForcedKernelsOnPrefillShapes) {
  for (const char* kernel : {"rows", "tile"}) {
    setenv("VRUN_SDPA", kernel, 1);
    check({DType::f16, 1, 4, 2, 65, 130, 128, 128, true, DType::f32}, 50);
  }
  unsetenv("VRUN_SDPA");
}

// The workgroup-scope tensor-core kernel (sdpa_cm2.comp; VRUN_SDPA=cm2 sends it shapes of few row
// blocks too): head dims 64 and 128, causal with a cache offset (Lq < Lk) and without, GQA,
// partial row blocks and key tiles, f16 and f32 (rounded to halves), two batches, a set scale.
// Only where the device has workgroup-scope matrices with row reductions.
TEST_F(VkSdpa, WorkgroupScopeKernel) {
  if (!ctx().coopmat2().reductions) GTEST_SKIP() << "no VK_NV_cooperative_matrix2 reductions on this device";
  struct Unset {
    ~Unset() { unsetenv("VRUN_SDPA"); }
  } unset;
  setenv("VRUN_SDPA", "cm2", 1);
  const std::vector<SdpaCase> cases = {
      {DType::f16, 1, 4, 1, 65, 130, 128, 128, true, DType::u8, 0, 8},
      {DType::f16, 2, 4, 2, 130, 130, 64, 64, false, DType::u8, 0, 8},
      {DType::f32, 1, 4, 2, 33, 97, 64, 64, true, DType::u8, 0, 8},
      {DType::f16, 1, 2, 2, 70, 200, 128, 128, false, DType::u8, 0.2, 8},
      // Lq = Lk under the causal limit: the first rows see one, two, three keys, whose weights'
      // rounding to half (2^-12 relative) no long row of keys averages away, as in VkSdpaWindow.
      {DType::f32, 2, 2, 1, 64, 64, 128, 128, true, DType::u8, 0, 8, 0, 6e-4},
      {DType::f16, 1, 8, 2, 200, 200, 64, 64, true, DType::u8, 0, 8, 0, 6e-4},
  };
  for (size_t i = 0; i < cases.size(); ++i) check(cases[i], 70 + static_cast<uint32_t>(i));
}

// One windowed sdpa case: q permuted from a [B, L, H, D] storage, K/V a strided view of a longer
// cache, and a band mask full [B, Hq, Lq, W], broadcast over batch or heads, or none.
struct WindowCase {
  DType dt;
  int64_t B, Hq, Hkv, Lq, Lk, D;
  int64_t left, right;
  bool causal = false;
  DType mask = DType::u8;  // u8: none
  Shape mask_shape{};      // rank 0: [B, Hq, Lq, W]; else broadcast from it
  int64_t q_offset = 8;    // 8 keeps rows aligned for the tensor-core kernel
};

class VkSdpaWindow : public VulkanTest {
 protected:
  struct Run {
    HostTensor q, k, v, m;
    Attrs attrs{OpKind::sdpa};
    std::vector<double> want;
    bool halves = false;
  };

  bool coop() { return ctx().coopmat() != vulkan::Context::CoopMat::kNone; }

  Run make(const WindowCase& c, uint32_t seed) {
    std::mt19937 rng(seed);
    Run r;
    const int64_t W = c.left + c.right + 1;
    r.q = random_strided(c.dt, Shape{c.B, c.Hq, c.Lq, c.D}, {0, 2, 1, 3}, c.q_offset, rng);
    r.k = random_tensor(c.dt, Shape{c.B, c.Hkv, c.Lk + 3, c.D}, rng);
    r.v = random_tensor(c.dt, Shape{c.B, c.Hkv, c.Lk + 3, c.D}, rng);
    r.k.view.shape = r.v.view.shape = Shape{c.B, c.Hkv, c.Lk, c.D};
    // As in VkSdpa: f32 prefill shapes go through the tensor cores as halves where there are any.
    r.halves = c.dt == DType::f32 && c.Lq >= 32 && ctx().coopmat() != vulkan::Context::CoopMat::kNone && !ctx().exact_f32();
    if (r.halves)
      for (HostTensor* t : {&r.q, &r.k, &r.v}) round_to_halves(*t);
    const Shape band{c.B, c.Hq, c.Lq, W};
    if (c.mask != DType::u8) {
      const Shape ms = c.mask_shape.rank ? c.mask_shape : band;
      r.m = c.mask == DType::bool_ ? random_tensor(c.mask, ms, rng, 0, 1.3) : random_tensor(c.mask, ms, rng, -3, 0);
    }
    r.attrs.set_i("causal", c.causal ? 1 : 0);
    r.attrs.set_ints("window", {c.left, c.right});
    const TensorView mv = c.mask != DType::u8 ? broadcast_view(r.m.view, band) : TensorView{};
    r.want = sdpa_ref(r.q.view, r.k.view, r.v.view, c.mask != DType::u8 ? &mv : nullptr,
                             1 / std::sqrt(static_cast<double>(c.D)), c.causal, c.left, c.right);
    return r;
  }

  static std::string describe(const WindowCase& c, const char* kernel) {
    char what[200];
    std::snprintf(what, sizeof what, "sdpa window [%lld, %lld] %s B%lld Hq%lld Hkv%lld Lq%lld Lk%lld D%lld causal %d mask %s%s kernel '%s'",
                  static_cast<long long>(c.left), static_cast<long long>(c.right), dtype_name(c.dt),
                  static_cast<long long>(c.B), static_cast<long long>(c.Hq), static_cast<long long>(c.Hkv),
                  static_cast<long long>(c.Lq), static_cast<long long>(c.Lk), static_cast<long long>(c.D), c.causal ? 1 : 0,
                  c.mask != DType::u8 ? dtype_name(c.mask) : "none", c.mask_shape.rank ? " (broadcast)" : "", kernel);
    return what;
  }

  // tensor_cores: the call may take the tensor-core kernel, which rounds the softmax weights to
  // half: an output is then off by up to about 2^-11 of the values' range (|v| < 1), which a band
  // of a few keys does not average down as a long row of keys does.
  void expect_matches(const WindowCase& c, const Run& r, const std::vector<HostTensor>& out, const std::string& what,
                      bool tensor_cores) {
    ASSERT_EQ(out[0].view.shape, (Shape{c.B, c.Hq, c.Lq, c.D})) << what;
    const bool f16_class = c.dt == DType::f16 || r.halves;
    const double atol = tensor_cores ? 6e-4 : f16_class ? 1e-4 : 2e-5;
    expect_close(to_doubles(out[0].view), r.want, atol, rtol_for(f16_class ? DType::f16 : c.dt) + 1e-5, what.c_str());
  }

  // The case under each forced kernel (VRUN_SDPA; "" the default choice).
  void check(const WindowCase& c, uint32_t seed, const std::vector<const char*>& kernels) {
    Run r = make(c, seed);
    for (const char* kernel : kernels) {
      if (*kernel) setenv("VRUN_SDPA", kernel, 1);
      else unsetenv("VRUN_SDPA");
      auto out = run_gpu(OpKind::sdpa, {&r.q, &r.k, &r.v, c.mask != DType::u8 ? &r.m : nullptr}, r.attrs);
      const bool tensor_cores = coop() && !*kernel && c.Lq >= 32;
      expect_matches(c, r, out, describe(c, kernel), tensor_cores);
    }
    unsetenv("VRUN_SDPA");
  }
};

// Windows [0, 0], [3, 5], [128, 128], [200, 0] causal and lopsided ones over 1 .. 700 rows, Lq
// below and above Lk (rows whose band misses every key give zeros), GQA groups whose row blocks
// span two heads, head dims 64 / 128 / 256, f32 / f16 / bool band masks, full and broadcast.
// Each case runs through the default kernel (tiled for 32+ rows, the tensor-core one where the
// device has it; the row kernel below), the row kernel, and the portable tiled kernel where the
// default is the tensor-core one.
TEST_F(VkSdpaWindow, BandsAgainstFloat64) {
  std::vector<const char*> kernels = {"", "rows"};
  if (coop()) kernels.push_back("tile");
  const std::vector<WindowCase> cases = {
      {DType::f32, 1, 4, 4, 1, 1, 64, 0, 0},
      {DType::f16, 1, 4, 2, 7, 7, 64, 3, 5, false, DType::f32},
      {DType::f32, 2, 8, 2, 33, 33, 64, 3, 5, false, DType::f32, Shape{2, 1, 33, 9}},
      {DType::f16, 1, 2, 2, 100, 100, 128, 128, 128, false, DType::f32},  // Parakeet's band
      {DType::f16, 1, 4, 2, 300, 300, 64, 200, 0, true},
      {DType::f32, 1, 2, 2, 300, 300, 128, 128, 128, false, DType::f32},
      {DType::f32, 1, 4, 1, 40, 300, 64, 2, 40, false, DType::bool_},
      {DType::f16, 1, 2, 1, 100, 33, 64, 50, 3},
      {DType::f32, 1, 2, 2, 300, 300, 64, 0, 0, false, DType::f32, Shape{1, 2, 300, 1}},
      {DType::f32, 1, 2, 1, 33, 33, 256, 6, 2, true, DType::f32},
      // Band wider than the tensor-core kernel's split threshold: its chunks split the band.
      {DType::f32, 1, 2, 2, 700, 700, 64, 300, 400, false, DType::f32},
  };
  for (size_t i = 0; i < cases.size(); ++i) check(cases[i], 200 + static_cast<uint32_t>(i), kernels);
}

// The row kernel's split keys over a band, merged by its last workgroup and by the combine pass:
// a few query rows at the end of a long cache, a band of 601 keys cut into chunks.
TEST_F(VkSdpaWindow, RowKernelSplitsTheBand) {
  const WindowCase c{DType::f16, 1, 8, 2, 20, 2000, 64, 300, 300, false, DType::f32, Shape{1, 8, 20, 601}};
  check(c, 250, {"rows", "combine"});
}

// The Vulkan kernels agree with the CPU kernel (the executor's fallback) on windowed calls.
TEST_F(VkSdpaWindow, MatchesCpuKernel) {
  const std::vector<WindowCase> cases = {
      {DType::f32, 1, 2, 2, 100, 100, 64, 16, 16, false, DType::f32, Shape{1, 1, 100, 33}},
      {DType::f16, 1, 4, 2, 7, 7, 64, 3, 5, true},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const WindowCase& c = cases[i];
    Run r = make(c, 260 + static_cast<uint32_t>(i));
    RunResult cpu = run_cpu(OpKind::sdpa, {r.q.view, r.k.view, r.v.view, c.mask != DType::u8 ? r.m.view : TensorView{}}, r.attrs);
    ASSERT_TRUE(cpu.status.is_ok()) << cpu.status.to_string();
    auto gpu = run_gpu(OpKind::sdpa, {&r.q, &r.k, &r.v, c.mask != DType::u8 ? &r.m : nullptr}, r.attrs);
    const bool f16_class = c.dt == DType::f16 || r.halves;
    const std::string what = describe(c, "") + " against the CPU kernel";
    // The tensor-core kernel's half-rounded softmax weights: see expect_matches.
    const double atol = coop() && c.Lq >= 32 ? 7e-4 : f16_class ? 2e-4 : 4e-5;
    expect_close(to_doubles(gpu[0].view), to_doubles(cpu.outputs[0].view), atol,
                 2 * rtol_for(f16_class ? DType::f16 : c.dt) + 1e-5, what.c_str());
  }
}

// A position per batch entry (sdpa's pos [B], a batched decode step's slots at their own
// lengths): the row kernel (grouped-query rows), the decode kernel (one row per KV head) and the
// separate combine pass agree with the CPU kernel, which tests/kernels checks against float64.
TEST_F(VkSdpa, PositionPerBatchEntry) {
  struct Unset {
    ~Unset() { unsetenv("VRUN_SDPA"); }
  } unset;
  std::mt19937 rng(300);
  for (int64_t group : {4, 1})
    for (const char* forced : {"", "combine", "decode"}) {
      if (group == 4 && std::string(forced) == "decode") continue;
      SCOPED_TRACE(std::string("group ") + std::to_string(group) + " VRUN_SDPA=" + forced);
      if (*forced) setenv("VRUN_SDPA", forced, 1);
      else unsetenv("VRUN_SDPA");
      const int64_t B = 3, Hkv = 2, cap = 300, D = 64;
      HostTensor q = random_tensor(DType::f16, Shape{B, Hkv * group, 1, D}, rng);
      HostTensor k = random_tensor(DType::f16, Shape{B, Hkv, cap, D}, rng, -2, 2);
      HostTensor v = random_tensor(DType::f16, Shape{B, Hkv, cap, D}, rng);
      HostTensor pos = make_tensor(DType::i32, Shape{B});
      const int32_t at[3] = {0, 150, 299};
      std::copy(at, at + 3, pos.view.ptr<int32_t>());
      Attrs a(OpKind::sdpa);
      a.set_i("causal", 1);
      RunResult cpu = run_cpu(OpKind::sdpa, {q.view, k.view, v.view, TensorView{}, pos.view}, a);
      ASSERT_TRUE(cpu.status.is_ok()) << cpu.status.to_string();
      auto gpu = run_gpu(OpKind::sdpa, {&q, &k, &v, nullptr, &pos}, a);
      expect_close(to_doubles(gpu[0].view), to_doubles(cpu.outputs[0].view), 2e-4, 2 * rtol_for(DType::f16),
                   "sdpa with a position per batch entry against the CPU kernel");
    }
}

// rope with an offset per row (rows of different sequences) agrees with the CPU kernel.
TEST_F(VkAttention, RopeOffsetPerRow) {
  std::mt19937 rng(301);
  HostTensor x = random_tensor(DType::f32, Shape{1, 5, 6, 16}, rng);
  HostTensor f = vector_tensor(rope_frequencies(16));
  HostTensor off = vector_tensor(std::vector<int32_t>{3, 0, 900, 41, 3});
  Attrs a(OpKind::rope);
  a.set_i("pos", 2).set_i("heads", 4);
  RunResult cpu = run_cpu(OpKind::rope, {x.view, f.view, off.view}, a);
  ASSERT_TRUE(cpu.status.is_ok()) << cpu.status.to_string();
  auto gpu = run_gpu(OpKind::rope, {&x, &f, &off}, a);
  // Row 2 sits at position 902: a GPU's sin and cos of angles that large are good to about 1e-4
  // (an H200 differed by up to 1.3e-4 from the CPU's), as in the single-offset decode path.
  expect_close(to_doubles(gpu[0].view), to_doubles(cpu.outputs[0].view), 2e-4, 2e-5, "rope with an offset per row");
}

TEST_F(VkAttention, RopeHalfAndInterleaved) {
  std::mt19937 rng(22);
  const int64_t B = 2, S = 7, H = 3, D = 24, rd = 16, pos = 37;
  HostTensor f = vector_tensor(rope_frequencies(rd));
  for (DType dt : {DType::f32, DType::f16}) {
    for (const char* mode : {"half", "interleaved"}) {
      for (int64_t heads : {0, 2}) {  // 2: the last head passes through
        HostTensor x = random_strided(dt, Shape{B, S, H, D}, {0, 2, 1, 3}, 3, rng);
        Attrs a(OpKind::rope);
        a.set_i("pos", pos).set_s("mode", mode).set_i("rotary_dim", rd).set_i("heads", heads);
        // f16 half: the position as pos 5 plus 32 from the offset input (a decode step's).
        const bool dyn = dt == DType::f16 && std::string(mode) == "half";
        HostTensor off = make_tensor(DType::i32, Shape{1});
        off.view.ptr<int32_t>()[0] = 32;
        if (dyn) a.set_i("pos", pos - 32);
        auto out = run_gpu(OpKind::rope, {&x, &f, dyn ? &off : nullptr}, a);
        const auto xv = to_doubles(x.view);
        std::vector<double> want(xv.size());
        const bool inter = std::string(mode) == "interleaved";
        for (int64_t r = 0; r < B * S * H; ++r) {
          const int64_t s = (r / H) % S;
          const double* xr = &xv[r * D];
          for (int64_t d = 0; d < D; ++d) {
            double y = xr[d];
            if (d < rd && (heads == 0 || r % H < heads)) {
              const int64_t fi = inter ? d / 2 : d % (rd / 2);
              const double ang = static_cast<double>(pos + s) * f.view.ptr<float>()[fi];
              if (inter)
                y = d % 2 == 0 ? xr[d] * std::cos(ang) - xr[d + 1] * std::sin(ang)
                               : xr[d] * std::cos(ang) + xr[d - 1] * std::sin(ang);
              else
                y = d < rd / 2 ? xr[d] * std::cos(ang) - xr[d + rd / 2] * std::sin(ang)
                               : xr[d] * std::cos(ang) + xr[d - rd / 2] * std::sin(ang);
            }
            want[r * D + d] = y;
          }
        }
        expect_close(to_doubles(out[0].view), want, 2e-5, rtol_for(dt) + 1e-5,
                     (std::string("rope ") + mode).c_str());
      }
    }
  }
}

}  // namespace
}  // namespace vrun::test
