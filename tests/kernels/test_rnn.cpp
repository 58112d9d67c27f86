// lstm against a float64 step-by-step reference (torch gate order i, f, g, o).
#include <cmath>

#include "kernel_test_util.h"
#include "tdt_greedy_case.h"

namespace vrun::test {
namespace {

struct LstmRef {
  std::vector<double> y, h, c;
};

LstmRef ref_lstm(const std::vector<TensorView>& in) {
  const TensorView &x = in[0], &h0 = in[1], &c0 = in[2], &wih = in[3], &whh = in[4];
  const int64_t nb = x.shape[0], nt = x.shape[1], ni = x.shape[2], nh = h0.shape[1];
  const std::vector<double> xd = to_doubles(x), wi = to_doubles(wih), wh = to_doubles(whh);
  std::vector<double> bi(static_cast<size_t>(4 * nh), 0.0), bh = bi;
  if (in.size() > 5 && in[5].present()) bi = to_doubles(in[5]);
  if (in.size() > 6 && in[6].present()) bh = to_doubles(in[6]);
  LstmRef r;
  r.h = to_doubles(h0);
  r.c = to_doubles(c0);
  r.y.assign(static_cast<size_t>(nb * nt * nh), 0.0);
  auto sig = [](double v) { return 1 / (1 + std::exp(-v)); };
  for (int64_t t = 0; t < nt; ++t) {
    std::vector<double> hn = r.h;
    for (int64_t b = 0; b < nb; ++b)
      for (int64_t j = 0; j < nh; ++j) {
        double g[4];
        for (int q = 0; q < 4; ++q) {
          const int64_t row = q * nh + j;
          double s = bi[row] + bh[row];
          for (int64_t p = 0; p < ni; ++p) s += wi[row * ni + p] * xd[(b * nt + t) * ni + p];
          for (int64_t p = 0; p < nh; ++p) s += wh[row * nh + p] * r.h[b * nh + p];
          g[q] = s;
        }
        double& c = r.c[b * nh + j];
        c = sig(g[1]) * c + sig(g[0]) * std::tanh(g[2]);
        hn[b * nh + j] = sig(g[3]) * std::tanh(c);
        r.y[(b * nt + t) * nh + j] = hn[b * nh + j];
      }
    r.h = hn;
  }
  return r;
}

void check(const std::vector<TensorView>& in, double tol, const char* what) {
  ThreadPool pool(2);
  RunResult r = run_cpu(OpKind::lstm, in, Attrs(OpKind::lstm), &pool);
  ASSERT_TRUE(r.status.is_ok()) << what << ": " << r.status.to_string();
  ASSERT_EQ(r.outputs.size(), 3u);
  const LstmRef want = ref_lstm(in);
  expect_close(to_doubles(r.outputs[0].view), want.y, tol, tol, what);
  expect_close(to_doubles(r.outputs[1].view), want.h, tol, tol, what);
  expect_close(to_doubles(r.outputs[2].view), want.c, tol, tol, what);
}

TEST(Lstm, SeveralStepsWithAndWithoutBiases) {
  std::mt19937 rng(1);
  const int64_t b = 2, t = 7, i = 5, h = 6;
  HostTensor x = random_tensor(DType::f32, Shape{b, t, i}, rng);
  HostTensor h0 = random_tensor(DType::f32, Shape{b, h}, rng);
  HostTensor c0 = random_tensor(DType::f32, Shape{b, h}, rng);
  HostTensor wih = random_tensor(DType::f32, Shape{4 * h, i}, rng);
  HostTensor whh = random_tensor(DType::f32, Shape{4 * h, h}, rng);
  HostTensor bih = random_tensor(DType::f32, Shape{4 * h}, rng);
  HostTensor bhh = random_tensor(DType::f32, Shape{4 * h}, rng);
  check({x.view, h0.view, c0.view, wih.view, whh.view, bih.view, bhh.view}, 1e-5, "both biases");
  check({x.view, h0.view, c0.view, wih.view, whh.view}, 1e-5, "no biases");
  check({x.view, h0.view, c0.view, wih.view, whh.view, TensorView{}, bhh.view}, 1e-5, "b_hh only");
}

TEST(Lstm, LargerBatchStridedInputAndHalf) {
  std::mt19937 rng(2);
  const int64_t b = 6, t = 4, i = 9, h = 8;
  HostTensor x = random_strided(DType::f32, Shape{b, t, i}, {1, 0, 2}, 3, rng);  // time-major storage
  HostTensor h0 = random_tensor(DType::f32, Shape{b, h}, rng);
  HostTensor c0 = random_tensor(DType::f32, Shape{b, h}, rng);
  HostTensor wih = random_tensor(DType::f32, Shape{4 * h, i}, rng);
  HostTensor whh = random_tensor(DType::f32, Shape{4 * h, h}, rng);
  check({x.view, h0.view, c0.view, wih.view, whh.view}, 1e-5, "B = 6, strided x");
  HostTensor xh = random_tensor(DType::f16, Shape{1, t, i}, rng);
  HostTensor hh = random_tensor(DType::f16, Shape{1, h}, rng);
  HostTensor ch = random_tensor(DType::f16, Shape{1, h}, rng);
  HostTensor wihh = random_tensor(DType::f16, Shape{4 * h, i}, rng);
  HostTensor whhh = random_tensor(DType::f16, Shape{4 * h, h}, rng);
  check({xh.view, hh.view, ch.view, wihh.view, whhh.view}, 2e-3, "f16");
}

TEST(Lstm, RejectsBadShapes) {
  std::mt19937 rng(3);
  HostTensor x = random_tensor(DType::f32, Shape{1, 3, 4}, rng);
  HostTensor h0 = random_tensor(DType::f32, Shape{1, 5}, rng);
  HostTensor wih = random_tensor(DType::f32, Shape{20, 4}, rng);
  HostTensor whh = random_tensor(DType::f32, Shape{20, 5}, rng);
  HostTensor bad = random_tensor(DType::f32, Shape{16, 4}, rng);
  RunResult r = run_cpu(OpKind::lstm, {x.view, h0.view, h0.view, bad.view, whh.view}, Attrs(OpKind::lstm));
  EXPECT_NE(r.status.message().find("w_ih must be [20, 4]"), std::string::npos) << r.status.message();
  HostTensor c2 = random_tensor(DType::f32, Shape{2, 5}, rng);
  r = run_cpu(OpKind::lstm, {x.view, h0.view, c2.view, wih.view, whh.view}, Attrs(OpKind::lstm));
  EXPECT_NE(r.status.message().find("c0 must be [1, 5]"), std::string::npos) << r.status.message();
  HostTensor b3 = random_tensor(DType::f32, Shape{19}, rng);
  r = run_cpu(OpKind::lstm, {x.view, h0.view, h0.view, wih.view, whh.view, b3.view}, Attrs(OpKind::lstm));
  EXPECT_NE(r.status.message().find("b_ih must be [20]"), std::string::npos) << r.status.message();
}

}  // namespace
}  // namespace vrun::test

namespace vrun::test {
namespace {

TEST(TdtGreedy, MatchesFloat64Loop) {
  std::mt19937 rng(5);
  ThreadPool pool(2);
  for (const TdtRun& run : tdt_runs()) {
    TdtInputs in = make_tdt_inputs(run.c, rng);
    set_control(in, run.t0, run.symbols0, run.end, run.row_offset, run.fresh);
    const TdtRef want = ref_tdt_greedy(run.c, in);
    // The cases are only worth something when the loop both emits and skips, and no argmax is a
    // near tie that float32 rounding could flip.
    ASSERT_GT(want.margin, 1e-4);
    ASSERT_GE(want.emitted.size(), 5u);
    ASSERT_GT(want.joints, static_cast<int64_t>(want.emitted.size()) + 3);
    RunResult r = run_cpu(OpKind::tdt_greedy, in.views(), in.attrs, &pool);
    ASSERT_TRUE(r.status.is_ok()) << r.status.to_string();
    expect_tdt_matches(r.outputs, want, 1e-4, "cpu tdt_greedy");
  }
}

// Lanes in one call give each lane's loop alone, with the buffer roomy and with one that some
// lanes fill.
TEST(TdtGreedy, LanesMatchEachStreamAlone) {
  std::mt19937 rng(8);
  ThreadPool pool(2);
  for (int64_t capacity : {400, 6}) {
    TdtCase c;
    c.capacity = capacity;
    const TdtLanes l = make_tdt_lanes(c, rng);
    size_t full = 0;
    for (const TdtRef& w : l.want) {
      ASSERT_GT(w.margin, 1e-4);
      full += static_cast<int64_t>(w.emitted.size()) == capacity ? 1 : 0;
    }
    if (capacity == 6) {
      ASSERT_GT(full, 0u);
    }
    ASSERT_LT(full, l.want.size());
    RunResult r = run_cpu(OpKind::tdt_greedy, l.in.views(), l.in.attrs, &pool);
    ASSERT_TRUE(r.status.is_ok()) << r.status.to_string();
    expect_tdt_lanes_match(r.outputs, l, 1e-4, "cpu tdt_greedy lanes");
  }
}

TEST(TdtGreedy, FullBufferResumes) {
  expect_resumes_in_pieces(
      [](const TdtInputs& part) {
        RunResult r = run_cpu(OpKind::tdt_greedy, part.views(), part.attrs);
        EXPECT_TRUE(r.status.is_ok()) << r.status.to_string();
        return r.outputs;
      },
      DType::f32, 6);
}

TEST(TdtGreedy, RefusesFramesOutsideTheTensor) {
  std::mt19937 rng(7);
  TdtCase c;
  TdtInputs in = make_tdt_inputs(c, rng);
  set_control(in, 0, 0, c.R + 1, 0, true);
  RunResult r = run_cpu(OpKind::tdt_greedy, in.views(), in.attrs);
  EXPECT_FALSE(r.status.is_ok());
  EXPECT_NE(r.status.to_string().find("rows"), std::string::npos) << r.status.to_string();
  set_control(in, 0, 3, c.R, 0, true);  // symbols must be below max_symbols
  EXPECT_FALSE(run_cpu(OpKind::tdt_greedy, in.views(), in.attrs).status.is_ok());
}

}  // namespace
}  // namespace vrun::test
