// copy/permute, concat, pad, slice_update (in place and into a new tensor), glu and embedding
// (every table dtype, i32 and i64 ids) against host math.
#include "tests/vulkan/vk_test_util.h"

namespace vrun::test {
namespace {

class VkData : public VulkanTest {};

TEST_F(VkData, CopyPermutedEveryPlainDtype) {
  std::mt19937 rng(40);
  for (DType dt : {DType::f32, DType::f16, DType::bf16, DType::i32, DType::i64, DType::i8, DType::u8}) {
    HostTensor x = random_strided(dt, Shape{4, 7, 33}, {2, 0, 1}, 3, rng);
    if (!is_float(dt)) for_each_index(x.view.shape, [&](const int64_t* i) { store_double(x.view, i, (i[0] * 7 + i[1]) * 3 - i[2]); });
    auto out = run_gpu(OpKind::copy, {&x}, Attrs(OpKind::copy));
    expect_close(to_doubles(out[0].view), to_doubles(x.view), 0, 0, dtype_name(dt));
  }
}

// Constant zero padding of the last dims (a strided input; f32, and f16 with an even last dim)
// against the index arithmetic; a non-zero value or cropping stays on the CPU.
TEST_F(VkData, PadWithZeros) {
  std::mt19937 rng(44);
  for (DType dt : {DType::f32, DType::f16}) {
    HostTensor x = random_strided(dt, Shape{2, 5, 6}, {1, 0, 2}, 1, rng);
    const std::vector<int64_t> pads = {2, 0, 1, 3};  // last dim: 2 before; dim 1: 1 before, 3 after
    Attrs a(OpKind::pad);
    a.set_ints("pads", pads);
    auto out = run_gpu(OpKind::pad, {&x}, a);
    ASSERT_EQ(out[0].view.shape, (Shape{2, 9, 8})) << dtype_name(dt);
    std::vector<double> want;
    for_each_index(out[0].view.shape, [&](const int64_t* i) {
      const int64_t j = i[1] - 1, k = i[2] - 2;
      int64_t idx[3] = {i[0], j, k};
      want.push_back(j >= 0 && j < 5 && k >= 0 && k < 6 ? load_double(x.view, idx) : 0.0);
    });
    expect_close(to_doubles(out[0].view), want, 0, 0, (std::string("pad ") + dtype_name(dt)).c_str());
  }
  HostTensor x = random_tensor(DType::f32, Shape{3, 4}, rng);
  TensorDesc d{DType::f32, Shape{3, 4}};
  std::vector<const TensorDesc*> in = {&d};
  Attrs one(OpKind::pad);
  one.set_ints("pads", {1, 1}).set_f("value", 1.0);
  EXPECT_FALSE(vulkan::supports(ctx(), OpKind::pad, in, one));
  Attrs crop(OpKind::pad);
  crop.set_ints("pads", {-1, 0});
  EXPECT_FALSE(vulkan::supports(ctx(), OpKind::pad, in, crop));
}

TEST_F(VkData, ConcatAndGlu) {
  std::mt19937 rng(41);
  HostTensor a = random_tensor(DType::f16, Shape{3, 5, 2}, rng);
  HostTensor b = random_strided(DType::f16, Shape{3, 7, 2}, {2, 1, 0}, 1, rng);
  Attrs c(OpKind::concat);
  c.set_i("axis", 1);
  auto out = run_gpu(OpKind::concat, {&a, &b}, c);
  ASSERT_EQ(out[0].view.shape, (Shape{3, 12, 2}));
  std::vector<double> want;
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 12; ++j)
      for (int64_t k = 0; k < 2; ++k) {
        int64_t idx[3] = {i, j < 5 ? j : j - 5, k};
        want.push_back(load_double(j < 5 ? a.view : b.view, idx));
      }
  expect_close(to_doubles(out[0].view), want, 0, 0, "concat");

  HostTensor x = random_tensor(DType::f32, Shape{5, 66}, rng, -4, 4);
  for (const char* act : {"sigmoid", "silu"})
  for (int axis : {-1, 0}) {
    HostTensor xx = axis == 0 ? random_tensor(DType::f32, Shape{6, 33}, rng, -4, 4) : x;
    Attrs g(OpKind::glu);
    g.set_i("axis", axis).set_s("act", act);
    auto y = run_gpu(OpKind::glu, {&xx}, g);
    const auto xv = to_doubles(xx.view);
    std::vector<double> w;
    const Shape& s = xx.view.shape;
    for_each_index(y[0].view.shape, [&](const int64_t* i) {
      const int64_t half = axis == 0 ? s[0] / 2 : s[1] / 2;
      const int64_t a0 = i[0] * s[1] + i[1];
      const int64_t b0 = axis == 0 ? (i[0] + half) * s[1] + i[1] : i[0] * s[1] + i[1] + half;
      w.push_back((std::string(act) == "silu" ? xv[a0] * xv[b0] : xv[a0]) / (1 + std::exp(-xv[b0])));
    });
    expect_close(to_doubles(y[0].view), w, 1e-6, 1e-5, act);
  }
}

TEST_F(VkData, SliceUpdateInPlaceOnDevice) {
  std::mt19937 rng(42);
  // KV-cache-like state [1, 2, 16, 8]; write 3 positions at start 5 along axis 2, in place.
  HostTensor state = random_tensor(DType::f16, Shape{1, 2, 16, 8}, rng);
  HostTensor src = random_strided(DType::f16, Shape{1, 2, 3, 8}, {0, 2, 1, 3}, 0, rng);
  auto ds = to_device(state);
  auto dsrc = to_device(src);
  Attrs a(OpKind::slice_update);
  a.set_i("axis", 2).set_i("start", 5);
  auto rec = vulkan::Recorder::create(ctx());
  ASSERT_TRUE(rec.is_ok());
  ASSERT_TRUE((*rec)->record(OpKind::slice_update, {ds.view, dsrc.view}, {ds.view}, a).is_ok());
  ASSERT_TRUE((*rec)->submit_and_wait().is_ok());
  HostTensor got = to_host(ds.view);
  std::vector<double> want;
  for_each_index(state.view.shape, [&](const int64_t* i) {
    if (i[2] >= 5 && i[2] < 8) {
      int64_t j[4] = {i[0], i[1], i[2] - 5, i[3]};
      want.push_back(load_double(src.view, j));
    } else {
      want.push_back(load_double(state.view, i));
    }
  });
  expect_close(to_doubles(got.view), want, 0, 0, "slice_update in place");
  // Into a distinct output: the state is copied first.
  auto out = run_gpu(OpKind::slice_update, {&state, &src}, a);
  expect_close(to_doubles(out[0].view), want, 0, 0, "slice_update copy");
}

TEST_F(VkData, SliceUpdateConvertsAnF32SourceIntoAnF16Cache) {
  std::mt19937 rng(44);
  HostTensor state = random_tensor(DType::f16, Shape{1, 3, 9, 5}, rng);
  HostTensor src = random_strided(DType::f32, Shape{1, 3, 2, 5}, {0, 2, 1, 3}, 0, rng);
  Attrs a(OpKind::slice_update);
  a.set_i("axis", 2).set_i("start", 4);
  auto out = run_gpu(OpKind::slice_update, {&state, &src}, a);
  std::vector<double> want;
  for_each_index(state.view.shape, [&](const int64_t* i) {
    int64_t j[4] = {i[0], i[1], i[2] - 4, i[3]};
    want.push_back(i[2] >= 4 && i[2] < 6 ? load_double(src.view, j) : load_double(state.view, i));
  });
  expect_close(to_doubles(out[0].view), want, 1e-7, 0x1p-11, "slice_update f32 -> f16");
}

// slice_update's offset input: start + a position read on the device (clamped to the state on
// the GPU, where a call cannot fail part way).
TEST_F(VkData, SliceUpdateAtAnOffsetOnTheDevice) {
  std::mt19937 rng(46);
  HostTensor src = random_strided(DType::f32, Shape{1, 2, 1, 8}, {0, 2, 1, 3}, 0, rng);
  Attrs a(OpKind::slice_update);
  a.set_i("axis", 2).set_i("start", 1);
  for (int32_t at : {0, 9, 14, 40}) {
    HostTensor state = random_tensor(DType::f16, Shape{1, 2, 16, 8}, rng);
    HostTensor off = make_tensor(DType::i32, Shape{1});
    off.view.ptr<int32_t>()[0] = at;
    auto out = run_gpu(OpKind::slice_update, {&state, &src, &off}, a);
    const int64_t row = 1 + std::min(at, 14);
    std::vector<double> want;
    for_each_index(state.view.shape, [&](const int64_t* i) {
      int64_t j[4] = {i[0], i[1], 0, i[3]};
      want.push_back(i[2] == row ? load_double(src.view, j) : load_double(state.view, i));
    });
    expect_close(to_doubles(out[0].view), want, 1e-7, 0x1p-11, ("slice_update at offset " + std::to_string(at)).c_str());
  }
}

// An offset per row of src (a batched decode writing each row into its own slot): row r lands at
// start + offset[r], as the CPU kernel writes it.
TEST_F(VkData, SliceUpdateScattersRowsAtTheirOffsets) {
  std::mt19937 rng(47);
  HostTensor src = random_strided(DType::f32, Shape{1, 4, 3, 8}, {0, 2, 1, 3}, 0, rng);
  HostTensor state = random_tensor(DType::f16, Shape{1, 4, 30, 8}, rng);
  HostTensor off = vector_tensor(std::vector<int32_t>{27, 0, 11});
  Attrs a(OpKind::slice_update);
  a.set_i("axis", 2).set_i("start", 2);
  RunResult cpu = run_cpu(OpKind::slice_update, {state.view, src.view, off.view}, a);
  ASSERT_TRUE(cpu.status.is_ok()) << cpu.status.to_string();
  auto gpu = run_gpu(OpKind::slice_update, {&state, &src, &off}, a);
  expect_close(to_doubles(gpu[0].view), to_doubles(cpu.outputs[0].view), 0, 0, "slice_update rows at their offsets");
}

// slice_update rotating what it writes (a decode step's keys beside its values) into f16 and f32
// caches, at a position on the device and from a prefill chunk, against float64 rope.
TEST_F(VkData, SliceUpdateRotatesWhatItWrites) {
  std::mt19937 rng(47);
  std::vector<float> freq(16);
  for (size_t i = 0; i < freq.size(); ++i) freq[i] = static_cast<float>(std::pow(500000.0, -2.0 * static_cast<double>(i) / 32));
  HostTensor f = make_tensor(DType::f32, Shape{16});
  std::copy(freq.begin(), freq.end(), f.view.ptr<float>());
  HostTensor off = make_tensor(DType::i32, Shape{1});
  for (DType cache : {DType::f16, DType::f32})
    for (const char* mode : {"half", "interleaved"})
      for (int64_t len : {1, 7}) {
        const Shape ss{1, 6, 50, 32};
        HostTensor src = random_strided(DType::f32, Shape{1, 6, len, 32}, {0, 2, 1, 3}, 0, rng);
        HostTensor state = random_tensor(cache, ss, rng);
        const int32_t at = len == 1 ? 41 : 0;
        off.view.ptr<int32_t>()[0] = at;
        Attrs a(OpKind::slice_update);
        a.set_i("axis", 2).set_i("start", len == 1 ? 2 : 13).set_s("rope_mode", mode).set_i("rope_heads", 3);
        auto out = run_gpu(OpKind::slice_update, {&state, &src, len == 1 ? &off : nullptr, &f}, a);
        const auto want = rope_written_state(to_doubles(state.view), src.view, freq, ss, 2, len == 1 ? 43 : 13,
                                             std::string(mode) == "interleaved", 3);
        const Tolerance tol = tolerance_for(cache);
        // As the rope test: the device's cos and sin of angles up to 50 rad add about 1e-5.
        expect_close(to_doubles(out[0].view), want, std::max(tol.atol, 2e-5), tol.rtol + 1e-5,
                     (std::string("slice_update rotating into ") + dtype_name(cache) + ", " + mode).c_str());
      }
}

TEST_F(VkData, EmbeddingEveryTableDtype) {
  std::mt19937 rng(43);
  const int64_t V = 37, D = 64;
  for (DType tdt : {DType::f32, DType::f16, DType::bf16, DType::q8_0, DType::q4_0, DType::q4_1}) {
    for (DType idt : {DType::i32, DType::i64}) {
      HostTensor table = random_tensor(tdt, Shape{V, D}, rng);
      HostTensor ids = make_tensor(idt, Shape{2, 5});
      for_each_index(ids.view.shape, [&](const int64_t* i) { store_double(ids.view, i, static_cast<double>((i[0] * 5 + i[1]) * 7 % V)); });
      Attrs a(OpKind::embedding);
      a.set_s("dtype", tdt == DType::bf16 ? "bf16" : "f32");
      auto out = run_gpu(OpKind::embedding, {&table, &ids}, a);
      ASSERT_EQ(out[0].view.shape, (Shape{2, 5, D}));
      const auto tv = to_doubles(table.view), iv = to_doubles(ids.view);
      std::vector<double> want;
      for (double id : iv)
        for (int64_t d = 0; d < D; ++d) want.push_back(tv[static_cast<int64_t>(id) * D + d]);
      expect_close(to_doubles(out[0].view), want, 0, 0, dtype_name(tdt));
    }
  }
}

}  // namespace
}  // namespace vrun::test
