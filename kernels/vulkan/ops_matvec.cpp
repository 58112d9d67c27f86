// Decode-shape linear: kernel variant and rows-per-workgroup choice (matvec_body.glsl and
// matvec_q4_0.comp say why the kernels are shaped the way they are).
#include "runtime/base/knobs.h"
#include "kernels/vulkan/ops_matvec.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "kernels/vulkan/context.h"
#include "kernels/vulkan/ops.h"

namespace vrun::vulkan {

namespace {

// Rows of x and K a norm is folded into the kernel for (matvec_norm_fits): a layer norm's two
// extra accumulator rows (g and beta) keep it to 4 rows; an RMS norm takes the matvec's 8, so a
// batched decode step of up to 8 rows normalises each row as one row alone is normalised.
constexpr int64_t kMaxLayerNormRows = 4, kMaxRmsNormRows = kMatvecMaxRows, kMaxNormK = 7168;
constexpr int64_t kQ4MatvecRows = 8;  // rows of x the q4_0 kernel takes (MX, matvec_q4_0.comp)

std::atomic<bool> g_force_shared_reduce{false};

// VRUN_MATVEC=RSxWGxU sets the float/q8_0/q4_1 matvec's rows per workgroup, invocations and chunks
// in flight per row for comparisons on a GPU (bench/vulkan/README.md); unset, the heuristics below.
struct MatvecShape {
  int64_t rs = 0, wg = 0, u = 0;
};
const MatvecShape& matvec_override() {
  static const MatvecShape s = [] {
    MatvecShape m;
    const char* e = knob_value(Knob::VRUN_MATVEC);
    long rs = 0, wg = 0, u = 0;
    if (e && std::sscanf(e, "%ldx%ldx%ld", &rs, &wg, &u) == 3 && rs >= 1 && rs <= 16 && (wg == 32 || wg == 64 || wg == 128 || wg == 256) &&
        u >= 1 && u <= 8) {
      m = {rs, wg, u};
    } else if (e && *e) {
      std::fprintf(stderr, "vrun: VRUN_MATVEC=%s is not RSxWGxU (rows 1-16, 32/64/128/256 invocations, 1-8 chunks); ignored\n", e);
    }
    return m;
  }();
  return s;
}
std::atomic<const Q4Tuning*> g_q4_tuning{nullptr};

// VRUN_Q4_MATVEC=R,RG,INV,XS,PF sets the q4_0 kernel's shape for whole-model comparisons on a GPU
// (bench/vulkan/README.md), =generic sends q4_0 to the generic kernel; nullptr when unset.
const Q4Tuning* q4_override() {
  static const Q4Tuning s = [] {
    Q4Tuning t{};
    const char* e = knob_value(Knob::VRUN_Q4_MATVEC);
    int r = 0, rg = 0, inv = 0, xs = 0, pf = 0;
    if (e && std::string(e) == "generic") {
      t.rows = -1;
    } else if (e && std::sscanf(e, "%d,%d,%d,%d,%d", &r, &rg, &inv, &xs, &pf) == 5 && r >= 1 && r <= 256 && rg >= 1 &&
        rg <= 8 && (rg & (rg - 1)) == 0 && (inv == 32 || inv == 64 || inv == 128 || inv == 256) && xs >= 0 && xs <= 16384 &&
        (pf == 0 || pf == 1)) {
      t = {r, rg, xs > 0 ? 1 : 0, inv, xs, pf};
    } else if (e && *e) {
      std::fprintf(stderr,
                   "vrun: VRUN_Q4_MATVEC=%s is not 'generic' or R,RG,INV,XS,PF (rows 1-256, 1/2/4/8 rows a pass, 32/64/128/256 "
                   "invocations, 0-16384 floats staged, prefetch 0/1); ignored\n",
                   e);
    }
    return t;
  }();
  return s.rows != 0 ? &s : nullptr;
}

// The q4_0 kernel's x staged in shared memory (a row's length, 0 for none) for M rows: where every
// row fits there with its block sums and 1 KiB for the rest, always then under a norm prologue
// (one row of K up to kMaxNormK fits); else read from memory (the same sums).
int64_t q4_0_staged(const Context& ctx, const Q4Tuning& t, int64_t K, int64_t M, bool norm) {
  if (M * (K * 4 + K / 8) + 1024 > static_cast<int64_t>(ctx.limits().maxComputeSharedMemorySize)) return 0;
  return norm || (t.stage_x && K <= t.stage_max) ? K : 0;
}

// VRUN_Q4_MATVEC_ROWS=1: a batched decode step's 2-8 rows of q4_0 W on the one-row q4_0 kernel,
// each row's sums its own (kQ4MatvecRows), instead of the generic matvec kernel (2-4 rows) and
// the rows kernel (5-8). Not yet timed on a GPU, so off by default.
bool q4_0_rows_on() {
  const char* e = knob_value(Knob::VRUN_Q4_MATVEC_ROWS);
  return e && std::string(e) == "1";
}

// Whether compute shaders have subgroupAdd (the device's properties, read once with the context).
bool has_subgroup_arithmetic(const Context& ctx) {
  const uint32_t need = VK_SUBGROUP_FEATURE_BASIC_BIT | VK_SUBGROUP_FEATURE_ARITHMETIC_BIT;
  return (ctx.info().subgroup_ops & need) == need;
}

bool is_float16ish(DType t) { return t == DType::f16 || t == DType::bf16; }

}  // namespace

// The matvec.comp kernels where the device has subgroup arithmetic, else matvec_shared.comp.
bool subgroup_reduce(const Context& ctx) { return !g_force_shared_reduce && has_subgroup_arithmetic(ctx); }

int64_t row_stride(const DeviceView& v) {
  for (int i = v.shape.rank - 2; i >= 0; --i)
    if (v.shape[i] != 1) return v.strides[i];
  return v.shape.rank ? v.shape[v.shape.rank - 1] : 1;
}

bool matvec_rows(const DeviceView& x, const DeviceView& w, bool glu) {
  const int64_t K = w.shape.rank == 2 ? w.shape[1] : 0;
  const int64_t M = K ? x.numel() / (glu ? 2 * K : K) : 0;
  return M >= 1 && M <= kMatvecMaxRows;
}

bool exact_decode_rows() {
  const char* e = knob_value(Knob::VRUN_MATMUL_ROWS);
  return e && std::string(e) == "exact";
}

DeviceView row_range(const DeviceView& v, int64_t r0, int64_t m, int64_t cols, int64_t stride) {
  DeviceView c = v;
  c.offset += static_cast<uint64_t>(r0 * stride * dtype_elem_size(v.dtype));
  c.shape = Shape{m, cols};
  c.strides = Strides{};
  c.strides[0] = stride;
  c.strides[1] = 1;
  return c;
}

bool q4_0_decode_rows_kernel(Recorder& rec, const DeviceView& x, const DeviceView& w, bool glu) {
  const int64_t K = w.shape.rank == 2 ? w.shape[1] : 0;
  const int64_t M = K ? x.numel() / (glu ? 2 * K : K) : 0;
  return w.dtype == DType::q4_0 && M > 4 && M <= kMatvecMaxRows && subgroup_reduce(rec.context()) &&
         !q4_0_rows_on() && matmul_rows_fits(rec, x, w);
}

bool matvec_norm_fits(const Context& ctx, const DeviceView& x, const DeviceView& w, bool rms, bool passes) {
  const int64_t K = w.shape.rank == 2 ? w.shape[1] : 0;
  // 5-8 rows with an RMS norm fold it in so that each row is normalised as one row alone is,
  // which only holds where one row takes this kernel too: one q4_0 row has a kernel of its own
  // (another order: such rows are not the single row's bits anyway), and there the fold's two
  // accumulators a row cost an 8-row Llama-1B step 5.6 ms against 4.8 (H200). With
  // VRUN_Q4_MATVEC_ROWS=1 q4_0 rows take the one-row kernel, which normalises each as alone.
  const bool own_q4_0_row = w.dtype == DType::q4_0 && subgroup_reduce(ctx) && !q4_0_rows_on();
  const int64_t most = rms && !own_q4_0_row ? kMaxRmsNormRows : kMaxLayerNormRows;
  // The q4_0 kernel normalises its staged x, which it stages up to kMaxNormK.
  return (passes || (matvec_rows(x, w) && x.numel() <= most * K)) && K <= kMaxNormK;
}

Status record_matvec_linear(Recorder& rec, const std::vector<DeviceView>& in, const DeviceView& y,
                            const MatvecNorm* norm, bool glu, int act) {
  VRUN_ASSIGN_OR_RETURN(DeviceView x, rec.rows_view(in[0], 1));
  const DeviceView& w = in[1];
  DeviceView b, r;
  const bool has_bias = in.size() > 2 && in[2].present(), has_res = in.size() > 3 && in[3].present();
  if (has_bias) {
    VRUN_ASSIGN_OR_RETURN(b, rec.dense_view(in[2]));
  }
  if (has_res) {
    VRUN_ASSIGN_OR_RETURN(r, rec.rows_view(in[3], 1));
  }
  const int64_t K = w.shape[1], N = w.shape[0];
  const int64_t M = K ? x.numel() / (glu ? 2 * K : K) : 0;
  if (N == 0) return Status::ok();
  return record_matvec_passes(rec, x, w, has_bias ? &b : nullptr, y, M, N, K, has_res ? &r : nullptr, norm, glu, act);
}

Status record_matvec_passes(Recorder& rec, const DeviceView& x, const DeviceView& w, const DeviceView* bias,
                            const DeviceView& y, int64_t M, int64_t N, int64_t K, const DeviceView* residual,
                            const MatvecNorm* norm, bool glu, int act) {
  const int64_t pass = norm ? (norm->rms ? kMaxRmsNormRows : kMaxLayerNormRows) : kMatvecMaxRows;
  const int64_t xs = row_stride(x), rs = residual ? row_stride(*residual) : 0;
  if (M <= pass) return record_matvec(rec, x, w, bias, y, M, N, K, xs, residual, rs, norm, glu, act);
  const int64_t ys = row_stride(y);
  for (int64_t r0 = 0; r0 < M; r0 += pass) {
    const int64_t m = std::min(pass, M - r0);
    const DeviceView rp = residual ? row_range(*residual, r0, m, N, rs) : DeviceView{};
    VRUN_RETURN_IF_ERROR(record_matvec(rec, row_range(x, r0, m, glu ? 2 * K : K, xs), w, bias, row_range(y, r0, m, N, ys),
                                       m, N, K, xs, residual ? &rp : nullptr, rs, norm, glu, act));
  }
  return Status::ok();
}

void set_matvec_shared_reduce_for_testing(bool on) { g_force_shared_reduce = on; }
void set_q4_0_tuning_for_bench(const Q4Tuning* t) { g_q4_tuning = t; }

Status record_matvec(Recorder& rec, const DeviceView& x, const DeviceView& w, const DeviceView* bias,
                     const DeviceView& y, int64_t M, int64_t N, int64_t K, int64_t x_row_stride,
                     const DeviceView* residual, int64_t residual_row_stride, const MatvecNorm* norm, bool glu,
                     int act) {
  if (glu && norm) return err(ErrorCode::kInvalidArgument, "vulkan: matvec takes glu or a norm, not both");
  if (M < 1 || M > kMatvecMaxRows)
    return err(ErrorCode::kInternal, "vulkan: matvec takes 1..", kMatvecMaxRows, " rows of x, got ", M);
  const int64_t max_norm_rows = norm && norm->rms ? kMaxRmsNormRows : kMaxLayerNormRows;
  if (norm && (M > max_norm_rows || K > kMaxNormK || !norm->weight))
    return err(ErrorCode::kInternal, "vulkan: matvec norm over ", M, "x", K, " rows (at most ", max_norm_rows, "x", kMaxNormK,
               ", with a weight)");
  if (is_quantized(w.dtype) && K % 32)
    return err(ErrorCode::kInvalidArgument, "vulkan: linear weight ", dtype_name(w.dtype), " needs K % 32 == 0, got K ",
               K);
  std::vector<Binding> bindings = {{&y, true}, {&x, false}, {&w, false}, {bias, false}, {residual, false},
                                   {norm ? norm->weight : nullptr, false}, {norm ? norm->bias : nullptr, false}};
  const int32_t norm_mode = norm ? (norm->rms ? 2 : 1) : 0;
  const int32_t g_dt = norm ? dt_code(*norm->weight) : 255, beta_dt = norm && norm->bias ? dt_code(*norm->bias) : 255;
  const float eps = norm ? norm->eps : 0.f;
  const int32_t res_dt = residual ? dt_code(*residual) : 255;
  VRUN_ASSIGN_OR_RETURN(auto offs, rec.binding_offsets(bindings));

  const int64_t wv = w.dtype == DType::f32 ? 4 : 8;  // elements per 16 bytes
  const bool wvec = (w.dtype == DType::f32 || is_float16ish(w.dtype)) && K % 8 == 0 && offs[2] % wv == 0;
  const int64_t xv = x.dtype == DType::f32 ? 4 : 8;
  // With glu the second half's loads (K further on) must keep the alignment too.
  const bool xvec = (x.dtype == DType::f32 || is_float16ish(x.dtype)) && offs[1] % xv == 0 &&
                    (M == 1 || x_row_stride % xv == 0) && (!glu || K % xv == 0);
  const bool a4 = w.dtype == DType::q4_1 && offs[2] % 4 == 0;
  const bool subgroups = subgroup_reduce(rec.context());

  const Q4Tuning* q4t = g_q4_tuning.load();
  if (!q4t) q4t = q4_override();
  // q4_0 with one row of x: its own kernel, unless a benchmark asks for the generic one; 2-8 rows
  // too with VRUN_Q4_MATVEC_ROWS=1, each with one row's bits.
  if (subgroups && w.dtype == DType::q4_0 && !(q4t && q4t->rows < 0) &&
      (M == 1 || (M <= kQ4MatvecRows && q4_0_rows_on()))) {
    // 16 rows per workgroup (one pass of its four subgroups), x staged in shared memory whenever
    // it fits there with its block sums (1 KiB left for the rest: with SwiGLU gated in the
    // kernel, an unstaged x is gated again by every subgroup), and lanes requesting their next
    // block before using the current one. A Llama-1B q4_0 decode on an H200, one run
    // (bench_llama_roofline, VRUN_Q4_MATVEC): 711.0 tok/s this way (x of 8192 staged in the
    // device's 48 KiB), 643.6 with 16 rows, x up to 7168 staged and no early loads, 663.3 with
    // that but 16-64 rows a workgroup (the earlier choice), 611.0 through the generic kernel.
    Q4Tuning t = q4t ? *q4t : Q4Tuning{};
    if (!q4t) t.rows = 16;
    const int64_t xsn = q4_0_staged(rec.context(), t, K, M, norm != nullptr);
    PushWords pw;
    pw.u(N).u(K).u(x_row_stride).u(offs[0]).u(offs[1]).u(offs[2]).u(offs[3]).u(t.rows).u(offs[4]).f(eps).u(offs[5]).u(offs[6]);
    pw.u(residual_row_stride);
    uint32_t gx, gy;
    rec.grid_1d(static_cast<uint64_t>((N + t.rows - 1) / t.rows), &gx, &gy);
    return rec.dispatch("matvec_q4_0",
                        {dt_code(x.dtype), 0, dt_code(y.dtype), bias ? dt_code(*bias) : 255, 0, 0, 0, xvec ? 1 : 0, 0,
                         t.invocations, static_cast<int32_t>(xsn), t.rows_per_pass, res_dt, norm_mode, g_dt, beta_dt,
                         glu ? 1 : 0, act, t.prefetch, static_cast<int32_t>(M)},
                        bindings, pw.w, pw.bytes(), gx, gy, 1);
  }

  // Rows of W per workgroup: more share each x load and keep more loads in flight per
  // invocation, fewer keep enough workgroups (about 1000) to fill a large GPU; with many rows
  // of x the accumulators would crowd the registers.
  int64_t rs = 4;
  while (rs > 1 && N / rs < 1024) rs /= 2;
  if (M > 4 && rs > 2) rs = 2;
  if (norm && !norm->rms && M > 2 && rs > 2) rs = 2;  // two more accumulator rows per weight row

  // Invocations per workgroup: halved (down to 32) while the rest would still get the kernel's
  // two work items (8-element chunks or half-blocks; single elements without 16-byte loads)
  // per row each, so short rows do not leave most of a workgroup idle.
  const int64_t items = is_quantized(w.dtype) ? K / 16 : wvec ? K / 8 : K / 2;
  int64_t wg = 128;
  while (wg > 32 && wg >= items) wg /= 2;
  int64_t u = 2;
  if (const MatvecShape& o = matvec_override(); o.rs) rs = o.rs, wg = o.wg, u = o.u;

  PushWords pw;
  pw.u(N).u(K).u(x_row_stride).u(offs[0]).u(offs[1]).u(offs[2]).u(offs[3]).u(offs[4]).u(residual_row_stride);
  pw.f(eps).u(offs[5]).u(offs[6]);
  uint32_t gx, gy;
  rec.grid_1d(static_cast<uint64_t>((N + rs - 1) / rs), &gx, &gy);
  return rec.dispatch(subgroups ? "matvec" : "matvec_shared",
                      {dt_code(x.dtype), dt_code(w.dtype), dt_code(y.dtype), bias ? dt_code(*bias) : 255,
                       static_cast<int32_t>(M), static_cast<int32_t>(rs), wvec ? 1 : 0, xvec ? 1 : 0, a4 ? 1 : 0,
                       static_cast<int32_t>(wg), res_dt, norm_mode, g_dt, beta_dt, glu ? 1 : 0, act,
                       static_cast<int32_t>(u)},
                      bindings, pw.w, pw.bytes(), gx, gy, 1);
}

namespace {

// VRUN_MATMUL_ROWS: -1 unset, 0 off ("0", or "exact": exact_decode_rows), else the forced K split.
int matmul_rows_knob() {
  const char* e = knob_value(Knob::VRUN_MATMUL_ROWS);
  if (!e || !*e) return -1;
  const int n = std::atoi(e);
  if (std::string(e) == "0" || std::string(e) == "exact") return 0;
  if (n >= 1 && n <= 16 && (n & (n - 1)) == 0) return n;
  static bool told = false;
  if (!told) std::fprintf(stderr, "vrun: VRUN_MATMUL_ROWS=%s is not 0, exact or a K split of 1, 2, 4, 8 or 16; ignored\n", e);
  told = true;
  return -1;
}

constexpr int64_t kRowsBN = 64;
int g_rows_split = 0, g_rows_tn = 4;
bool g_rows_scalar = false;

}  // namespace

void set_matmul_rows_for_bench(int split, bool scalar_loads, int columns) {
  g_rows_split = split;
  g_rows_scalar = scalar_loads;
  g_rows_tn = columns == 8 ? 8 : 4;
}

bool matmul_rows_fits(Recorder& rec, const DeviceView& x, const DeviceView& w) {
  if (matmul_rows_knob() == 0 || w.shape.rank != 2) return false;
  const int64_t K = w.shape[1];
  const DType wd = w.dtype, xd = x.dtype;
  const bool w_ok = wd == DType::f32 || is_float16ish(wd) || wd == DType::q8_0 || wd == DType::q4_0 || wd == DType::q4_1;
  const bool x_ok = xd == DType::f32 || is_float16ish(xd);
  if (!w_ok || !x_ok || K % 32 != 0 || K == 0) return false;
  if (!is_quantized(wd)) return true;
  // Block-quantised W is read 16 bits at a time: its first byte even in the binding.
  std::vector<Binding> b = {{&w, false}};
  Result<std::vector<uint32_t>> offs = rec.binding_offsets(b);
  return offs.is_ok() && (*offs)[0] % 2 == 0;
}

Status record_matmul_rows(Recorder& rec, const DeviceView& x, const DeviceView& w, const DeviceView* bias,
                          const DeviceView& y, int64_t M, int64_t N, int64_t K, int64_t x_row_stride,
                          int64_t y_row_stride, const DeviceView* residual, int64_t residual_row_stride, int act) {
  if (M < 1 || N < 1) return Status::ok();
  if (K % 32 != 0) return err(ErrorCode::kInternal, "vulkan: the rows kernel needs K % 32 == 0, got K ", K);
  // Tiles of 16 or 32 rows of x (an invocation's 2 or 4): 16 for steps of up to 16 rows (each row
  // summed in the same order whatever the tile). A 16-row q4_0 step of Llama-1B on an H200: 5.5
  // ms a decode call against 6.3 on 32-row tiles. 8 rows (tiles of 8, an invocation's one) took
  // 5.6 ms against 5.1 on the matvec kernel, which keeps steps of up to 8 (of q4_0 up to 4:
  // q4_0_decode_rows_kernel).
  const char* cols = knob_value(Knob::VRUN_MATMUL_ROWS_COLS);
  const int64_t tm = M <= 16 ? 2 : 4, bm = 8 * tm, tn = g_rows_tn == 8 || (cols && std::string(cols) == "8") ? 8 : 4,
                bn = 16 * tn;
  const int64_t gx = (N + bn - 1) / bn, gy = (M + bm - 1) / bm, blocks = K / 32;
  // K split: 8 parts (4 where the projection's columns of tiles alone are 1024 workgroups or
  // more), fewer where a part would keep under 4 blocks. Llama-1B's projections at 32 rows on an
  // H200 (vrun_bench_vulkan --rows-shapes 16,32: every split of each shape), q4_0 / f16 ms: QKV
  // 3072x2048 0.039 / 0.052 in 4 parts, 0.033 / 0.039 in 8; 2048x2048 0.029 / 0.038 against
  // 0.026 / 0.031; down 2048x8192 0.096 / 0.132 against 0.074 / 0.098 (16 and 32 no faster);
  // gate-up 16384x2048 0.13-0.14 / 0.17-0.18 in 1 to 8; the output head 128256x2048 1.031 unsplit
  // against 0.932 in 4 or 8. From N and K only: the rows of a step get the same sums whatever
  // their number.
  int64_t split = 1;
  const int64_t most = (N + kRowsBN - 1) / kRowsBN >= 1024 ? 4 : 8;
  while (split < most && blocks % (split * 2) == 0 && blocks / (split * 2) >= 4) split *= 2;
  if (const int f = matmul_rows_knob(); f > 0 && blocks % f == 0) split = f;
  if (g_rows_split > 0 && blocks % g_rows_split == 0) split = g_rows_split;
  std::vector<Binding> bindings = {{&y, true}, {&x, false}, {&w, false}, {bias, false}, {residual, false}};
  DeviceView part, cnt;
  if (split > 1) {
    VRUN_ASSIGN_OR_RETURN(part, rec.scratch(DType::f32, Shape{gx * gy * split * bm * bn}));
    VRUN_ASSIGN_OR_RETURN(cnt, rec.counters(gx * gy));
    bindings.push_back({&part, true});
    bindings.push_back({&cnt, true});
  }
  VRUN_ASSIGN_OR_RETURN(auto offs, rec.binding_offsets(bindings));
  offs.resize(7, 0);
  // Float W rows 16 bytes aligned (K is a multiple of 32), f32 x rows so: 16-byte loads.
  const bool wvec = !is_quantized(w.dtype) && !g_rows_scalar && offs[2] % (w.dtype == DType::f32 ? 4 : 8) == 0;
  const bool xvec = x.dtype == DType::f32 && !g_rows_scalar && offs[1] % 4 == 0 && x_row_stride % 4 == 0;
  PushWords pw;
  pw.u(M).u(N).u(K).u(x_row_stride).u(y_row_stride).u(residual_row_stride);
  pw.u(offs[0]).u(offs[1]).u(offs[2]).u(offs[3]).u(offs[4]).u(offs[5]).u(offs[6]);
  return rec.dispatch("matmul_rows",
                      {dt_code(x.dtype), dt_code(w.dtype), dt_code(y.dtype), bias ? dt_code(*bias) : 255,
                       residual ? dt_code(*residual) : 255, act, static_cast<int32_t>(split), static_cast<int32_t>(tm),
                       wvec ? 1 : 0, xvec ? 1 : 0, static_cast<int32_t>(tn)},
                      bindings, pw.w, pw.bytes(), static_cast<uint32_t>(gx), static_cast<uint32_t>(gy),
                      static_cast<uint32_t>(split));
}

}  // namespace vrun::vulkan
