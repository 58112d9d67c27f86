// Element types, generated from runtime/dtypes.def (the single list), plus f16/bf16 conversion.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

namespace vrun {

enum class DType : uint8_t {
#define VRUN_DTYPE(ident, name, code, block_elems, block_bytes, kind) ident = code,
#include "runtime/base/dtypes.def"
#undef VRUN_DTYPE
};

enum class DTypeKind : uint8_t { kFloat, kInt, kBool, kQuant };

struct DTypeInfo {
  const char* name;
  uint8_t code;
  int block_elems;  // elements per storage block (1 for plain types)
  int block_bytes;  // bytes per storage block
  DTypeKind kind;
};

// Info for a dtype; nullptr for a code that is not in dtypes.def.
const DTypeInfo* dtype_info_from_code(uint8_t code);
const DTypeInfo& dtype_info(DType t);
inline const char* dtype_name(DType t) { return dtype_info(t).name; }
std::optional<DType> dtype_from_name(std::string_view name);
inline bool is_quantized(DType t) { return dtype_info(t).kind == DTypeKind::kQuant; }
inline bool is_float(DType t) { return dtype_info(t).kind == DTypeKind::kFloat; }
// Bytes for n elements (n must be a multiple of the block size for quantised types).
inline int64_t dtype_bytes(DType t, int64_t n) {
  const DTypeInfo& i = dtype_info(t);
  return n / i.block_elems * i.block_bytes;
}
// Size of one element for plain types; 0 for block formats.
inline int dtype_elem_size(DType t) {
  const DTypeInfo& i = dtype_info(t);
  return i.block_elems == 1 ? i.block_bytes : 0;
}

// IEEE half <-> float, round-to-nearest-even, with subnormals, inf and nan.
float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);
inline float bf16_to_f32(uint16_t b) {
  uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
uint16_t f32_to_bf16(float f);  // round-to-nearest-even, nan preserved

// GGUF-compatible block layouts (see dtypes.def).
constexpr int kQuantBlock = 32;
struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[32];
};
struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[16];
};
struct BlockQ4_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qs[16];
};
static_assert(sizeof(BlockQ8_0) == 34 && sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_1) == 20);

// Row (de)quantisation for the block formats; n is a multiple of 32. Quantisation follows
// GGUF's reference quantisers (ggml quantize_row_*_ref), so files we write read the same there.
void dequantize_row(DType t, const void* src, float* dst, int64_t n);
void quantize_row(DType t, const float* src, void* dst, int64_t n);

}  // namespace vrun
