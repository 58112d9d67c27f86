// Element conversion for CPU kernels: f16/bf16 are storage types that kernels compute in f32.
// The scalar conversions here are branch-free so that loops over rows auto-vectorise; they agree
// bit for bit with f16_to_f32/f32_to_f16/f32_to_bf16 in runtime/dtype.h (round-to-nearest-even).
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "runtime/base/dtype.h"

// Hot per-element helpers must inline into the row loops to vectorise; GCC's heuristics stop
// inlining them in large translation units with many instantiations.
#define VRUN_ALWAYS_INLINE inline __attribute__((always_inline))
#define VRUN_ALWAYS_INLINE_LAMBDA __attribute__((always_inline))

namespace vrun::cpu {

// Storage tags for the two 16-bit float formats (both are uint16_t bits in memory).
struct f16_t {
  uint16_t bits;
};
struct bf16_t {
  uint16_t bits;
};
static_assert(sizeof(f16_t) == 2 && sizeof(bf16_t) == 2);

VRUN_ALWAYS_INLINE float bits_to_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
VRUN_ALWAYS_INLINE uint32_t float_to_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

VRUN_ALWAYS_INLINE float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t em = static_cast<uint32_t>(h & 0x7fffu);
  // Scaling by 2^112 rebiases the exponent and normalises subnormals exactly.
  const uint32_t scaled = float_to_bits(bits_to_float(em << 13) * 0x1p112f);
  const uint32_t special = 0x7f800000u | (em << 13);  // inf / nan keep their payload
  const uint32_t is_special = 0u - static_cast<uint32_t>(em >= 0x7c00u);
  return bits_to_float((special & is_special) | (scaled & ~is_special) | sign);
}

VRUN_ALWAYS_INLINE uint16_t float_to_half(float f) {
  const uint32_t x = float_to_bits(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t a = x & 0x7fffffffu;
  // All three candidates are computed and one is picked with integer selects, so that loops
  // converting rows if-convert and vectorise.
  const uint32_t normal = (a + (static_cast<uint32_t>(15 - 127) << 23) + 0xfffu + ((a >> 13) & 1u)) >> 13;
  // Half subnormals: adding 0.5 lets the FPU round at the right bit.
  constexpr uint32_t kMagic = ((127 - 15) + (23 - 10) + 1) << 23;
  const uint32_t sub = float_to_bits(bits_to_float(a) + bits_to_float(kMagic)) - kMagic;
  const uint32_t special = 0x7c00u | (static_cast<uint32_t>(a > 0x7f800000u) << 9);  // nan, or overflow to inf
  const uint32_t is_special = 0u - static_cast<uint32_t>(a >= 0x47800000u);
  const uint32_t is_sub = 0u - static_cast<uint32_t>(a < 0x38800000u);
  const uint32_t o = (special & is_special) | (~is_special & ((sub & is_sub) | (normal & ~is_sub)));
  return static_cast<uint16_t>(o | sign);
}

VRUN_ALWAYS_INLINE float bf16_to_float(uint16_t b) { return bits_to_float(static_cast<uint32_t>(b) << 16); }

VRUN_ALWAYS_INLINE uint16_t float_to_bf16(float f) {
  const uint32_t x = float_to_bits(f);
  const uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
  return static_cast<uint16_t>((x & 0x7fffffffu) > 0x7f800000u ? ((x >> 16) | 0x40u) : rounded);
}

// to_float / from_float over every storage type a float kernel is instantiated for.
VRUN_ALWAYS_INLINE float to_float(float v) { return v; }
VRUN_ALWAYS_INLINE float to_float(double v) { return static_cast<float>(v); }
VRUN_ALWAYS_INLINE float to_float(f16_t v) { return half_to_float(v.bits); }
VRUN_ALWAYS_INLINE float to_float(bf16_t v) { return bf16_to_float(v.bits); }

template <typename T>
VRUN_ALWAYS_INLINE T from_float(float v) {
  if constexpr (std::is_same_v<T, f16_t>) {
    return f16_t{float_to_half(v)};
  } else if constexpr (std::is_same_v<T, bf16_t>) {
    return bf16_t{float_to_bf16(v)};
  } else {
    return static_cast<T>(v);
  }
}

// The DType of a storage type (for messages and dispatch checks).
template <typename T>
constexpr DType dtype_of() {
  if constexpr (std::is_same_v<T, float>) return DType::f32;
  else if constexpr (std::is_same_v<T, f16_t>) return DType::f16;
  else if constexpr (std::is_same_v<T, bf16_t>) return DType::bf16;
  else if constexpr (std::is_same_v<T, double>) return DType::f64;
  else if constexpr (std::is_same_v<T, int8_t>) return DType::i8;
  else if constexpr (std::is_same_v<T, uint8_t>) return DType::u8;
  else if constexpr (std::is_same_v<T, int32_t>) return DType::i32;
  else if constexpr (std::is_same_v<T, int64_t>) return DType::i64;
  else static_assert(sizeof(T) == 0, "not a storage type");
}

template <typename T>
struct TypeTag {
  using type = T;
};

// True for the activation dtypes kernels compute in f32: f32, f16, bf16.
inline bool is_activation_dtype(DType t) { return t == DType::f32 || t == DType::f16 || t == DType::bf16; }

// Calls fn(TypeTag<T>{}) for T the storage type of an activation dtype (f32/f16/bf16) and
// returns true; returns false for any other dtype (the caller reports kUnsupported).
template <typename Fn>
bool dispatch_activation(DType t, Fn&& fn) {
  switch (t) {
    case DType::f32: fn(TypeTag<float>{}); return true;
    case DType::f16: fn(TypeTag<f16_t>{}); return true;
    case DType::bf16: fn(TypeTag<bf16_t>{}); return true;
    default: return false;
  }
}

// As dispatch_activation, plus f64 (computed in f64 by kernels that template on the type).
template <typename Fn>
bool dispatch_float(DType t, Fn&& fn) {
  if (t == DType::f64) {
    fn(TypeTag<double>{});
    return true;
  }
  return dispatch_activation(t, fn);
}

// Every plain (non-block) dtype, bool read as uint8_t.
template <typename Fn>
bool dispatch_plain(DType t, Fn&& fn) {
  if (dispatch_float(t, fn)) return true;
  switch (t) {
    case DType::i8: fn(TypeTag<int8_t>{}); return true;
    case DType::u8:
    case DType::bool_: fn(TypeTag<uint8_t>{}); return true;
    case DType::i32: fn(TypeTag<int32_t>{}); return true;
    case DType::i64: fn(TypeTag<int64_t>{}); return true;
    default: return false;
  }
}

// Contiguous rows: n elements of src (stride in elements) to f32 and back. These are the hot
// conversions of f16/bf16 kernels; with stride 1 they vectorise.
template <typename T>
inline void load_row(const T* src, int64_t stride, float* dst, int64_t n) {
  if (stride == 1) {
    for (int64_t i = 0; i < n; ++i) dst[i] = to_float(src[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) dst[i] = to_float(src[i * stride]);
  }
}
template <typename T>
inline void store_row(const float* src, T* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = from_float<T>(src[i]);
}

// Any float or block-quantised dtype to f32 (block types need stride 1 and n % 32 == 0 at a
// block boundary); false for other dtypes.
inline bool load_row_f32(DType t, const void* src, int64_t stride, float* dst, int64_t n) {
  if (is_quantized(t)) {
    if (stride != 1 || n % kQuantBlock != 0) return false;
    dequantize_row(t, src, dst, n);
    return true;
  }
  return dispatch_float(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    load_row(static_cast<const T*>(src), stride, dst, n);
  });
}

// f32 to a dense row of a float dtype (f32/f16/bf16/f64); false for other dtypes.
inline bool store_row_f32(const float* src, DType t, void* dst, int64_t n) {
  return dispatch_float(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    store_row(src, static_cast<T*>(dst), n);
  });
}

}  // namespace vrun::cpu
