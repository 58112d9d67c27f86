// Dequantisers for the GGUF tensor types vrun does not run directly (q5_0, q5_1, the K-quants
// q2_K..q6_K, iq4_nl, iq4_xs, mxfp4) and the conversions the importers make from them:
// q4_K maps exactly onto q4_1 (each 32-element sub-block is d*q - m with 4-bit q); every other
// type is re-quantised to q8_0, whose per-32 step (amax / 127) is finer than any of theirs.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "runtime/base/dtype.h"
#include "runtime/base/status.h"

namespace vrun::gguf {

// Whether dequantize_ggml_row handles `type` (a GGUF type code).
bool can_dequantize_ggml(uint32_t type);

// n elements (a multiple of the type's block size) of `type` from src to f32.
void dequantize_ggml_row(uint32_t type, const void* src, float* dst, int64_t n);

// The dtype vrun runs a tensor of `type` as without any conversion (f32, f16, bf16, q8_0, q4_0,
// q4_1); nullopt for every other type.
std::optional<DType> ggml_direct_dtype(uint32_t type);

// The dtype a tensor of `type` becomes at import: itself where vrun runs it, q4_1 for q4_K, q8_0
// for the other quantised types, f32 for f64 and the integer types; nullopt for a type with no
// conversion (the grid-coded iq1/iq2/iq3 types, the ternary tq types, nvfp4, q1_0, and q8_1 / q8_K, which are
// activation formats llama.cpp never stores).
std::optional<DType> ggml_import_dtype(uint32_t type);

struct ConvertedTensor {
  DType dtype;                      // ggml_import_dtype(type), or q8_0 where a q4_K scale overflows f16
  std::shared_ptr<const void> data;  // rows x cols elements of dtype
};

// Converts rows x cols elements of `type` (row-major, rows of cols elements) to `to`: f32, or
// (the default) ggml_import_dtype(type).
Result<ConvertedTensor> convert_ggml_tensor(uint32_t type, const void* src, int64_t rows, int64_t cols,
                                            std::optional<DType> to = std::nullopt);

}  // namespace vrun::gguf
