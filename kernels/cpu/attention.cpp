// sdpa (flash-style online softmax over key blocks, so memory does not grow with Lk^2) and
// rope (angles as torch/HF compute them in float32: float(pos) * inv_freq, then cos/sin).
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "kernels/cpu/attention_rows.h"
#include "kernels/cpu/cpu_kernel.h"
#include "runtime/base/cpu_features.h"
#include "kernels/cpu/gemm.h"
#include "runtime/base/vec_math.h"

namespace vrun {

namespace {

constexpr int64_t kKeyBlock = 128;
// Prefill-shaped attention (at least this many query rows) runs as blocked matrix products:
// blocks of kGemmQueries query rows against kGemmKeys keys at a time, scores by sgemm, an online
// softmax over the key blocks, and P @ V by sgemm into the block's f32 accumulator.
constexpr int64_t kGemmMinQueries = 16;
constexpr int64_t kGemmQueries = 64;
constexpr int64_t kGemmKeys = 512;

const bool kHaveAvx2 = cpu_has_avx2();

// f32 rows ld elements apart (see rows_block).
struct Rows {
  const float* data;
  int64_t ld;
};

float mask_value(const TensorView& m, int64_t off) {
  switch (m.dtype) {
    case DType::bool_:
      return static_cast<const uint8_t*>(m.data)[off] ? 0.f : -std::numeric_limits<float>::infinity();
    case DType::f16: return f16_to_f32(static_cast<const uint16_t*>(m.data)[off]);
    case DType::bf16: return bf16_to_f32(static_cast<const uint16_t*>(m.data)[off]);
    default: return static_cast<const float*>(m.data)[off];
  }
}

// s[j] = exp(s[j] - mx) over a row of scores, returning their sum (mx finite).
VRUN_ALWAYS_INLINE float exp_row_body(float* s, int64_t n, float mx) {
  float sum = 0;
  for (int64_t j = 0; j < n; ++j) {
    const float e = cpu::exp_fast(s[j] - mx);
    s[j] = e;
    sum += e;
  }
  return sum;
}
VRUN_AVX2 float exp_row_avx2(float* s, int64_t n, float mx) { return exp_row_body(s, n, mx); }
float exp_row_plain(float* s, int64_t n, float mx) { return exp_row_body(s, n, mx); }

// s[j] = s[j] * scale + add[j] (add may be null), returning the row's max.
VRUN_ALWAYS_INLINE float scale_add_max_body(float* s, int64_t n, float scale, const float* add) {
  float mx = -std::numeric_limits<float>::infinity();
  for (int64_t j = 0; j < n; ++j) {
    const float v = s[j] * scale + (add ? add[j] : 0.f);
    s[j] = v;
    mx = std::max(mx, v);
  }
  return mx;
}
VRUN_AVX2 float scale_add_max_avx2(float* s, int64_t n, float scale, const float* add) {
  return scale_add_max_body(s, n, scale, add);
}
float scale_add_max_plain(float* s, int64_t n, float scale, const float* add) {
  return scale_add_max_body(s, n, scale, add);
}

// Rows [r0, r0 + rows) of a [L, D] slice of a rank-4 view at (b, h), columns [0, d), as f32 rows:
// in place when the view already holds them so, else converted into scratch.
Rows rows_block(const TensorView& t, int64_t b, int64_t h, int64_t r0, int64_t rows, std::vector<float>* scratch) {
  const int64_t d = t.shape[3];
  const int64_t base = b * t.strides[0] + h * t.strides[1] + r0 * t.strides[2];
  if (t.dtype == DType::f32 && (t.strides[3] == 1 || d == 1))
    return {static_cast<const float*>(elem_ptr(t, base)), t.strides[2]};
  scratch->resize(static_cast<size_t>(rows * d));
  for (int64_t i = 0; i < rows; ++i)
    load_row_f32(elem_ptr(t, base + i * t.strides[2]), t.dtype, t.strides[3], d, scratch->data() + i * d);
  return {scratch->data(), d};
}

struct SdpaShape {
  int64_t nb, hq, lq, d, dv, lk, group;
  bool causal;
  float scale;
  Strides ms;  // the mask's strides broadcast to [nb, hq, lq, Lk] (with a window: to the band's width)
  bool windowed = false;
  int64_t left = 0, right = 0;  // the window: query at position p sees keys p - left .. p + right
};

// sdpa as blocked matrix products (see kGemmMinQueries). Each task is one (batch, head, block of
// query rows); the running max and sum per row rescale the accumulator when a later key block
// raises the max, so memory stays at one block of scores whatever Lk is. With a window, a block
// reads only the keys its rows' bands cover, and each row takes part only over its own band.
void sdpa_blocked(const KernelCall& call, const SdpaShape& sh) {
  const TensorView& q = call.input(0);
  const TensorView& k = call.input(1);
  const TensorView& v = call.input(2);
  const TensorView* mask = call.has_input(3) ? &call.input(3) : nullptr;
  const bool mask_rows_f32 = mask && mask->dtype == DType::f32 && sh.ms[3] == 1;
  TensorView& y = call.out[0];
  const int64_t ye = dtype_elem_size(y.dtype);
  const int64_t nqb = (sh.lq + kGemmQueries - 1) / kGemmQueries;
  auto exp_row = kHaveAvx2 ? exp_row_avx2 : exp_row_plain;
  auto scale_add_max = kHaveAvx2 ? scale_add_max_avx2 : scale_add_max_plain;
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  call.pool->parallel_for(sh.nb * sh.hq * nqb, 1, [&](int64_t t0, int64_t t1) {
    std::vector<float> qs, ks, vs, madd;
    std::vector<float> sc(static_cast<size_t>(kGemmQueries * kGemmKeys));
    std::vector<float> acc(static_cast<size_t>(kGemmQueries * sh.dv)), mx(kGemmQueries), sum(kGemmQueries);
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t qb = t % nqb, h = (t / nqb) % sh.hq, b = t / (nqb * sh.hq), hk = h / sh.group;
      const int64_t i0 = qb * kGemmQueries, rows = std::min(kGemmQueries, sh.lq - i0);
      const Rows qr = rows_block(q, b, h, i0, rows, &qs);
      // Row i's keys [key_lo(i), key_hi(i)): all, up to its causal limit, within its window.
      const int64_t shift = sh.lk - sh.lq;  // query i sits at position shift + i
      auto key_lo = [&](int64_t i) { return sh.windowed ? std::max<int64_t>(0, shift + i - sh.left) : 0; };
      auto key_hi = [&](int64_t i) {
        int64_t hi = sh.causal ? shift + i + 1 : sh.lk;
        if (sh.windowed) hi = std::min(hi, shift + i + sh.right + 1);
        return std::min(hi, sh.lk);
      };
      // The keys any row of the block sees (both bounds grow with the row).
      const int64_t kbeg_block = key_lo(i0), kend_block = key_hi(i0 + rows - 1);
      std::fill(acc.begin(), acc.begin() + rows * sh.dv, 0.f);
      std::fill(mx.begin(), mx.end(), kNegInf);
      std::fill(sum.begin(), sum.end(), 0.f);
      for (int64_t j0 = kbeg_block; j0 < kend_block; j0 += kGemmKeys) {
        const int64_t kn = std::min(kGemmKeys, kend_block - j0);
        const Rows kr = rows_block(k, b, hk, j0, kn, &ks);
        sgemm(rows, kn, sh.d, qr.data, qr.ld, kr.data, kr.ld, true, sc.data(), kGemmKeys, false, nullptr);
        for (int64_t r = 0; r < rows; ++r) {
          const int64_t i = i0 + r;
          float* srow = sc.data() + r * kGemmKeys;
          // Only this row's keys [lo, hi) of the block take part.
          const int64_t lo = std::clamp<int64_t>(key_lo(i) - j0, 0, kn), hi = std::clamp<int64_t>(key_hi(i) - j0, lo, kn);
          const int64_t live = hi - lo;
          const float* add = nullptr;
          if (mask && live > 0) {
            // The mask's column of key j: j itself, or its place in the row's band.
            const int64_t col = sh.windowed ? j0 + lo - (shift + i - sh.left) : j0 + lo;
            const int64_t moff = b * sh.ms[0] + h * sh.ms[1] + i * sh.ms[2] + col * sh.ms[3];
            if (mask_rows_f32) {
              add = static_cast<const float*>(mask->data) + moff;
            } else {
              madd.resize(static_cast<size_t>(kn));
              for (int64_t j = 0; j < live; ++j) madd[j] = mask_value(*mask, moff + j * sh.ms[3]);
              add = madd.data();
            }
          }
          float* slive = srow + lo;
          const float bmax = live > 0 ? scale_add_max(slive, live, sh.scale, add) : kNegInf;
          std::fill(srow, slive, 0.f);
          std::fill(srow + hi, srow + kn, 0.f);
          if (bmax == kNegInf) {  // nothing live in this block: the row's p are all 0
            std::fill(slive, slive + live, 0.f);
            continue;
          }
          float* arow = acc.data() + r * sh.dv;
          if (bmax > mx[r]) {
            const float rescale = std::exp(mx[r] - bmax);  // 0 on the row's first live block
            sum[r] *= rescale;
            scale_f32(rescale, arow, sh.dv);
            mx[r] = bmax;
          }
          sum[r] += exp_row(slive, live, mx[r]);
        }
        const Rows vr = rows_block(v, b, hk, j0, kn, &vs);
        sgemm(rows, sh.dv, kn, sc.data(), kGemmKeys, vr.data, vr.ld, false, acc.data(), sh.dv, true, nullptr);
      }
      for (int64_t r = 0; r < rows; ++r) {
        float* arow = acc.data() + r * sh.dv;
        scale_f32(sum[r] > 0 ? 1.f / sum[r] : 0.f, arow, sh.dv);  // fully masked rows give zeros
        store_row_f32(arow, static_cast<uint8_t*>(y.data) + (((b * sh.hq + h) * sh.lq + i0 + r) * sh.dv) * ye, y.dtype,
                      sh.dv);
      }
    }
  });
}

// Fully masked rows (every score -inf) output zeros: there is no distribution to average over,
// and zeros keep NaN out of later layers (torch would give NaN).
Status sdpa_kernel(const KernelCall& call) {
  const TensorView& q = call.input(0);
  const TensorView& k = call.input(1);
  const TensorView& v = call.input(2);
  const bool has_mask = call.has_input(3);
  TensorView& y = call.out[0];
  const int64_t nb = q.shape[0], hq = q.shape[1], lq = q.shape[2], d = q.shape[3];
  const int64_t hkv = k.shape[1], dv = v.shape[3];
  // The keys that count: all of k, or those of a cache's capacity up to the last query's position
  // (one position for all batch entries, or one each).
  const int64_t npos = call.input_numel(4);
  if (npos > 1 && npos != nb)
    return err(ErrorCode::kInvalidArgument, "sdpa: ", npos, " positions for a batch of ", nb, " (one, or one per entry)");
  auto keys_of = [&](int64_t b) {
    return npos == 0 ? k.shape[2] : call.vector_input(4, npos > 1 ? b : 0) + lq;
  };
  const int64_t lk = keys_of(0);
  const bool causal = call.attr().i("causal") != 0;
  for (int64_t b = 0; b < (npos > 1 ? nb : std::min<int64_t>(npos, 1)); ++b)
    if (keys_of(b) < lq || keys_of(b) > k.shape[2])
      return err(ErrorCode::kInvalidArgument, "sdpa: queries at position ", keys_of(b) - lq, " .. ", keys_of(b) - 1,
                 " outside the keys ", k.shape.str());
  const int64_t group = hq / hkv;
  const float scale = call.attr().f("scale") != 0 ? static_cast<float>(call.attr().f("scale"))
                                                  : 1.f / std::sqrt(static_cast<float>(d));
  const std::vector<int64_t>& window = call.attr().ints("window");
  const bool windowed = window.size() == 2;
  Strides ms{};
  if (has_mask) {
    const TensorView& m = call.input(3);
    ms = broadcast_strides(m.shape, m.strides, Shape{nb, hq, lq, windowed ? window[0] + window[1] + 1 : k.shape[2]});
  }
  // Windowed (local) attention always takes the blocked path, which reads only the bands' keys;
  // a position per batch entry takes the row paths below.
  if ((lq >= kGemmMinQueries && npos <= 1) || windowed) {
    SdpaShape sh{nb, hq, lq, d, dv, lk, group, causal, scale, ms};
    if (windowed) {
      sh.windowed = true;
      sh.left = window[0];
      sh.right = window[1];
    }
    sdpa_blocked(call, sh);
    return Status::ok();
  }
  const int64_t ye = dtype_elem_size(y.dtype);
  // Query blocks of up to 32 rows: enough (B, H) x blocks to feed every thread.
  const int64_t qblock = std::max<int64_t>(1, std::min<int64_t>(32, lq));
  const int64_t nqb = (lq + qblock - 1) / qblock;
  const int64_t tasks = nb * hq * nqb;
  if (k.dtype == v.dtype && k.strides[3] == 1 && v.strides[3] == 1 && attend_row_supported(k.dtype, d, dv)) {
    // K/V read in place, one query row at a time (see attention_rows.h).
    call.pool->parallel_for(tasks, 1, [&](int64_t t0, int64_t t1) {
      std::vector<float> qrow(static_cast<size_t>(d)), out(static_cast<size_t>(dv)), s(static_cast<size_t>(k.shape[2]));
      std::vector<float> madd(has_mask ? static_cast<size_t>(k.shape[2]) : 0);
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t qb = t % nqb, h = (t / nqb) % hq, b = t / (nqb * hq), hk = h / group;
        const int64_t lk = keys_of(b);
        const void* kp = elem_ptr(k, b * k.strides[0] + hk * k.strides[1]);
        const void* vp = elem_ptr(v, b * v.strides[0] + hk * v.strides[1]);
        for (int64_t i = qb * qblock; i < std::min(lq, (qb + 1) * qblock); ++i) {
          load_row_f32(elem_ptr(q, b * q.strides[0] + h * q.strides[1] + i * q.strides[2]), q.dtype, q.strides[3], d,
                       qrow.data());
          const int64_t kend = std::max<int64_t>(0, causal ? lk - lq + i + 1 : lk);
          if (has_mask) {
            const int64_t moff = b * ms[0] + h * ms[1] + i * ms[2];
            for (int64_t j = 0; j < kend; ++j) madd[j] = mask_value(call.input(3), moff + j * ms[3]);
          }
          attend_row(k.dtype, qrow.data(), kp, k.strides[2], vp, v.strides[2], d, dv, kend, scale,
                     has_mask ? madd.data() : nullptr, s.data(), out.data());
          store_row_f32(out.data(), static_cast<uint8_t*>(y.data) + (((b * hq + h) * lq + i) * dv) * ye, y.dtype, dv);
        }
      }
    });
    return Status::ok();
  }
  // Other layouts and dtypes: query blocks share one packing of k/v.
  call.pool->parallel_for(tasks, 1, [&](int64_t t0, int64_t t1) {
    std::vector<float> ks, vs, qrow(static_cast<size_t>(d)), acc(static_cast<size_t>(dv)), s(kKeyBlock);
    int64_t packed_b = -1, packed_h = -1;
    Rows kr{}, vr{};
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t qb = t % nqb, h = (t / nqb) % hq, b = t / (nqb * hq);
      const int64_t hk = h / group, lk = keys_of(b);
      if (b != packed_b || hk != packed_h) {
        kr = rows_block(k, b, hk, 0, k.shape[2], &ks);
        vr = rows_block(v, b, hk, 0, v.shape[2], &vs);
        packed_b = b;
        packed_h = hk;
      }
      for (int64_t i = qb * qblock; i < std::min(lq, (qb + 1) * qblock); ++i) {
        load_row_f32(elem_ptr(q, b * q.strides[0] + h * q.strides[1] + i * q.strides[2]), q.dtype, q.strides[3], d,
                     qrow.data());
        const int64_t kend = causal ? lk - lq + i + 1 : lk;
        const int64_t moff = b * ms[0] + h * ms[1] + i * ms[2];
        float mx = -std::numeric_limits<float>::infinity(), sum = 0;
        std::fill(acc.begin(), acc.end(), 0.f);
        for (int64_t j0 = 0; j0 < kend; j0 += kKeyBlock) {
          const int64_t j1 = std::min(kend, j0 + kKeyBlock);
          float bmax = -std::numeric_limits<float>::infinity();
          for (int64_t j = j0; j < j1; ++j) {
            float sc = scale * dot_f32_any(qrow.data(), kr.data + j * kr.ld, DType::f32, d);
            if (has_mask) sc += mask_value(call.input(3), moff + j * ms[3]);
            s[j - j0] = sc;
            bmax = std::max(bmax, sc);
          }
          if (bmax == -std::numeric_limits<float>::infinity()) continue;
          if (bmax > mx) {
            const float r = std::exp(mx - bmax);  // 0 on the first live block
            sum *= r;
            scale_f32(r, acc.data(), dv);
            mx = bmax;
          }
          for (int64_t j = j0; j < j1; ++j) {
            const float p = std::exp(s[j - j0] - mx);
            if (p == 0) continue;
            sum += p;
            axpy_f32(p, vr.data + j * vr.ld, acc.data(), dv);
          }
        }
        const float inv = sum > 0 ? 1.f / sum : 0.f;
        scale_f32(inv, acc.data(), dv);
        store_row_f32(acc.data(), static_cast<uint8_t*>(y.data) + (((b * hq + h) * lq + i) * dv) * ye, y.dtype, dv);
      }
    }
  });
  return Status::ok();
}

Status rope_kernel(const KernelCall& call) {
  const TensorView& x = call.input(0);
  const Attrs& at = call.attr();
  const int r = x.rank();
  RopeSpec spec;
  spec.seq_axis = normalize_axis(at.i("seq_axis"), r);
  const int64_t noff = call.input_numel(2);
  if (noff > 1) {  // one position per row along the sequence axis
    if (noff != x.shape[spec.seq_axis])
      return err(ErrorCode::kInvalidArgument, "rope: ", noff, " offsets for ", x.shape[spec.seq_axis], " rows of x ",
                 x.shape.str(), " (one, or one per row)");
    spec.pos = at.i("pos");
    spec.row_pos = static_cast<const int32_t*>(call.in[2].data);
    spec.row_pos_stride = call.in[2].strides[0];
  } else {
    spec.pos = at.i("pos") + call.scalar_input(2, 0);
  }
  spec.interleaved = at.s("mode") == "interleaved";
  spec.rotary_dim = at.i("rotary_dim");
  spec.heads = at.i("heads");
  spec.head_axis = r - 2;
  return rope_rows(x, call.input(1), call.out[0], spec, call.pool);
}

}  // namespace

Status rope_rows(const TensorView& x, const TensorView& f, const TensorView& y, const RopeSpec& spec, ThreadPool* pool) {
  const int r = x.rank();
  const int seq = spec.seq_axis;
  const int64_t d = x.shape[r - 1];
  const int64_t rd = spec.rotary_dim == 0 ? d : spec.rotary_dim;
  const int64_t half = rd / 2;
  const int64_t slen = x.shape[seq];
  std::vector<float> freq(static_cast<size_t>(half));
  load_row_f32(f.data, DType::f32, f.strides[0], half, freq.data());
  std::vector<float> cs(static_cast<size_t>(slen * half)), sn(cs.size());
  for (int64_t s = 0; s < slen; ++s)
    for (int64_t i = 0; i < half; ++i) {
      const float ang = static_cast<float>(spec.pos + (spec.row_pos ? spec.row_pos[s * spec.row_pos_stride] : s)) * freq[i];
      cs[s * half + i] = std::cos(ang);
      sn[s * half + i] = std::sin(ang);
    }
  const auto offs = row_offsets(x);
  // Row r's index along seq_axis and head_axis: rows are row-major over all dims but the last.
  int64_t inner = 1, head_inner = 1;
  for (int a = seq + 1; a < r - 1; ++a) inner *= x.shape[a];
  for (int a = spec.head_axis + 1; a < r - 1; ++a) head_inner *= x.shape[a];
  const int64_t rows = static_cast<int64_t>(offs.size());
  const int64_t ye = dtype_elem_size(y.dtype);
  const int64_t nh = x.shape[spec.head_axis];
  pool->parallel_for(rows, 64, [&](int64_t r0, int64_t r1) {
    std::vector<float> in(static_cast<size_t>(d)), out(static_cast<size_t>(d));
    for (int64_t row = r0; row < r1; ++row) {
      const int64_t s = (row / inner) % slen;
      load_row_f32(elem_ptr(x, offs[row]), x.dtype, x.strides[r - 1], d, in.data());
      if (spec.heads > 0 && (row / head_inner) % nh >= spec.heads) {  // a head past `heads` passes through
        store_row_f32(in.data(), static_cast<uint8_t*>(y.data) + row * d * ye, y.dtype, d);
        continue;
      }
      const float* c = cs.data() + s * half;
      const float* sv = sn.data() + s * half;
      for (int64_t i = 0; i < half; ++i) {
        const int64_t i0 = spec.interleaved ? 2 * i : i, i1 = spec.interleaved ? 2 * i + 1 : i + half;
        out[i0] = in[i0] * c[i] - in[i1] * sv[i];
        out[i1] = in[i1] * c[i] + in[i0] * sv[i];
      }
      for (int64_t i = rd; i < d; ++i) out[i] = in[i];
      store_row_f32(out.data(), static_cast<uint8_t*>(y.data) + row * d * ye, y.dtype, d);
    }
  });
  return Status::ok();
}

void register_cpu_attention(CpuKernelTable& t) {
  t.set(OpKind::sdpa, sdpa_kernel);
  t.set(OpKind::rope, rope_kernel);
}

}  // namespace vrun
