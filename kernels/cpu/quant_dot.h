// Integer dot products between GGUF block-quantised weight rows (q8_0, q4_0, q4_1) and
// activations quantised on the fly per block of 32 (like llama.cpp's q8_1, with a second 8-bit
// half for precision), the core of quantised linear. Runtime dispatch picks AVX-512 VNNI, AVX2 or portable code; all compute
// the same integer block sums, so they differ only in float summation order.
#pragma once

#include <cstdint>

#include "runtime/base/dtype.h"

namespace vrun {

// One activation block: x[j] ~= d * (128 * qs[j] + ql[j]), a 15-bit quantisation in two 8-bit
// halves (hi in [-127, 127], lo in [-64, 64]) so that each half is one 8-bit integer dot product
// (maximum error amax / 32512 against 8-bit's amax / 254: 8-bit activations alone move this
// model's logits by tenths, flipping near-tie tokens against a float64 reference).
// s = sum of the 32 floats, for the weight's offset term (q4_1's m, q4_0's implicit -8).
struct BlockQ8Act {
  float d;
  float s;
  int8_t qs[32];
  int8_t ql[32];
};
static_assert(sizeof(BlockQ8Act) == 72);

// Quantises k (multiple of 32) floats to k / 32 blocks, rounding to nearest (amax maps to 127 * 128).
void quantize_act_row(const float* x, BlockQ8Act* dst, int64_t k);

// A tile of the product: out[i * ldo + j] = dot(x row i, weight row j) for i < nx, j < nw,
// over nblocks blocks. Weight rows are w_stride bytes apart, activation rows x_stride blocks.
// wt is q8_0, q4_0 or q4_1. with_offsets = false leaves out the weight-offset term
// sum_b c_b * x.s_b (c = q4_1's m, q4_0's -8 d). Weight rows are read one after another, in
// address order; each is read once per kQuantTileX activation rows, so callers pass few
// activation rows or few weight rows.
void quant_dot_tile(DType wt, const void* w, int64_t w_stride, int nw, const BlockQ8Act* x, int64_t x_stride,
                    int nx, int64_t nblocks, float* out, int64_t ldo, bool with_offsets = true);

// Activation rows one pass over a weight row serves.
constexpr int kQuantTileX = 4;

// Which implementation runs ("avx512vnni", "avx2", "scalar"); for benchmarks and tests.
const char* quant_dot_isa();
// Forces the portable implementation (tests compare it with the vector one).
void quant_dot_force_scalar(bool on);
// Caps the vector implementation at AVX2 (no VNNI) where the CPU has more; for tests.
void quant_dot_force_avx2(bool on);

}  // namespace vrun
