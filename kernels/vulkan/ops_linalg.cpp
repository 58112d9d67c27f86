// linear (matvec for decode-sized M, tiled matmul otherwise, cooperative-matrix matmul where the
// device has it) and strided, broadcast bmm.
#include <algorithm>
#include <cstdlib>
#include <string>

#include "runtime/base/knobs.h"
#include "kernels/vulkan/context.h"
#include "kernels/vulkan/matmul_tiles.h"
#include "kernels/vulkan/ops.h"
#include "kernels/vulkan/ops_matvec.h"
#include "kernels/vulkan/pipelines.h"

namespace vrun::vulkan {

namespace {

constexpr int64_t kMatvecMaxRows = 8;
constexpr int64_t kMatvecChunkRows = 63;

// y = act(x W^T (+ bias)) (+ res), act 0 none, 1 gelu, 2 silu: the tensor-core kernel applies
// act and adds res as it writes y; elsewhere they follow the projection, on f32 rows.
// How the kernel for a linear's rows is chosen. one_row (linear's decode = 1): every row in f32 as
// a one-row projection computes it (the matvec kernels up to 8 rows, the rows kernel beyond, f32
// scratch rows), never rounded to halves for the tensor cores. pinned (batch_invariant = 1):
// kernel and scratch dtype as for kPinnedRows rows whatever the call's count (no matvec or rows
// kernel for few rows, no split K), so that a row's values do not depend on how many rows the
// call has. The subgroup-scope tensor-core tile still follows the rows: its shape does not change
// the order in which an output's products are summed (K in the same steps), only how many
// outputs a workgroup makes. The workgroup-scope kernels' tile is chosen for kPinnedRows too:
// there the tile choice also decides between the W-as-A and x-as-A kernels.
struct RowRule {
  bool one_row = false, pinned = false;
};
constexpr int64_t kPinnedRows = 4096;
Status record_linear_core(Recorder& rec, const std::vector<DeviceView>& in, const DeviceView& y,
                          const DeviceView* res = nullptr, int act = 0, RowRule rr = {});

int act_code(const std::string& act) { return act == "gelu" ? 1 : act == "silu" ? 2 : 0; }

// Whether the tensor-core linear takes these operands, alignment aside: f16 x, or f32 x rounded
// to halves unless exact f32 is asked for; f16 W, or block-quantised W expanded to halves as its
// tiles load (whole blocks: K % 32 == 0); enough rows (tensor_core_rows) and K % 8 == 0.
bool coop_linear_operands(const Context& ctx, DType x, DType w, int64_t M, int64_t K) {
  const bool x_ok = x == DType::f16 || (x == DType::f32 && !ctx.exact_f32());
  const bool quant = w == DType::q8_0 || w == DType::q4_0 || w == DType::q4_1;
  const bool w_ok = w == DType::f16 || (quant && K % 32 == 0);
  return !coopmat_kernel(ctx, "matmul_coopmat").empty() && x_ok && w_ok && M >= tensor_core_rows(ctx, quant) &&
         K % 8 == 0;
}

// Whether a batched decode step's rows (linear's decode) take the tensor cores' exact mode
// (matmul_tiles.cpp, cm2_exact_tile): f32 rows of x (glu: of 2K elements each), at least
// exact_tensor_rows() of them, W of halves, or of q8_0, q4_0 or q4_1 blocks at least
// kExactBlocksN rows long (exact_wide_enough); never with VRUN_MATMUL_ROWS=exact (the single
// stream's bits). From W's shape and the step's rows past the threshold only, so that a row's
// values do not depend on how many rows share the step. Only where K and N are both at least
// kExactMinDim, the shapes it was measured on (Llama-1B's); the speech decoders' narrower
// projections (Whisper's 384-1280 wide) keep the rows and matvec kernels until measured.
constexpr int64_t kExactMinDim = 2048;
bool exact_on_tensor_cores(Recorder& rec, const DeviceView& x, const DeviceView& w, RowRule rr, bool glu) {
  if (!rr.one_row || exact_decode_rows() || x.dtype != DType::f32 || w.shape.rank != 2) return false;
  const int64_t K = w.shape[1], rows = exact_tensor_rows(w.dtype);
  const int64_t M = K ? x.numel() / (glu ? 2 * K : K) : 0;
  const DType wd = w.dtype;
  const bool w_ok = wd == DType::f16 || ((wd == DType::q8_0 || wd == DType::q4_0 || wd == DType::q4_1) &&
                                         exact_wide_enough(w.shape[0]));
  return rows > 0 && M >= rows && w_ok && K % kQuantBlock == 0 && K >= kExactMinDim && w.shape[0] >= kExactMinDim &&
         cm2_exact_tile(rec.context(), M, wd) != nullptr;
}

// Whether x's rows go to the matvec kernels: up to 8 of them (glu: of 2K elements each), or a
// batched decode step's rows of any count with VRUN_MATMUL_ROWS=exact; not a step's q4_0 rows
// that the rows kernel takes (q4_0_decode_rows_kernel), nor those of the tensor cores' exact mode.
bool rows_on_matvec(Recorder& rec, const DeviceView& x, const DeviceView& w, RowRule rr, bool glu) {
  return !rr.pinned && (matvec_rows(x, w, glu) || (rr.one_row && exact_decode_rows())) &&
         !(rr.one_row && q4_0_decode_rows_kernel(rec, x, w, glu)) && !exact_on_tensor_cores(rec, x, w, rr, glu);
}

// The residual and act: decode rows apply them in the matvec's epilogue (act after the bias,
// then the residual), other shapes in record_linear_core.
Status record_linear_plain(Recorder& rec, const std::vector<DeviceView>& in, const DeviceView& y, int act = 0,
                           RowRule rr = {}) {
  const bool res = in.size() > 3 && in[3].present();
  if (!res && act == 0) return record_linear_core(rec, in, y, nullptr, 0, rr);
  if (rows_on_matvec(rec, in[0], in[1], rr, false)) return record_matvec_linear(rec, in, y, nullptr, false, act);
  const bool bias = in.size() > 2 && in[2].present();
  return record_linear_core(rec, {in[0], in[1], bias ? in[2] : DeviceView{}}, y, res ? &in[3] : nullptr, act, rr);
}

// The dtype of a scratch tensor of x's rows (M x K) that the projection with W will read: the
// halves the tensor cores would round them to on load where they will read them (half the bytes
// written and read, the same products), else f32.
DType rows_scratch_dtype(const Context& ctx, DType w, int64_t M, int64_t K, RowRule rr) {
  return !rr.one_row && coop_linear_operands(ctx, DType::f32, w, rr.pinned ? kPinnedRows : M, K) ? DType::f16 : DType::f32;
}

bool halve_x_on() {
  const char* e = knob_value(Knob::VRUN_MM_HALVE_X);
  return !(e && std::string(e) == "0");
}

// glu = silu: decode rows are gated inside the matvec kernel as x is loaded; other shapes get
// the gated rows in a scratch tensor first (the glu op's math; rows_scratch_dtype).
Status record_linear_glu(Recorder& rec, const std::vector<DeviceView>& in, const DeviceView& y, int act, RowRule rr) {
  const int64_t K = in[1].shape[1];
  if (rows_on_matvec(rec, in[0], in[1], rr, true)) return record_matvec_linear(rec, in, y, nullptr, true, act);
  const DeviceView& x = in[0];
  const int last = x.shape.rank - 1;
  Shape hs = x.shape;
  hs[last] = K;
  VRUN_ASSIGN_OR_RETURN(DeviceView xg,
                        rec.scratch(rows_scratch_dtype(rec.context(), in[1].dtype, K ? hs.numel() / K : 0, K, rr), hs));
  DeviceView a = x, g = x;
  a.shape = hs;
  g.shape = hs;
  g.offset += static_cast<uint64_t>(K * x.strides[last] * dtype_elem_size(x.dtype));
  VRUN_RETURN_IF_ERROR(record_eltwise(rec, OP_GLU_SILU, xg, &a, &g, nullptr));
  std::vector<DeviceView> rest(in.begin(), in.begin() + std::min<size_t>(in.size(), 4));
  rest[0] = xg;
  return record_linear_plain(rec, rest, y, act, rr);
}

// x with its trailing x_dims dims merged into one dense K (copied when they are not dense).
Result<DeviceView> merge_x_dims(Recorder& rec, const DeviceView& x, int x_dims) {
  VRUN_ASSIGN_OR_RETURN(DeviceView v, rec.rows_view(x, x_dims));
  const int lead = v.shape.rank - x_dims;
  int64_t k = 1;
  for (int i = lead; i < v.shape.rank; ++i) k *= v.shape[i];
  v.shape.rank = lead + 1;
  v.shape[lead] = k;
  v.strides[lead] = 1;
  return v;
}

// The norm prologue: decode rows are normalised inside the matvec kernel; other shapes get their
// rows normalised into a scratch tensor first, as the layer_norm / rms_norm op would.
Status record_linear(Recorder& rec, const std::vector<DeviceView>& in_, const DeviceView& y, const Attrs& attrs) {
  const int64_t x_dims = attrs.i("x_dims");
  const bool glu = attrs.s("glu") == "silu";
  const std::string& norm = attrs.s("norm");
  const std::string& act_name = attrs.s("act");
  if (act_name != "none" && act_name != "gelu" && act_name != "silu")
    return err(ErrorCode::kInvalidArgument, "vulkan: linear act must be none, gelu or silu, got '", act_name, "'");
  const int act = act_code(act_name);
  if (x_dims < 1 || x_dims > in_[0].shape.rank || (glu && (x_dims != 1 || norm != "none")))
    return err(ErrorCode::kInvalidArgument, "vulkan: linear with x_dims = ", x_dims, ", glu = ", attrs.s("glu"), " and norm = ",
               norm, " over x ", in_[0].shape.str(), " (glu needs x_dims = 1 and norm = none)");
  std::vector<DeviceView> in = in_;
  if (x_dims > 1) {
    VRUN_ASSIGN_OR_RETURN(in[0], merge_x_dims(rec, in_[0], static_cast<int>(x_dims)));
  }
  RowRule rr;
  rr.one_row = attrs.i("decode") != 0;
  rr.pinned = !rr.one_row && attrs.i("batch_invariant") != 0;
  if (glu) return record_linear_glu(rec, in, y, act, rr);
  if (norm == "none") return record_linear_plain(rec, in, y, act, rr);
  const bool rms = norm == "rms";
  if (in.size() < 5 || !in[4].present())
    return err(ErrorCode::kInvalidArgument, "vulkan: linear with norm = ", norm, " needs norm_weight");
  const bool has_nb = !rms && in.size() > 5 && in[5].present();
  const float eps = static_cast<float>(attrs.f("eps"));
  if (!rr.pinned && matvec_norm_fits(rec.context(), in[0], in[1], rms, rr.one_row && exact_decode_rows()) &&
      !exact_on_tensor_cores(rec, in[0], in[1], rr, false)) {
    DeviceView g, b;
    VRUN_ASSIGN_OR_RETURN(g, rec.dense_view(in[4]));
    if (has_nb) {
      VRUN_ASSIGN_OR_RETURN(b, rec.dense_view(in[5]));
    }
    const MatvecNorm mn{rms, eps, &g, has_nb ? &b : nullptr};
    return record_matvec_linear(rec, in, y, &mn, false, act);
  }
  const int64_t K = in[1].shape[1], M = K ? in[0].numel() / K : 0;
  VRUN_ASSIGN_OR_RETURN(DeviceView xs, rec.scratch(rows_scratch_dtype(rec.context(), in[1].dtype, M, K, rr), in[0].shape));
  const OpKind op = rms ? OpKind::rms_norm : OpKind::layer_norm;
  Attrs na(op);
  na.set_f("eps", eps);
  std::vector<DeviceView> nin = {in[0], in[4]};
  if (has_nb) nin.push_back(in[5]);
  VRUN_RETURN_IF_ERROR(record_norm(rec, op, nin, {xs}, na));
  std::vector<DeviceView> rest(in.begin(), in.begin() + 4);
  rest[0] = xs;
  return record_linear_plain(rec, rest, y, act, rr);
}

// Block-quantised W [N, K] expanded to f16 rows in wh (dequant.comp): false where its byte offset
// in the binding is odd (its 16-bit fields unaligned).
Result<bool> record_dequant(Recorder& rec, const DeviceView& w, const DeviceView& wh) {
  std::vector<Binding> bindings = {{&wh, true}, {&w, false}};
  VRUN_ASSIGN_OR_RETURN(auto offs, rec.binding_offsets(bindings));
  if (offs[1] % 2 != 0 || offs[0] % 8 != 0) return false;
  const uint64_t n8 = static_cast<uint64_t>(w.numel()) / 8;
  PushWords pw;
  pw.u(n8).u(offs[0]).u(offs[1]);
  uint32_t gx, gy;
  rec.grid_1d((n8 + 255) / 256, &gx, &gy);
  VRUN_RETURN_IF_ERROR(rec.dispatch("dequant", {dt_code(w.dtype)}, bindings, pw.w, pw.bytes(), gx, gy, 1));
  return true;
}

// The rows kernel (record_matmul_rows) over x's rows into y's, the residual's rows read in its
// epilogue.
Status record_rows_kernel(Recorder& rec, const DeviceView& x, const DeviceView& w, const DeviceView* bias, const DeviceView& y,
                          const DeviceView* res, int act, int64_t M, int64_t N, int64_t K) {
  VRUN_ASSIGN_OR_RETURN(DeviceView yr, rec.rows_view(y, 1));
  DeviceView r;
  if (res) {
    VRUN_ASSIGN_OR_RETURN(r, rec.rows_view(*res, 1));
  }
  return record_matmul_rows(rec, x, w, bias, yr, M, N, K, row_stride(x), row_stride(yr), res ? &r : nullptr,
                            res ? row_stride(r) : 0, act);
}

// The operands of prefill rows (Ms: the rows the kernel is chosen for) made ready for the
// tensor cores: W and x replaced by the f16 copies described below where those pay.
Status prepare_prefill_operands(Recorder& rec, DeviceView& x, DeviceView& w, int64_t Ms) {
  Context& ctx = rec.context();
  const int64_t K = x.shape[x.shape.rank - 1], N = w.shape[0];
  // Block-quantised W on prefill rows: expanded to f16 scratch first where that pays, then the f16
  // kernels (matmul_tiles.cpp, dequant_first). A device without room for the halves keeps the
  // fused kernels: the expansion is only a speed-up.
  if (w.is_contiguous() && dequant_first(ctx, Ms, K, N, x.dtype, w.dtype) &&
      (!ctx.coopmat2().on || coop_linear_operands(ctx, x.dtype, DType::f16, Ms, K))) {
    if (Result<DeviceView> wh = rec.scratch(DType::f16, Shape{N, K}); wh.is_ok()) {
      VRUN_ASSIGN_OR_RETURN(const bool expanded, record_dequant(rec, w, *wh));
      if (expanded) w = *wh;
    }
  }
  // f32 rows that the workgroup-scope kernels would round to halves as they load are rounded
  // once, into an f16 copy, first, for f16 W: the projection then runs on the f16-x kernels (W as
  // the A matrix on wide projections), which read half the bytes a tile. Block-quantised W stays
  // on f32 x (its kernel measured no gain from the extra pass). VRUN_MM_HALVE_X=0 keeps f32 x.
  if (x.dtype == DType::f32 && w.dtype == DType::f16 && ctx.coopmat2().on && K % 8 == 0 &&
      coop_linear_operands(ctx, x.dtype, w.dtype, Ms, K) && halve_x_on()) {
    VRUN_ASSIGN_OR_RETURN(DeviceView xh, rec.scratch(DType::f16, x.shape));
    VRUN_RETURN_IF_ERROR(rec.record_copy(x, xh));
    x = xh;
  }
  return Status::ok();
}

Status record_linear_core(Recorder& rec, const std::vector<DeviceView>& in, const DeviceView& y, const DeviceView* res, int act,
                          RowRule rr) {
  VRUN_ASSIGN_OR_RETURN(DeviceView x, rec.rows_view(in[0], 1));
  DeviceView w = in[1];
  const DeviceView* bias = in.size() > 2 && in[2].present() ? &in[2] : nullptr;
  DeviceView b;
  if (bias) {
    VRUN_ASSIGN_OR_RETURN(b, rec.dense_view(*bias));
    bias = &b;
  }
  const int64_t K = x.shape[x.shape.rank - 1], N = w.shape[0];
  const int64_t M = K ? x.numel() / K : 0;
  if (M == 0 || N == 0) return Status::ok();
  // Off the tensor cores, act and res follow the projection as passes over f32 rows (scratch
  // when y is not f32), rounded to y's dtype once, as the CPU kernel does.
  const bool after = act != 0 || res, in_scratch = after && y.dtype != DType::f32;
  auto finish = [&](const DeviceView& p) -> Status {
    if (act != 0) VRUN_RETURN_IF_ERROR(record_eltwise(rec, act == 1 ? OP_GELU : OP_SILU, p, &p, nullptr, nullptr));
    if (res) return record_eltwise(rec, OP_ADD, y, &p, res, nullptr);
    return in_scratch ? rec.record_copy(p, y) : Status::ok();
  };
  auto plain_target = [&]() -> Result<DeviceView> {
    if (!in_scratch) return y;
    return rec.scratch(DType::f32, y.shape);
  };
  // Decode shapes: record_matvec binds and computes its offsets itself.
  const int64_t Ms = rr.pinned ? kPinnedRows : M;  // the rows the kernel is chosen for
  const bool exact = exact_on_tensor_cores(rec, x, w, rr, false);
  if (M <= kMatvecMaxRows && !rr.pinned && !exact && !(rr.one_row && q4_0_decode_rows_kernel(rec, x, w))) {
    VRUN_ASSIGN_OR_RETURN(DeviceView p, plain_target());
    VRUN_RETURN_IF_ERROR(record_matvec(rec, x, w, bias, p, M, N, K, row_stride(x)));
    return after ? finish(p) : Status::ok();
  }
  Context& ctx = rec.context();
  // A batched decode step's rows (linear's decode: any count, each as one row alone; else up to
  // kMatvecChunkRows rows short of the tensor cores' tile): the rows kernel where it takes them (W
  // read once per 32 rows; a 32-row q4_0 Llama-1B step took 16.7 ms on an H200 as 8-row matvec
  // passes, the fallback), not the subgroup-scope tiled matmul (too few workgroups for so few
  // rows); VRUN_MM_QROWS sends block-quantised W to the W-as-A kernel from fewer rows.
  // (The tensor cores' exact mode takes a step's rows where it can: exact_on_tensor_cores; then
  // the rows kernel only where W's offsets do not allow it.)
  auto rows_kernels = [&]() -> Status {
    if (matmul_rows_fits(rec, x, w)) return record_rows_kernel(rec, x, w, bias, y, res, act, M, N, K);
    VRUN_ASSIGN_OR_RETURN(DeviceView p, plain_target());
    VRUN_RETURN_IF_ERROR(record_matvec_passes(rec, x, w, bias, p, M, N, K));
    return after ? finish(p) : Status::ok();
  };
  if (!exact && (rr.one_row || (!rr.pinned && M <= kMatvecChunkRows && !coop_linear_operands(ctx, x.dtype, w.dtype, M, K))))
    return rows_kernels();
  if (!exact) VRUN_RETURN_IF_ERROR(prepare_prefill_operands(rec, x, w, Ms));
  DeviceView r;
  if (res) {
    VRUN_ASSIGN_OR_RETURN(r, rec.rows_view(*res, 1));
  }
  std::vector<Binding> bindings = {{&y, true}, {&x, false}, {&w, false}, {bias, false}, {res ? &r : nullptr, false}};
  const int32_t bias_dt = bias ? dt_code(*bias) : 255;
  PushWords pw;
  // The push constants for the bindings as they stand (offsets in elements).
  auto push = [&]() -> Result<std::vector<uint32_t>> {
    VRUN_ASSIGN_OR_RETURN(auto offs, rec.binding_offsets(bindings));
    pw = PushWords{};
    pw.u(M).u(N).u(K).u(row_stride(x)).u(1).u(0).u(0).u(1).u(1);
    for (int i = 0; i < 6; ++i) pw.u(0);
    pw.u(offs[0]).u(offs[1]).u(offs[2]).u(offs[3]).u(offs[4]).u(bindings[4].view ? row_stride(r) : 0);
    return offs;
  };
  VRUN_ASSIGN_OR_RETURN(auto offs, push());
  const std::string coop = coopmat_kernel(ctx, "matmul_coopmat");
  // Tensor cores read 16 bytes at a time: rows and W 8-element aligned (block-quantised W: its
  // 2-byte fields aligned).
  const bool coop_ok = coop_linear_operands(ctx, x.dtype, w.dtype, Ms, K) && offs[2] % (w.dtype == DType::f16 ? 8 : 2) == 0 &&
                       row_stride(x) % 8 == 0 && offs[1] % 8 == 0;
  // The workgroup-scope kernels into f32 or f16 y, where the device has them. W as the A matrix:
  // block-quantised W (its blocks expanded by the loads, where W starts on a block boundary of its
  // binding) and f16 W on wide projections.
  // Their dispatch: gx x gy tiles, each split into cm2_split's K ranges (gl_WorkGroupID.z) whose
  // partial sums go through scratch and one counter per tile (bindings 5 and 6, offsets in push
  // words 9 and 10); specialisation constants (matmul_cm2_common.glsl): dtypes, epilogue, tile, 4 K
  // steps per unrolled pass, W's dtype (matmul_wa_cm2.comp), the K ranges.
  // x's last tile of rows, where M is not a whole number of tiles (a prompt's length), starts at
  // M - rows rather than past M (push word 11): its loads stay unclamped (the clamped ones made a
  // 481-row f16 prefill 1.2-2x slower a projection than a 512-row one on an H100), and the rows it
  // shares with the tile before are computed twice, to the same values. Not where y overlaps the
  // residual it reads.
  auto first_byte = [](const DeviceView& v) { return v.buffer.offset + v.offset; };
  const bool y_reads_itself =
      res && r.buffer.buffer == y.buffer.buffer && first_byte(r) < first_byte(y) + y.dense_bytes() &&
      first_byte(y) < first_byte(r) + static_cast<uint64_t>(((M - 1) * row_stride(r) + N) * dtype_elem_size(r.dtype));
  // The W-as-A kernel's exact mode (specialisation constant 12) for a decode step's rows: its K
  // ranges chosen from W's tiles alone, as for one tile of rows, so that a row's sums do not depend
  // on how many rows the step has.
  auto dispatch_cm2 = [&](std::string_view kernel, const Cm2Tile& t, int32_t w_dt, int64_t gx, int64_t gy,
                          int64_t m_rows, bool exact_rows = false) -> Status {
    const bool quant = is_quantized(w.dtype);
    const int split = rr.pinned ? 1 : exact_rows ? cm2_split(ctx, t, gx, K, quant, 1) : cm2_split(ctx, t, gx * gy, K, quant, M);
    std::vector<int32_t> spec = {dt_code(y.dtype), bias_dt, dt_code(x.dtype), res ? dt_code(r) : 255, act, t.bm,
                                 t.bn, t.bk, 4, t.threads, w_dt, split};
    if (exact_rows) spec.push_back(exact_mode(w.dtype));
    if (split > 1) {
      DeviceView part, cnt;
      VRUN_ASSIGN_OR_RETURN(part, rec.scratch(DType::f32, Shape{gx * gy * split * t.bm * t.bn}));
      VRUN_ASSIGN_OR_RETURN(cnt, rec.counters(gx * gy));
      bindings.push_back({&part, true});
      bindings.push_back({&cnt, true});
      VRUN_ASSIGN_OR_RETURN(auto so, push());
      pw.w[9] = static_cast<uint32_t>(so[5]);
      pw.w[10] = static_cast<uint32_t>(so[6]);
    }
    pw.w[11] = M > m_rows && M % m_rows != 0 && !y_reads_itself ? 1 : 0;
    return rec.dispatch(kernel, spec, bindings, pw.w, pw.bytes(), static_cast<uint32_t>(gx), static_cast<uint32_t>(gy),
                        static_cast<uint32_t>(split));
  };
  const bool wa_operands = is_quantized(w.dtype) ? offs[2] % dtype_bytes(w.dtype, kQuantBlock) == 0 : w.dtype == DType::f16;
  if (exact) {
    // 16-byte loads: x's rows and W (of halves) 8-element aligned, blocks whole in their binding.
    const bool aligned = wa_operands && (w.dtype != DType::f16 || offs[2] % 8 == 0) && row_stride(x) % 8 == 0 &&
                         offs[1] % 8 == 0 && (y.dtype == DType::f32 || y.dtype == DType::f16);
    const Cm2Tile* ct = cm2_exact_tile(ctx, M, w.dtype);
    if (!aligned || !ct) return rows_kernels();
    return dispatch_cm2("matmul_wa_cm2", *ct, dt_code(w.dtype), (N + ct->bm - 1) / ct->bm, (M + ct->bn - 1) / ct->bn,
                        ct->bn, true);
  }
  if (coop_ok && wa_operands && (y.dtype == DType::f32 || y.dtype == DType::f16)) {
    if (const Cm2Tile* ct = cm2_wa_tile(ctx, Ms, K, N, x.dtype, w.dtype))
      return dispatch_cm2("matmul_wa_cm2", *ct, dt_code(w.dtype), (N + ct->bm - 1) / ct->bm, (M + ct->bn - 1) / ct->bn,
                          ct->bn);
  }
  // f16 W otherwise: x as the A matrix.
  if (coop_ok && w.dtype == DType::f16 && (y.dtype == DType::f32 || y.dtype == DType::f16)) {
    if (const Cm2Tile* ct = cm2_tile(ctx, Ms, K, N, x.dtype))
      return dispatch_cm2("matmul_cm2", *ct, 255, (N + ct->bn - 1) / ct->bn, (M + ct->bm - 1) / ct->bm, ct->bm);
  }
  const CoopTile& tl = coop_tile(ctx, M, N, 1, x.dtype);
  if (coop_ok && tl.fits(ctx)) {
    std::vector<int32_t> spec = tl.spec(y.dtype, bias_dt, x.dtype, w.dtype, 1);
    spec.push_back(res ? dt_code(r) : 255);
    spec.push_back(act);
    spec.push_back(0);
    return rec.dispatch(coop, spec, bindings, pw.w, pw.bytes(), static_cast<uint32_t>((N + tl.bn() - 1) / tl.bn()),
                        static_cast<uint32_t>((M + tl.bm() - 1) / tl.bm()), 1);
  }
  VRUN_ASSIGN_OR_RETURN(DeviceView p, plain_target());
  bindings[0].view = &p;
  bindings[4].view = nullptr;
  VRUN_RETURN_IF_ERROR(push().status());
  VRUN_RETURN_IF_ERROR(rec.dispatch("matmul", {dt_code(x.dtype), dt_code(w.dtype), dt_code(p.dtype), bias_dt, 1}, bindings,
                                    pw.w, pw.bytes(), static_cast<uint32_t>((N + 63) / 64),
                                    static_cast<uint32_t>((M + 63) / 64), 1));
  return after ? finish(p) : Status::ok();
}

// pinned (batch_invariant): the kernel chosen alike for every row and batch count (the tile
// follows the rows, as in record_linear_core).
Status record_bmm(Recorder& rec, const std::vector<DeviceView>& in, const DeviceView& y, bool rel = false, bool pinned = false) {
  DeviceView a = in[0], b = in[1];
  const int yr = y.shape.rank;
  // rel: y [.., M, M] from b's 2M - 1 columns (N below is b's width).
  const int64_t M = y.shape[yr - 2], N = rel ? 2 * M - 1 : y.shape[yr - 1], K = a.shape[a.shape.rank - 1];
  if (y.numel() == 0) return Status::ok();
  // The full product into scratch, then the shifted view of it copied into y, where the tensor
  // cores do not take the shape.
  auto rel_by_copy = [&]() -> Status {
    Shape fs = y.shape;
    fs[yr - 1] = N;
    VRUN_ASSIGN_OR_RETURN(DeviceView full, rec.scratch(y.dtype, fs));
    VRUN_RETURN_IF_ERROR(record_bmm(rec, in, full, false, pinned));
    DeviceView shifted = full;
    shifted.shape = y.shape;
    shifted.strides[yr - 2] = N - 1;
    shifted.offset += static_cast<uint64_t>((M - 1) * dtype_elem_size(y.dtype));
    return rec.record_copy(shifted, y);
  };
  // Batch dims of y with a's and b's (broadcast) strides, collapsed where all three stay regular.
  Shape batch;
  batch.rank = yr - 2;
  for (int i = 0; i < yr - 2; ++i) batch[i] = y.shape[i];
  auto batch_strides = [&](const DeviceView& v) {
    Shape vb;
    vb.rank = v.shape.rank - 2;
    Strides vs;
    for (int i = 0; i < vb.rank; ++i) {
      vb[i] = v.shape[i];
      vs[i] = v.strides[i];
    }
    return broadcast_strides(vb, vs, batch);
  };
  for (int attempt = 0; attempt < 2; ++attempt) {
    const Strides sa = batch_strides(a), sb = batch_strides(b);
    std::vector<int64_t> dims, ya, yb;
    for (int i = 0; i < batch.rank; ++i) {
      if (batch[i] == 1) continue;
      if (!dims.empty() && ya.back() == sa[i] * batch[i] && yb.back() == sb[i] * batch[i]) {
        dims.back() *= batch[i];
        ya.back() = sa[i];
        yb.back() = sb[i];
        continue;
      }
      dims.push_back(batch[i]);
      ya.push_back(sa[i]);
      yb.push_back(sb[i]);
    }
    if (dims.size() > 3) {
      if (attempt == 1) return err(ErrorCode::kInternal, "vulkan: bmm batch dims did not collapse");
      // Irregular batch layout: materialise both operands densely at the full batch shape.
      auto expand = [&](DeviceView& v) -> Status {
        DeviceView e = v;
        e.shape = batch;
        e.shape.rank = yr;
        e.shape[yr - 2] = v.shape[v.shape.rank - 2];
        e.shape[yr - 1] = v.shape[v.shape.rank - 1];
        const Strides bs = batch_strides(v);
        for (int i = 0; i < yr - 2; ++i) e.strides[i] = bs[i];
        e.strides[yr - 2] = v.strides[v.shape.rank - 2];
        e.strides[yr - 1] = v.strides[v.shape.rank - 1];
        VRUN_ASSIGN_OR_RETURN(DeviceView d, rec.scratch(v.dtype, e.shape));
        VRUN_RETURN_IF_ERROR(rec.record_copy(e, d));
        v = d;
        return Status::ok();
      };
      VRUN_RETURN_IF_ERROR(expand(a));
      VRUN_RETURN_IF_ERROR(expand(b));
      continue;
    }
    while (dims.size() < 3) {
      dims.insert(dims.begin(), 1);
      ya.insert(ya.begin(), 0);
      yb.insert(yb.begin(), 0);
    }
    std::vector<Binding> bindings = {{&y, true}, {&a, false}, {&b, false}};
    VRUN_ASSIGN_OR_RETURN(auto offs, rec.binding_offsets(bindings));
    const int ar = a.shape.rank, br = b.shape.rank;
    PushWords pw;
    pw.u(M).u(N).u(K).u(a.strides[ar - 2]).u(a.strides[ar - 1]).u(b.strides[br - 2]).u(b.strides[br - 1]);
    pw.u(dims[1]).u(dims[2]).u(ya[0]).u(ya[1]).u(ya[2]).u(yb[0]).u(yb[1]).u(yb[2]);
    pw.u(offs[0]).u(offs[1]).u(offs[2]).u(0).u(0).u(0);
    const uint64_t nb = static_cast<uint64_t>(dims[0] * dims[1] * dims[2]);
    if (nb > rec.context().limits().maxComputeWorkGroupCount[2])
      return err(ErrorCode::kUnsupported, "vulkan: bmm with ", nb, " batches exceeds the device's grid");
    // Tensor cores where both operands run along K in memory (A [M, K] rows, B as [N, K] rows: a
    // transposed view, as attention's q k^T is), every row and batch start 8-element aligned.
    Context& ctx = rec.context();
    const std::string coop = coopmat_kernel(ctx, "matmul_coopmat");
    auto half_ok = [&](DType t) { return t == DType::f16 || (t == DType::f32 && !ctx.exact_f32()); };
    auto al8 = [](int64_t v) { return v % 8 == 0; };
    const bool rows_ok = M >= 64 || pinned;
    const bool coop_ok = !coop.empty() && half_ok(a.dtype) && half_ok(b.dtype) && rows_ok && K % 8 == 0 &&
                         (K == 1 || (a.strides[ar - 1] == 1 && b.strides[br - 2] == 1)) && al8(a.strides[ar - 2]) &&
                         al8(b.strides[br - 1]) && al8(ya[0]) && al8(ya[1]) && al8(ya[2]) && al8(yb[0]) &&
                         al8(yb[1]) && al8(yb[2]) && offs[1] % 8 == 0 && offs[2] % 8 == 0;
    // Otherwise the gathering variant (B_GATHER): A still read along K 16 bytes at a time (f32
    // rows and batches 4-element aligned, f16 8), B element by element through its strides, K
    // any length: attention's scores times V (V's rows run along N; 1500 keys for Whisper's
    // encoder), which the portable kernel ran at a tenth of the tensor cores' rate.
    const int64_t aq = a.dtype == DType::f32 ? 4 : 8;
    auto alq = [&](int64_t v) { return v % aq == 0; };
    const bool gather = !coop_ok && !rel && !coop.empty() && half_ok(a.dtype) && half_ok(b.dtype) && rows_ok &&
                        K >= 8 && a.strides[ar - 1] == 1 && alq(a.strides[ar - 2]) && alq(ya[0]) && alq(ya[1]) &&
                        alq(ya[2]) && offs[1] % aq == 0;
    // rel: each tile row computes a window of M + BM - 1 of b's columns.
    const CoopTile& tl = coop_tile(ctx, M, rel ? M + 127 : N, static_cast<int64_t>(nb), a.dtype);
    if ((coop_ok || gather) && tl.fits(ctx)) {
      std::vector<int32_t> spec = tl.spec(y.dtype, 255, a.dtype, b.dtype, 0);
      spec.push_back(255);
      spec.push_back(0);
      spec.push_back(rel ? 1 : 0);
      spec.push_back(gather ? 1 : 0);
      const int64_t cols = rel ? M + tl.bm() - 1 : N;
      return rec.dispatch(coop, spec, bindings, pw.w, pw.bytes(),
                          static_cast<uint32_t>((cols + tl.bn() - 1) / tl.bn()), static_cast<uint32_t>((M + tl.bm() - 1) / tl.bm()),
                          static_cast<uint32_t>(nb));
    }
    if (rel) return rel_by_copy();
    return rec.dispatch("matmul", {dt_code(a.dtype), dt_code(b.dtype), dt_code(y.dtype), 255, 0}, bindings, pw.w,
                        pw.bytes(), static_cast<uint32_t>((N + 63) / 64), static_cast<uint32_t>((M + 63) / 64),
                        static_cast<uint32_t>(nb));
  }
  return Status::ok();
}

}  // namespace

bool supports_linalg(const Context&, OpKind op, const std::vector<const TensorDesc*>& inputs,
                     const Attrs&) {
  const TensorDesc* x = inputs[0];
  auto in = [&](size_t k) { return input_at(inputs, k); };
  if (op == OpKind::linear) {
    const TensorDesc *w = in(1), *b = in(2), *r = in(3), *g = in(4), *nb = in(5);
    return w && is_act(x->dtype) && is_weight(w->dtype) && (!b || is_act(b->dtype)) &&
           (!r || is_act(r->dtype)) && (!g || is_act(g->dtype)) && (!nb || is_act(nb->dtype));
  }
  return in(1) && is_act(x->dtype) && is_act(in(1)->dtype);
}

Status record_linalg(Recorder& rec, OpKind op, const std::vector<DeviceView>& in, const std::vector<DeviceView>& out,
                     const Attrs& attrs) {
  if (op == OpKind::linear) return record_linear(rec, in, out[0], attrs);
  if (op == OpKind::bmm) return record_bmm(rec, in, out[0], attrs.i("rel_shift") != 0, attrs.i("batch_invariant") != 0);
  return err(ErrorCode::kUnsupported, "vulkan: no kernel for ", op_name(op));
}

}  // namespace vrun::vulkan
