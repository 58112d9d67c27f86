// sdpa and rope against float64 references.
#include <array>
#include <cmath>
#include <limits>

#include "kernel_test_util.h"

namespace vrun::test {
namespace {

// Softmax attention in float64; rows with no finite score give zeros (the kernel's contract).
// window {left, right}: query i (at position lk - lq + i) sees only keys within it, and the mask
// is in band coordinates (column c is key p - left + c).
std::vector<double> ref_sdpa(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView* mask,
                             double scale, bool causal, const std::vector<int64_t>& window = {}) {
  const int64_t nb = q.shape[0], hq = q.shape[1], lq = q.shape[2], d = q.shape[3];
  const int64_t hkv = k.shape[1], lk = k.shape[2], dv = v.shape[3];
  const bool windowed = !window.empty();
  if (scale == 0) scale = 1 / std::sqrt(static_cast<double>(d));
  TensorView m;
  if (mask) m = broadcast_view(*mask, Shape{nb, hq, lq, windowed ? window[0] + window[1] + 1 : lk});
  std::vector<double> out;
  for (int64_t b = 0; b < nb; ++b)
    for (int64_t h = 0; h < hq; ++h)
      for (int64_t i = 0; i < lq; ++i) {
        const int64_t hk = h / (hq / hkv);
        std::vector<double> s(static_cast<size_t>(lk));
        double mx = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < lk; ++j) {
          double dot = 0;
          for (int64_t p = 0; p < d; ++p) {
            const int64_t iq[4] = {b, h, i, p}, ik[4] = {b, hk, j, p};
            dot += load_double(q, iq) * load_double(k, ik);
          }
          s[j] = dot * scale;
          const int64_t p = lk - lq + i;
          if (windowed && (j < p - window[0] || j > p + window[1])) {
            s[j] = -INFINITY;
          } else if (mask) {
            const int64_t im[4] = {b, h, i, windowed ? j - (p - window[0]) : j};
            const double mv = load_double(m, im);
            s[j] = m.dtype == DType::bool_ ? (mv != 0 ? s[j] : -INFINITY) : s[j] + mv;
          }
          if (causal && j > p) s[j] = -INFINITY;
          mx = std::max(mx, s[j]);
        }
        for (int64_t c = 0; c < dv; ++c) {
          double num = 0, den = 0;
          if (std::isfinite(mx)) {
            for (int64_t j = 0; j < lk; ++j) {
              const double p = std::exp(s[j] - mx);
              const int64_t iv[4] = {b, hk, j, c};
              num += p * load_double(v, iv);
              den += p;
            }
          }
          out.push_back(den > 0 ? num / den : 0);
        }
      }
  return out;
}

void check_sdpa(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView* mask, double scale,
                bool causal, double tol, const char* what, const std::vector<int64_t>& window = {}) {
  Attrs at(OpKind::sdpa);
  at.set_f("scale", scale).set_i("causal", causal);
  if (!window.empty()) at.set_ints("window", window);
  std::vector<TensorView> in{q, k, v};
  if (mask) in.push_back(*mask);
  ThreadPool pool(2);
  RunResult r = run_cpu(OpKind::sdpa, in, at, &pool);
  ASSERT_TRUE(r.status.is_ok()) << what << ": " << r.status.to_string();
  expect_close(to_doubles(r.outputs[0].view), ref_sdpa(q, k, v, mask, scale, causal, window), tol, tol, what);
}

// k/v as the first `len` positions of a [B, H, cap, D] cache: strided, non-contiguous views.
TensorView cache_view(const HostTensor& cache, int64_t len) {
  TensorView v = cache.view;
  v.shape[2] = len;
  return v;
}

// Random q, k and v, each a [B, H, L, D] view of [B, L, H, D] storage (a fused projection's
// layout) starting a few elements into its buffer.
struct PermutedQkv {
  HostTensor q, k, v;
};
PermutedQkv permuted_qkv(const Shape& q, const Shape& k, const Shape& v, std::mt19937& rng) {
  const std::vector<int> blhd = {0, 2, 1, 3};
  return {random_strided(DType::f32, q, blhd, 2, rng), random_strided(DType::f32, k, blhd, 3, rng),
          random_strided(DType::f32, v, blhd, 1, rng)};
}

// q against random k and v caches (k in [-2, 2]) of shapes k_cache / v_cache: causal over their
// first lens[0] positions, then not causal, with `scale`, over their first lens[1].
void check_sdpa_over_caches(const HostTensor& q, const Shape& k_cache, const Shape& v_cache,
                            std::array<int64_t, 2> lens, double scale, std::mt19937& rng,
                            std::array<const char*, 2> what) {
  HostTensor kc = random_tensor(DType::f32, k_cache, rng, -2, 2);
  HostTensor vc = random_tensor(DType::f32, v_cache, rng);
  check_sdpa(q.view, cache_view(kc, lens[0]), cache_view(vc, lens[0]), nullptr, 0, true, 1e-5, what[0]);
  check_sdpa(q.view, cache_view(kc, lens[1]), cache_view(vc, lens[1]), nullptr, scale, false, 1e-5, what[1]);
}

TEST(Sdpa, GqaCausalOverCachePrefix) {
  std::mt19937 rng(1);
  HostTensor q = random_tensor(DType::f32, Shape{2, 6, 5, 16}, rng);
  // Lq = 5 new tokens at cache positions 4..8: query i sees keys 0 .. 4 + i.
  check_sdpa_over_caches(q, Shape{2, 2, 20, 16}, Shape{2, 2, 20, 12}, {9, 9}, 0.3, rng,
                         {"causal Lq < Lk", "non-causal, scale 0.3"});
  const PermutedQkv p = permuted_qkv(Shape{2, 6, 7, 16}, Shape{2, 2, 7, 16}, Shape{2, 2, 7, 12}, rng);
  check_sdpa(p.q.view, p.k.view, p.v.view, nullptr, 0, true, 1e-5, "permuted q/k/v");
}

TEST(Sdpa, DecodeOverManyKeyBlocks) {
  std::mt19937 rng(2);
  HostTensor q = random_tensor(DType::f32, Shape{1, 9, 1, 64}, rng, -3, 3);
  HostTensor kc = random_tensor(DType::f32, Shape{1, 3, 400, 64}, rng);
  HostTensor vc = random_tensor(DType::f32, Shape{1, 3, 400, 64}, rng);
  check_sdpa(q.view, cache_view(kc, 333), cache_view(vc, 333), nullptr, 0, true, 1e-5, "Lq = 1, Lk = 333");
}

// The queries' cache position on the device (sdpa's pos input): k/v are the whole capacity,
// and only keys up to pos + Lq - 1 count, exactly as attention over the cache's prefix.
TEST(Sdpa, PositionInputCutsTheCacheCapacity) {
  std::mt19937 rng(11);
  HostTensor kc = random_tensor(DType::f16, Shape{1, 3, 64, 32}, rng, -2, 2);
  HostTensor vc = random_tensor(DType::f16, Shape{1, 3, 64, 32}, rng);
  HostTensor pos = make_tensor(DType::i32, Shape{1});
  for (int64_t lq : {1, 4})
    for (int64_t at : {int64_t{0}, int64_t{9}, 64 - lq}) {
      SCOPED_TRACE("Lq " + std::to_string(lq) + " at " + std::to_string(at));
      HostTensor q = random_tensor(DType::f32, Shape{1, 9, lq, 32}, rng);
      pos.view.ptr<int32_t>()[0] = static_cast<int32_t>(at);
      for (bool causal : {true, false}) {
        Attrs a(OpKind::sdpa);
        a.set_i("causal", causal);
        RunResult r = run_cpu(OpKind::sdpa, {q.view, kc.view, vc.view, TensorView{}, pos.view}, a);
        ASSERT_TRUE(r.status.is_ok()) << r.status.to_string();
        expect_close(to_doubles(r.outputs[0].view),
                     ref_sdpa(q.view, cache_view(kc, at + lq), cache_view(vc, at + lq), nullptr, 0, causal), 1e-5, 1e-5,
                     causal ? "causal" : "non-causal");
      }
    }
  // Past the capacity: an error naming the positions.
  HostTensor q = random_tensor(DType::f32, Shape{1, 3, 2, 32}, rng);
  pos.view.ptr<int32_t>()[0] = 63;
  RunResult r = run_cpu(OpKind::sdpa, {q.view, kc.view, vc.view, TensorView{}, pos.view}, Attrs(OpKind::sdpa));
  EXPECT_EQ(r.status.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(r.status.message().find("position 63 .. 64"), std::string::npos) << r.status.message();
}

// Batch entry b of a view, its dim 2 cut to len (len < 0: whole).
TensorView entry(const TensorView& t, int64_t b, int64_t len = -1) {
  TensorView v = t;
  v.data = static_cast<uint8_t*>(t.data) + b * t.strides[0] * dtype_elem_size(t.dtype);
  v.shape[0] = 1;
  if (len >= 0) v.shape[2] = len;
  return v;
}

// One position per batch entry (pos [B]): entry b attends over its own keys 0 .. pos[b] + Lq - 1,
// as each entry alone would. K/V are the slots of a batched cache [1, 2 kv heads, S * C, D] seen as
// [B, kv heads, C, D] (keys in the first kv heads, values after them), as a batched decode reads them.
TEST(Sdpa, PositionPerBatchEntry) {
  std::mt19937 rng(23);
  const int64_t S = 4, C = 40, kvh = 2, D = 32;
  HostTensor cache = random_tensor(DType::f16, Shape{1, 2 * kvh, S * C, D}, rng, -2, 2);
  auto slots = [&](int64_t first_head) {
    TensorView v = cache.view;
    v.data = static_cast<uint8_t*>(v.data) + first_head * S * C * D * dtype_elem_size(v.dtype);
    v.shape = Shape{3, kvh, C, D};
    v.strides = {C * D, S * C * D, D, 1};
    return v;
  };
  const TensorView k = slots(0), vv = slots(kvh);
  HostTensor pos = make_tensor(DType::i32, Shape{3});
  const int32_t at[3] = {0, 17, 39};
  for (int64_t lq : {1, 3}) {
    SCOPED_TRACE("Lq " + std::to_string(lq));
    HostTensor q = random_tensor(DType::f32, Shape{3, 4, lq, D}, rng);
    for (int b = 0; b < 3; ++b) pos.view.ptr<int32_t>()[b] = std::min<int32_t>(at[b], static_cast<int32_t>(C - lq));
    Attrs a(OpKind::sdpa);
    a.set_i("causal", 1);
    RunResult r = run_cpu(OpKind::sdpa, {q.view, k, vv, TensorView{}, pos.view}, a);
    ASSERT_TRUE(r.status.is_ok()) << r.status.to_string();
    std::vector<double> want;
    for (int64_t b = 0; b < 3; ++b) {
      const int64_t len = pos.view.ptr<int32_t>()[b] + lq;
      const auto part = ref_sdpa(entry(q.view, b), entry(k, b, len), entry(vv, b, len), nullptr, 0, true);
      want.insert(want.end(), part.begin(), part.end());
    }
    expect_close(to_doubles(r.outputs[0].view), want, 1e-5, 1e-5, "a position per batch entry");
  }
  // Neither one nor one per entry, or past an entry's capacity: errors.
  HostTensor q = random_tensor(DType::f32, Shape{3, 4, 1, D}, rng);
  HostTensor two = make_tensor(DType::i32, Shape{2});
  RunResult r = run_cpu(OpKind::sdpa, {q.view, k, vv, TensorView{}, two.view}, Attrs(OpKind::sdpa));
  EXPECT_NE(r.status.message().find("one per batch entry (3)"), std::string::npos) << r.status.message();
  pos.view.ptr<int32_t>()[1] = 40;
  r = run_cpu(OpKind::sdpa, {q.view, k, vv, TensorView{}, pos.view}, Attrs(OpKind::sdpa));
  EXPECT_NE(r.status.message().find("position 40 .. 40"), std::string::npos) << r.status.message();
}

TEST(Sdpa, FloatAndBoolMasks) {
  std::mt19937 rng(3);
  HostTensor q = random_tensor(DType::f32, Shape{2, 4, 6, 8}, rng);
  HostTensor k = random_tensor(DType::f32, Shape{2, 2, 10, 8}, rng);
  HostTensor v = random_tensor(DType::f32, Shape{2, 2, 10, 8}, rng);
  HostTensor fm = random_tensor(DType::f32, Shape{6, 10}, rng, -4, 1);
  check_sdpa(q.view, k.view, v.view, &fm.view, 0, false, 1e-5, "float mask [Lq, Lk]");
  HostTensor small = random_tensor(DType::f32, Shape{2, 1, 1, 10}, rng, -3, 0);
  const TensorView fb = broadcast_view(small.view, Shape{2, 4, 6, 10});
  check_sdpa(q.view, k.view, v.view, &fb, 0, true, 1e-5, "0-stride float mask, causal");
  // Bool mask: padding keys masked per batch, one query row masked entirely (gives zeros).
  HostTensor bm = make_tensor(DType::bool_, Shape{2, 1, 6, 10});
  for_each_index(bm.view.shape, [&](const int64_t* i) {
    const bool keep_it = i[3] < (i[0] == 0 ? 10 : 7) && !(i[0] == 1 && i[2] == 2);
    store_double(bm.view, i, keep_it);
  });
  check_sdpa(q.view, k.view, v.view, &bm.view, 0, false, 1e-5, "bool mask with a fully masked row");
  HostTensor hm = random_tensor(DType::f16, Shape{1, 4, 6, 10}, rng, -2, 0);
  check_sdpa(q.view, k.view, v.view, &hm.view, 0, false, 1e-5, "f16 mask");
}

TEST(Sdpa, HalfInputs) {
  std::mt19937 rng(4);
  for (DType t : {DType::f16, DType::bf16}) {
    HostTensor q = random_tensor(t, Shape{1, 4, 3, 32}, rng);
    HostTensor k = random_tensor(t, Shape{1, 1, 5, 32}, rng);
    HostTensor v = random_tensor(t, Shape{1, 1, 5, 16}, rng);
    check_sdpa(q.view, k.view, v.view, nullptr, 0, true, t == DType::f16 ? 2e-3 : 1.6e-2, dtype_name(t));
  }
}

TEST(Sdpa, HalfKvCacheRowsReadInPlace) {
  // f16/bf16 caches as the Llama graph keeps them: f32 queries, K/V a strided prefix of the cache;
  // key counts that are and are not multiples of the 8-key step, head dims of one and two
  // 64-wide passes plus an 8-wide tail.
  std::mt19937 rng(6);
  for (DType t : {DType::f16, DType::bf16}) {
    for (int64_t d : {64, 136}) {
      HostTensor q = random_tensor(DType::f32, Shape{1, 6, 1, d}, rng, -3, 3);
      HostTensor kc = random_tensor(t, Shape{1, 2, 300, d}, rng);
      HostTensor vc = random_tensor(t, Shape{1, 2, 300, d}, rng);
      for (int64_t len : {1, 8, 263}) {
        const std::string what = std::string(dtype_name(t)) + " decode D=" + std::to_string(d) + " Lk=" + std::to_string(len);
        check_sdpa(q.view, cache_view(kc, len), cache_view(vc, len), nullptr, 0, true, 1e-5, what.c_str());
      }
      HostTensor q5 = random_tensor(DType::f32, Shape{1, 6, 37, d}, rng);
      check_sdpa(q5.view, cache_view(kc, 50), cache_view(vc, 50), nullptr, 0, true, 1e-5,
                 (std::string(dtype_name(t)) + " chunk of 37 at position 13").c_str());
    }
  }
}

// Prefill-shaped attention (16 or more query rows) runs as blocked matrix products with an
// online softmax over blocks of 512 keys: query counts around the 64-row blocks, key counts past
// one and two key blocks, causal over a cache prefix, GQA, permuted views, every mask kind
// (including rows masked in a whole key block and rows masked entirely), half K/V.
TEST(Sdpa, BlockedPrefillMatchesReference) {
  std::mt19937 rng(21);
  {
    HostTensor q = random_tensor(DType::f32, Shape{1, 4, 130, 32}, rng, -2, 2);
    check_sdpa_over_caches(q, Shape{1, 2, 1200, 32}, Shape{1, 2, 1200, 24}, {1100, 1025}, 0.2, rng,
                           {"causal 130 over 1100 keys", "non-causal 130 x 1025"});
  }
  {
    const PermutedQkv p = permuted_qkv(Shape{2, 4, 16, 16}, Shape{2, 4, 600, 16}, Shape{2, 4, 600, 8}, rng);
    check_sdpa(p.q.view, p.k.view, p.v.view, nullptr, 0, false, 1e-5, "permuted q/k/v, 16 queries");
    // Scores that differ by hundreds between key blocks: the later block's max rescales the first's.
    HostTensor fm = random_tensor(DType::f32, Shape{2, 4, 16, 600}, rng, -1, 1);
    for (int64_t i = 0; i < fm.view.numel(); ++i)
      if (i % 600 >= 512) fm.view.ptr<float>()[i] += 200.f;
    check_sdpa(p.q.view, p.k.view, p.v.view, &fm.view, 0, false, 1e-5,
               "f32 mask rising in the second key block");
  }
  {
    HostTensor q = random_tensor(DType::f32, Shape{2, 3, 70, 16}, rng);
    HostTensor k = random_tensor(DType::f32, Shape{2, 3, 530, 16}, rng);
    HostTensor v = random_tensor(DType::f32, Shape{2, 3, 530, 16}, rng);
    // Padding keys per batch (batch 1 sees keys < 300 only, none in the second block), query row
    // 5 of batch 1 masked entirely, row 66 of batch 0 live in the second block only.
    HostTensor bm = make_tensor(DType::bool_, Shape{2, 1, 70, 530});
    for_each_index(bm.view.shape, [&](const int64_t* i) {
      bool keep_it = i[3] < (i[0] == 0 ? 530 : 300) && !(i[0] == 1 && i[2] == 5);
      if (i[0] == 0 && i[2] == 66) keep_it = i[3] >= 512;
      store_double(bm.view, i, keep_it);
    });
    check_sdpa(q.view, k.view, v.view, &bm.view, 0, false, 1e-5, "bool mask, masked rows and blocks");
    HostTensor hm = random_tensor(DType::f16, Shape{1, 3, 70, 530}, rng, -2, 0);
    check_sdpa(q.view, k.view, v.view, &hm.view, 0, true, 1e-5, "f16 mask, causal");
    HostTensor small = random_tensor(DType::f32, Shape{2, 1, 1, 530}, rng, -3, 0);
    const TensorView fb = broadcast_view(small.view, Shape{2, 3, 70, 530});
    check_sdpa(q.view, k.view, v.view, &fb, 0, false, 1e-5, "0-stride f32 mask");
  }
  for (DType t : {DType::f16, DType::bf16}) {
    HostTensor q = random_tensor(DType::f32, Shape{1, 6, 40, 64}, rng);
    HostTensor kc = random_tensor(t, Shape{1, 2, 700, 64}, rng);
    HostTensor vc = random_tensor(t, Shape{1, 2, 700, 64}, rng);
    check_sdpa(q.view, cache_view(kc, 600), cache_view(vc, 600), nullptr, 0, true, 1e-5,
               (std::string(dtype_name(t)) + " cache, 40 queries at position 560").c_str());
  }
}

// Local attention: each query sees the keys of its window only, and its mask is laid out over
// the band. Small and prefill-sized queries, rows whose band runs off either end of the keys,
// bands wider than the keys, asymmetric and causal windows, a query block spanning two key blocks.
TEST(Sdpa, WindowedMatchesReference) {
  std::mt19937 rng(33);
  for (int64_t len : {1, 7, 33, 100, 700}) {
    HostTensor q = random_tensor(DType::f32, Shape{1, 4, len, 16}, rng, -2, 2);
    HostTensor k = random_tensor(DType::f32, Shape{1, 2, len, 16}, rng, -2, 2);
    HostTensor v = random_tensor(DType::f32, Shape{1, 2, len, 8}, rng);
    const std::string n = std::to_string(len);
    for (const std::vector<int64_t>& w : std::vector<std::vector<int64_t>>{{0, 0}, {3, 5}, {128, 128}, {300, 2}}) {
      const std::string tag = n + " rows, window [" + std::to_string(w[0]) + ", " + std::to_string(w[1]) + "]";
      check_sdpa(q.view, k.view, v.view, nullptr, 0, false, 1e-5, tag.c_str(), w);
      HostTensor bm = random_tensor(DType::f32, Shape{1, 4, len, w[0] + w[1] + 1}, rng, -3, 3);
      check_sdpa(q.view, k.view, v.view, &bm.view, 0, false, 1e-5, (tag + ", band mask").c_str(), w);
      check_sdpa(q.view, k.view, v.view, &bm.view, 0.3, true, 1e-5, (tag + ", band mask, causal").c_str(), w);
    }
  }
  {
    // Queries after a prefix of keys (position lk - lq + i), f16 q/k/v, a broadcast f16 mask and
    // a bool mask that drops some rows' whole bands (the output is f16: its rounding sets the tolerance).
    HostTensor q = random_tensor(DType::f16, Shape{2, 2, 90, 32}, rng);
    HostTensor k = random_tensor(DType::f16, Shape{2, 2, 150, 32}, rng);
    HostTensor v = random_tensor(DType::f16, Shape{2, 2, 150, 32}, rng);
    HostTensor hm = random_tensor(DType::f16, Shape{2, 1, 1, 21}, rng, -2, 2);
    check_sdpa(q.view, k.view, v.view, &hm.view, 0, false, 2e-3, "f16, queries after 60 keys, [10, 10]", {10, 10});
    HostTensor bm = make_tensor(DType::bool_, Shape{2, 2, 90, 21});
    for_each_index(bm.view.shape, [&](const int64_t* i) { store_double(bm.view, i, i[2] % 7 != 3 && (i[3] + i[2]) % 3 != 0); });
    check_sdpa(q.view, k.view, v.view, &bm.view, 0, true, 2e-3, "bool band mask, masked rows, causal", {10, 10});
  }
}

TEST(Sdpa, RejectsBadShapes) {
  std::mt19937 rng(5);
  HostTensor q = random_tensor(DType::f32, Shape{1, 3, 4, 8}, rng);
  HostTensor k = random_tensor(DType::f32, Shape{1, 2, 4, 8}, rng);
  RunResult r = run_cpu(OpKind::sdpa, {q.view, k.view, k.view}, Attrs(OpKind::sdpa));
  EXPECT_NE(r.status.message().find("multiple of kv heads"), std::string::npos) << r.status.message();
  HostTensor k2 = random_tensor(DType::f32, Shape{1, 1, 4, 6}, rng);
  r = run_cpu(OpKind::sdpa, {q.view, k2.view, k2.view}, Attrs(OpKind::sdpa));
  EXPECT_NE(r.status.message().find("disagree on D"), std::string::npos) << r.status.message();
  HostTensor k3 = random_tensor(DType::f32, Shape{1, 1, 2, 8}, rng);
  Attrs causal(OpKind::sdpa);
  causal.set_i("causal", 1);
  r = run_cpu(OpKind::sdpa, {q.view, k3.view, k3.view}, causal);
  EXPECT_NE(r.status.message().find("Lq <= Lk"), std::string::npos) << r.status.message();
  HostTensor k4 = random_tensor(DType::f32, Shape{1, 1, 4, 8}, rng);
  HostTensor m = random_tensor(DType::f32, Shape{3, 4, 5}, rng);
  r = run_cpu(OpKind::sdpa, {q.view, k4.view, k4.view, m.view}, Attrs(OpKind::sdpa));
  EXPECT_NE(r.status.message().find("does not broadcast"), std::string::npos) << r.status.message();
  // A window's mask is as wide as its band, not as the keys.
  Attrs windowed(OpKind::sdpa);
  windowed.set_ints("window", {1, 1});
  HostTensor wide = random_tensor(DType::f32, Shape{1, 3, 4, 4}, rng);
  r = run_cpu(OpKind::sdpa, {q.view, k4.view, k4.view, wide.view}, windowed);
  EXPECT_NE(r.status.message().find("does not broadcast"), std::string::npos) << r.status.message();
  windowed.set_ints("window", {-1, 2});
  r = run_cpu(OpKind::sdpa, {q.view, k4.view, k4.view}, windowed);
  EXPECT_NE(r.status.message().find("window must be"), std::string::npos) << r.status.message();
}

// rope in float64 with the angle rounded as the kernel's contract says: float(pos) * inv_freq
// in f32, then exact cos/sin.
std::vector<double> ref_rope(const TensorView& x, const std::vector<float>& f, int64_t pos, int seq, bool inter,
                             int64_t rd, int64_t heads = 0) {
  const int r = x.rank();
  const int64_t d = x.shape[r - 1];
  std::vector<double> out;
  for_each_index(x.shape, [&](const int64_t* idx) {
    const int64_t c = idx[r - 1];
    int64_t j[kMaxRank];
    std::copy(idx, idx + r, j);
    double y = load_double(x, idx);
    if (c < rd && (heads == 0 || idx[r - 2] < heads)) {
      const int64_t half = rd / 2;
      const int64_t pair = inter ? c / 2 : c % half;
      const bool first = inter ? c % 2 == 0 : c < half;
      const int64_t other = inter ? (first ? c + 1 : c - 1) : (first ? c + half : c - half);
      j[r - 1] = other;
      const double xo = load_double(x, j);
      const double ang = static_cast<float>(static_cast<float>(pos + idx[seq]) * f[pair]);
      y = first ? y * std::cos(ang) - xo * std::sin(ang) : y * std::cos(ang) + xo * std::sin(ang);
    }
    (void)d;
    out.push_back(y);
  });
  return out;
}

void check_rope(const TensorView& x, int64_t pos, int seq_axis, const char* mode, int64_t rotary_dim, double tol,
                int64_t heads = 0) {
  const int64_t d = x.shape[x.rank() - 1], rd = rotary_dim ? rotary_dim : d;
  const std::vector<float> fv = rope_frequencies(rd);
  HostTensor f = vector_tensor(fv);
  Attrs at(OpKind::rope);
  at.set_i("pos", pos).set_i("seq_axis", seq_axis).set_s("mode", mode).set_i("rotary_dim", rotary_dim);
  at.set_i("heads", heads);
  RunResult r = run_cpu(OpKind::rope, {x, f.view}, at);
  ASSERT_TRUE(r.status.is_ok()) << r.status.to_string();
  const int seq = normalize_axis(seq_axis, x.rank());
  expect_close(to_doubles(r.outputs[0].view), ref_rope(x, fv, pos, seq, std::string(mode) == "interleaved", rd, heads),
               tol, tol, mode);
}

TEST(Rope, HalfAndInterleavedModes) {
  std::mt19937 rng(6);
  HostTensor x = random_tensor(DType::f32, Shape{5, 3, 16}, rng);  // [S, H, D]
  check_rope(x.view, 0, -3, "half", 0, 2e-6);
  check_rope(x.view, 1000, -3, "interleaved", 0, 2e-6);
  check_rope(x.view, 37, -3, "half", 8, 2e-6);  // dims 8.. pass through
  check_rope(x.view, 37, -3, "interleaved", 6, 2e-6);
  HostTensor xb = random_strided(DType::f32, Shape{2, 3, 4, 8}, {0, 2, 1, 3}, 3, rng);  // [B, H, S, D] view
  check_rope(xb.view, 12, 2, "half", 0, 2e-6);
  HostTensor xh = random_tensor(DType::f16, Shape{1, 4, 2, 32}, rng);
  check_rope(xh.view, 5, 1, "half", 0, 1e-3);
}

// Stacked q, k and v heads: the first `heads` rotate, the values pass through bit for bit.
TEST(Rope, LeadingHeadsOnly) {
  std::mt19937 rng(8);
  HostTensor x = random_tensor(DType::f32, Shape{1, 3, 7, 16}, rng);  // [B, S, q 4 + k 1 + v 2 heads, D]
  check_rope(x.view, 9, -3, "half", 0, 2e-6, 5);
  check_rope(x.view, 9, -3, "interleaved", 8, 2e-6, 1);
  check_rope(x.view, 9, -3, "half", 0, 2e-6, 7);  // all of them
  HostTensor xs = random_strided(DType::f16, Shape{2, 5, 6, 8}, {0, 2, 1, 3}, 3, rng);
  check_rope(xs.view, 3, 1, "half", 0, 1e-3, 4);
}

// The offset input (a position on the device) adds to pos.
TEST(Rope, OffsetInputAddsToPos) {
  std::mt19937 rng(9);
  HostTensor x = random_tensor(DType::f32, Shape{1, 3, 4, 16}, rng);
  const std::vector<float> fv = rope_frequencies(16);
  HostTensor f = vector_tensor(fv);
  HostTensor off = vector_tensor(std::vector<int32_t>{700});
  Attrs at(OpKind::rope);
  at.set_i("pos", 5).set_i("heads", 3);
  RunResult r = run_cpu(OpKind::rope, {x.view, f.view, off.view}, at);
  ASSERT_TRUE(r.status.is_ok()) << r.status.to_string();
  expect_close(to_doubles(r.outputs[0].view), ref_rope(x.view, fv, 705, 1, false, 16, 3), 2e-6, 2e-6, "rope offset");
  HostTensor wrong = make_tensor(DType::f32, Shape{1});
  r = run_cpu(OpKind::rope, {x.view, f.view, wrong.view}, at);
  EXPECT_NE(r.status.message().find("offset must be i32"), std::string::npos) << r.status.message();
}

// An offset per row along the sequence axis: row s sits at pos + offset[s] (rows of different
// sequences in one call).
TEST(Rope, OffsetPerRow) {
  std::mt19937 rng(29);
  HostTensor x = random_tensor(DType::f32, Shape{1, 5, 6, 16}, rng);  // 5 rows, 6 heads (q and k)
  const std::vector<float> fv = rope_frequencies(16);
  HostTensor f = vector_tensor(fv);
  const std::vector<int32_t> rows = {3, 0, 900, 41, 3};
  HostTensor off = vector_tensor(rows);
  Attrs at(OpKind::rope);
  at.set_i("pos", 2).set_i("heads", 4);
  RunResult r = run_cpu(OpKind::rope, {x.view, f.view, off.view}, at);
  ASSERT_TRUE(r.status.is_ok()) << r.status.to_string();
  std::vector<double> want;
  for (int64_t s = 0; s < 5; ++s) {
    TensorView row = x.view;
    row.data = static_cast<uint8_t*>(row.data) + s * row.strides[1] * 4;
    row.shape[1] = 1;
    const auto part = ref_rope(row, fv, 2 + rows[s], 1, false, 16, 4);
    want.insert(want.end(), part.begin(), part.end());
  }
  expect_close(to_doubles(r.outputs[0].view), want, 2e-6, 2e-6, "rope offset per row");
  HostTensor three = make_tensor(DType::i32, Shape{3});
  r = run_cpu(OpKind::rope, {x.view, f.view, three.view}, at);
  EXPECT_NE(r.status.message().find("one per row along seq_axis (5)"), std::string::npos) << r.status.message();
}

TEST(Rope, RejectsBadAttributes) {
  std::mt19937 rng(7);
  HostTensor x = random_tensor(DType::f32, Shape{4, 2, 8}, rng);
  HostTensor f = random_tensor(DType::f32, Shape{4}, rng);
  Attrs odd(OpKind::rope);
  odd.set_i("rotary_dim", 5);
  EXPECT_NE(run_cpu(OpKind::rope, {x.view, f.view}, odd).status.message().find("rotary_dim must be even"),
            std::string::npos);
  HostTensor f3 = random_tensor(DType::f32, Shape{3}, rng);
  EXPECT_NE(run_cpu(OpKind::rope, {x.view, f3.view}, Attrs(OpKind::rope)).status.message().find("inv_freq must be"),
            std::string::npos);
  Attrs heads(OpKind::rope);
  heads.set_i("heads", 3);  // x has 2 rows on the axis before D
  EXPECT_NE(run_cpu(OpKind::rope, {x.view, f.view}, heads).status.message().find("rope: heads 3"), std::string::npos);
  Attrs seq_heads(OpKind::rope);
  seq_heads.set_i("heads", 1).set_i("seq_axis", -2);  // the axis before D is the sequence
  EXPECT_NE(run_cpu(OpKind::rope, {x.view, f.view}, seq_heads).status.message().find("rope: heads 1"),
            std::string::npos);
  Attrs mode(OpKind::rope);
  mode.set_s("mode", "spiral");
  EXPECT_NE(run_cpu(OpKind::rope, {x.view, f.view}, mode).status.message().find("half or interleaved"),
            std::string::npos);
  Attrs axis(OpKind::rope);
  axis.set_i("seq_axis", -1);
  EXPECT_NE(run_cpu(OpKind::rope, {x.view, f.view}, axis).status.message().find("seq_axis"), std::string::npos);
}

}  // namespace
}  // namespace vrun::test
