// tdt_greedy test cases (random prediction networks and joints at small sizes) and a float64
// reference of NeMo's greedy TDT / RNN-T loop written straight from FORMATS.md, shared by the CPU
// and the Vulkan kernel tests.
#pragma once

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <vector>

#include "tests/kernels/kernel_test_util.h"

namespace vrun::test {

struct TdtCase {
  int64_t L = 2, P = 24, J = 20, V = 13, R = 48;  // V: tokens with the blank (last)
  std::vector<int64_t> durations = {0, 1, 2, 3, 4};
  int64_t max_symbols = 3, capacity = 400;
  DType weights = DType::f32;
  double blank_bias = 1.0;  // added to the blank logit: moves the share of blanks
};

struct TdtInputs {
  HostTensor frames, control, state, weights, vectors;
  Attrs attrs{OpKind::tdt_greedy};
  std::vector<TensorView> views() const { return {frames.view, control.view, state.view, weights.view, vectors.view}; }
  std::vector<const HostTensor*> tensors() const { return {&frames, &control, &state, &weights, &vectors}; }
};

inline TdtInputs make_tdt_inputs(const TdtCase& c, std::mt19937& rng) {
  TdtInputs in;
  const int64_t D = static_cast<int64_t>(c.durations.size()), O = c.V + D;
  in.frames = random_tensor(DType::f32, Shape{c.R, c.J}, rng, -1.5, 1.5);
  in.control = make_tensor(DType::i32, Shape{5});
  in.state = random_tensor(DType::f32, Shape{2 * c.L * c.P + c.J}, rng, -0.5, 0.5);
  // Gate and projection weights of about unit gain, so that the state keeps moving.
  in.weights = make_tensor(c.weights, Shape{c.L * 8 * c.P * c.P + c.J * c.P + O * c.J});
  std::uniform_real_distribution<double> u(-1, 1);
  const double sg = 1.5 / std::sqrt(2.0 * c.P), sp = 2.0 / std::sqrt(1.0 * c.P), so = 3.0 / std::sqrt(1.0 * c.J);
  int64_t e = 0;
  auto put = [&](double scale, int64_t n) {
    for (int64_t k = 0; k < n; ++k, ++e) store_double(in.weights.view, &e, scale * u(rng));
  };
  put(sg, c.L * 8 * c.P * c.P);
  put(sp, c.J * c.P);
  // Output rows of zero sum: z = relu(f + g) is non-negative, so rows of unequal sums would pick
  // the same winner on every frame.
  for (int64_t row = 0; row < O; ++row) {
    std::vector<double> r(static_cast<size_t>(c.J));
    double mean = 0;
    for (double& x : r) mean += (x = so * u(rng)) / static_cast<double>(c.J);
    for (double x : r) {
      store_double(in.weights.view, &e, x - mean);
      ++e;
    }
  }
  in.vectors = random_tensor(DType::f32, Shape{c.V * c.P + c.L * 4 * c.P + c.J + O}, rng, -0.5, 0.5);
  float* v = in.vectors.view.ptr<float>();
  std::fill_n(v + (c.V - 1) * c.P, c.P, 0.f);  // the blank's embedding row is zeros
  for (int64_t k = 0; k < c.V * c.P; ++k) v[k] *= 2.f;
  v[c.V * c.P + c.L * 4 * c.P + c.J + c.V - 1] += static_cast<float>(c.blank_bias);
  in.attrs.set_i("layers", c.L).set_i("pred_hidden", c.P).set_i("joint_hidden", c.J).set_i("vocab", c.V);
  in.attrs.set_i("max_symbols", c.max_symbols).set_ints("durations", c.durations).set_i("capacity", c.capacity);
  return in;
}

inline void set_control(TdtInputs& in, int64_t t, int64_t symbols, int64_t end, int64_t row_offset, bool fresh) {
  int32_t* p = in.control.view.ptr<int32_t>();
  p[0] = static_cast<int32_t>(t);
  p[1] = static_cast<int32_t>(symbols);
  p[2] = static_cast<int32_t>(end);
  p[3] = static_cast<int32_t>(row_offset);
  p[4] = fresh ? 1 : 0;
}

struct TdtRef {
  std::vector<std::array<int64_t, 3>> emitted;  // token, frame, duration
  int64_t t = 0, symbols = 0;
  std::vector<double> state;
  double margin = 1e300;  // the smallest gap between an argmax and the runner-up
  int64_t joints = 0;
};

inline TdtRef ref_tdt_greedy(const TdtCase& c, const TdtInputs& in) {
  const int64_t L = c.L, P = c.P, J = c.J, V = c.V, D = static_cast<int64_t>(c.durations.size()), O = V + D;
  const std::vector<double> w = to_doubles(in.weights.view), vec = to_doubles(in.vectors.view), fr = to_doubles(in.frames.view);
  const int32_t* ctl = in.control.view.ptr<int32_t>();
  TdtRef r;
  r.t = ctl[0];
  r.symbols = ctl[1];
  const int64_t end = ctl[2], off = ctl[3], blank = V - 1;
  const bool fresh = ctl[4] != 0;
  std::vector<double> h(static_cast<size_t>(L * P)), cs(static_cast<size_t>(L * P)), g(static_cast<size_t>(J));
  const std::vector<double> s0 = to_doubles(in.state.view);
  if (!fresh) {
    std::copy_n(s0.begin(), L * P, h.begin());
    std::copy_n(s0.begin() + L * P, L * P, cs.begin());
    std::copy_n(s0.begin() + 2 * L * P, J, g.begin());
  }
  auto sig = [](double x) { return 1 / (1 + std::exp(-x)); };
  auto predict = [&](int64_t token) {
    std::vector<double> x(vec.begin() + token * P, vec.begin() + (token + 1) * P);
    for (int64_t l = 0; l < L; ++l) {
      std::vector<double> gate(static_cast<size_t>(4 * P));
      for (int64_t row = 0; row < 4 * P; ++row) {
        const double* wr = w.data() + l * 8 * P * P + row * 2 * P;
        double s = vec[V * P + l * 4 * P + row];
        for (int64_t k = 0; k < P; ++k) s += wr[k] * x[k] + wr[P + k] * h[l * P + k];
        gate[row] = s;
      }
      for (int64_t j = 0; j < P; ++j) {
        double& cc = cs[l * P + j];
        cc = sig(gate[P + j]) * cc + sig(gate[j]) * std::tanh(gate[2 * P + j]);
        h[l * P + j] = sig(gate[3 * P + j]) * std::tanh(cc);
      }
      x.assign(h.begin() + l * P, h.begin() + (l + 1) * P);
    }
    for (int64_t row = 0; row < J; ++row) {
      double s = vec[V * P + L * 4 * P + row];
      for (int64_t k = 0; k < P; ++k) s += w[L * 8 * P * P + row * P + k] * x[k];
      g[row] = s;
    }
  };
  auto argmax = [&](const std::vector<double>& v, int64_t a, int64_t b) {
    int64_t best = a;
    for (int64_t i = a + 1; i < b; ++i)
      if (v[i] > v[best]) best = i;
    for (int64_t i = a; i < b; ++i)
      if (i != best) r.margin = std::min(r.margin, v[best] - v[i]);
    return best - a;
  };
  if (fresh) predict(blank);
  while (r.t < end) {
    std::vector<double> logits(static_cast<size_t>(O));
    for (int64_t row = 0; row < O; ++row) {
      double s = vec[V * P + L * 4 * P + J + row];
      for (int64_t i = 0; i < J; ++i) s += w[L * 8 * P * P + J * P + row * J + i] * std::max(0.0, fr[(r.t + off) * J + i] + g[i]);
      logits[row] = s;
    }
    ++r.joints;
    const int64_t k = argmax(logits, 0, V);
    const int64_t skip = D > 0 ? c.durations[static_cast<size_t>(argmax(logits, V, O))] : (k == blank ? 1 : 0);
    if (k != blank) {
      if (static_cast<int64_t>(r.emitted.size()) == c.capacity) break;
      r.emitted.push_back({k, r.t, skip});
      predict(k);
    }
    ++r.symbols;
    r.t += skip;
    if (!(skip == 0 && !(D == 0 && k == blank)) || r.symbols >= c.max_symbols) {
      if (r.symbols >= c.max_symbols) ++r.t;
      r.symbols = 0;
    }
  }
  r.state = h;
  r.state.insert(r.state.end(), cs.begin(), cs.end());
  r.state.insert(r.state.end(), g.begin(), g.end());
  return r;
}

// The cases both kernels run: fresh streams and resumed ones (a row offset, symbols already
// emitted at the first frame), TDT and RNN-T, one symbol a frame, f16 weights.
struct TdtRun {
  TdtCase c;
  int64_t t0, symbols0, end, row_offset;
  bool fresh;
};

inline std::vector<TdtRun> tdt_runs() {
  std::vector<TdtRun> runs;
  TdtCase base;
  runs.push_back({base, 0, 0, base.R, 0, true});
  runs.push_back({base, 7, 1, 40, -3, false});
  TdtCase one = base;
  one.max_symbols = 1;
  runs.push_back({one, 0, 0, one.R, 0, true});
  TdtCase rnnt = base;
  rnnt.durations.clear();
  rnnt.blank_bias = 2.0;
  runs.push_back({rnnt, 0, 0, rnnt.R, 0, true});
  TdtCase half = base;
  half.weights = DType::f16;
  half.L = 1;
  half.P = 40;
  half.J = 32;  // rows of whole 16-byte words: the GPU's eight-at-a-time loads
  half.blank_bias = 1.5;
  runs.push_back({half, 2, 0, half.R, 0, true});
  return runs;
}

// One stream's emitted rows [capacity + 1, 4] and state_out against the float64 loop.
inline void expect_tdt_lane(const int32_t* em, const float* state, const TdtRef& want, double state_tol, const std::string& what) {
  EXPECT_EQ(em[3], 0) << what << ": status";
  ASSERT_EQ(em[0], static_cast<int32_t>(want.emitted.size())) << what << ": tokens emitted";
  EXPECT_EQ(em[1], want.t) << what << ": next frame";
  EXPECT_EQ(em[2], want.symbols) << what << ": symbols at the next frame";
  for (size_t i = 0; i < want.emitted.size(); ++i) {
    const int32_t* row = em + 4 * (1 + i);
    EXPECT_EQ(row[0], want.emitted[i][0]) << what << ": token " << i;
    EXPECT_EQ(row[1], want.emitted[i][1]) << what << ": frame of token " << i;
    EXPECT_EQ(row[2], want.emitted[i][2]) << what << ": duration of token " << i;
  }
  expect_close(std::vector<double>(state, state + want.state.size()), want.state, state_tol, 1e-4, what.c_str());
}

// Several streams in one call (lanes): control [B, 5] and state [B, n] over one frames tensor
// and one network. The lanes start at different frames and row offsets, fresh and resumed, one
// with nothing to do, and (with a small capacity) some fill their buffers while others end.
struct TdtLanes {
  TdtInputs in;               // control and state with the lanes' rows
  std::vector<TdtRef> want;   // each lane alone through the float64 loop
  int64_t capacity = 0;
};

inline TdtLanes make_tdt_lanes(const TdtCase& c, std::mt19937& rng) {
  TdtLanes l;
  l.in = make_tdt_inputs(c, rng);
  l.capacity = c.capacity;
  struct Lane {
    int64_t t, symbols, end, offset;
    bool fresh;
  };
  const int64_t R = c.R;
  const std::vector<Lane> lanes = {{0, 0, R, 0, true},          {7, 1, 40, -3, false}, {5, 0, 20, 10, true},
                                   {10, 0, 10, 0, false},        {0, 0, R - 8, 8, true}, {3, 2, R - 5, 0, false}};
  const int64_t B = static_cast<int64_t>(lanes.size()), n = l.in.state.numel();
  HostTensor control = make_tensor(DType::i32, Shape{B, 5});
  HostTensor state = random_tensor(DType::f32, Shape{B, n}, rng, -0.5, 0.5);
  for (int64_t b = 0; b < B; ++b) {
    const Lane& x = lanes[static_cast<size_t>(b)];
    set_control(l.in, x.t, std::min(x.symbols, c.max_symbols - 1), x.end, x.offset, x.fresh);
    std::copy_n(state.view.ptr<float>() + b * n, n, l.in.state.view.ptr<float>());
    l.want.push_back(ref_tdt_greedy(c, l.in));
    std::copy_n(l.in.control.view.ptr<int32_t>(), 5, control.view.ptr<int32_t>() + b * 5);
  }
  l.in.control = std::move(control);
  l.in.state = std::move(state);
  return l;
}

// outputs: emitted [B, capacity + 1, 4] and state_out [B, n] of one call over the lanes.
inline void expect_tdt_lanes_match(const std::vector<HostTensor>& out, const TdtLanes& l, double state_tol, const char* what) {
  ASSERT_EQ(out.size(), 2u) << what;
  const int64_t B = static_cast<int64_t>(l.want.size()), n = out[1].numel() / B;
  ASSERT_EQ(out[0].view.shape, (Shape{B, l.capacity + 1, 4})) << what;
  for (int64_t b = 0; b < B; ++b)
    expect_tdt_lane(out[0].view.ptr<int32_t>() + b * (l.capacity + 1) * 4, out[1].view.ptr<float>() + b * n, l.want[static_cast<size_t>(b)],
                    state_tol, std::string(what) + ", lane " + std::to_string(b));
}

// outputs: emitted, state_out of one tdt_greedy call.
inline void expect_tdt_matches(const std::vector<HostTensor>& out, const TdtRef& want, double state_tol, const char* what) {
  ASSERT_EQ(out.size(), 2u) << what;
  ASSERT_EQ(static_cast<size_t>(out[1].numel()), want.state.size()) << what;
  expect_tdt_lane(out[0].view.ptr<int32_t>(), out[1].view.ptr<float>(), want, state_tol, what);
}

// Runs the whole of `in`'s frames through calls of `capacity` tokens each, each call going on
// from the previous one's row 0 and state; checks that each stopping call filled its buffer.
// Returns the tokens of all calls and the last call's outputs.
inline std::vector<std::array<int64_t, 3>> run_in_pieces(const std::function<std::vector<HostTensor>(const TdtInputs&)>& run,
                                                          TdtInputs in, int64_t capacity, std::vector<HostTensor>* last) {
  in.attrs.set_i("capacity", capacity);
  in.state = make_tensor(DType::f32, in.state.view.shape);  // its own, as it is rewritten below
  const int32_t* ctl = in.control.view.ptr<int32_t>();
  const int64_t end = ctl[2], offset = ctl[3];
  set_control(in, ctl[0], ctl[1], end, offset, ctl[4] != 0);
  std::vector<std::array<int64_t, 3>> got;
  for (int call = 0; call < 1000; ++call) {
    *last = run(in);
    if (last->size() != 2) return got;
    const int32_t* em = (*last)[0].view.ptr<int32_t>();
    EXPECT_EQ(em[3], 0) << "status of call " << call;
    EXPECT_LE(em[0], capacity);
    for (int i = 0; i < em[0]; ++i) got.push_back({em[4 + 4 * i], em[5 + 4 * i], em[6 + 4 * i]});
    if (em[1] >= end) break;
    EXPECT_EQ(em[0], capacity) << "call " << call << " stopped before the end without filling its buffer";
    if (em[0] != capacity) break;
    std::copy_n((*last)[1].view.ptr<float>(), in.state.numel(), in.state.view.ptr<float>());
    in.control = make_tensor(DType::i32, Shape{5});
    set_control(in, em[1], em[2], end, offset, false);
  }
  return got;
}

// A full buffer stops the loop before the token that did not fit; calls of `capacity` tokens,
// each from the one before's row 0 and state, give what one long call gives (the float64 loop).
inline void expect_resumes_in_pieces(const std::function<std::vector<HostTensor>(const TdtInputs&)>& run, DType weights,
                                     int64_t capacity) {
  std::mt19937 rng(6);
  TdtCase c;
  c.weights = weights;
  TdtInputs in = make_tdt_inputs(c, rng);
  set_control(in, 0, 0, c.R, 0, true);
  const TdtRef whole = ref_tdt_greedy(c, in);
  ASSERT_GT(whole.margin, 1e-4);
  ASSERT_GT(static_cast<int64_t>(whole.emitted.size()), 2 * capacity);
  std::vector<HostTensor> last;
  EXPECT_EQ(run_in_pieces(run, in, capacity, &last), whole.emitted);
  ASSERT_EQ(last.size(), 2u);
  expect_close(to_doubles(last[1].view), whole.state, 1e-4, 1e-4, "state after the last call");
}

}  // namespace vrun::test
