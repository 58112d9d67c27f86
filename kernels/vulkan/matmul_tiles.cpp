// The tile rules of matmul_tiles.h, each with the measurements it rests on.
#include "runtime/base/knobs.h"
#include "kernels/vulkan/matmul_tiles.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "kernels/vulkan/pipelines.h"

namespace vrun::vulkan {

namespace {

// The tiles the shape chooses between, measured on an H100 (vrun_bench_vulkan --tiles, TFLOP/s):
// - f16 x: 128 x 128 tiles on eight subgroups with K steps of 16 through two stages (24 KiB of
//   shared memory, so two workgroups share a multiprocessor) where their grid fills the device,
//   else 64 x 128. 4096^3: 180 against 167 for 128 x 256 tiles; 512 x 2048 x 8192: 160 against
//   146-151; Parakeet's ff up at a 150-s chunk (1875 x 1024 x 4096): 151 against 143-148.
//   Where few tiles exist the small tile wins: 1875 x 4096 x 1024 139 against 100, 512 x 2048 x
//   2048 106 against 59.
// - f32 x (rounded to f16 as it loads, twice the bytes a tile): 128 x 256 on sixteen subgroups
//   (less to load per invocation) where that grid fills the device, else 128 x 128 on sixteen,
//   else 64 x 128. 4096^3: 132 against 112 for 64 x 128; 1875 x 1024 x 4096: 123 against 102;
//   1875 x 4096 x 1024 (the 128 x 128 tile): 108 against 97; 1875 x 1024 x 1024: 116 against 108.
constexpr CoopTile kHalfTile{2, 4, 4, 2, 16, 2}, kWideTile{4, 4, 2, 4, 32, 1}, kSquareTile{4, 4, 2, 2, 32, 1},
    kSmallTile{2, 4, 2, 2, 32, 1};

// Whether a grid of tiles for M x N (x batches) keeps `per_sm` workgroups on each of `sms`
// multiprocessors busy for at least three quarters of its waves (the last counts as whole).
bool fills(const CoopTile& t, int64_t M, int64_t N, int64_t batches, int64_t sms, int64_t per_sm) {
  const int64_t tiles = ((M + t.bm() - 1) / t.bm()) * ((N + t.bn() - 1) / t.bn()) * batches;
  const int64_t slots = sms * per_sm, waves = (tiles + slots - 1) / slots;
  return tiles * 4 >= waves * slots * 3;
}

// The tile an environment variable forces (its value), parsed by `parse` into a Tile and kept
// while the value stays the same: read at each recording, so that benchmarks can compare tiles in
// one process. A value that is not a tile the kernel or the device takes is refused once through
// `refuse` (a warning), and the caller chooses by shape. Null when unset or refused.
template <class Tile, class Parse, class Refuse>
const Tile* forced_tile(const char* value, Parse parse, Refuse refuse) {
  static thread_local std::string seen;
  static thread_local Tile tile;
  static thread_local bool ok = false;
  if (!value || !*value) return nullptr;
  if (seen != value) {
    seen = value;
    Tile t;  // the fields the value leaves out keep the tile's defaults
    ok = parse(value, &t);
    if (ok) tile = t;
    else refuse(value);
  }
  return ok ? &tile : nullptr;
}

}  // namespace

const CoopTile& coop_tile(const Context& ctx, int64_t M, int64_t N, int64_t batches, DType x) {
  const CoopTile* forced = forced_tile<CoopTile>(
      knob_value(Knob::VRUN_MM_TILE),
      [&](const char* e, CoopTile* o) {
        const int n = std::sscanf(e, "%dx%dx%dx%dx%dx%d", &o->wgm, &o->wgn, &o->fm, &o->fn, &o->bk, &o->stages);
        return (n == 5 || n == 6) && o->valid() && o->fits(ctx);
      },
      [&](const char* e) {
        std::fprintf(stderr, "vrun: VRUN_MM_TILE=%s is not a tile the tensor-core matmul takes (WGMxWGNxFMxFNxBK[xSTAGES], "
                     "1 or 2 stages within the device's %u bytes of shared memory and %u invocations); choosing by shape\n", e,
                     ctx.limits().maxComputeSharedMemorySize, ctx.limits().maxComputeWorkGroupInvocations);
      });
  if (forced) return *forced;
  // Where the device does not say how many multiprocessors it has, a tile every grid fills.
  const int64_t sms = ctx.info().multiprocessors;
  if (sms <= 0) return kSmallTile;
  if (x == DType::f32) {
    if (fills(kWideTile, M, N, batches, sms, 1)) return kWideTile;
    if (fills(kSquareTile, M, N, batches, sms, 1)) return kSquareTile;
    return kSmallTile;
  }
  return fills(kHalfTile, M, N, batches, sms, 2) ? kHalfTile : kSmallTile;
}

namespace {

// Where it runs and with which tile, from one H100's measurements (vrun_bench_vulkan --tiles,
// TFLOP/s, against the subgroup-scope kernel's best tile; bench/vulkan/README.md):
// - projections with K and N of at least 2048 (Llama's): f16 x 512 x 2048 x 8192 190 against 162,
//   4096^3 231 against 180, 512 x 2048 x 16384 189 against 159; f32 x 146 against 118, 170
//   against 130, 150 against 124;
// - narrower ones (speech encoders: K 384-1280, or N 1024) stay on the subgroup-scope kernel, which
//   reads 5-20% faster there (1875 x 1024 x 4096 f16: 152 against 143).
// The tile: for f16 x 128 x 128 on four subgroups, with K steps of 64 where the grid would leave
// multiprocessors idle (512 x 2048 x 3072: 155 against 123), and 128 x 64 tiles with K steps of
// 64 where 128 x 128 tiles would not fill half of them (512 x 2048 x 2048: 158 against 113 for
// 128 x 128 x 64; 512 x 8192 x 2048: 154 against 112; at 512 x 2048 x 3072, 96 tiles of 128 x 128
// on 132 multiprocessors, 124 against 153, so not there);
// for f32 x 128 x 256 on eight subgroups, then 128 x 128, then 64 x 128, by the same rule (longer
// K steps lose with f32 x: 66 against 94).
constexpr Cm2Tile kCm2Wide{128, 256, 32, 256}, kCm2Square{128, 128, 32, 128}, kCm2DeepK{128, 128, 64, 128},
    kCm2Narrow{128, 64, 64, 128}, kCm2Small{64, 128, 32, 128};
// The W-as-A kernel's narrow tile (cm2_wa_tile): 128 x 64 with K steps of 32; its square one:
// 128 x 128 with K steps of 64 on eight subgroups.
constexpr Cm2Tile kCm2NarrowK32{128, 64, 32, 128}, kCm2SquareWide{128, 128, 64, 256};

// VRUN_MM_TILE (a subgroup-scope tile) or VRUN_MM_CM2=0 keep the workgroup-scope kernels off;
// VRUN_MM_CM2=BMxBNxBKxTHREADS forces their tile.
struct Cm2Env {
  bool off = false;
  const Cm2Tile* forced = nullptr;
};
Cm2Env cm2_env(const Context& ctx) {
  const char* old = knob_value(Knob::VRUN_MM_TILE);
  const char* e = knob_value(Knob::VRUN_MM_CM2);
  if ((old && *old) || (e && std::string(e) == "0")) return {true, nullptr};
  const Cm2Tile* forced = forced_tile<Cm2Tile>(
      e,
      [&](const char* v, Cm2Tile* t) {
        return std::sscanf(v, "%dx%dx%dx%d", &t->bm, &t->bn, &t->bk, &t->threads) == 4 && t->fits(ctx);
      },
      [&](const char* v) {
        std::fprintf(stderr, "vrun: VRUN_MM_CM2=%s is not a tile this device's workgroup-scope matrices take "
                     "(BMxBNxBKxTHREADS; granularity %u x %u x %u); choosing by shape\n", v,
                     ctx.coopmat2().m_granularity, ctx.coopmat2().n_granularity, ctx.coopmat2().k_granularity);
      });
  return {false, forced};
}

}  // namespace

// The tile for M x K x N, or null where the subgroup-scope kernel runs it.
const Cm2Tile* cm2_tile(const Context& ctx, int64_t M, int64_t K, int64_t N, DType x) {
  if (!ctx.coopmat2().on || !PipelineCache::has_kernel("matmul_cm2")) return nullptr;
  const Cm2Env env = cm2_env(ctx);
  if (env.off) return nullptr;
  if (env.forced) return env.forced;
  if (K < 2048 || N < 2048) return nullptr;
  const int64_t sms = ctx.info().multiprocessors;
  auto tiles = [&](const Cm2Tile& t) { return ((M + t.bm - 1) / t.bm) * ((N + t.bn - 1) / t.bn); };
  auto fills = [&](const Cm2Tile& t) { return sms <= 0 || tiles(t) * 4 >= sms * 3; };
  if (x == DType::f32 && kCm2Wide.fits(ctx) && fills(kCm2Wide)) return &kCm2Wide;
  if (kCm2Square.fits(ctx) && fills(kCm2Square)) return &kCm2Square;
  if (x == DType::f16 && sms > 0 && tiles(kCm2Square) * 2 <= sms && kCm2Narrow.fits(ctx)) return &kCm2Narrow;
  if (x == DType::f16 && kCm2DeepK.fits(ctx)) return &kCm2DeepK;
  return kCm2Small.fits(ctx) ? &kCm2Small : nullptr;
}

// The tile of the W-as-A kernel (matmul_wa_cm2.comp: bm of W's rows by bn of x's), or null where
// another kernel runs the projection. VRUN_MM_CM2_WA=1 sends f16 W to it at every shape (with
// VRUN_MM_CM2's tile where one is forced), =0 never; the switches of cm2_env apply.
// Block-quantised W (where the device has block loads) always takes it, from one H100
// (`vrun_bench_vulkan --quant-tiles`, q4_0 / q8_0 W, f16 x, TFLOP/s): 128 x 256 on eight
// subgroups where its grid fills three quarters of the multiprocessors (512 x 2048 x 8192: 209 /
// 178 against 189 / 172 for 128 x 128); 128 x 64 where 128 x 128 tiles would fill at most half
// (Llama-1B's o and down, N 2048: 96 / 80 and 104 / 61 against 75 / 66 and 80 / 54); else 128 x
// 128 (qkv, N 3072: 110 / 98 against 95 / 82 for 128 x 64). The subgroup-scope kernel reads
// 38-96 on these shapes.
// f16 W with f16 x (`--quant-tiles --tile-w f16`, against matmul_cm2.comp's best tile in the same
// run): 128 x 128 where that grid fills more than half of the multiprocessors; narrower grids (o
// and down) stay on matmul_cm2.comp's 128 x 64 tiles (158.9 / 149.1 against 130.5 / 111.5 here).
// The 128 x 128 tile takes K steps of 64 on eight subgroups (kCm2SquareWide), for both W types:
// one H100, `--quant-tiles --tile-w f16,q4_0 --tile-list cm2:128x128x32x128,cm2:128x128x64x128`
// (TFLOP/s, f16 / q4_0): qkv 166.4 / 127.5 against 124.8 / 110.1 and 157.9 / 95.8; f16 up
// (512 x 2048 x 16384) 202.6 against 191.4 and 168.0; 512 x 2048 x 8192 (f16) 206.6 against 189.4
// and 173.7; and llama.cpp's perf shape 512 x 14336 x 4096 (`--peer-shapes`) 236.6 / 160.9
// against 133.9 / 110.8 with K steps of 32 on four subgroups.
const Cm2Tile* cm2_wa_tile(const Context& ctx, int64_t M, int64_t K, int64_t N, DType x, DType w) {
  const bool quant = is_quantized(w);
  if (!ctx.coopmat2().on || (quant && !ctx.coopmat2().block_loads) || !PipelineCache::has_kernel("matmul_wa_cm2"))
    return nullptr;
  const Cm2Env env = cm2_env(ctx);
  if (env.off) return nullptr;
  const char* wa = knob_value(Knob::VRUN_MM_CM2_WA);
  const bool wa_on = wa && std::string(wa) == "1", wa_off = wa && std::string(wa) == "0";
  if (!quant && (wa_off || (!wa_on && (x != DType::f16 || K < 2048 || N < 2048 || env.forced)))) return nullptr;
  if (env.forced) return !quant || env.forced->bk % kQuantBlock == 0 ? env.forced : nullptr;
  const int64_t sms = ctx.info().multiprocessors;
  auto tiles = [&](const Cm2Tile& t) { return ((N + t.bm - 1) / t.bm) * ((M + t.bn - 1) / t.bn); };
  auto pick = [&](const Cm2Tile& t) { return t.fits(ctx) ? &t : nullptr; };
  auto square = [&]() { return kCm2SquareWide.fits(ctx) ? &kCm2SquareWide : pick(kCm2Square); };
  if (!quant) {
    if (sms <= 0 || tiles(kCm2Square) * 2 > sms) return square();
    return wa_on ? pick(kCm2NarrowK32) : nullptr;
  }
  // Fewer rows than a tile (VRUN_MM_QROWS below 64: a short prefill chunk): the narrowest.
  if (M < 64 && kCm2NarrowK32.fits(ctx)) return &kCm2NarrowK32;
  if (sms > 0 && kCm2Wide.fits(ctx) && tiles(kCm2Wide) * 4 >= sms * 3) return &kCm2Wide;
  if (sms > 0 && kCm2NarrowK32.fits(ctx) && tiles(kCm2Square) * 2 <= sms) return &kCm2NarrowK32;
  return square();
}

// A batched decode step keeps each row's f32 sums (linear's decode: rounding x to halves made 0 of
// 16 to 64 streams keep their single-stream tokens), so it took the rows kernel (f32 FMA, 10-18
// TFLOP/s on an H200) and, up to 8 rows, the matvec kernels: at 32 rows of a q4_0 Llama-1B those
// were about 5 of the step's 6.2 ms, the output head alone 0.8-0.93. The W-as-A kernel's exact mode
// computes the same f32 sums on the tensor cores from halves (x = hi + lo, W likewise). Its tile
// covers the step's rows in one tile of 16, 32 or 64 (128 of W's rows, K steps of 32), K split
// by cm2_split's short-chunk rule. One H200, `vrun_bench_vulkan --rows-shapes 16,32` (ms, rows
// kernel / exact mode at 16 and 32 rows, Llama-1B's q4_0 projections): qkv 3072x2048 0.023 /
// 0.039 and 0.028 / 0.040; o 2048x2048 0.019 / 0.026 and 0.024 / 0.026; down 2048x8192 - and
// 0.063 / 0.076; gate-up 16384x2048 0.098 / 0.086 and 0.117 / 0.079; the output head
// 128256x2048 0.800 / 0.58 at 32. Every projection in it, `bench_llm_batch` tok/s at 9 / 16 / 32
// / 64 streams: q4_0 1,382-1,636 / 2,442-2,921 / 5,406-5,473 / 7,384-7,504 against the rows
// kernel's 1,870-1,886 / 3,329-3,348 / 5,121-5,195 / 5,640-5,688; f16 2,040-2,053 / 3,626-3,645 /
// 5,854-5,874 / 7,777-7,795 against 1,901-1,909 / 3,274-3,377 / 4,928-4,984 / 5,523-5,552. Its
// W loads run a decode function per element, twice (hi and lo), so block-quantised W takes it
// only on wide projections (exact_wide_enough: N of 8192 or more, gate-up and the head); halves
// everywhere. (A subgroup-scope kernel that split x and W into shared memory itself, with the rows
// kernel's loads, measured no faster than the rows kernel: 0.121 against 0.117 ms for gate-up at
// 32 rows, 0.861 against 0.800 for the head.)
const Cm2Tile* cm2_exact_tile(const Context& ctx, int64_t M, DType w) {
  static constexpr Cm2Tile k16{128, 16, 32, 128}, k32{128, 32, 32, 128};
  if (!ctx.coopmat2().on || ctx.exact_f32() || (is_quantized(w) && !ctx.coopmat2().block_loads) ||
      !PipelineCache::has_kernel("matmul_wa_cm2"))
    return nullptr;
  const Cm2Env env = cm2_env(ctx);
  if (env.off) return nullptr;
  if (env.forced) return env.forced->bk % kQuantBlock == 0 ? env.forced : nullptr;
  if (M <= 16 && k16.fits(ctx)) return &k16;
  if (M <= 32 && k32.fits(ctx)) return &k32;
  return kCm2NarrowK32.fits(ctx) ? &kCm2NarrowK32 : nullptr;
}

// From how many rows, one H200 (`bench_llm_batch` tok/s, Llama-1B): 5 for halves, and for q4_0
// and q8_0 W in the scaled form (exact_mode 2), where the matvec kernels' eight accumulators a
// weight row slow down: halves (one call) 4 / 5 / 6 / 8 streams 1,015 / 1,231 / 1,481 / 1,967 from
// 4 rows against 1,483 / 1,010 / 1,219 / 1,621 on them; q4_0 from 5 against the former 17 (one
// call) 5 / 8 / 9 / 12 / 16 streams 1,239 / 1,974 / 2,200 / 2,931 / 3,850 against 1,017 / 1,630 /
// 1,848 / 2,503 / 3,325, q8_0 1,024 / 1,637 / 2,002 / 2,670 / 3,572 against 802 / 1,281 / 1,688 /
// 2,225 / 3,018; from 3 rows only within noise at 3 and 4 (q4_0 834 / 1,123 against 820 / 1,096 on
// the matvec kernels, q8_0 792 / 1,052 against 765-788 / 1,037-1,051). W split into halves (q4_1,
// and q4_0 / q8_0 with VRUN_MM_EXACT_Q=split: two decodes an element) from 17, where the rule above
// only sends gate-up and the head (q4_0 from 9 against VRUN_MM_EXACT_ROWS=0, one call: 9 streams
// 1,791-1,808 against 1,878, 16 3,172-3,197 against 3,272, 32 5,463-5,529 against 5,118).
int64_t exact_tensor_rows(DType w) {
  if (const char* e = knob_value(Knob::VRUN_MM_EXACT_ROWS); e && *e) return std::max<int64_t>(0, std::atoll(e));
  return is_quantized(w) && exact_mode(w) == 1 ? 17 : 5;
}

constexpr int64_t kExactBlocksN = 8192;
bool exact_wide_enough(int64_t n) {
  if (const char* e = knob_value(Knob::VRUN_MM_EXACT_WIDE); e && *e) return n >= std::atoll(e);
  return n >= kExactBlocksN;
}

// EXACT = 2 (matmul_wa_cm2.comp: q4_0 and q8_0 W as integers, exact in halves, each block's sums
// scaled by its d; one decode an element where EXACT = 1 runs two) is the default for both;
// VRUN_MM_EXACT_Q=split keeps them to the two halves of EXACT = 1. One H200, Llama-1B q4_0 at 32
// rows (ms, rows kernel / split / scaled): gate-up 0.118 / 0.080 / 0.055, the head 0.802 / 0.585 /
// 0.416; `bench_llm_batch --ctx 4096` tok/s at 32 / 64 streams 5,103 / 5,615 on the rows kernel,
// 5,386 / 6,783 split, 6,296 / 7,214 scaled, every stream's tokens generate's.
int exact_mode(DType w) {
  const char* e = knob_value(Knob::VRUN_MM_EXACT_Q);
  const bool split = e && std::string(e) == "split";
  return !split && (w == DType::q4_0 || w == DType::q8_0) ? 2 : 1;
}

// K ranges for a workgroup-scope tile of `tiles` workgroups (matmul_cm2_common.glsl's
// SPLIT_MERGE): block-quantised W whose tiles leave multiprocessors idle (Llama-1B's o and down
// projections at 512 rows: 128 tiles of 128 x 64 on an H100's 132) splits each tile's K in two,
// where each half keeps at least 32 K steps. One H100, Llama-1B-shaped prefill of 512 tokens
// (`vrun generate`, three runs each, tok/s): q4_0 38,256-39,168 whole, 43,145-45,773 so; q8_0
// 35,172-35,456 and 41,302-41,902. Splitting further (up to 4 ranges, or to fill the device twice)
// or with fewer steps a range (qkv: 16 steps of 64) read the same or lower, and f16 W lost at
// every split (`vrun_bench_vulkan --quant-tiles`, 512 x 2048 x 2048: 157 TFLOP/s whole, 116 in
// two). Tiles wider than 128 x 64 (the 128 x 256 ones of 512 x 2048 x 8192, whose partial sums
// would be four times the size) were not measured split and keep whole K.
// A short prefill chunk (fewer than 64 rows of x: one tile of rows, mostly empty) has as few tiles
// as W has tiles of rows, and each workgroup walked all of K: the projection took about as long
// for 16 rows as for 512 would per tile. There K is split into the most ranges, up to 8, whose
// workgroups still fit the multiprocessors once (and the rule above where it gives more). One
// H200, `vrun_bench_vulkan --quant-tiles --tile-w f16,q4_0 --tile-m 47 --tile-list split:1,...`
// (VRUN_MM_QROWS=9), Llama-1B's projections, us at 1 / 2 / 4 / 8 ranges: f16 W (128 x 64 tiles)
// qkv 42 / 27 / 30 / 34, o 43 / 27 / 20 / 27, down 162 / 86 / 49 / 63, up 55 / 72 / 83 / 112;
// q4_0 (W-as-A 128 x 64) qkv 58 / 37 / 24 / 25, o 59 / 36 / 24 / 22, up 59 / 51 (2, the rule
// above) / -; 16 rows gave the same times. This rule picks 2, 4, 4, 1 and 4, 8, 2.
// VRUN_MM_SPLITK=N asks for N ranges wherever K allows (the most up to N that it does, each at
// least four K steps), 0 or 1 keeps K whole.
// (A grid of more tiles than the recorder has counters, or whose partial sums would pass 256 MiB,
// is never split.)
constexpr int64_t kMaxSplitTiles = 1 << 16, kMaxSplitPartials = int64_t{1} << 26, kShortChunkRows = 64;
int cm2_split(const Context& ctx, const Cm2Tile& t, int64_t tiles, int64_t K, bool quant, int64_t M) {
  auto takes = [&](int s, int64_t steps) {
    return K % (int64_t{s} * t.bk) == 0 && K / s >= steps * t.bk && tiles * s * t.bm * t.bn <= kMaxSplitPartials;
  };
  if (tiles > kMaxSplitTiles) return 1;
  if (const char* e = knob_value(Knob::VRUN_MM_SPLITK); e && *e) {
    for (int s = std::clamp(std::atoi(e), 1, 16); s > 1; --s)
      if (takes(s, 4)) return s;
    return 1;
  }
  const int64_t sms = ctx.info().multiprocessors;
  const int wide = quant && t.bm * t.bn <= 128 * 64 && sms > 0 && tiles < sms && takes(2, 32) ? 2 : 1;
  int chunk = 1;
  if (M < kShortChunkRows && sms > 0)
    while (chunk < 8 && tiles * chunk * 2 <= sms && takes(chunk * 2, 4)) chunk *= 2;
  return std::max(wide, chunk);
}

// Block-quantised W expanded to f16 scratch first (dequant.comp), the projection then on the f16
// workgroup-scope kernels: the pass reads W once and writes its halves, which pays where the f16
// kernels' rate saves more than that. One H100, `vrun_bench_vulkan --quant-tiles --tile-w
// q4_0,q8_0,q4_1 --tile-list dequant:0` (512 rows of f16 x, us, expanded first / blocks expanded
// by the tile loads): Llama-1B's qkv 45 / 49-54, o 32-33 / 46-51, down 134-137 / 157-173 (the
// fused kernel's grids leave multiprocessors idle there, split K or not); up (N 16384) q4_0 206 /
// 184, q4_1 207 / 203, q8_0 212 / 233; 512 x 2048 x 8192 q4_0 101 / 83, q4_1 102 / 90, q8_0 104 /
// 99. So 4-bit W keeps the fused kernel where it takes its 128 x 256 tile (a grid that fills the
// device), and everything else from 128 rows is expanded first. A Llama-1B-shaped prefill of 512
// tokens (`bench_llama_roofline --shape llama-1b --backend vulkan`, tok/s): nothing expanded
// (VRUN_MM_DEQUANT=0) q4_0 48,223-48,391, q8_0 43,590-43,704, q4_1 45,253-45,353; every shape
// expanded (VRUN_MM_DEQUANT=128) 53,718-54,585, 52,318-52,523, 53,019-54,004; this rule, on the
// second of those two H100s, 56,069-56,690, 52,911-52,926, 53,780-54,170.
// Only with VK_NV_cooperative_matrix2, for W of at most 256 MiB of halves, and where K and N are
// at least 2048 (what was measured: the speech encoders' narrower block-quantised projections,
// Whisper's 384-1280 wide, keep the fused kernel until they are).
// VRUN_MM_DEQUANT=ROWS expands every shape from that many rows (0 never) on any device.
constexpr int64_t kDequantRows = 128, kMaxDequantBytes = int64_t{256} << 20;
bool dequant_first(const Context& ctx, int64_t M, int64_t K, int64_t N, DType x, DType w) {
  if (!is_quantized(w) || K % kQuantBlock != 0 || N * K * 2 > kMaxDequantBytes || !PipelineCache::has_kernel("dequant"))
    return false;
  if (const char* e = knob_value(Knob::VRUN_MM_DEQUANT); e && *e) {
    const int64_t rows = std::atoll(e);
    return rows > 0 && M >= rows;
  }
  if (!ctx.coopmat2().on || !PipelineCache::has_kernel("matmul_cm2") || M < kDequantRows || K < 2048 || N < 2048)
    return false;
  const bool four_bit = w == DType::q4_0 || w == DType::q4_1;
  return !(four_bit && cm2_wa_tile(ctx, M, K, N, x, w) == &kCm2Wide);
}

// A batched decode step's rows never come here (linear's decode keeps their f32 sums: with x
// rounded to halves for the tensor cores, 0 of 16 to 64 streams kept generate's tokens;
// docs/performance.md; the tensor cores take them only in the exact mode, exact_tensor_rows).
// What is left is a prefill chunk's rows, which generate and the
// batched session's prefill_slot both send here at the same count, so the threshold only trades
// speed: below it the rows kernel's f32 products, from it the tensor cores'. One H200, Llama-1B
// shape, `bench_llama_roofline --prompt P` prefill tok/s. Rows kernel from 9 to 63 rows against
// the tensor cores from 9 (VRUN_MM_QROWS=9), before cm2_split's short-chunk rule: q4_0 16 / 32 /
// 47 / 63 tokens 3,733 / 5,871 / 4,812 / 6,240 against 2,513 / 4,867 / 7,089 / 9,343; f16 2,796 /
// 4,790 / 3,827 / 5,176 against 2,139 / 4,235 / 6,061 / 8,068 (one call). With that rule, another
// call: 47 tokens q4_0 8,519 against 4,809 on the rows kernel, f16 9,373 against 3,855; 16 tokens
// q4_0 3,066, f16 3,355 (the rows kernel's 3,733 and 2,796 were from the first call). So with the
// workgroup-scope kernels (VK_NV_cooperative_matrix2) float W goes to the tensor cores past the
// matvec kernels' 8 rows and block-quantised W past one 32-row tile of the rows kernel; elsewhere
// from 64 rows (the subgroup-scope kernel was not measured on fewer).
int64_t tensor_core_rows(const Context& ctx, bool quant) {
  if (const char* e = knob_value(Knob::VRUN_MM_QROWS); e && *e) {
    const int64_t rows = std::atoll(e);
    if (rows > 0) return rows;
  }
  if (!ctx.coopmat2().on) return 64;
  return quant ? 33 : 9;
}

}  // namespace vrun::vulkan
