#include "runtime/base/dtype.h"

#include <algorithm>
#include <bit>
#include <cmath>

namespace vrun {

namespace {
constexpr DTypeInfo kInfos[] = {
#define VRUN_DTYPE(ident, name, code, block_elems, block_bytes, kind) \
  {name, code, block_elems, block_bytes, DTypeKind::k##kind},
#define kfloat kFloat
#define kint kInt
#define kbool kBool
#define kquant kQuant
#include "runtime/base/dtypes.def"
#undef VRUN_DTYPE
};
constexpr int kNumInfos = sizeof(kInfos) / sizeof(kInfos[0]);
}  // namespace

const DTypeInfo* dtype_info_from_code(uint8_t code) {
  for (const auto& i : kInfos)
    if (i.code == code) return &i;
  return nullptr;
}

const DTypeInfo& dtype_info(DType t) {
  const DTypeInfo* i = dtype_info_from_code(static_cast<uint8_t>(t));
  return i ? *i : kInfos[0];
}

std::optional<DType> dtype_from_name(std::string_view name) {
  for (int k = 0; k < kNumInfos; ++k)
    if (name == kInfos[k].name) return static_cast<DType>(kInfos[k].code);
  return std::nullopt;
}

float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      exp = 127 - 15 + 1;
      while ((mant & 0x400u) == 0) {
        mant <<= 1;
        --exp;
      }
      mant &= 0x3ffu;
      bits = sign | (exp << 23) | (mant << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  return std::bit_cast<float>(bits);
}

uint16_t f32_to_f16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t absx = x & 0x7fffffffu;
  if (absx >= 0x7f800000u) return static_cast<uint16_t>(sign | 0x7c00u | (absx > 0x7f800000u ? 0x200u : 0));
  if (absx >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to inf
  if (absx < 0x38800000u) {  // subnormal or zero in half
    if (absx < 0x33000000u) return static_cast<uint16_t>(sign);
    const uint32_t e = absx >> 23;
    const uint32_t m = (absx & 0x7fffffu) | 0x800000u;
    const int shift = 126 - static_cast<int>(e);  // 14 + (113 - e) ... aligns to half subnormal
    uint32_t half_m = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1);
    const uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (half_m & 1u))) ++half_m;
    return static_cast<uint16_t>(sign | half_m);
  }
  uint32_t h = ((absx >> 13) - ((127 - 15) << 10));
  const uint32_t rem = absx & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
  return static_cast<uint16_t>(sign | h);
}

uint16_t f32_to_bf16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  const uint32_t rounding = 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>((x + rounding) >> 16);
}

void dequantize_row(DType t, const void* src, float* dst, int64_t n) {
  const int64_t nb = n / kQuantBlock;
  switch (t) {
    case DType::q8_0: {
      const auto* b = static_cast<const BlockQ8_0*>(src);
      for (int64_t i = 0; i < nb; ++i) {
        const float d = f16_to_f32(b[i].d);
        for (int j = 0; j < 32; ++j) dst[i * 32 + j] = b[i].qs[j] * d;
      }
      break;
    }
    case DType::q4_0: {
      const auto* b = static_cast<const BlockQ4_0*>(src);
      for (int64_t i = 0; i < nb; ++i) {
        const float d = f16_to_f32(b[i].d);
        for (int j = 0; j < 16; ++j) {
          dst[i * 32 + j] = ((b[i].qs[j] & 0x0f) - 8) * d;
          dst[i * 32 + j + 16] = ((b[i].qs[j] >> 4) - 8) * d;
        }
      }
      break;
    }
    case DType::q4_1: {
      const auto* b = static_cast<const BlockQ4_1*>(src);
      for (int64_t i = 0; i < nb; ++i) {
        const float d = f16_to_f32(b[i].d);
        const float m = f16_to_f32(b[i].m);
        for (int j = 0; j < 16; ++j) {
          dst[i * 32 + j] = (b[i].qs[j] & 0x0f) * d + m;
          dst[i * 32 + j + 16] = (b[i].qs[j] >> 4) * d + m;
        }
      }
      break;
    }
    default:
      break;
  }
}

namespace {

// A quantised index from a float that may be out of range or nan (a checkpoint's non-finite
// weights): clamped, nan to `nan_to`, so that no float-to-integer conversion is undefined.
inline int clamp_index(float v, int lo, int hi, int nan_to) {
  if (v != v) return nan_to;
  return v <= static_cast<float>(lo) ? lo : v >= static_cast<float>(hi) ? hi : static_cast<int>(v);
}

}  // namespace

void quantize_row(DType t, const float* src, void* dst, int64_t n) {
  const int64_t nb = n / kQuantBlock;
  switch (t) {
    case DType::q8_0: {
      auto* b = static_cast<BlockQ8_0*>(dst);
      for (int64_t i = 0; i < nb; ++i) {
        const float* x = src + i * 32;
        float amax = 0;
        for (int j = 0; j < 32; ++j) amax = std::fmax(amax, std::fabs(x[j]));
        const float d = amax / 127.f;
        const float id = d != 0 ? 1.f / d : 0.f;
        b[i].d = f32_to_f16(d);
        for (int j = 0; j < 32; ++j) b[i].qs[j] = static_cast<int8_t>(clamp_index(std::nearbyint(x[j] * id), -127, 127, 0));
      }
      break;
    }
    case DType::q4_0: {
      auto* b = static_cast<BlockQ4_0*>(dst);
      for (int64_t i = 0; i < nb; ++i) {
        const float* x = src + i * 32;
        float amax = 0, maxv = 0;
        for (int j = 0; j < 32; ++j)
          if (std::fabs(x[j]) > amax) {
            amax = std::fabs(x[j]);
            maxv = x[j];
          }
        const float d = maxv / -8.f;
        const float id = d != 0 ? 1.f / d : 0.f;
        b[i].d = f32_to_f16(d);
        for (int j = 0; j < 16; ++j) {
          const int q0 = clamp_index(x[j] * id + 8.5f, 0, 15, 8);
          const int q1 = clamp_index(x[j + 16] * id + 8.5f, 0, 15, 8);
          b[i].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
        }
      }
      break;
    }
    case DType::q4_1: {
      auto* b = static_cast<BlockQ4_1*>(dst);
      for (int64_t i = 0; i < nb; ++i) {
        const float* x = src + i * 32;
        float mn = x[0], mx = x[0];
        for (int j = 1; j < 32; ++j) {
          mn = std::fmin(mn, x[j]);
          mx = std::fmax(mx, x[j]);
        }
        const float d = (mx - mn) / 15.f;
        const float id = d != 0 ? 1.f / d : 0.f;
        b[i].d = f32_to_f16(d);
        b[i].m = f32_to_f16(mn);
        for (int j = 0; j < 16; ++j) {
          const int q0 = clamp_index((x[j] - mn) * id + 0.5f, 0, 15, 0);
          const int q1 = clamp_index((x[j + 16] - mn) * id + 0.5f, 0, 15, 0);
          b[i].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
        }
      }
      break;
    }
    default:
      break;
  }
}

}  // namespace vrun
