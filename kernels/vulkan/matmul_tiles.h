// Which tensor-core matmul kernel and tile a projection or batched product takes, from its shape,
// the activations' dtype and the device (each rule with the measurements behind it in
// matmul_tiles.cpp), and the environment switches that force a tile for comparisons.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/vulkan/context.h"
#include "kernels/vulkan/ops.h"
#include "runtime/base/dtype.h"

namespace vrun::vulkan {

// The tensor-core matmul's tile (matmul_coopmat.glsl): WGM x WGN subgroups of FM x FN 16x16
// fragments, K steps of BK through STAGES buffers of shared memory.
// VRUN_MM_TILE=WGMxWGNxFMxFNxBK[xSTAGES] overrides the choice (read at each recording, so that
// benchmarks can compare tiles in one process); a shape the kernel or the device cannot take is
// refused with a warning.
struct CoopTile {
  int wgm = 2, wgn = 4, fm = 4, fn = 4, bk = 32, stages = 1;
  int bm() const { return 16 * wgm * fm; }
  int bn() const { return 16 * wgn * fn; }
  int threads() const { return 32 * wgm * wgn; }
  // Shared memory: the stages of A and B rows (16-byte words, rows padded by one word), which
  // also hold each subgroup's 16 x 16 f32 staging area at the end.
  int64_t shared_bytes() const { return int64_t{stages} * (bm() + bn()) * (bk / 8 + 1) * 16; }
  // Whether the kernel takes it (chunks split evenly over the invocations, room for staging).
  bool valid() const {
    const int ch = bk / 8;
    return wgm > 0 && wgn > 0 && fm > 0 && fn > 0 && bk >= 16 && bk % 16 == 0 && (stages == 1 || stages == 2) &&
           threads() <= 1024 && bm() * ch % threads() == 0 && bn() * ch % threads() == 0 &&
           shared_bytes() >= int64_t{wgm} * wgn * 1024;
  }
  // Whether this device runs it: shared memory and invocations per workgroup.
  bool fits(const Context& ctx) const {
    return shared_bytes() <= ctx.limits().maxComputeSharedMemorySize &&
           static_cast<uint32_t>(threads()) <= ctx.limits().maxComputeWorkGroupInvocations;
  }
  std::vector<int32_t> spec(DType y, int32_t bias, DType a, DType b, int linear) const {
    return {dt_code(y), bias, dt_code(a), dt_code(b), linear, wgm, wgn, fm, fn, bk, threads(), stages};
  }
};

// The subgroup-scope kernel's tile for M x N (x batches) with x of dtype x.
const CoopTile& coop_tile(const Context& ctx, int64_t M, int64_t N, int64_t batches, DType x);

// The workgroup-scope tensor-core linear (matmul_cm2.comp, VK_NV_cooperative_matrix2): a BM x BN
// tile per workgroup of `threads` invocations, K walked BK at a time.
// VRUN_MM_CM2=BMxBNxBKxTHREADS forces a tile (on any shape the kernel takes), VRUN_MM_CM2=0 keeps
// the kernel off (both read at each recording, for comparisons in one process); VRUN_MM_TILE (a
// tile of the subgroup-scope kernel) keeps it off too.
struct Cm2Tile {
  int bm = 128, bn = 128, bk = 32, threads = 128;
  // Whether the device takes it (Context::CoopMat2::takes).
  bool fits(const Context& ctx) const { return ctx.coopmat2().takes(bm, bn, bk, threads); }
};

// The workgroup-scope x-as-A kernel's tile (matmul_cm2.comp) for M x K x N, or null where the
// subgroup-scope kernel runs it.
const Cm2Tile* cm2_tile(const Context& ctx, int64_t M, int64_t K, int64_t N, DType x);

// The tile of the W-as-A kernel (matmul_wa_cm2.comp: bm of W's rows by bn of x's), or null where
// another kernel runs the projection.
const Cm2Tile* cm2_wa_tile(const Context& ctx, int64_t M, int64_t K, int64_t N, DType x, DType w);

// The W-as-A kernel's tile for a batched decode step's M rows in its exact mode (EXACT in
// matmul_wa_cm2.comp: x and W split into halves, f32 sums), or null where the device or the
// switches of the workgroup-scope kernels leave it off (the step's rows then take the rows kernel).
const Cm2Tile* cm2_exact_tile(const Context& ctx, int64_t M, DType w);

// The fewest rows of a batched decode step that take that exact mode for W of dtype w:
// VRUN_MM_EXACT_ROWS, else 5 for halves and for q4_0 and q8_0 W as integers (exact_mode 2), 17 for
// block-quantised W split into halves (matmul_tiles.cpp says why); 0 for never.
int64_t exact_tensor_rows(DType w);

// Whether block-quantised W of n rows takes the exact mode (W of halves always does): the wide
// projections, where it beats the rows kernel (matmul_tiles.cpp).
// VRUN_MM_EXACT_WIDE=N moves that bound (default 8192).
bool exact_wide_enough(int64_t n);

// The exact mode's form for W (specialisation constant EXACT of matmul_wa_cm2.comp): 2 for q4_0
// and q8_0 W, its integers with each block's sums scaled; 1, W split into halves, for the others
// and with VRUN_MM_EXACT_Q=split.
int exact_mode(DType w);

// The K ranges each of a workgroup-scope grid's `tiles` tiles is split into (1: whole K).
int cm2_split(const Context& ctx, const Cm2Tile& t, int64_t tiles, int64_t K, bool quant, int64_t M);

// Whether block-quantised W [N, K] is expanded to f16 first (dequant.comp) for M rows of x, the
// projection then running on the f16 kernels.
bool dequant_first(const Context& ctx, int64_t M, int64_t K, int64_t N, DType x, DType w);

// The fewest rows of x (a prefill chunk's tokens) that send a projection of W (block-quantised:
// quant) to the tensor cores rather than to the f32 kernels (the rows kernel; matvec up to 8
// rows): VRUN_MM_QROWS, else with the workgroup-scope kernels 9 for float W and 33 for
// block-quantised, and 64 without them (matmul_tiles.cpp says why). A batched decode step's rows
// (linear's decode) stay in f32 at any count.
int64_t tensor_core_rows(const Context& ctx, bool quant);

}  // namespace vrun::vulkan
