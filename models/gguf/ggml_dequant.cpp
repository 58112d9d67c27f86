#include "models/gguf/ggml_dequant.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "models/gguf/gguf_file.h"

namespace vrun::gguf {

namespace {

constexpr uint32_t kIq4Nl = static_cast<uint32_t>(GgmlType::IQ4_NL), kIq4Xs = static_cast<uint32_t>(GgmlType::IQ4_XS),
                   kMxfp4 = static_cast<uint32_t>(GgmlType::MXFP4);

// The 16 non-linear levels of iq4_nl / iq4_xs (the format's code book).
constexpr int8_t kIq4Levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
// mxfp4's e2m1 values, doubled (so that they are integers); the block scale is halved to match.
constexpr int8_t kMxfp4Levels[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

float h(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return f16_to_f32(v);
}

uint32_t u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// Six-bit scale and min j (0..7) of a q4_K / q5_K block's 12 packed bytes.
void scale_min_k4(int j, const uint8_t* q, int* sc, int* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// Quant j (0..15) of a q5_0 / q5_1 block and quant j + 16: four low bits from qs, the fifth from qh.
int q5_low(const uint8_t* qs, uint32_t qh, int j) { return static_cast<int>((qs[j] & 0x0F) | (((qh >> j) << 4) & 0x10)); }
int q5_high(const uint8_t* qs, uint32_t qh, int j) { return static_cast<int>((qs[j] >> 4) | ((qh >> (j + 12)) & 0x10)); }

void q5_0(const uint8_t* b, float* y) {  // d, qh[4], qs[16]
  const float d = h(b);
  const uint32_t qh = u32(b + 2);
  const uint8_t* qs = b + 6;
  for (int j = 0; j < 16; ++j) {
    y[j] = static_cast<float>(q5_low(qs, qh, j) - 16) * d;
    y[j + 16] = static_cast<float>(q5_high(qs, qh, j) - 16) * d;
  }
}

void q5_1(const uint8_t* b, float* y) {  // d, m, qh[4], qs[16]
  const float d = h(b), m = h(b + 2);
  const uint32_t qh = u32(b + 4);
  const uint8_t* qs = b + 8;
  for (int j = 0; j < 16; ++j) {
    y[j] = static_cast<float>(q5_low(qs, qh, j)) * d + m;
    y[j + 16] = static_cast<float>(q5_high(qs, qh, j)) * d + m;
  }
}

void q2_k(const uint8_t* b, float* y) {  // scales[16], qs[64], d, dmin
  const uint8_t* scales = b;
  const uint8_t* q = b + 16;
  const float d = h(b + 80), dmin = h(b + 82);
  int is = 0;
  for (int n = 0; n < 256; n += 128) {
    for (int shift = 0; shift < 8; shift += 2) {
      for (int half = 0; half < 2; ++half) {
        const uint8_t sc = scales[is++];
        const float dl = d * static_cast<float>(sc & 0xF), ml = dmin * static_cast<float>(sc >> 4);
        for (int l = 0; l < 16; ++l) *y++ = dl * static_cast<float>((q[l + 16 * half] >> shift) & 3) - ml;
      }
    }
    q += 32;
  }
}

void q3_k(const uint8_t* b, float* y) {  // hmask[32], qs[64], scales[12], d
  const uint8_t* hm = b;
  const uint8_t* q = b + 32;
  const uint8_t* packed = b + 96;
  const float d = h(b + 108);
  // Sixteen 6-bit scales: low 4 bits in bytes 0..7 (two per byte), high 2 bits in bytes 8..11.
  int8_t scales[16];
  for (int i = 0; i < 16; ++i) {
    const int low = i < 8 ? packed[i] & 0xF : packed[i - 8] >> 4;
    const int high = (packed[8 + i % 4] >> (2 * (i / 4))) & 3;
    scales[i] = static_cast<int8_t>((low | (high << 4)) - 32);
  }
  int is = 0;
  uint8_t m = 1;
  for (int n = 0; n < 256; n += 128) {
    for (int shift = 0; shift < 8; shift += 2) {
      for (int half = 0; half < 2; ++half) {
        const float dl = d * static_cast<float>(scales[is++]);
        for (int l = 0; l < 16; ++l) {
          const int i = l + 16 * half;
          const int v = ((q[i] >> shift) & 3) - ((hm[i] & m) ? 0 : 4);
          *y++ = dl * static_cast<float>(v);
        }
      }
      m = static_cast<uint8_t>(m << 1);
    }
    q += 32;
  }
}

// Scale and offset of sub-blocks 2j and 2j + 1 of a q4_K / q5_K block: value = d * q - c.
struct SubBlockPair {
  float d1, c1, d2, c2;
};
SubBlockPair k4_sub_blocks(int j, const uint8_t* sc, float d, float dmin) {
  int s1, m1, s2, m2;
  scale_min_k4(2 * j, sc, &s1, &m1);
  scale_min_k4(2 * j + 1, sc, &s2, &m2);
  return {d * static_cast<float>(s1), dmin * static_cast<float>(m1), d * static_cast<float>(s2),
          dmin * static_cast<float>(m2)};
}

void q4_k(const uint8_t* b, float* y) {  // d, dmin, scales[12], qs[128]
  const float d = h(b), dmin = h(b + 2);
  const uint8_t* sc = b + 4;
  const uint8_t* q = b + 16;
  for (int j = 0; j < 4; ++j) {
    const auto [d1, c1, d2, c2] = k4_sub_blocks(j, sc, d, dmin);
    for (int l = 0; l < 32; ++l) *y++ = d1 * static_cast<float>(q[l] & 0xF) - c1;
    for (int l = 0; l < 32; ++l) *y++ = d2 * static_cast<float>(q[l] >> 4) - c2;
    q += 32;
  }
}

void q5_k(const uint8_t* b, float* y) {  // d, dmin, scales[12], qh[32], qs[128]
  const float d = h(b), dmin = h(b + 2);
  const uint8_t* sc = b + 4;
  const uint8_t* qh = b + 16;
  const uint8_t* ql = b + 48;
  for (int j = 0; j < 4; ++j) {
    const auto [d1, c1, d2, c2] = k4_sub_blocks(j, sc, d, dmin);
    const uint8_t u1 = static_cast<uint8_t>(1u << (2 * j)), u2 = static_cast<uint8_t>(2u << (2 * j));
    for (int l = 0; l < 32; ++l) *y++ = d1 * static_cast<float>((ql[l] & 0xF) + ((qh[l] & u1) ? 16 : 0)) - c1;
    for (int l = 0; l < 32; ++l) *y++ = d2 * static_cast<float>((ql[l] >> 4) + ((qh[l] & u2) ? 16 : 0)) - c2;
    ql += 32;
  }
}

void q6_k(const uint8_t* b, float* y) {  // ql[128], qh[64], scales[16] (int8), d
  const uint8_t* ql = b;
  const uint8_t* qh = b + 128;
  const auto* sc = reinterpret_cast<const int8_t*>(b + 192);
  const float d = h(b + 208);
  for (int n = 0; n < 256; n += 128) {
    for (int l = 0; l < 32; ++l) {
      const int is = l / 16;
      const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
      const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
      const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
      const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
      y[l] = d * static_cast<float>(sc[is]) * static_cast<float>(q1);
      y[l + 32] = d * static_cast<float>(sc[is + 2]) * static_cast<float>(q2);
      y[l + 64] = d * static_cast<float>(sc[is + 4]) * static_cast<float>(q3);
      y[l + 96] = d * static_cast<float>(sc[is + 6]) * static_cast<float>(q4);
    }
    y += 128;
    ql += 64;
    qh += 32;
    sc += 8;
  }
}

// 32 values from 16 bytes of 4-bit indices into a level table: the low nibbles give values 0..15,
// the high nibbles 16..31.
void nibble_levels(const int8_t* levels, const uint8_t* qs, float d, float* y) {
  for (int j = 0; j < 16; ++j) {
    y[j] = d * static_cast<float>(levels[qs[j] & 0xF]);
    y[j + 16] = d * static_cast<float>(levels[qs[j] >> 4]);
  }
}

void iq4_nl(const uint8_t* b, float* y) {  // d, qs[16]
  nibble_levels(kIq4Levels, b + 2, h(b), y);
}

void iq4_xs(const uint8_t* b, float* y) {  // d, scales_h (u16), scales_l[4], qs[128]
  const float d = h(b);
  uint16_t scales_h;
  std::memcpy(&scales_h, b + 2, 2);
  const uint8_t* scales_l = b + 4;
  const uint8_t* qs = b + 8;
  for (int ib = 0; ib < 8; ++ib) {
    const int ls = ((scales_l[ib / 2] >> (4 * (ib % 2))) & 0xF) | (((scales_h >> (2 * ib)) & 3) << 4);
    nibble_levels(kIq4Levels, qs, d * static_cast<float>(ls - 32), y);
    y += 32;
    qs += 16;
  }
}

void mxfp4(const uint8_t* b, float* y) {  // e (E8M0 scale), qs[16]
  // 2^(e - 127), halved for the doubled level table; e = 0 gives 2^-128 (a subnormal float).
  nibble_levels(kMxfp4Levels, b + 1, std::ldexp(1.0f, static_cast<int>(b[0]) - 128), y);
}

struct Codec {
  uint32_t type;
  int64_t elems, bytes;
  void (*fn)(const uint8_t*, float*);
};

constexpr Codec kCodecs[] = {
    {static_cast<uint32_t>(GgmlType::Q5_0), 32, 22, q5_0},   {static_cast<uint32_t>(GgmlType::Q5_1), 32, 24, q5_1},
    {static_cast<uint32_t>(GgmlType::Q2_K), 256, 84, q2_k},
    {static_cast<uint32_t>(GgmlType::Q3_K), 256, 110, q3_k}, {static_cast<uint32_t>(GgmlType::Q4_K), 256, 144, q4_k},
    {static_cast<uint32_t>(GgmlType::Q5_K), 256, 176, q5_k}, {static_cast<uint32_t>(GgmlType::Q6_K), 256, 210, q6_k},
    {kIq4Nl, 32, 18, iq4_nl},
    {kIq4Xs, 256, 136, iq4_xs},                              {kMxfp4, 32, 17, mxfp4},
};

const Codec* codec(uint32_t type) {
  for (const Codec& c : kCodecs)
    if (c.type == type) return &c;
  return nullptr;
}

// n elements of type T (at any byte offset) to f32.
template <typename T>
void cast_to_f32(const uint8_t* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    T v;
    std::memcpy(&v, src + static_cast<int64_t>(sizeof(T)) * i, sizeof(T));
    dst[i] = static_cast<float>(v);
  }
}

// f64 and the integer types widen (or narrow, for f64) to f32 element by element.
bool plain_to_f32(uint32_t type, const uint8_t* src, float* dst, int64_t n) {
  switch (static_cast<GgmlType>(type)) {
    case GgmlType::F64: cast_to_f32<double>(src, dst, n); return true;
    case GgmlType::I8: cast_to_f32<int8_t>(src, dst, n); return true;
    case GgmlType::I16: cast_to_f32<int16_t>(src, dst, n); return true;
    case GgmlType::I32: cast_to_f32<int32_t>(src, dst, n); return true;
    default: return false;
  }
}

bool is_plain(uint32_t type) {
  const auto t = static_cast<GgmlType>(type);
  return t == GgmlType::F64 || t == GgmlType::I8 || t == GgmlType::I16 || t == GgmlType::I32;
}

// q4_K -> q4_1 without re-rounding the quants: sub-block s of a 256-block is d*sc_s*q - dmin*m_s,
// i.e. a q4_1 block with scale d*sc_s and offset -dmin*m_s. False when a scale does not fit f16.
bool q4k_to_q4_1(const uint8_t* b, BlockQ4_1* out) {
  const float d = h(b), dmin = h(b + 2);
  const uint8_t* sc = b + 4;
  const uint8_t* q = b + 16;
  for (int j = 0; j < 4; ++j) {
    for (int half = 0; half < 2; ++half) {
      int s, m;
      scale_min_k4(2 * j + half, sc, &s, &m);
      const float scale = d * static_cast<float>(s), offset = -dmin * static_cast<float>(m);
      if (!(std::fabs(scale) <= 65504.f) || !(std::fabs(offset) <= 65504.f)) return false;
      BlockQ4_1& o = out[2 * j + half];
      o.d = f32_to_f16(scale);
      o.m = f32_to_f16(offset);
      // q4_K keeps a sub-block's 32 quants in one nibble half of 32 bytes; q4_1 keeps quant i in
      // the low nibble of byte i and quant i + 16 in the high nibble of byte i.
      for (int l = 0; l < 16; ++l) {
        const int lo = half ? q[l] >> 4 : q[l] & 0xF;
        const int hi = half ? q[l + 16] >> 4 : q[l + 16] & 0xF;
        o.qs[l] = static_cast<uint8_t>(lo | (hi << 4));
      }
    }
    q += 32;
  }
  return true;
}

}  // namespace

bool can_dequantize_ggml(uint32_t type) { return codec(type) != nullptr || is_plain(type); }

void dequantize_ggml_row(uint32_t type, const void* src, float* dst, int64_t n) {
  const auto* s = static_cast<const uint8_t*>(src);
  if (plain_to_f32(type, s, dst, n)) return;
  const Codec* c = codec(type);
  if (!c) return;
  for (int64_t i = 0; i < n / c->elems; ++i) c->fn(s + i * c->bytes, dst + i * c->elems);
}

std::optional<DType> ggml_direct_dtype(uint32_t type) {
  switch (static_cast<GgmlType>(type)) {
    case GgmlType::F32: return DType::f32;
    case GgmlType::F16: return DType::f16;
    case GgmlType::BF16: return DType::bf16;
    case GgmlType::Q8_0: return DType::q8_0;
    case GgmlType::Q4_0: return DType::q4_0;
    case GgmlType::Q4_1: return DType::q4_1;
    default: return std::nullopt;
  }
}

std::optional<DType> ggml_import_dtype(uint32_t type) {
  if (auto d = ggml_direct_dtype(type)) return d;
  if (type == static_cast<uint32_t>(GgmlType::Q4_K)) return DType::q4_1;
  if (is_plain(type)) return DType::f32;
  if (codec(type)) return DType::q8_0;
  return std::nullopt;
}

Result<ConvertedTensor> convert_ggml_tensor(uint32_t type, const void* src, int64_t rows, int64_t cols,
                                            std::optional<DType> target) {
  const Codec* c = codec(type);
  if (!target) target = ggml_import_dtype(type);
  if (!target || !can_dequantize_ggml(type))
    return err(ErrorCode::kUnsupported, "GGUF tensor type ", ggml_type_name(type), " has no conversion");
  DType to = *target;
  // A tensor with a zero dimension converts to nothing; no row buffer is sized from the other one.
  if (rows < 0 || cols < 0 || (rows > 0 && cols > INT64_MAX / rows))
    return err(ErrorCode::kInvalidProgram, "GGUF tensor of ", rows, " rows of ", cols, " elements has no valid size");
  if (rows == 0 || cols == 0) return ConvertedTensor{to, std::make_shared<const uint8_t>(0)};
  if (to == DType::f32) {  // can_dequantize_ggml: a codec or a plain type
    auto buf = std::make_shared<std::vector<float>>(static_cast<size_t>(rows * cols));
    dequantize_ggml_row(type, src, buf->data(), rows * cols);
    return ConvertedTensor{to, std::shared_ptr<const void>(buf, buf->data())};
  }
  if (!c || cols % c->elems != 0 || (to != DType::q8_0 && to != DType::q4_1) || cols % kQuantBlock != 0)
    return err(ErrorCode::kUnsupported, "cannot convert GGUF ", ggml_type_name(type), " rows of ", cols, " elements to ",
               dtype_name(to));
  const int64_t src_row = cols / c->elems * c->bytes;
  const int64_t dst_row = dtype_bytes(to, cols);
  auto buf = std::make_shared<std::vector<uint8_t>>(static_cast<size_t>(rows * dst_row));
  const auto* s = static_cast<const uint8_t*>(src);
  if (type == static_cast<uint32_t>(GgmlType::Q4_K) && to == DType::q4_1) {
    bool exact = true;
    for (int64_t r = 0; r < rows && exact; ++r)
      for (int64_t b = 0; b < cols / 256 && exact; ++b)
        exact = q4k_to_q4_1(s + r * src_row + b * 144, reinterpret_cast<BlockQ4_1*>(buf->data() + r * dst_row) + b * 8);
    if (exact) return ConvertedTensor{to, std::shared_ptr<const void>(buf, buf->data())};
    to = DType::q8_0;  // a scale beyond f16's range: fall through to the general path
    buf->assign(static_cast<size_t>(rows * dtype_bytes(to, cols)), 0);
  }
  const int64_t out_row = dtype_bytes(to, cols);
  std::vector<float> tmp(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    dequantize_ggml_row(type, s + r * src_row, tmp.data(), cols);
    quantize_row(to, tmp.data(), buf->data() + r * out_row, cols);
  }
  return ConvertedTensor{to, std::shared_ptr<const void>(buf, buf->data())};
}

}  // namespace vrun::gguf
