// linear for decode-sized inputs: up to 8 rows of x on the matvec kernels, where reading the
// weight once is the whole cost (kernels/vulkan/shaders/matvec_body.glsl, matvec_q4_0.comp), and
// a batched decode step's rows beyond that on the rows kernel (matmul_rows.comp).
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/vulkan/recorder.h"
#include "runtime/base/status.h"

namespace vrun::vulkan {

// The most rows of x the matvec kernel takes (one accumulator each in registers, its MR); a
// batched decode step of up to this many rows sums each row as one row alone is summed.
constexpr int64_t kMatvecMaxRows = 8;

// y[m, n] = sum_k x[m, k] w[n, k] (+ bias[n]) (+ residual[m, n]) for 1 <= M <= 8 rows of x,
// whose last dim is dense and whose rows are x_row_stride elements apart. w is [N, K] in any
// weight dtype (block-quantised ones as stored), bias nullptr or [N] dense, residual nullptr or
// rows of N dense elements residual_row_stride apart (y itself is fine: each output element is
// read and written by one invocation), y [M, N] dense.
// norm: x's rows normalised first (linear's norm prologue), weight and bias dense [K] (bias
// nullptr for rms or when absent); needs matvec_norm_fits.
// glu: x's rows hold 2K elements (dense, rows x_row_stride apart) and the kernel projects
// x[m, :K] * silu(x[m, K:]) (linear's glu = silu), gated as x is loaded; not with norm.
// act: y = act(x W^T + bias) + residual (linear's act: 0 none, 1 gelu, 2 silu), in the epilogue.
struct MatvecNorm {
  bool rms = false;
  float eps = 1e-5f;
  const DeviceView* weight = nullptr;
  const DeviceView* bias = nullptr;
};
Status record_matvec(Recorder& rec, const DeviceView& x, const DeviceView& w, const DeviceView* bias,
                     const DeviceView& y, int64_t M, int64_t N, int64_t K, int64_t x_row_stride,
                     const DeviceView* residual = nullptr, int64_t residual_row_stride = 0,
                     const MatvecNorm* norm = nullptr, bool glu = false, int act = 0);

// Whether linear(x, w, ...) has few enough rows of x for the matvec kernel (rows of 2K
// elements with glu).
bool matvec_rows(const DeviceView& x, const DeviceView& w, bool glu = false);

// VRUN_MATMUL_ROWS=exact: a batched decode step's rows of any count go through the matvec
// kernels in passes of up to 8 (norm and gate folded in each pass as for one row) and batched
// attention takes one entry's key chunks at any batch, so every row sums as the single stream's
// does (float, q4_1 and q8_0 weights); slower from 9 rows on than the rows kernel.
bool exact_decode_rows();

// Rows v[r0 .. r0 + m) of a view whose rows are `stride` elements apart, `cols` wide.
DeviceView row_range(const DeviceView& v, int64_t r0, int64_t m, int64_t cols, int64_t stride);

// Whether a batched decode step's rows of q4_0 W (5 to 8 of them) go to the rows kernel rather
// than the matvec kernels: where one q4_0 row has a kernel of its own, several rows do not have
// its bits on either, and the rows kernel's 16-row tile is the faster (H200, Llama-1B q4_0,
// bench_llm_batch --min-rows 16: 4.9 ms a step at 6 and 8 streams against 5.25-5.35 through the
// matvec; at 2 and 4 rows the matvec's 2.6-4.0 and 3.7 ms are ahead).
bool q4_0_decode_rows_kernel(Recorder& rec, const DeviceView& x, const DeviceView& w, bool glu = false);

// Whether the matvec kernels reduce through subgroup arithmetic (else shared memory); one q4_0
// row has a kernel of its own only then.
bool subgroup_reduce(const Context& ctx);

// Stride between consecutive rows of a view whose last dim is dense and whose leading dims
// collapse (what Recorder::rows_view guarantees).
int64_t row_stride(const DeviceView& v);

// Whether the matvec kernel normalises x's rows itself (rms: an RMS norm, else a layer norm;
// they fit its accumulators and shared memory; ctx: whether one q4_0 row has a kernel of its own);
// passes: any number of rows, in passes (exact_decode_rows).
bool matvec_norm_fits(const Context& ctx, const DeviceView& x, const DeviceView& w, bool rms, bool passes = false);

// record_matvec over M rows of any count: passes of as many rows as one call takes (8, 4 with a
// layer norm), each row computed as alone.
Status record_matvec_passes(Recorder& rec, const DeviceView& x, const DeviceView& w, const DeviceView* bias,
                            const DeviceView& y, int64_t M, int64_t N, int64_t K, const DeviceView* residual = nullptr,
                            const MatvecNorm* norm = nullptr, bool glu = false, int act = 0);

// The linear op (inputs x, weight, bias?, residual? as ops.def has them) for matvec_rows shapes:
// bias and residual both added in the kernel's epilogue; norm (nullptr: none), glu and act as
// record_matvec.
Status record_matvec_linear(Recorder& rec, const std::vector<DeviceView>& in, const DeviceView& y,
                            const MatvecNorm* norm = nullptr, bool glu = false, int act = 0);

// y = act(x W^T + bias) + residual for any number of rows of x (a batched decode step's, linear's
// decode attribute) on the rows kernel (matmul_rows.comp): f32 arithmetic, W read once per 32
// rows, K split over workgroups where N alone leaves the device idle (a choice from N and K only,
// so a row's sum does not depend on how many rows share the step). Shapes and layouts as
// record_matvec's, y rows y_row_stride apart; false from matmul_rows_fits when the kernel does not
// take them (K % 32 != 0, W's dtype, a block-quantised W at an odd byte, VRUN_MATMUL_ROWS=0).
bool matmul_rows_fits(Recorder& rec, const DeviceView& x, const DeviceView& w);
Status record_matmul_rows(Recorder& rec, const DeviceView& x, const DeviceView& w, const DeviceView* bias,
                          const DeviceView& y, int64_t M, int64_t N, int64_t K, int64_t x_row_stride,
                          int64_t y_row_stride, const DeviceView* residual, int64_t residual_row_stride, int act);

// Tests use this to run the shared-memory reduction kernel that devices without subgroup
// arithmetic get, on a device that has it.
void set_matvec_shared_reduce_for_testing(bool on);

// Benchmarks sweep the q4_0 kernel's shape with this (nullptr: the built-in choice, or the
// VRUN_Q4_MATVEC knob): rows of W per workgroup, rows per subgroup pass, x staged in shared
// memory or not, invocations, the longest x staged (floats; within the device's shared memory),
// the next block's loads issued before the current one is used; rows < 0 sends q4_0 to the
// generic matvec kernel instead.
struct Q4Tuning {
  int rows = 0, rows_per_pass = 4, stage_x = 1, invocations = 128, stage_max = kStageAsFits, prefetch = 1;
  static constexpr int kStageAsFits = 1 << 30;  // stage_max: whatever the device's shared memory holds
};
void set_q4_0_tuning_for_bench(const Q4Tuning* t);

// Benchmarks force the rows kernel's K split (a power of two up to 32; 0: the built-in rule, or
// the VRUN_MATMUL_ROWS knob), its loads of float W and f32 x (scalar_loads: one load an element
// instead of 16-byte loads) and the columns of W an invocation computes (4, the default, or 8:
// tiles of 128 columns) with this; each changes the speed, not the values.
void set_matmul_rows_for_bench(int split, bool scalar_loads, int columns = 4);

}  // namespace vrun::vulkan
