// Shared declarations of every vrun compute kernel. All kernels use one pipeline layout: thirteen
// storage buffers in set 0 (each declared under several element types, since a binding's dtype
// is a specialisation constant) and 128 bytes of push constants. Bindings 0-4 are declared here;
// the few kernels that take 5 to 12 declare them with BINDING(5) etc.
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_8bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require
#extension GL_EXT_shader_explicit_arithmetic_types_int8 : require

// DType codes of runtime/dtypes.def.
#define DT_F32 0
#define DT_F16 1
#define DT_BF16 2
#define DT_I8 4
#define DT_U8 5
#define DT_I32 6
#define DT_I64 7
#define DT_BOOL 8
#define DT_Q8_0 9
#define DT_Q4_0 10
#define DT_Q4_1 11
#define DT_NONE 255

#define BINDING(B)                                                                        \
  layout(set = 0, binding = B, std430) buffer BufF32_##B { float b##B##_f32[]; };         \
  layout(set = 0, binding = B, std430) buffer BufF16_##B { float16_t b##B##_f16[]; };     \
  layout(set = 0, binding = B, std430) buffer BufU16_##B { uint16_t b##B##_u16[]; };      \
  layout(set = 0, binding = B, std430) buffer BufI8_##B { int8_t b##B##_i8[]; };          \
  layout(set = 0, binding = B, std430) buffer BufU8_##B { uint8_t b##B##_u8[]; };         \
  layout(set = 0, binding = B, std430) buffer BufI32_##B { int b##B##_i32[]; };           \
  layout(set = 0, binding = B, std430) buffer BufU32_##B { uint b##B##_u32[]; };          \
  float load##B(uint dt, uint i) {                                                        \
    if (dt == DT_F32) return b##B##_f32[i];                                               \
    if (dt == DT_F16) return float(b##B##_f16[i]);                                        \
    if (dt == DT_BF16) return uintBitsToFloat(uint(b##B##_u16[i]) << 16);                 \
    if (dt == DT_I8) return float(int(b##B##_i8[i]));                                     \
    if (dt == DT_U8 || dt == DT_BOOL) return float(uint(b##B##_u8[i]));                   \
    if (dt == DT_I32) return float(b##B##_i32[i]);                                        \
    if (dt == DT_I64) return float(b##B##_i32[2 * i]);                                    \
    return 0.0;                                                                           \
  }                                                                                       \
  /* Element k of a block-quantised row whose blocks start at byte `base` (even). */      \
  float loadq##B(uint dt, uint base, uint blk, uint j) {                                  \
    if (dt == DT_Q8_0) {                                                                  \
      uint b = base + blk * 34u;                                                          \
      return unpackHalf2x16(uint(b##B##_u16[b >> 1])).x * float(int(b##B##_i8[b + 2u + j])); \
    }                                                                                     \
    if (dt == DT_Q4_0) {                                                                  \
      uint b = base + blk * 18u;                                                          \
      uint q = uint(b##B##_u8[b + 2u + (j & 15u)]);                                       \
      q = j < 16u ? (q & 15u) : (q >> 4);                                                 \
      return unpackHalf2x16(uint(b##B##_u16[b >> 1])).x * (float(q) - 8.0);               \
    }                                                                                     \
    uint b = base + blk * 20u;                                                            \
    uint q = uint(b##B##_u8[b + 4u + (j & 15u)]);                                         \
    q = j < 16u ? (q & 15u) : (q >> 4);                                                   \
    return unpackHalf2x16(uint(b##B##_u16[b >> 1])).x * float(q) +                        \
           unpackHalf2x16(uint(b##B##_u16[(b >> 1) + 1u])).x;                             \
  }                                                                                       \
  void store##B(uint dt, uint i, float v) {                                               \
    if (dt == DT_F32) b##B##_f32[i] = v;                                                  \
    else if (dt == DT_F16) b##B##_f16[i] = float16_t(v);                                  \
    else if (dt == DT_BF16) {                                                             \
      uint u = floatBitsToUint(v);                                                        \
      /* round to nearest even; nan stays nan */                                          \
      u = isnan(v) ? (u | 0x400000u) : u + 0x7fffu + ((u >> 16) & 1u);                    \
      b##B##_u16[i] = uint16_t(u >> 16);                                                  \
    } else if (dt == DT_U8 || dt == DT_BOOL) b##B##_u8[i] = uint8_t(uint(v));             \
    else if (dt == DT_I8) b##B##_i8[i] = int8_t(int(v));                                  \
    else if (dt == DT_I32) b##B##_i32[i] = int(v);                                        \
    else if (dt == DT_I64) { b##B##_i32[2 * i] = int(v); b##B##_i32[2 * i + 1] = int(v) < 0 ? -1 : 0; } \
  }

BINDING(0)
BINDING(1)
BINDING(2)
BINDING(3)
BINDING(4)

bool is_quant(uint dt) { return dt == DT_Q8_0 || dt == DT_Q4_0 || dt == DT_Q4_1; }

// Abramowitz-Stegun 7.1.26 has 1.5e-7 absolute error, below f32 rounding of the result.
float erf_approx(float x) {
  float s = sign(x), a = abs(x);
  float t = 1.0 / (1.0 + 0.3275911 * a);
  float y = 1.0 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t * exp(-a * a);
  return s * y;
}
// silu(v) = v * sigmoid(v), as the matvec kernels gate x for linear's glu = silu.
// cos and sin of an angle of any size (rotary embeddings at long positions take thousands of
// radians): reduced to [-pi, pi] first by 2 pi in three parts (6.28125 has 8 significant bits;
// each fma rounds once), as a GPU's cos and sin are accurate only there (an H200's were off by
// up to 1e-4 at 250 and 4,500 radians, the CPU's std::cos not).
vec2 cos_sin(float a) {
  const float k = roundEven(a * 0.15915494309189535);
  float r = fma(-k, 6.28125, a);
  r = fma(-k, 1.9353071693331003e-3, r);
  r = fma(-k, 1.0253131677018246e-11, r);
  return vec2(cos(r), sin(r));
}

float silu(float v) { return v / (1.0 + exp(-v)); }
vec4 silu4(vec4 v) { return v / (1.0 + exp(-v)); }
// gelu with the exact (erf) form, torch's default.
float gelu_erf(float x) { return 0.5 * x * (1.0 + erf_approx(x * 0.70710678118654752)); }
// linear's act: 1 gelu (erf), 2 silu, else none.
float apply_act(uint act, float v) { return act == 1u ? gelu_erf(v) : act == 2u ? silu(v) : v; }

// Flat index over a grid that may be 2-D (more than 65535 workgroups in x).
uint flat_group() { return gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x; }
// A macro: gl_WorkGroupSize is only known after the kernel's local_size declaration, which
// follows this include.
#define flat_invocation() (flat_group() * gl_WorkGroupSize.x + gl_LocalInvocationID.x)

// Attention over a length from the device (sdpa.comp, sdpa_combine.comp and sdpa_decode.comp agree
// on both):
// the length: the first query's position pos plus Lq, clamped to [min(Lq, Lk), Lk] (a causal
// row's keys never underflow);
uint dyn_len(int pos, uint Lq, uint Lk) { return clamp(uint(max(pos, 0)) + Lq, min(Lq, Lk), Lk); }
// keys per split-K chunk of that length L: about L / want, at least 64, and enough that nsplit
// chunks cover L (the host sized nsplit chunks of kmax keys for the capacity; kmax % 16 == 0).
uint dyn_kchunk(uint L, uint want, uint nsplit, uint kmax) {
  uint a = max(64u, ((L + want - 1u) / want + 15u) / 16u * 16u);
  uint b = ((L + nsplit - 1u) / nsplit + 15u) / 16u * 16u;
  return min(kmax, max(a, b));
}
