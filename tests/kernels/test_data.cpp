// copy, concat, pad, embedding, slice_update and glu against references computed here, plus
// the strided iteration every kernel in this area is built on.
#include <cmath>
#include <string>

#include "kernels/cpu/strided_iter.h"
#include "tests/kernels/kernel_test_util.h"

namespace vrun::test {
namespace {

const DType kFloatTypes[] = {DType::f32, DType::f16, DType::bf16};
const Layout kLayouts[] = {Layout::kDense, Layout::kPermuted, Layout::kBroadcast};

TEST(StridedIter, PiecesVisitEveryElementInOrder) {
  std::mt19937 rng(1);
  for (const Shape& s : {Shape{7}, Shape{3, 1, 5}, Shape{2, 3, 4, 5, 6}, Shape{1, 1}, Shape{}}) {
    HostTensor a = random_layout(DType::f32, s, Layout::kPermuted, rng);
    HostTensor b = random_layout(DType::f32, s, Layout::kBroadcast, rng);
    const Strides dense = contiguous_strides(s);
    const cpu::StridedIter<3> it(s, {dense, a.view.strides, b.view.strides});
    ASSERT_EQ(it.numel(), s.numel());
    std::vector<int64_t> want[3];
    for_each_index(s, [&](const int64_t* i) {
      int64_t o[3] = {};
      for (int d = 0; d < s.rank; ++d) {
        o[0] += i[d] * dense[d];
        o[1] += i[d] * a.view.strides[d];
        o[2] += i[d] * b.view.strides[d];
      }
      for (int k = 0; k < 3; ++k) want[k].push_back(o[k]);
    });
    for (int trial = 0; trial < 20; ++trial) {
      const int64_t n = s.numel();
      int64_t b0 = std::uniform_int_distribution<int64_t>(0, n)(rng);
      int64_t b1 = std::uniform_int_distribution<int64_t>(0, n)(rng);
      if (b0 > b1) std::swap(b0, b1);
      std::vector<int64_t> got[3];
      it.for_range(b0, b1, [&](const int64_t* off, int64_t len) {
        for (int64_t j = 0; j < len; ++j)
          for (int k = 0; k < 3; ++k) got[k].push_back(off[k] + j * it.inner_stride(k));
      });
      for (int k = 0; k < 3; ++k)
        ASSERT_EQ(got[k], std::vector<int64_t>(want[k].begin() + b0, want[k].begin() + b1)) << s.str() << " operand " << k;
    }
  }
}

// ---- copy

TEST(Copy, EveryDtypeAndLayout) {
  std::mt19937 rng(2);
  ThreadPool pool(3);
  for (DType dt : {DType::f32, DType::f16, DType::bf16, DType::f64, DType::i8, DType::u8, DType::i32, DType::i64, DType::bool_})
    for (Layout l : kLayouts)
      for (const Shape& s : {Shape{1}, Shape{33, 7}, Shape{2, 3, 1, 5, 7}, Shape{129, 300}}) {
        SCOPED_TRACE(std::string(dtype_name(dt)) + " " + s.str() + " " + layout_name(l));
        HostTensor x = random_layout(dt, s, l, rng, dt == DType::bool_ ? 0 : -100, dt == DType::bool_ ? 2 : 100);
        RunResult r = run_cpu(OpKind::copy, {x.view}, Attrs(OpKind::copy), &pool);
        ASSERT_TRUE(r.status.is_ok()) << r.status.to_string();
        ASSERT_TRUE(r.outputs[0].view.is_contiguous());
        expect_close(to_doubles(r.outputs[0].view), to_doubles(x.view), 0, 0, "copy");
      }
  // Transposed inner dims (the tiled path), with outer dims, an offset and odd sizes.
  for (DType dt : {DType::f32, DType::bf16, DType::i64, DType::u8})
    for (const auto& [shape, perm] : {std::pair<Shape, std::vector<int>>{Shape{3, 45, 70}, {0, 2, 1}},
                                      {Shape{2, 33, 5, 40}, {0, 1, 3, 2}},
                                      {Shape{301, 257}, {1, 0}},
                                      {Shape{4, 31, 2}, {2, 0, 1}}}) {
      SCOPED_TRACE(std::string("transposed ") + dtype_name(dt) + " " + shape.str());
      HostTensor x = random_strided(dt, shape, perm, 7, rng);
      fill_uniform(x.view, rng, dt == DType::u8 ? 0 : -100, 100);
      RunResult r = run_cpu(OpKind::copy, {x.view}, Attrs(OpKind::copy), &pool);
      ASSERT_TRUE(r.status.is_ok()) << r.status.to_string();
      expect_close(to_doubles(r.outputs[0].view), to_doubles(x.view), 0, 0, "transposed copy");
    }
  HostTensor q = random_tensor(DType::q4_1, Shape{3, 64}, rng);
  RunResult r = run_cpu(OpKind::copy, {q.view}, Attrs(OpKind::copy));
  ASSERT_TRUE(r.status.is_ok()) << r.status.to_string();
  EXPECT_EQ(std::memcmp(r.outputs[0].view.data, q.view.data, static_cast<size_t>(q.view.dense_bytes())), 0);
}

// ---- concat

TEST(Concat, AxesDtypesLayouts) {
  std::mt19937 rng(3);
  for (DType dt : {DType::f32, DType::f16, DType::i64, DType::u8})
    for (int64_t axis : {0, 1, -1, 3}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " axis " + std::to_string(axis));
      const Shape base{2, 3, 4, 5};
      const int ax = normalize_axis(axis, 4);
      std::vector<HostTensor> xs;
      std::vector<TensorView> views;
      const int64_t sizes[] = {1, 3, 2};
      for (int k = 0; k < 3; ++k) {
        Shape s = base;
        s[ax] = sizes[k];
        xs.push_back(random_layout(dt, s, kLayouts[k], rng, -50, 50));
        views.push_back(xs.back().view);
      }
      RunResult r = run_cpu(OpKind::concat, views, Attrs(OpKind::concat).set_i("axis", axis));
      ASSERT_TRUE(r.status.is_ok()) << r.status.to_string();
      Shape ys = base;
      ys[ax] = 6;
      ASSERT_EQ(r.outputs[0].view.shape, ys);
      std::vector<double> want;
      for_each_index(ys, [&](const int64_t* i) {
        int64_t idx[4] = {i[0], i[1], i[2], i[3]};
        int k = 0;
        while (idx[ax] >= sizes[k]) idx[ax] -= sizes[k++];
        want.push_back(load_double(views[k], idx));
      });
      expect_close(to_doubles(r.outputs[0].view), want, 0, 0, "concat");
    }
}

TEST(Concat, Errors) {
  std::mt19937 rng(4);
  HostTensor a = random_tensor(DType::f32, Shape{2, 3}, rng), b = random_tensor(DType::f32, Shape{2, 4}, rng);
  RunResult r = run_cpu(OpKind::concat, {a.view, b.view}, Attrs(OpKind::concat).set_i("axis", 0));
  EXPECT_EQ(r.status.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(r.status.message().find("dim 1"), std::string::npos) << r.status.message();
  HostTensor c = random_tensor(DType::f16, Shape{2, 3}, rng);
  EXPECT_EQ(run_cpu(OpKind::concat, {a.view, c.view}, Attrs(OpKind::concat).set_i("axis", 0)).status.code(),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(run_cpu(OpKind::concat, {a.view}, Attrs(OpKind::concat).set_i("axis", 2)).status.code(),
            ErrorCode::kInvalidArgument);
}

// ---- pad

// torch.nn.functional.pad's definition: reflect mirrors without repeating the edge
// (x[1], x[0] | x[0] ... ), replicate repeats the edge, constant fills.
int64_t ref_pad_index(int64_t j, int64_t before, int64_t n, const std::string& mode) {
  const int64_t i = j - before;
  if (i >= 0 && i < n) return i;
  if (mode == "constant") return -1;
  if (mode == "replicate") return i < 0 ? 0 : n - 1;
  return i < 0 ? -i : 2 * n - 2 - i;
}

void check_pad(DType dt, const Shape& shape, const std::vector<int64_t>& pads, const std::string& mode, Layout l,
               std::mt19937& rng) {
  std::string ps;
  for (int64_t p : pads) ps += std::to_string(p) + " ";
  SCOPED_TRACE(std::string(dtype_name(dt)) + " " + shape.str() + " pads " + ps + mode + " " + layout_name(l));
  HostTensor x = random_layout(dt, shape, l, rng, -50, 50);
  const double value = 2.5;
  RunResult r = run_cpu(OpKind::pad, {x.view}, Attrs(OpKind::pad).set_ints("pads", pads).set_s("mode", mode).set_f("value", value));
  ASSERT_TRUE(r.status.is_ok()) << r.status.to_string();
  Shape ys = shape;
  for (size_t p = 0; p < pads.size() / 2; ++p) ys[shape.rank - 1 - static_cast<int>(p)] += pads[2 * p] + pads[2 * p + 1];
  ASSERT_EQ(r.outputs[0].view.shape, ys);
  const double fill = is_float(dt) ? value : std::floor(value);
  std::vector<double> want;
  for_each_index(ys, [&](const int64_t* i) {
    int64_t idx[kMaxRank];
    bool inside = true;
    for (int d = 0; d < shape.rank; ++d) {
      const size_t p = static_cast<size_t>(shape.rank - 1 - d);
      const int64_t before = 2 * p < pads.size() ? pads[2 * p] : 0;
      idx[d] = ref_pad_index(i[d], before, shape[d], mode);
      inside = inside && idx[d] >= 0;
    }
    want.push_back(inside ? load_double(x.view, idx) : fill);
  });
  expect_close(to_doubles(r.outputs[0].view), want, 0, 0, "pad");
}

TEST(Pad, ConstantReflectReplicate) {
  std::mt19937 rng(5);
  for (const std::string mode : {"constant", "reflect", "replicate"})
    for (DType dt : {DType::f32, DType::bf16, DType::i32})
      for (Layout l : kLayouts) {
        check_pad(dt, Shape{7}, {2, 3}, mode, l, rng);
        check_pad(dt, Shape{3, 5, 7}, {1, 0, 0, 4}, mode, l, rng);
        check_pad(dt, Shape{2, 3, 4, 5, 6}, {3, 2, 1, 2, 0, 1}, mode, l, rng);
        check_pad(dt, Shape{4, 6}, {}, mode, l, rng);
      }
  check_pad(DType::f32, Shape{4, 9}, {-2, 3, 1, -1}, "constant", Layout::kPermuted, rng);  // negative pads crop
}

TEST(Pad, Errors) {
  std::mt19937 rng(6);
  HostTensor x = random_tensor(DType::f32, Shape{3, 4}, rng);
  auto run = [&](std::vector<int64_t> pads, const char* mode) {
    return run_cpu(OpKind::pad, {x.view}, Attrs(OpKind::pad).set_ints("pads", pads).set_s("mode", mode)).status;
  };
  EXPECT_EQ(run({1, 1, 1}, "constant").code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(run({1, 1, 1, 1, 1, 1}, "constant").code(), ErrorCode::kInvalidArgument);
  Status s = run({4, 0}, "reflect");
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(s.message().find("less than its size 4"), std::string::npos) << s.message();
  EXPECT_EQ(run({1, 1}, "circular").code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(run({-1, 0}, "replicate").code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(run({-3, -2}, "constant").code(), ErrorCode::kInvalidArgument);
}

// ---- embedding

double f16_at(const uint8_t* p) { return f16_to_f32(static_cast<uint16_t>(p[0] | (p[1] << 8))); }

// Row r of a GGUF block-quantised [V, D] table, decoded from the bytes (independently of
// dequantize_row).
std::vector<double> decode_row(DType t, const uint8_t* table, int64_t d, int64_t r) {
  std::vector<double> out;
  const int bb = t == DType::q8_0 ? 34 : t == DType::q4_0 ? 18 : 20;
  const uint8_t* row = table + r * (d / 32) * bb;
  for (int64_t b = 0; b < d / 32; ++b) {
    const uint8_t* blk = row + b * bb;
    const double scale = f16_at(blk);
    double v[32];
    if (t == DType::q8_0) {
      for (int j = 0; j < 32; ++j) v[j] = static_cast<int8_t>(blk[2 + j]) * scale;
    } else if (t == DType::q4_0) {
      for (int j = 0; j < 16; ++j) v[j] = ((blk[2 + j] & 15) - 8) * scale, v[j + 16] = ((blk[2 + j] >> 4) - 8) * scale;
    } else {
      const double m = f16_at(blk + 2);
      for (int j = 0; j < 16; ++j) v[j] = (blk[4 + j] & 15) * scale + m, v[j + 16] = (blk[4 + j] >> 4) * scale + m;
    }
    out.insert(out.end(), v, v + 32);
  }
  return out;
}

double round_to(DType t, double v) {
  if (t == DType::f16) return f16_to_f32(f32_to_f16(static_cast<float>(v)));
  if (t == DType::bf16) return bf16_to_f32(f32_to_bf16(static_cast<float>(v)));
  if (t == DType::f32) return static_cast<float>(v);
  return v;
}

void check_embedding(DType table_t, DType out_t, DType ids_t, const Shape& ids_shape, Layout table_layout,
                     std::mt19937& rng, ThreadPool* pool = nullptr) {
  SCOPED_TRACE(std::string("table ") + dtype_name(table_t) + " -> " + dtype_name(out_t) + " ids " + dtype_name(ids_t) +
               ids_shape.str() + " " + layout_name(table_layout));
  const int64_t vocab = 37, d = 64;
  HostTensor table = is_quantized(table_t) ? random_tensor(table_t, Shape{vocab, d}, rng, -2, 2)
                                           : random_layout(table_t, Shape{vocab, d}, table_layout, rng, -20, 20);
  HostTensor ids = random_layout(ids_t, ids_shape, Layout::kPermuted, rng, 0, vocab);
  RunResult r = run_cpu(OpKind::embedding, {table.view, ids.view}, Attrs(OpKind::embedding).set_s("dtype", dtype_name(out_t)), pool);
  ASSERT_TRUE(r.status.is_ok()) << r.status.to_string();
  Shape ys = ids_shape;
  ys.dims[ys.rank++] = d;
  ASSERT_EQ(r.outputs[0].view.shape, ys);
  ASSERT_EQ(r.outputs[0].view.dtype, out_t);
  std::vector<double> want;
  for (double id : to_doubles(ids.view)) {
    const int64_t row = static_cast<int64_t>(id);
    if (is_quantized(table_t)) {
      for (double v : decode_row(table_t, static_cast<const uint8_t*>(table.view.data), d, row))
        want.push_back(round_to(out_t, v));
    } else {
      for (int64_t j = 0; j < d; ++j) {
        const int64_t idx[2] = {row, j};
        want.push_back(round_to(out_t, load_double(table.view, idx)));
      }
    }
  }
  expect_close(to_doubles(r.outputs[0].view), want, 1e-6, 1e-6, "embedding");
}

TEST(Embedding, TablesOfEveryKind) {
  std::mt19937 rng(7);
  for (DType tt : {DType::f32, DType::f16, DType::bf16, DType::q8_0, DType::q4_0, DType::q4_1})
    for (DType ot : kFloatTypes)
      for (DType it : {DType::i32, DType::i64}) {
        check_embedding(tt, ot, it, Shape{7}, Layout::kDense, rng);
        check_embedding(tt, ot, it, Shape{2, 3, 5}, Layout::kPermuted, rng);
      }
  check_embedding(DType::i32, DType::i32, DType::i64, Shape{4, 3}, Layout::kPermuted, rng);
  ThreadPool pool(3);
  check_embedding(DType::q4_0, DType::f32, DType::i32, Shape{1000}, Layout::kDense, rng, &pool);
}

TEST(Embedding, OutOfRangeIdIsAnError) {
  std::mt19937 rng(8);
  HostTensor table = random_tensor(DType::q8_0, Shape{10, 32}, rng);
  for (int64_t bad : {10, -1}) {
    HostTensor ids = make_tensor(DType::i64, Shape{3});
    ids.view.ptr<int64_t>()[0] = 2;
    ids.view.ptr<int64_t>()[1] = bad;
    ids.view.ptr<int64_t>()[2] = 3;
    RunResult r = run_cpu(OpKind::embedding, {table.view, ids.view}, Attrs(OpKind::embedding));
    EXPECT_EQ(r.status.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(r.status.message().find("id " + std::to_string(bad)), std::string::npos) << r.status.message();
  }
  HostTensor ids = random_tensor(DType::f32, Shape{3}, rng);
  EXPECT_EQ(run_cpu(OpKind::embedding, {table.view, ids.view}, Attrs(OpKind::embedding)).status.code(),
            ErrorCode::kInvalidArgument);
  HostTensor odd = random_tensor(DType::f32, Shape{10, 7}, rng);
  HostTensor i32 = random_tensor(DType::i32, Shape{3}, rng, 0, 10);
  EXPECT_EQ(run_cpu(OpKind::embedding, {odd.view, i32.view}, Attrs(OpKind::embedding).set_s("dtype", "i64")).status.code(),
            ErrorCode::kUnsupported);
}

// ---- slice_update

// The kernel called as the executor calls it: y is the state's own memory.
Status slice_update_in_place(const TensorView& state, const TensorView& src, const Attrs& attrs) {
  TensorView y = state;
  const TensorView in[2] = {state, src};
  KernelCall call;
  call.op = OpKind::slice_update;
  call.in = in;
  call.n_in = 2;
  call.out = &y;
  call.n_out = 1;
  call.attrs = &attrs;
  call.pool = &ThreadPool::global();
  return cpu_kernels().get(OpKind::slice_update)(call);
}

// The rank-4 state `before` (shape ss) with src written at start along ax, in float64.
std::vector<double> updated_state(const std::vector<double>& before, const TensorView& src, const Shape& ss, int ax,
                                  int64_t start) {
  std::vector<double> want;
  size_t k = 0;
  for_each_index(ss, [&](const int64_t* i) {
    int64_t si[4] = {i[0], i[1], i[2], i[3]};
    si[ax] -= start;
    const bool in_src = si[ax] >= 0 && si[ax] < src.shape[ax];
    want.push_back(in_src ? load_double(src, si) : before[k]);
    ++k;
  });
  return want;
}

TEST(SliceUpdate, WritesInPlaceThroughTheAliasedOutput) {
  std::mt19937 rng(9);
  for (DType dt : {DType::f32, DType::f16, DType::i64})
    for (int64_t axis : {2, -2, 0}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " axis " + std::to_string(axis));
      const Shape ss{2, 3, 16, 8};
      const int ax = normalize_axis(axis, 4);
      Shape src_shape = ss;
      src_shape[ax] = ax == 0 ? 1 : 5;
      const int64_t start = ax == 0 ? 1 : 9;
      HostTensor state = random_tensor(dt, ss, rng, -50, 50);
      HostTensor src = random_layout(dt, src_shape, Layout::kPermuted, rng, -50, 50);
      const std::vector<double> before = to_doubles(state.view);
      Attrs attrs(OpKind::slice_update);
      attrs.set_i("axis", axis).set_i("start", start);
      ASSERT_TRUE(slice_update_in_place(state.view, src.view, attrs).is_ok());
      expect_close(to_doubles(state.view), updated_state(before, src.view, ss, ax, start), 0, 0, "slice_update in place");
      // Through run_cpu the output is a separate buffer: it must hold the whole updated state.
      HostTensor state2 = random_tensor(dt, ss, rng, -50, 50);
      const std::vector<double> before2 = to_doubles(state2.view);
      RunResult r = run_cpu(OpKind::slice_update, {state2.view, src.view}, attrs);
      ASSERT_TRUE(r.status.is_ok()) << r.status.to_string();
      expect_close(to_doubles(r.outputs[0].view), updated_state(before2, src.view, ss, ax, start), 0, 0,
                   "slice_update to a new buffer");
    }
}

TEST(SliceUpdate, ConvertsAFloatSourceToTheStateType) {
  // An f32 source written into an f16 or bf16 cache: each element rounded to the state's type.
  std::mt19937 rng(12);
  for (DType state_dt : {DType::f16, DType::bf16, DType::f32})
    for (DType src_dt : {DType::f32, DType::f16, DType::bf16}) {
      if (state_dt == src_dt) continue;
      SCOPED_TRACE(std::string(dtype_name(src_dt)) + " into " + dtype_name(state_dt));
      const Shape ss{1, 3, 11, 7};
      HostTensor state = random_tensor(state_dt, ss, rng);
      HostTensor src = random_layout(src_dt, Shape{1, 3, 4, 7}, Layout::kPermuted, rng);
      const std::vector<double> before = to_doubles(state.view);
      RunResult r = run_cpu(OpKind::slice_update, {state.view, src.view},
                            Attrs(OpKind::slice_update).set_i("axis", 2).set_i("start", 6));
      ASSERT_TRUE(r.status.is_ok()) << r.status.to_string();
      const std::vector<double> want = updated_state(before, src.view, ss, 2, 6);
      // Rounding to the state's type: half an ulp at most (f16 2^-11, bf16 2^-8 relative).
      const double rtol = state_dt == DType::f16 ? 0x1p-11 : state_dt == DType::bf16 ? 0x1p-8 : 0;
      expect_close(to_doubles(r.outputs[0].view), want, 1e-7, rtol, "converted slice_update");
    }
  HostTensor ints = random_tensor(DType::i32, Shape{2, 4}, rng, 0, 9);
  HostTensor f = random_tensor(DType::f32, Shape{2, 1}, rng);
  EXPECT_FALSE(run_cpu(OpKind::slice_update, {ints.view, f.view}, Attrs(OpKind::slice_update).set_i("axis", 1).set_i("start", 0))
                   .status.is_ok());
}

// The offset input (a position on the device) adds to start; past the state it is an error.
TEST(SliceUpdate, OffsetInputAddsToStart) {
  std::mt19937 rng(13);
  const Shape ss{1, 4, 20, 8};
  HostTensor src = random_layout(DType::f32, Shape{1, 4, 1, 8}, Layout::kPermuted, rng);
  HostTensor off = make_tensor(DType::i32, Shape{1});
  for (int32_t at : {0, 7, 17}) {
    HostTensor state = random_tensor(DType::f16, ss, rng);
    const std::vector<double> before = to_doubles(state.view);
    off.view.ptr<int32_t>()[0] = at;
    RunResult r = run_cpu(OpKind::slice_update, {state.view, src.view, off.view},
                          Attrs(OpKind::slice_update).set_i("axis", 2).set_i("start", 2));
    ASSERT_TRUE(r.status.is_ok()) << r.status.to_string();
    expect_close(to_doubles(r.outputs[0].view), updated_state(before, src.view, ss, 2, at + 2), 1e-7, 0x1p-11,
                 "slice_update at an offset");
  }
  HostTensor state = random_tensor(DType::f16, ss, rng);
  off.view.ptr<int32_t>()[0] = 18;
  RunResult r = run_cpu(OpKind::slice_update, {state.view, src.view, off.view},
                        Attrs(OpKind::slice_update).set_i("axis", 2).set_i("start", 2));
  EXPECT_EQ(r.status.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(r.status.message().find("start 20"), std::string::npos) << r.status.message();
}

// An offset per row of src along the axis: row r lands at start + offset[r] (a batched decode
// writes each sequence's new key and value into its own slot of the cache).
TEST(SliceUpdate, OffsetPerRowScattersTheRows) {
  std::mt19937 rng(31);
  const Shape ss{1, 4, 30, 8};
  HostTensor src = random_layout(DType::f32, Shape{1, 4, 3, 8}, Layout::kPermuted, rng);
  const std::vector<int32_t> rows = {27, 0, 11};
  HostTensor off = vector_tensor(rows);
  HostTensor state = random_tensor(DType::f16, ss, rng);
  std::vector<double> want = to_doubles(state.view);
  for (int64_t r = 0; r < 3; ++r) {
    TensorView row = src.view;
    row.data = static_cast<uint8_t*>(row.data) + r * row.strides[2] * 4;
    row.shape[2] = 1;
    want = updated_state(want, row, ss, 2, rows[r] + 2);
  }
  RunResult r = run_cpu(OpKind::slice_update, {state.view, src.view, off.view},
                        Attrs(OpKind::slice_update).set_i("axis", 2).set_i("start", 2));
  ASSERT_TRUE(r.status.is_ok()) << r.status.to_string();
  expect_close(to_doubles(r.outputs[0].view), want, 1e-7, 0x1p-11, "slice_update rows apart");
  off.view.ptr<int32_t>()[1] = 28;  // start 2 + 28: past the state's 30 rows
  r = run_cpu(OpKind::slice_update, {state.view, src.view, off.view},
              Attrs(OpKind::slice_update).set_i("axis", 2).set_i("start", 2));
  EXPECT_NE(r.status.message().find("row 1 at 30"), std::string::npos) << r.status.message();
  HostTensor two = make_tensor(DType::i32, Shape{2});
  r = run_cpu(OpKind::slice_update, {state.view, src.view, two.view}, Attrs(OpKind::slice_update).set_i("axis", 2));
  EXPECT_NE(r.status.message().find("one per row of src along axis (3)"), std::string::npos) << r.status.message();
}

// With inv_freq, src's rows are rotated at the positions they are written to (a cache's keys;
// the values after rope_heads pass through), as a float64 rope would.
TEST(SliceUpdate, RotatesWhatItWrites) {
  std::mt19937 rng(14);
  const Shape ss{1, 6, 40, 16};
  std::vector<float> freq(8);
  for (size_t i = 0; i < freq.size(); ++i) freq[i] = static_cast<float>(std::pow(10000.0, -2.0 * static_cast<double>(i) / 16));
  HostTensor f = make_tensor(DType::f32, Shape{8});
  std::copy(freq.begin(), freq.end(), f.view.ptr<float>());
  HostTensor off = make_tensor(DType::i32, Shape{1});
  for (const char* mode : {"half", "interleaved"})
    for (int64_t heads : {0, 3})
      for (int64_t len : {1, 5}) {
        HostTensor src = random_layout(DType::f32, Shape{1, 6, len, 16}, Layout::kPermuted, rng);
        HostTensor state = random_tensor(DType::f32, ss, rng);
        const std::vector<double> before = to_doubles(state.view);
        off.view.ptr<int32_t>()[0] = 29;
        Attrs a(OpKind::slice_update);
        a.set_i("axis", 2).set_i("start", 3).set_s("rope_mode", mode).set_i("rope_heads", heads);
        RunResult r = run_cpu(OpKind::slice_update, {state.view, src.view, off.view, f.view}, a);
        ASSERT_TRUE(r.status.is_ok()) << r.status.to_string();
        expect_close(to_doubles(r.outputs[0].view),
                     rope_written_state(before, src.view, freq, ss, 2, 32, std::string(mode) == "interleaved", heads), 1e-6,
                     1e-5, (std::string("slice_update rotating, ") + mode).c_str());
      }
  // Frequencies that do not match the rows, and rope_heads on the seq axis, are errors.
  HostTensor src = random_tensor(DType::f32, Shape{1, 6, 1, 16}, rng);
  HostTensor state = random_tensor(DType::f32, ss, rng);
  HostTensor bad = make_tensor(DType::f32, Shape{4});
  Attrs a(OpKind::slice_update);
  a.set_i("axis", 2).set_i("start", 0);
  EXPECT_EQ(run_cpu(OpKind::slice_update, {state.view, src.view, off.view, bad.view}, a).status.code(), ErrorCode::kInvalidArgument);
  a.set_i("axis", 1).set_i("rope_heads", 2);
  EXPECT_EQ(run_cpu(OpKind::slice_update, {state.view, src.view, off.view, f.view}, a).status.code(), ErrorCode::kInvalidArgument);
}

TEST(SliceUpdate, OutOfBoundsIsAnError) {
  std::mt19937 rng(10);
  HostTensor state = random_tensor(DType::f32, Shape{2, 16, 4}, rng);
  HostTensor src = random_tensor(DType::f32, Shape{2, 5, 4}, rng);
  for (int64_t start : {12, -1}) {
    RunResult r = run_cpu(OpKind::slice_update, {state.view, src.view},
                          Attrs(OpKind::slice_update).set_i("axis", 1).set_i("start", start));
    EXPECT_EQ(r.status.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(r.status.message().find("start " + std::to_string(start)), std::string::npos) << r.status.message();
  }
  HostTensor wrong = random_tensor(DType::f32, Shape{2, 5, 3}, rng);
  EXPECT_EQ(run_cpu(OpKind::slice_update, {state.view, wrong.view},
                    Attrs(OpKind::slice_update).set_i("axis", 1).set_i("start", 0)).status.code(),
            ErrorCode::kInvalidArgument);
  // A direct kernel call (no shape inference in front) is bounds-checked too.
  EXPECT_EQ(slice_update_in_place(state.view, src.view, Attrs(OpKind::slice_update).set_i("axis", 1).set_i("start", 14)).code(),
            ErrorCode::kInvalidArgument);
}

// ---- glu

TEST(Glu, AxesDtypesLayouts) {
  std::mt19937 rng(11);
  for (const char* act : {"sigmoid", "silu"})
  for (DType dt : kFloatTypes)
    for (Layout l : kLayouts)
      for (int64_t axis : {-1, 1, 0}) {
        const Shape s{4, 6, 10};
        SCOPED_TRACE(std::string(act) + " " + dtype_name(dt) + " axis " + std::to_string(axis) + " " + layout_name(l));
        HostTensor x = random_layout(dt, s, l, rng, -4, 4);
        RunResult r = run_cpu(OpKind::glu, {x.view}, Attrs(OpKind::glu).set_i("axis", axis).set_s("act", act));
        ASSERT_TRUE(r.status.is_ok()) << r.status.to_string();
        const int ax = normalize_axis(axis, 3);
        Shape ys = s;
        ys[ax] /= 2;
        ASSERT_EQ(r.outputs[0].view.shape, ys);
        std::vector<double> want;
        for_each_index(ys, [&](const int64_t* i) {
          int64_t j[3] = {i[0], i[1], i[2]};
          const double a = load_double(x.view, j);
          j[ax] += ys[ax];
          const double b = load_double(x.view, j);
          // silu: SwiGLU with the gate second, a * b * sigmoid(b).
          want.push_back((std::string(act) == "silu" ? a * b : a) / (1 + std::exp(-b)));
        });
        const Tolerance tol = tolerance_for(dt);
        expect_close(to_doubles(r.outputs[0].view), want, tol.atol, tol.rtol, "glu");
      }
  HostTensor odd = random_tensor(DType::f32, Shape{3, 5}, rng);
  EXPECT_EQ(run_cpu(OpKind::glu, {odd.view}, Attrs(OpKind::glu)).status.code(), ErrorCode::kInvalidArgument);
  HostTensor even = random_tensor(DType::f32, Shape{3, 4}, rng);
  EXPECT_EQ(run_cpu(OpKind::glu, {even.view}, Attrs(OpKind::glu).set_s("act", "tanh")).status.code(),
            ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace vrun::test
