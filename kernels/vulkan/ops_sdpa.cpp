// sdpa (flash-style, KV cache read in place through its strides): the kernel a call takes and its
// recording. Many query rows go to a tiled kernel (workgroup-scope tensor cores, subgroup-scope
// tensor cores or the portable tile kernel), decode shapes with one query row per KV head to the
// one-kernel decode kernel, the rest to the row kernel with its keys split.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "runtime/base/knobs.h"
#include "kernels/vulkan/context.h"
#include "kernels/vulkan/ops.h"
#include "kernels/vulkan/ops_matvec.h"
#include "kernels/vulkan/pipelines.h"

namespace vrun::vulkan {

namespace {

// Batch entries of a decode (keys up to device-held positions) whose attention takes the key
// chunks of a single entry, so that each row's sums are the single-stream step's: the matvec
// kernel's rows, beyond which a batched step's projections sum in another order anyway (at any
// batch with VRUN_MATMUL_ROWS=exact).
constexpr int64_t kExactDecodeBatch = kMatvecMaxRows;

// The tiled prefill kernel reduces across the four invocations of a query row with subgroup
// shuffles; devices without them (or with odd subgroups) take the row kernel.
bool has_subgroup_shuffle(const Context& ctx) {
  const auto& i = ctx.info();
  return (i.subgroup_ops & VK_SUBGROUP_FEATURE_SHUFFLE_BIT) && i.subgroup_size >= 4 && 128 % i.subgroup_size == 0;
}

// Rows of an f16 view can be read 8 halves (16 bytes) at a time.
bool rows_vec8(const DeviceView& v, uint32_t elem_offset) {
  return v.dtype == DType::f16 && v.shape[3] % 8 == 0 && v.strides[0] % 8 == 0 && v.strides[1] % 8 == 0 &&
         v.strides[2] % 8 == 0 && elem_offset % 8 == 0;
}

// Rows the tensor-core kernel can stage 8 elements at a time: f16, or f32 rounded to f16 as it
// loads (not when exact f32 is asked for).
bool coop_rows(const Context& ctx, const DeviceView& v, uint32_t elem_offset) {
  const bool dt = v.dtype == DType::f16 || (v.dtype == DType::f32 && !ctx.exact_f32());
  return dt && v.shape[3] % 8 == 0 && v.strides[0] % 8 == 0 && v.strides[1] % 8 == 0 && v.strides[2] % 8 == 0 &&
         elem_offset % 8 == 0;
}

// Rows of an f32 view can be read 4 floats (16 bytes) at a time.
bool rows_vec4_f32(const DeviceView& v, uint32_t elem_offset) {
  return v.dtype == DType::f32 && v.shape[3] % 4 == 0 && v.strides[0] % 4 == 0 && v.strides[1] % 4 == 0 &&
         v.strides[2] % 4 == 0 && elem_offset % 4 == 0;
}

// The one-pass decode kernel sums each key's partial dot products over up to 8 lanes of a
// subgroup with shuffles; 8 lanes also fit devices whose shaders may run narrower subgroups than
// the reported size (8 is the least of those).
bool decode_subgroups(const Context& ctx) {
  const auto& i = ctx.info();
  return (i.subgroup_ops & VK_SUBGROUP_FEATURE_SHUFFLE_BIT) && i.subgroup_size >= 1 && 256 % i.subgroup_size == 0;
}

int64_t padded_head_dim(int64_t d) { return d <= 64 ? 64 : d <= 128 ? 128 : 256; }

// VRUN_SDPA picks a kernel for comparisons on a GPU: "rows" sends prefill and decode shapes to the
// row kernel, "tile" prefill shapes to the portable tiled kernel even where the cooperative-matrix
// one could run, "decode" every decode shape (not only those with one query row per KV head) to
// the one-kernel decode kernel (sdpa_decode.comp) instead of the split-K row kernel, "combine"
// decode shapes to the row kernel with its split keys merged by the separate combine pass
// (sdpa_combine.comp) instead of in the kernel, "nosplit" the tensor-core kernel's keys in one
// chunk however few its row blocks, "coop" prefill shapes to that subgroup-scope tensor-core
// kernel where the workgroup-scope one (sdpa_cm2.comp) would take them, "cm2" to the workgroup-scope
// one wherever it can run them, however few their row blocks.
// Read on every call so tests can cover every path in one process.
std::string forced_kernel() {
  const char* e = knob_value(Knob::VRUN_SDPA);
  return e ? e : "";
}

// The workgroup-scope attention kernel's tile (sdpa_cm2.comp): BR query rows a workgroup, BC keys
// a step, NT invocations; clamp_all loads every tile through clamped layouts rather than only
// those reaching past the rows or keys (the whole tiles' unclamped loads read 147 against 113
// TFLOP/s on an H100's causal 2k prefill). VRUN_SDPA_CM2=BR,BC,NT[,CLAMP_ALL] overrides it, read at
// each recording for comparisons (`vrun_bench_vulkan --sdpa-tiles`); a tile the device does not
// take is refused with a warning.
struct Cm2AttentionTile {
  int br = 64, bc = 64, nt = 128, clamp_all = 0;
  // Its two products on NT invocations: scores BR x BC over D, outputs BR x D over BC keys.
  bool fits(const Context& ctx, int d) const {
    const Context::CoopMat2& c2 = ctx.coopmat2();
    return c2.reductions && c2.takes(br, bc, d, nt) && c2.takes(br, d, bc, nt) && (clamp_all == 0 || clamp_all == 1);
  }
};

Cm2AttentionTile cm2_attention_tile(const Context& ctx, int d) {
  const char* e = knob_value(Knob::VRUN_SDPA_CM2);
  if (!e || !*e) return {};
  Cm2AttentionTile t;
  const int n = std::sscanf(e, "%d,%d,%d,%d", &t.br, &t.bc, &t.nt, &t.clamp_all);
  if ((n == 3 || n == 4) && t.fits(ctx, d)) return t;
  static thread_local std::string refused;
  if (refused != e) {
    refused = e;
    std::fprintf(stderr, "vrun: VRUN_SDPA_CM2=%s is not a tile the workgroup-scope attention kernel takes on this device "
                 "for head dim %d (BR,BC,NT[,CLAMP_ALL]); using 64,64,128\n", e, d);
  }
  return {};
}

// The row kernel's key split, for comparisons on a GPU (`vrun_bench_vulkan --sdpa-rows`):
// VRUN_SDPA_ROWS=WANT,KBYTES,KCH[,PRE] sets the chunks it aims for per row block, the K tile's KiB
// of f32 in shared memory (8, 16 or 32), the most keys a chunk holds (a multiple of 16, 64 to
// 1024) and whether a decode chunk is loaded whole at its start (1) or streamed (0); 0 (PRE: -1)
// keeps the default. Read on every call; a value it does not take is refused with a warning.
struct RowSplit {
  int64_t want = 0, kbytes = 0, kch = 0, pre = -1;
};

RowSplit forced_row_split() {
  const char* e = knob_value(Knob::VRUN_SDPA_ROWS);
  if (!e || !*e) return {};
  long long w = 0, kb = 0, kc = 0, pre = -1;
  const int n = std::sscanf(e, "%lld,%lld,%lld,%lld", &w, &kb, &kc, &pre);
  const bool ok = (n == 3 || n == 4) && w >= 0 && w <= 4096 && (kb == 0 || kb == 8 || kb == 16 || kb == 32) &&
                  (kc == 0 || (kc >= 64 && kc <= 1024 && kc % 16 == 0)) && pre >= -1 && pre <= 1;
  if (ok) return {w, kb, kc, pre};
  static thread_local std::string refused;
  if (refused != e) {
    refused = e;
    std::fprintf(stderr, "vrun: VRUN_SDPA_ROWS=%s is not WANT,KBYTES,KCH[,PRE] (KBYTES 0, 8, 16 or 32; KCH 0 or "
                 "64..1024 in steps of 16; PRE -1, 0 or 1); using the defaults\n", e);
  }
  return {};
}

// y from split-K partials [rows, nsplit, Dv + 2] (sdpa_combine.comp); qpos: the device-held
// length the chunks were cut from (else every chunk holds keys).
Status record_combine(Recorder& rec, const DeviceView& y, const DeviceView& partial, const DeviceView* qpos, int64_t rows, int64_t Dv,
                      int64_t nsplit, int64_t Lk, int64_t Lq, int64_t kchunk, int64_t want, int64_t batch_rows) {
  std::vector<Binding> cb = {{&y, true}, {&partial, false}, {qpos, false}};
  VRUN_ASSIGN_OR_RETURN(auto coffs, rec.binding_offsets(cb));
  PushWords cp;
  const int64_t n = rows * Dv;
  cp.u(n).u(Dv).u(nsplit).u(coffs[0]).u(coffs[1]).u(Lk).u(Lq).u(kchunk).u(want).u(coffs[2]).u(std::max<int64_t>(1, batch_rows));
  uint32_t gx, gy;
  rec.grid_1d((static_cast<uint64_t>(n) + 255) / 256, &gx, &gy);
  return rec.dispatch("sdpa_combine", {dt_code(y.dtype), !qpos ? 0 : batch_rows > 0 ? 2 : 1}, cb, cp.w, cp.bytes(), gx, gy, 1);
}

// One sdpa call: its operands (head dims dense), shapes and options, as every kernel takes them.
class SdpaCall {
 public:
  SdpaCall(Recorder& r, const DeviceView& out) : rec(r), y(out), ctx(r.context()) {}
  // q, k and v with their head dims dense; their shapes.
  Status read_operands(const std::vector<DeviceView>& in);
  // The checks, the window, mask and cache position, the scale and the kernels' head dim.
  Status read_options(const std::vector<DeviceView>& in, const Attrs& attrs);
  Status record();

 private:
  // The one-kernel decode kernel's shape for this call: rows per workgroup, chunks of keys.
  struct DecodePlan {
    bool fits = false;
    int64_t lpk = 0, dpl = 0, rows_wg = 0, row_blocks = 0, base = 0, want = 0, kchunk = 0, nsplit = 0;
  };
  // The push constants every sdpa kernel shares (sdpa.comp's layout).
  PushWords push_words(const std::vector<uint32_t>& offs, int64_t nsplit, int64_t kchunk) const;
  Status record_tiled();
  DecodePlan plan_decode() const;
  Status record_decode(const DecodePlan& p);
  Status record_rows();

  Recorder& rec;
  const DeviceView& y;
  Context& ctx;
  DeviceView q, k, v, mask, qpos;
  int64_t B = 0, Hq = 0, Lq = 0, D = 0, Hkv = 0, Lk = 0, Dv = 0;
  bool window = false, has_mask = false, dyn_len = false, pos_per_batch = false;
  // The kernels' DYN_LEN: 0 no device position, 1 one for all, 2 one per batch entry.
  int32_t dyn_code() const { return !dyn_len ? 0 : pos_per_batch ? 2 : 1; }
  int64_t win_l = 0, win_r = 0, width = 1;
  double scale = 0;
  int32_t causal = 0;
  int64_t dmax = 0;
  uint32_t smem = 0;
  std::string forced;  // VRUN_SDPA
  int64_t block_keys = 0, group_rows = 0;
  // batch_invariant: the kernel and its key split chosen alike for every query and batch count.
  bool pinned = false;
};

Status SdpaCall::read_operands(const std::vector<DeviceView>& in) {
  // The kernels read head dims contiguously; every other dim goes through strides.
  auto last_dense = [&](const DeviceView& view) -> Result<DeviceView> {
    if (view.shape[3] == 1 || view.strides[3] == 1) return view;
    return rec.dense_view(view);
  };
  VRUN_ASSIGN_OR_RETURN(q, last_dense(in[0]));
  VRUN_ASSIGN_OR_RETURN(k, last_dense(in[1]));
  VRUN_ASSIGN_OR_RETURN(v, last_dense(in[2]));
  B = q.shape[0], Hq = q.shape[1], Lq = q.shape[2], D = q.shape[3];
  Hkv = k.shape[1], Lk = k.shape[2], Dv = v.shape[3];
  return Status::ok();
}

Status SdpaCall::read_options(const std::vector<DeviceView>& in, const Attrs& attrs) {
  if (Lk == 0) return err(ErrorCode::kUnsupported, "vulkan: sdpa over zero keys");
  if (D > 256 || Dv > 256) return err(ErrorCode::kUnsupported, "vulkan: sdpa head dims ", D, "/", Dv, " exceed 256");
  if (Hkv == 0 || Hq % Hkv != 0)
    return err(ErrorCode::kInvalidArgument, "vulkan: sdpa query heads ", Hq, " not a multiple of kv heads ", Hkv);
  // Local attention: query i at position p = Lk - Lq + i sees keys p - left .. p + right, and its
  // mask holds the band's left + right + 1 columns. The kernels take it in 32-bit arithmetic.
  pinned = attrs.i("batch_invariant") != 0;
  const std::vector<int64_t>& window_attr = attrs.ints("window");
  window = !window_attr.empty();
  if (window) {
    if (!sdpa_window_fits(window_attr, Lq, Lk))
      return err(ErrorCode::kUnsupported, "vulkan: sdpa window of ", window_attr.size(),
                 " values does not fit Lq = ", Lq, ", Lk = ", Lk);
    win_l = window_attr[0];
    win_r = window_attr[1];
  }
  width = win_l + win_r + 1;
  has_mask = in.size() > 3 && in[3].present();
  if (has_mask) {
    mask = in[3];
    const Shape full{B, Hq, Lq, window ? width : Lk};
    mask.strides = broadcast_strides(mask.shape, mask.strides, full);
    mask.shape = full;
  }
  // The queries' position held on the device (k and v are a cache's capacity): the row kernel cuts its
  // chunks from it at run time, so the recording is the same at every position.
  dyn_len = in.size() > 4 && in[4].present();
  if (dyn_len && window)
    return err(ErrorCode::kInvalidArgument, "vulkan: sdpa window with a cache position input");
  if (dyn_len) {
    VRUN_ASSIGN_OR_RETURN(qpos, rec.dense_view(in[4]));
    pos_per_batch = qpos.numel() > 1;
    if (pos_per_batch && qpos.numel() != B)
      return err(ErrorCode::kInvalidArgument, "vulkan: sdpa with ", qpos.numel(), " positions for a batch of ", B);
  }
  scale = attrs.f("scale");
  if (scale == 0) scale = 1.0 / std::sqrt(static_cast<double>(D));
  causal = attrs.i("causal") ? 1 : 0;
  dmax = padded_head_dim(std::max(D, Dv));
  smem = ctx.limits().maxComputeSharedMemorySize;
  return Status::ok();
}

PushWords SdpaCall::push_words(const std::vector<uint32_t>& offs, int64_t nsplit, int64_t kchunk) const {
  PushWords pw;
  pw.u(Lq).u(Lk).u(D | Dv << 16).u(Hq).u(Hkv).f(static_cast<float>(scale));
  pw.u(q.strides[0]).u(q.strides[1]).u(q.strides[2]);
  pw.u(k.strides[0]).u(k.strides[1]).u(k.strides[2]);
  pw.u(v.strides[0]).u(v.strides[1]).u(v.strides[2]);
  pw.u(has_mask ? mask.strides[0] : 0).u(has_mask ? mask.strides[1] : 0).u(has_mask ? mask.strides[2] : 0);
  pw.u(has_mask ? mask.strides[3] : 0);
  pw.u(offs[1]).u(offs[2]).u(offs[3]).u(offs[4]).u(offs[0]);
  pw.u(nsplit).u(kchunk);
  pw.u(win_l).u(win_r);
  return pw;
}

Status SdpaCall::record() {
  forced = forced_kernel();
  // A few query blocks over a much longer cache (chunked prefill) would leave most of the GPU
  // idle there: the row kernel splits the keys instead.
  // With a window a 64-row block meets at most 63 + left + right + 1 keys.
  block_keys = window ? std::min(Lk, width + 63) : Lk;
  const bool few_blocks = (Lq + 63) / 64 * Hq * B < 128 && block_keys > 8 * Lq;
  const bool tiled = !dyn_len && forced != "rows" && (pinned || (Lq >= 32 && !few_blocks)) && dmax <= 128 && has_subgroup_shuffle(ctx) &&
                     Lq <= 65535 * 64 && Hq <= 65535 && B <= 65535;
  if (tiled) return record_tiled();
  group_rows = (Hq / Hkv) * Lq;
  const DecodePlan plan = plan_decode();
  if (plan.fits) return record_decode(plan);
  return record_rows();
}

// Many query rows: the tiled kernels, 64 rows of a head per workgroup (the workgroup-scope one:
// its tile's), K/V tiles in shared memory.
Status SdpaCall::record_tiled() {
  // Keys per K/V tile: both tiles of BKV x dmax f32 in shared memory, at most 64.
  int64_t bkv = 64;
  while (bkv > 8 && 2 * bkv * dmax * 4 > smem) bkv /= 2;
  std::vector<Binding> bindings = {{&y, true}, {&q, false}, {&k, false}, {&v, false}, {has_mask ? &mask : nullptr, false}};
  VRUN_ASSIGN_OR_RETURN(auto offs, rec.binding_offsets(bindings));
  const PushWords pw = push_words(offs, 1, Lk);
  const int32_t kvvec = rows_vec8(k, offs[2]) && rows_vec8(v, offs[3]) ? 1 : 0;
  // Workgroup-scope matrices (sdpa_cm2.comp): no mask or window, one dtype for q, k, v, equal head
  // dims of 64 or 128, and enough row blocks to fill three quarters of the multiprocessors
  // (fewer go to the subgroup-scope kernel, which splits the keys) or a causal limit.
  const Cm2AttentionTile tile = cm2_attention_tile(ctx, static_cast<int>(D));
  const int64_t mps = ctx.info().multiprocessors, cm2_rows = tile.br, cm2_blocks = (Lq + cm2_rows - 1) / cm2_rows * Hq * B;
  const bool cm2_shape = !has_mask && !window && D == Dv && (D == 64 || D == 128) && q.dtype == k.dtype &&
                         q.dtype == v.dtype && (y.dtype == DType::f16 || y.dtype == DType::f32) &&
                         (forced == "cm2" || (forced.empty() && (causal || pinned || mps <= 0 || cm2_blocks * 4 >= mps * 3)));
  const bool cm2_fits = tile.fits(ctx, static_cast<int>(D));
  if (cm2_shape && cm2_fits && PipelineCache::has_kernel("sdpa_cm2") && coop_rows(ctx, q, offs[1]) &&
      coop_rows(ctx, k, offs[2]) && coop_rows(ctx, v, offs[3])) {
    return rec.dispatch("sdpa_cm2", {dt_code(y.dtype), dt_code(q.dtype), causal, static_cast<int32_t>(D), tile.br, tile.bc, tile.nt, tile.clamp_all},
                        bindings, pw.w, pw.bytes(), static_cast<uint32_t>((Lq + cm2_rows - 1) / cm2_rows),
                        static_cast<uint32_t>(Hq), static_cast<uint32_t>(B));
  }
  // Tensor cores: 64 rows per workgroup, Q/K/V staged 8 elements at a time.
  const std::string coop = coopmat_kernel(ctx, "sdpa_coopmat");
  const uint64_t coop_smem = 2 * 32 * (dmax + 8) * 2 + 4 * 16 * 36 * 4 + 4 * 16 * 40 * 2 + 4 * 256 * 4 + 64 * 4;
  if (!coop.empty() && forced != "tile" && coop_rows(ctx, q, offs[1]) && coop_rows(ctx, k, offs[2]) &&
      coop_rows(ctx, v, offs[3]) && coop_smem <= smem) {
    // Few row blocks (Parakeet: 8 heads of a chunk's rows): the keys split so that each
    // multiprocessor gets about four workgroups, at least 256 keys each, merged by sdpa_combine.
    const int64_t blocks = (Lq + 63) / 64 * Hq * B, mps = ctx.info().multiprocessors;
    // With a window the chunks split each block's band (block_keys from its first key).
    int64_t nsplit = 1, kchunk = Lk;
    if (!causal && !pinned && mps > 0 && blocks < 4 * mps && forced != "nosplit") {
      nsplit =
          std::clamp<int64_t>((4 * mps + blocks - 1) / blocks, 1, std::max<int64_t>(1, block_keys / 256));
      kchunk = ((block_keys + nsplit - 1) / nsplit + 31) / 32 * 32;
      nsplit = (block_keys + kchunk - 1) / kchunk;
    }
    // Into y, or (split) into f32 partials.
    auto dispatch = [&](DType out, int32_t split, const std::vector<Binding>& b, const PushWords& push, int64_t z) {
      return rec.dispatch(coop,
                          {dt_code(out), has_mask ? dt_code(mask.dtype) : 255, causal, static_cast<int32_t>(dmax), dt_code(q.dtype),
                           dt_code(k.dtype), dt_code(v.dtype), split, window ? 1 : 0},
                          b, push.w, push.bytes(), static_cast<uint32_t>((Lq + 63) / 64), static_cast<uint32_t>(Hq),
                          static_cast<uint32_t>(z));
    };
    if (nsplit == 1 || B * nsplit > 65535) return dispatch(y.dtype, 0, bindings, pw, B);
    const int64_t rows = B * Hq * Lq;
    VRUN_ASSIGN_OR_RETURN(DeviceView partial, rec.scratch(DType::f32, Shape{rows * nsplit * (Dv + 2)}));
    std::vector<Binding> sb = {{&partial, true}, {&q, false}, {&k, false}, {&v, false}, {has_mask ? &mask : nullptr, false}};
    VRUN_ASSIGN_OR_RETURN(auto soffs, rec.binding_offsets(sb));
    VRUN_RETURN_IF_ERROR(dispatch(DType::f32, 1, sb, push_words(soffs, nsplit, kchunk), B * nsplit));
    return record_combine(rec, y, partial, nullptr, rows, Dv, nsplit, Lk, Lq, kchunk, 0, 0);
  }
  return rec.dispatch("sdpa_tile",
                      {dt_code(q.dtype), dt_code(k.dtype), dt_code(v.dtype), dt_code(y.dtype),
                       has_mask ? dt_code(mask.dtype) : 255, causal, static_cast<int32_t>(dmax), kvvec,
                       static_cast<int32_t>(bkv), window ? 1 : 0},
                      bindings, pw.w, pw.bytes(), static_cast<uint32_t>((Lq + 63) / 64), static_cast<uint32_t>(Hq),
                      static_cast<uint32_t>(B));
}

// Decode with one query row per KV head (Whisper's heads; VRUN_SDPA=decode: any decode shape):
// the one-kernel decode kernel. At most 8 query rows per KV head; a workgroup takes rows_wg of a
// KV head's query rows (all of them where registers allow: each K/V row read once for the group)
// and one chunk of the head's keys (sdpa_decode.comp); the last workgroup of a row block to
// finish merges the chunks, so it is one kernel. Each lane keeps rows_wg x dims-per-lane query
// values and accumulators in registers: at most 64 of each. On an H100 (vrun_bench_vulkan
// --attention-shapes) it takes 6-10 us for Whisper's shapes against 8-28 us for the row kernel
// and its combine pass, while for Llama's GQA groups of 4 rows the row kernel is as fast or
// faster (8 against 17 us over 1024 keys), so those stay there.
SdpaCall::DecodePlan SdpaCall::plan_decode() const {
  const bool decode_kernel = !window && (forced == "decode" || (forced.empty() && group_rows == 1));
  const int64_t lpk = std::min<int64_t>(8, ctx.info().subgroup_size);
  const int64_t dpl = dmax / lpk;
  int64_t rows_wg = 1;
  while (rows_wg < group_rows) rows_wg *= 2;
  rows_wg = std::min<int64_t>(rows_wg, 64 / std::max<int64_t>(1, dpl));
  const int64_t row_blocks = (group_rows + rows_wg - 1) / rows_wg;
  // A workgroup streams its keys through one compute unit: chunks of at least 64 keys, enough of
  // them for about 256 workgroups (a decode step of Llama-1B has 8 KV heads; Whisper's 6).
  const int64_t base = row_blocks * Hkv * B;
  // Chunks sized as for one entry in a decode of up to kExactDecodeBatch entries (record_rows).
  const int64_t sized = dyn_len && (B <= kExactDecodeBatch || exact_decode_rows()) ? row_blocks * Hkv : base;
  const int64_t want = std::clamp<int64_t>((256 + sized - 1) / sized, 1, (Lk + 63) / 64);
  const int64_t kchunk = ((Lk + want - 1) / want + 15) / 16 * 16;
  const int64_t nsplit = (Lk + kchunk - 1) / kchunk;
  const bool fits = decode_kernel && group_rows <= 8 && dmax <= 128 && dpl <= 64 && nsplit <= 256 && decode_subgroups(ctx) &&
                    Hkv <= 65535 && B * nsplit <= 65535;
  return {fits, lpk, dpl, rows_wg, row_blocks, base, want, kchunk, nsplit};
}

Status SdpaCall::record_decode(const DecodePlan& p) {
  const int64_t lpk = p.lpk, dpl = p.dpl, rows_wg = p.rows_wg, row_blocks = p.row_blocks, base = p.base, want = p.want,
                kchunk = p.kchunk, nsplit = p.nsplit;
  DeviceView part, cnt;
  if (nsplit > 1) {
    VRUN_ASSIGN_OR_RETURN(part, rec.scratch(DType::f32, Shape{B * Hq * Lq * nsplit * (Dv + 2)}));
    VRUN_ASSIGN_OR_RETURN(cnt, rec.counters(base));
  }
  std::vector<Binding> bindings = {{&y, true},
                                   {&q, false},
                                   {&k, false},
                                   {&v, false},
                                   {has_mask ? &mask : nullptr, false},
                                   {nsplit > 1 ? &part : nullptr, true},
                                   {nsplit > 1 ? &cnt : nullptr, true},
                                   {dyn_len ? &qpos : nullptr, false}};
  VRUN_ASSIGN_OR_RETURN(auto offs, rec.binding_offsets(bindings));
  PushWords pw = push_words(offs, nsplit, kchunk);
  pw.u(offs[5]).u(offs[6]).u(offs[7]).u(want);
  const int32_t kmode = rows_vec8(k, offs[2]) ? 1 : rows_vec4_f32(k, offs[2]) ? 2 : 0;
  const int32_t vmode = rows_vec8(v, offs[3]) ? 1 : rows_vec4_f32(v, offs[3]) ? 2 : 0;
  // Keys per group and step: about 16 16-byte K and V words per lane in flight, half that
  // where the rows' registers are many.
  const int64_t words = std::max(kmode == 1 ? dpl / 8 : dpl / 4, vmode == 1 ? dpl / 8 : dpl / 4);
  int64_t unroll = std::clamp<int64_t>(8 / std::max<int64_t>(1, words), 1, 8);
  if (rows_wg * dpl > 16) unroll = std::max<int64_t>(1, unroll / 2);
  // Invocations: a key group (lpk lanes) per 2 to 4 keys of the chunk, at most 256 and at least
  // the head dim (an invocation per output dim in the merges); one or two rows' values per
  // lane leave registers for 512 where a chunk is long.
  const auto& lim = ctx.limits();
  int32_t wg = 256;
  while (wg > std::max<int64_t>(64, dmax) && kchunk / (wg / lpk) < 2) wg /= 2;
  if (kchunk >= 4096 && rows_wg * dpl <= 16 && lim.maxComputeWorkGroupInvocations >= 512 &&
      lim.maxComputeWorkGroupSize[0] >= 512)
    wg = 512;
  return rec.dispatch("sdpa_decode",
                      {dt_code(q.dtype), dt_code(k.dtype), dt_code(v.dtype), dt_code(y.dtype),
                       has_mask ? dt_code(mask.dtype) : 255, causal, kmode, vmode, static_cast<int32_t>(dmax),
                       static_cast<int32_t>(lpk), static_cast<int32_t>(rows_wg), static_cast<int32_t>(unroll), wg,
                       nsplit > 1 ? 1 : 0, dyn_code()},
                      bindings, pw.w, pw.bytes(), static_cast<uint32_t>(row_blocks), static_cast<uint32_t>(Hkv),
                      static_cast<uint32_t>(B * nsplit));
}

Status SdpaCall::record_rows() {
  // Row kernel: 2, 4 or 8 query rows sharing a KV head per workgroup, keys cut into chunks of at
  // most kch (split-K, merged by sdpa_combine) so that even one decode row fills the GPU.
  int64_t rmax = 2;
  while (rmax < 8 && rmax < group_rows) rmax *= 2;
  const int64_t row_blocks = (group_rows + rmax - 1) / rmax;
  // The keys a workgroup's chunks cover from its first: all, or with a window the union of its
  // rows' bands (rmax consecutive rows of a head, or any of a head's rows where a block takes
  // rows of two heads of a GQA group).
  int64_t span = Lk;
  if (window) {
    const bool across_heads = Hq / Hkv > 1 && Lq % rmax != 0;
    span = std::min(Lk, width + (across_heads ? Lq : std::min(rmax, Lq)) - 1);
  }
  const RowSplit forced_split = forced_row_split();
  // Where the keys end at a device-held position (decode), up to kExactDecodeBatch batch entries
  // take the key chunks of one entry: the chunks (sized on the device from the length and `want`)
  // are then the single-stream step's, and each row adds up its attention as that step does
  // (a batched decode step of that many rows keeps the single stream's bits; its projections do
  // too, up to the matvec's 8 rows). Larger batches size them for all their entries.
  const int64_t base_groups = row_blocks * Hkv * (dyn_len && (B <= kExactDecodeBatch || exact_decode_rows()) ? 1 : B);
  const int64_t kch = forced_split.kch ? forced_split.kch : dmax == 256 ? 128 : 256;
  // Shared bytes: K tile (rows padded by a vec4), Q rows, scores, reductions.
  auto row_kernel_smem = [&](int64_t rows) {
    return rows * (dmax / 4 + 1) * 16 + rmax * dmax * 4 + rmax * kch * 4 + 128 * 4 + 2 * rmax * 4;
  };
  // K tile rows: the largest of 32, 16 and 8 KiB of f32 that leaves room for two workgroups in
  // shared memory, else the largest that fits. On an H100 (48 KiB) a decode chunk of 128 keys on
  // 16 KiB tiles, two workgroups a multiprocessor, took 28 us over 4,096 keys of 8 heads of 128
  // where one 32 KiB tile of 64 keys, one workgroup a multiprocessor, took 50 (`--sdpa-rows`).
  int64_t krows = 0;
  for (const uint32_t room : {smem / 2, smem})
    for (int64_t kib : {forced_split.kbytes, int64_t{32}, int64_t{16}, int64_t{8}})
      if (!krows && kib && row_kernel_smem(kib * 256 / dmax) <= room) krows = kib * 256 / dmax;
  if (!krows)
    return err(ErrorCode::kUnsupported, "vulkan: sdpa row kernel needs ", row_kernel_smem(2048 / dmax),
               " bytes of shared memory, the device has ", smem);
  // Decode (few row blocks) over f16 K and V: each chunk's K and V loaded whole at its start, at
  // most 16 words of 8 halves per invocation each (128 keys of 128 dims, 256 of 64).
  const bool pre_shape = forced_split.pre != 0 && (base_groups < 128 || forced_split.pre == 1) &&
                         k.dtype == DType::f16 && v.dtype == DType::f16 && D % 8 == 0 && Dv % 8 == 0;
  const int64_t kmax = pre_shape ? std::min<int64_t>(kch, 16 * 128 * 8 / dmax) : kch;
  // Aim for about 256 workgroups (two per compute unit on large GPUs) with chunks of >= 64 keys:
  // on the H100, 32 chunks of 128 keys for each of 8 KV heads took 28 us where 64 of 64 took 40
  // and 16 of 256 took 31 (4,096 keys of 128 dims, streamed chunks).
  int64_t want = forced_split.want ? forced_split.want : std::max<int64_t>(1, 256 / std::max<int64_t>(1, base_groups));
  int64_t kchunk = std::clamp<int64_t>((span + want - 1) / want, 64, kmax);
  // Up to one chunk of keys, a workgroup per row block takes them all where there are enough
  // such workgroups: splitting that little work costs a second pass (the combine) and a barrier.
  // With few (a decode step's 8 KV heads) one workgroup streaming 256 keys takes longer than the
  // split and the combine (H100: 13 us against 8 us for 4x the keys in chunks of 64).
  if (span <= kch && base_groups >= 128) kchunk = kch;
  kchunk = std::min<int64_t>(pre_shape ? kmax : kch, (kchunk + 15) / 16 * 16);
  const int64_t nsplit = (span + kchunk - 1) / kchunk;
  if (row_blocks > 65535 || Hkv > 65535 || B * nsplit > 65535)
    return err(ErrorCode::kUnsupported, "vulkan: sdpa grid [", row_blocks, ", ", Hkv, ", ", B * nsplit,
               "] exceeds the kernel's");
  const int64_t rows = B * Hq * Lq;
  DeviceView partial, cnt;
  // Split keys merge in the kernel (its last workgroup per row block, counted in) where the chunks'
  // maxima and sums fit its score block; VRUN_SDPA=combine (or more chunks) takes the separate
  // combine pass. Each pass is a launch and a barrier: on an H100 the combine of a Llama-1B decode
  // step cost 6.7 us a layer.
  const bool merge = nsplit > 1 && nsplit <= kch / 2 && forced != "combine";
  if (nsplit > 1) {
    VRUN_ASSIGN_OR_RETURN(partial, rec.scratch(DType::f32, Shape{rows * nsplit * (Dv + 2)}));
  }
  if (merge) {
    VRUN_ASSIGN_OR_RETURN(cnt, rec.counters(row_blocks * Hkv * B));
  }
  const DeviceView& dst = nsplit > 1 ? partial : y;
  std::vector<Binding> bindings = {{&dst, true},
                                   {&q, false},
                                   {&k, false},
                                   {&v, false},
                                   {has_mask ? &mask : nullptr, false},
                                   {dyn_len ? &qpos : nullptr, false},
                                   {merge ? &cnt : nullptr, true},
                                   {merge ? &y : nullptr, true}};
  VRUN_ASSIGN_OR_RETURN(auto offs, rec.binding_offsets(bindings));
  // Words of K (and of V) per invocation for a whole chunk, whole K tiles of krows * dmax / 8 / 128.
  const int64_t tile_words = krows * dmax / 8 / 128;
  const int64_t pre = pre_shape && rows_vec8(k, offs[2]) && rows_vec8(v, offs[3])
                          ? (kchunk * dmax / 8 / 128 + tile_words - 1) / tile_words * tile_words
                          : 0;
  PushWords pw = push_words(offs, nsplit, kchunk);
  pw.u(offs[5]).u(want).u(offs[6]).u(offs[7]);
  const std::vector<int32_t> spec = {dt_code(q.dtype),
                                     dt_code(k.dtype),
                                     dt_code(v.dtype),
                                     dt_code(y.dtype),
                                     has_mask ? dt_code(mask.dtype) : 255,
                                     causal,
                                     nsplit > 1 ? 1 : 0,
                                     rows_vec8(k, offs[2]) ? 1 : 0,
                                     rows_vec8(v, offs[3]) ? 1 : 0,
                                     static_cast<int32_t>(dmax),
                                     static_cast<int32_t>(kch),
                                     static_cast<int32_t>(rmax),
                                     static_cast<int32_t>(krows),
                                     dyn_code(),
                                     merge ? 1 : 0,
                                     window ? 1 : 0,
                                     static_cast<int32_t>(pre)};
  VRUN_RETURN_IF_ERROR(rec.dispatch("sdpa", spec, bindings, pw.w, pw.bytes(), static_cast<uint32_t>(row_blocks),
                                    static_cast<uint32_t>(Hkv), static_cast<uint32_t>(B * nsplit)));
  if (nsplit == 1 || merge) return Status::ok();
  return record_combine(rec, y, partial, dyn_len ? &qpos : nullptr, rows, Dv, nsplit, Lk, Lq, kchunk, want,
                        pos_per_batch ? Hq * Lq : 0);
}

}  // namespace

Status record_sdpa(Recorder& rec, const std::vector<DeviceView>& in, const DeviceView& y, const Attrs& attrs) {
  SdpaCall call(rec, y);
  VRUN_RETURN_IF_ERROR(call.read_operands(in));
  if (y.numel() == 0) return Status::ok();
  VRUN_RETURN_IF_ERROR(call.read_options(in, attrs));
  return call.record();
}

bool sdpa_window_fits(const std::vector<int64_t>& window, int64_t Lq, int64_t Lk) {
  constexpr int64_t kMax = int64_t{1} << 29;
  return window.size() == 2 && window[0] >= 0 && window[1] >= 0 && window[0] < kMax && window[1] < kMax && Lq >= 0 &&
         Lk >= 0 && Lq < kMax && Lk < kMax;
}

}  // namespace vrun::vulkan
