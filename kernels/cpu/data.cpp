// Data movement kernels: copy, concat, pad, embedding, slice_update, glu. Copies move elements
// by size (1/2/4/8 bytes), so every plain dtype shares one strided copy.
#include <cstring>
#include <string>
#include <vector>

#include "kernels/cpu/attention_rows.h"
#include "runtime/base/convert.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/kernel_util.h"
#include "kernels/cpu/strided_iter.h"
#include "runtime/base/vec_math.h"

namespace vrun::cpu {

namespace {

// Transposing copies (the source is unit-stride along the second-to-last merged dim, not the
// last) go through 32x32 tiles so that both sides stay in cache.
template <typename E>
bool copy_tiled(const TensorView& dst, const TensorView& src, const StridedIter<2>& it, ThreadPool* pool) {
  const int r = it.rank();
  if (r < 2 || it.inner_stride(1) == 1 || it.stride(1, r - 2) != 1) return false;
  const int64_t rows = it.dim(r - 2), cols = it.dim(r - 1);
  const int64_t d_row = it.stride(0, r - 2), d_col = it.stride(0, r - 1), s_col = it.stride(1, r - 1);
  Shape outer;
  Strides od, os;
  outer.rank = r - 2;
  for (int d = 0; d < r - 2; ++d) {
    outer[d] = it.dim(d);
    od[d] = it.stride(0, d);
    os[d] = it.stride(1, d);
  }
  const StridedIter<2> oit(outer, {od, os});
  constexpr int64_t kTile = 32;
  const int64_t row_tiles = (rows + kTile - 1) / kTile;
  E* dp = static_cast<E*>(dst.data);
  const E* sp = static_cast<const E*>(src.data);
  parallel_range(pool, oit.numel() * row_tiles, kTile * cols, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      int64_t base[2] = {0, 0};
      oit.for_range(t / row_tiles, t / row_tiles + 1, [&](const int64_t* off, int64_t) {
        base[0] = off[0];
        base[1] = off[1];
      });
      const int64_t r0 = t % row_tiles * kTile, r1 = std::min(rows, r0 + kTile);
      for (int64_t c0 = 0; c0 < cols; c0 += kTile) {
        const int64_t c1 = std::min(cols, c0 + kTile);
        for (int64_t i = r0; i < r1; ++i) {
          E* drow = dp + base[0] + i * d_row;
          const E* srow = sp + base[1] + i;
          for (int64_t j = c0; j < c1; ++j) drow[j * d_col] = srow[j * s_col];
        }
      }
    }
  });
  return true;
}

template <typename E>
void copy_elems(const TensorView& dst, const TensorView& src, ThreadPool* pool) {
  const StridedIter<2> it(src.shape, {dst.strides, src.strides});
  if (copy_tiled<E>(dst, src, it, pool)) return;
  const int64_t ds = it.inner_stride(0), ss = it.inner_stride(1);
  it.parallel(pool, [&](const int64_t* off, int64_t n) {
    E* d = static_cast<E*>(dst.data) + off[0];
    const E* s = static_cast<const E*>(src.data) + off[1];
    if (ds == 1 && ss == 1) {
      std::memcpy(d, s, static_cast<size_t>(n) * sizeof(E));
    } else {
      for (int64_t i = 0; i < n; ++i) d[i * ds] = s[i * ss];
    }
  });
}

// dst[...] = src[...] for two views of the same shape and plain dtype (dst may be strided).
bool copy_view(const TensorView& dst, const TensorView& src, ThreadPool* pool) {
  switch (dtype_elem_size(src.dtype)) {
    case 1: copy_elems<uint8_t>(dst, src, pool); return true;
    case 2: copy_elems<uint16_t>(dst, src, pool); return true;
    case 4: copy_elems<uint32_t>(dst, src, pool); return true;
    case 8: copy_elems<uint64_t>(dst, src, pool); return true;
    default: return false;
  }
}

TensorView offset_view(const TensorView& v, int axis, int64_t start, const Shape& shape) {
  TensorView r = v;
  r.data = static_cast<uint8_t*>(v.data) + start * v.strides[axis] * dtype_elem_size(v.dtype);
  r.shape = shape;
  return r;
}

Status copy_kernel(const KernelCall& c) {
  VRUN_RETURN_IF_ERROR(check_arity(c, 1, 1, 1));
  const TensorView& x = c.in[0];
  const TensorView& y = c.out[0];
  if (y.dtype != x.dtype || y.shape != x.shape) return unsupported_dtypes(c);
  if (is_quantized(x.dtype)) {
    if (!x.is_contiguous())
      return err(ErrorCode::kUnsupported, "copy: a block-quantised input must be dense (x ", x.shape.str(), ")");
    std::memcpy(y.data, x.data, static_cast<size_t>(x.dense_bytes()));
    return Status::ok();
  }
  return copy_view(y, x, c.pool) ? Status::ok() : unsupported_dtypes(c);
}

Status concat_kernel(const KernelCall& c) {
  VRUN_RETURN_IF_ERROR(check_arity(c, 1, -1, 1));
  const TensorView& y = c.out[0];
  const int ax = normalize_axis(c.attr().i("axis"), y.rank());
  if (ax < 0) return err(ErrorCode::kInvalidArgument, "concat: axis ", c.attr().i("axis"), " out of range for ", y.shape.str());
  int64_t pos = 0;
  for (int k = 0; k < c.n_in; ++k) {
    const TensorView& x = c.in[k];
    if (!x.present() || x.dtype != y.dtype || x.rank() != y.rank() || pos + x.shape[ax] > y.shape[ax])
      return err(ErrorCode::kInvalidArgument, "concat: input ", k, " does not fit output ", y.shape.str());
    if (!copy_view(offset_view(y, ax, pos, x.shape), x, c.pool)) return unsupported_dtypes(c);
    pos += x.shape[ax];
  }
  return Status::ok();
}

// ---- pad

enum class PadMode { kConstant, kReflect, kReplicate };

// Source index along one dim for output index j, or -1 for the constant value.
int64_t pad_source(int64_t j, int64_t before, int64_t n, PadMode mode) {
  int64_t i = j - before;
  if (i >= 0 && i < n) return i;
  switch (mode) {
    case PadMode::kConstant: return -1;
    case PadMode::kReplicate: return i < 0 ? 0 : n - 1;
    case PadMode::kReflect: return i < 0 ? -i : 2 * (n - 1) - i;
  }
  return -1;
}

template <typename E>
void pad_rows(const KernelCall& c, const std::vector<std::vector<int64_t>>& maps, E value) {
  const TensorView& x = c.in[0];
  const TensorView& y = c.out[0];
  const int rank = y.rank();
  const int64_t inner = y.shape[rank - 1];
  const int64_t rows = inner ? y.numel() / inner : 0;
  const std::vector<int64_t>& last = maps[rank - 1];
  const int64_t xs = x.strides[rank - 1];
  parallel_range(c.pool, rows, std::max<int64_t>(inner, 1), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      E* out = static_cast<E*>(y.data) + r * inner;
      int64_t rest = r, off = 0;
      bool inside = true;
      for (int d = rank - 2; d >= 0; --d) {
        const int64_t j = rest % y.shape[d];
        rest /= y.shape[d];
        const int64_t src = maps[d][j];
        if (src < 0) inside = false;
        else off += src * x.strides[d];
      }
      if (!inside) {
        for (int64_t j = 0; j < inner; ++j) out[j] = value;
        continue;
      }
      const E* in = static_cast<const E*>(x.data) + off;
      for (int64_t j = 0; j < inner; ++j) {
        const int64_t src = last[j];
        out[j] = src < 0 ? value : in[src * xs];
      }
    }
  });
}

template <typename T>
uint64_t pad_value_bits(double v, DType dtype) {
  T t;
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) t = static_cast<T>(v);
  else if constexpr (std::is_same_v<T, f16_t> || std::is_same_v<T, bf16_t>) t = from_float<T>(static_cast<float>(v));
  else if (dtype == DType::bool_) t = static_cast<T>(v != 0);
  else if (!(v == v)) t = 0;
  else t = v <= static_cast<double>(std::numeric_limits<T>::min()) ? std::numeric_limits<T>::min()
         : v >= static_cast<double>(std::numeric_limits<T>::max()) ? std::numeric_limits<T>::max()
                                                                   : static_cast<T>(v);
  uint64_t bits = 0;
  std::memcpy(&bits, &t, sizeof(T));
  return bits;
}

Status pad_kernel(const KernelCall& c) {
  VRUN_RETURN_IF_ERROR(check_arity(c, 1, 1, 1));
  const TensorView& x = c.in[0];
  const TensorView& y = c.out[0];
  const Attrs& a = c.attr();
  const std::string& m = a.s("mode");
  const PadMode mode = m == "reflect" ? PadMode::kReflect : m == "replicate" ? PadMode::kReplicate : PadMode::kConstant;
  const std::vector<int64_t>& pads = a.ints("pads");
  if (y.dtype != x.dtype || y.rank() != x.rank() || pads.size() / 2 > static_cast<size_t>(x.rank()))
    return err(ErrorCode::kInvalidArgument, "pad: output ", y.shape.str(), " does not match x ", x.shape.str());
  if (y.numel() == 0) return Status::ok();
  if (x.rank() == 0) return copy_view(y, x, c.pool) ? Status::ok() : unsupported_dtypes(c);
  std::vector<std::vector<int64_t>> maps(static_cast<size_t>(x.rank()));
  for (int d = 0; d < x.rank(); ++d) {
    const size_t p = static_cast<size_t>(x.rank() - 1 - d);
    const int64_t before = 2 * p < pads.size() ? pads[2 * p] : 0;
    const int64_t after = 2 * p < pads.size() ? pads[2 * p + 1] : 0;
    if (y.shape[d] != x.shape[d] + before + after)
      return err(ErrorCode::kInvalidArgument, "pad: output ", y.shape.str(), " does not match x ", x.shape.str());
    maps[d].resize(static_cast<size_t>(y.shape[d]));
    for (int64_t j = 0; j < y.shape[d]; ++j) {
      const int64_t s = pad_source(j, before, x.shape[d], mode);
      if (s >= x.shape[d] || (s < 0 && mode != PadMode::kConstant))
        return err(ErrorCode::kInvalidArgument, "pad: ", m, " padding [", before, ", ", after, "] too large for dim ", d,
                   " of x ", x.shape.str());
      maps[d][j] = s;
    }
  }
  uint64_t bits = 0;
  if (!dispatch_plain(x.dtype, [&](auto tag) { bits = pad_value_bits<typename decltype(tag)::type>(a.f("value"), x.dtype); }))
    return unsupported_dtypes(c);
  switch (dtype_elem_size(x.dtype)) {
    case 1: pad_rows<uint8_t>(c, maps, static_cast<uint8_t>(bits)); break;
    case 2: pad_rows<uint16_t>(c, maps, static_cast<uint16_t>(bits)); break;
    case 4: pad_rows<uint32_t>(c, maps, static_cast<uint32_t>(bits)); break;
    case 8: pad_rows<uint64_t>(c, maps, bits); break;
    default: return unsupported_dtypes(c);
  }
  return Status::ok();
}

// ---- embedding

template <typename I>
Status gather_ids(const TensorView& ids, int64_t vocab, std::vector<int64_t>* out) {
  out->reserve(static_cast<size_t>(ids.numel()));
  const StridedIter<1> it(ids.shape, {ids.strides});
  const int64_t s = it.inner_stride(0);
  Status st;
  it.for_range(0, it.numel(), [&](const int64_t* off, int64_t n) {
    const I* p = static_cast<const I*>(ids.data) + off[0];
    for (int64_t i = 0; i < n; ++i) {
      const int64_t id = static_cast<int64_t>(p[i * s]);
      if ((id < 0 || id >= vocab) && st.is_ok())
        st = err(ErrorCode::kInvalidArgument, "embedding: id ", id, " at position ", out->size(), " of ids ",
                 ids.shape.str(), " is out of range for a table of ", vocab, " rows");
      out->push_back(id);
    }
  });
  return st;
}

Status embedding_kernel(const KernelCall& c) {
  VRUN_RETURN_IF_ERROR(check_arity(c, 2, 2, 1));
  const TensorView& table = c.in[0];
  const TensorView& ids = c.in[1];
  const TensorView& y = c.out[0];
  if (table.rank() != 2 || y.numel() != ids.numel() * table.shape[1])
    return err(ErrorCode::kInvalidArgument, "embedding: table ", table.shape.str(), ", ids ", ids.shape.str(),
               " and output ", y.shape.str(), " disagree");
  const int64_t vocab = table.shape[0], d = table.shape[1];
  std::vector<int64_t> rows;
  if (ids.dtype == DType::i32) VRUN_RETURN_IF_ERROR(gather_ids<int32_t>(ids, vocab, &rows));
  else if (ids.dtype == DType::i64) VRUN_RETURN_IF_ERROR(gather_ids<int64_t>(ids, vocab, &rows));
  else return unsupported_dtypes(c);
  const int64_t n = static_cast<int64_t>(rows.size());
  const int ysz = dtype_elem_size(y.dtype);
  if (is_quantized(table.dtype)) {
    if (!table.is_contiguous() || d % kQuantBlock != 0 || !is_float(y.dtype)) return unsupported_dtypes(c);
    const int64_t row_bytes = dtype_bytes(table.dtype, d);
    bool ok = true;
    parallel_range(c.pool, n, 2 * d, [&](int64_t i0, int64_t i1) {
      std::vector<float> buf(static_cast<size_t>(d));
      for (int64_t i = i0; i < i1; ++i) {
        dequantize_row(table.dtype, static_cast<const uint8_t*>(table.data) + rows[i] * row_bytes, buf.data(), d);
        if (!store_row_f32(buf.data(), y.dtype, static_cast<uint8_t*>(y.data) + i * d * ysz, d)) ok = false;
      }
    });
    return ok ? Status::ok() : unsupported_dtypes(c);
  }
  // Plain table: each output row is a (possibly converted) copy of a table row view.
  TensorView src = table;
  src.shape = Shape{d};
  src.strides[0] = table.strides[1];
  TensorView dst = TensorView::dense(y.data, y.dtype, Shape{d});
  if (y.dtype == table.dtype) {
    parallel_range(c.pool, n, d, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        TensorView s = src, t = dst;
        s.data = static_cast<uint8_t*>(table.data) + rows[i] * table.strides[0] * ysz;
        t.data = static_cast<uint8_t*>(y.data) + i * d * ysz;
        copy_view(t, s, nullptr);
      }
    });
    return Status::ok();
  }
  if (!is_float(table.dtype) || !is_float(y.dtype)) return unsupported_dtypes(c);
  const int tsz = dtype_elem_size(table.dtype);
  bool ok = true;
  parallel_range(c.pool, n, 2 * d, [&](int64_t i0, int64_t i1) {
    std::vector<float> buf(static_cast<size_t>(d));
    for (int64_t i = i0; i < i1; ++i) {
      const uint8_t* row = static_cast<const uint8_t*>(table.data) + rows[i] * table.strides[0] * tsz;
      if (!load_row_f32(table.dtype, row, table.strides[1], buf.data(), d) ||
          !store_row_f32(buf.data(), y.dtype, static_cast<uint8_t*>(y.data) + i * d * ysz, d))
        ok = false;
    }
  });
  return ok ? Status::ok() : unsupported_dtypes(c);
}

// ---- slice_update

Status slice_update_kernel(const KernelCall& c) {
  VRUN_RETURN_IF_ERROR(check_arity(c, 2, 4, 1));
  const TensorView& state = c.in[0];
  TensorView src = c.in[1];
  const TensorView& y = c.out[0];
  const int ax = normalize_axis(c.attr().i("axis"), state.rank());
  const int64_t noff = c.input_numel(2);
  const bool scatter = noff > 1;  // one offset per row of src along axis
  const int64_t start = c.attr().i("start") + (scatter ? 0 : c.scalar_input(2, 0));
  if (ax < 0 || src.rank() != state.rank())
    return err(ErrorCode::kInvalidArgument, "slice_update: axis ", c.attr().i("axis"), " invalid for state ",
               state.shape.str(), " and src ", src.shape.str());
  for (int d = 0; d < state.rank(); ++d)
    if (d != ax && src.shape[d] != state.shape[d])
      return err(ErrorCode::kInvalidArgument, "slice_update: src ", src.shape.str(), " does not match state ",
                 state.shape.str(), " in dim ", d);
  if (scatter && (noff != src.shape[ax] || c.has_input(3)))
    return err(ErrorCode::kInvalidArgument, "slice_update: ", noff, " offsets for ", src.shape[ax], " rows of src ",
               src.shape.str(), c.has_input(3) ? " (rows written apart do not rotate as written)" : " (one, or one per row)");
  for (int64_t r = 0; r < (scatter ? noff : 0); ++r) {
    const int64_t at = start + c.vector_input(2, r);
    if (at < 0 || at >= state.shape[ax])
      return err(ErrorCode::kInvalidArgument, "slice_update: row ", r, " at ", at, " along axis ", ax,
                 " is outside the state ", state.shape.str());
  }
  if (!scatter && (start < 0 || start > state.shape[ax] - src.shape[ax]))
    return err(ErrorCode::kInvalidArgument, "slice_update: writing ", src.shape[ax], " rows at start ", start,
               " along axis ", ax, " does not fit the state's ", state.shape[ax], " (state ", state.shape.str(), ")");
  if (y.dtype != state.dtype || y.shape != state.shape || is_quantized(state.dtype) || is_quantized(src.dtype))
    return unsupported_dtypes(c);
  // Rotated as written: a rotated f32 copy of src takes its place.
  std::vector<float> rotated;
  if (c.has_input(3)) {
    if (!is_float(src.dtype)) return unsupported_dtypes(c);
    RopeSpec spec;
    spec.seq_axis = ax;
    spec.head_axis = 1;
    spec.pos = start;
    spec.interleaved = c.attr().s("rope_mode") == "interleaved";
    spec.heads = c.attr().i("rope_heads");
    rotated.resize(static_cast<size_t>(src.numel()));
    const TensorView r = TensorView::dense(rotated.data(), DType::f32, src.shape);
    VRUN_RETURN_IF_ERROR(rope_rows(src, c.in[3], r, spec, c.pool));
    src = r;
  }
  // The executor passes y aliasing the state; a separate y first receives the whole state.
  TensorView target = y;
  if (y.data == state.data) target = state;
  else if (!copy_view(y, state, c.pool)) return unsupported_dtypes(c);
  auto write = [&](const TensorView& to, const TensorView& from) {
    return from.dtype == state.dtype ? copy_view(to, from, c.pool)
                                     : is_float(from.dtype) && is_float(state.dtype) && convert_view(to, from, c.pool);
  };
  if (!scatter) return write(offset_view(target, ax, start, src.shape), src) ? Status::ok() : unsupported_dtypes(c);
  Shape row = src.shape;
  row[ax] = 1;
  for (int64_t r = 0; r < noff; ++r)
    if (!write(offset_view(target, ax, start + c.vector_input(2, r), row), offset_view(src, ax, r, row)))
      return unsupported_dtypes(c);
  return Status::ok();
}

// ---- glu

template <typename T, bool kSilu>
void glu_rows(const KernelCall& c, int ax) {
  const TensorView& x = c.in[0];
  const TensorView& y = c.out[0];
  const int64_t h = y.shape[ax];
  const TensorView a = offset_view(x, ax, 0, y.shape);
  const TensorView b = offset_view(x, ax, h, y.shape);
  const StridedIter<3> it(y.shape, {y.strides, a.strides, b.strides});
  const int64_t as = it.inner_stride(1), bs = it.inner_stride(2);
  it.parallel(
      c.pool,
      [&](const int64_t* off, int64_t n) {
        T* yp = static_cast<T*>(y.data) + off[0];
        const T* ap = static_cast<const T*>(a.data) + off[1];
        const T* bp = static_cast<const T*>(b.data) + off[2];
        auto gate = [](float g) { return kSilu ? g * sigmoid_fast(g) : sigmoid_fast(g); };
        if (as == 1 && bs == 1) {
          for (int64_t i = 0; i < n; ++i) yp[i] = from_float<T>(to_float(ap[i]) * gate(to_float(bp[i])));
        } else {
          for (int64_t i = 0; i < n; ++i) yp[i] = from_float<T>(to_float(ap[i * as]) * gate(to_float(bp[i * bs])));
        }
      },
      4);
}

Status glu_kernel(const KernelCall& c) {
  VRUN_RETURN_IF_ERROR(check_arity(c, 1, 1, 1));
  const TensorView& x = c.in[0];
  const TensorView& y = c.out[0];
  const int ax = normalize_axis(c.attr().i("axis"), x.rank());
  if (ax < 0 || y.rank() != x.rank() || y.shape[ax] * 2 != x.shape[ax])
    return err(ErrorCode::kInvalidArgument, "glu: output ", y.shape.str(), " does not match x ", x.shape.str());
  if (y.dtype != x.dtype) return unsupported_dtypes(c);
  const std::string& act = c.attr().s("act");
  if (act != "sigmoid" && act != "silu")
    return err(ErrorCode::kInvalidArgument, "glu: act '", act, "' (sigmoid or silu)");
  const bool silu = act == "silu";
  return for_activation(c, x.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (silu) glu_rows<T, true>(c, ax);
    else glu_rows<T, false>(c, ax);
  });
}

}  // namespace

}  // namespace vrun::cpu

namespace vrun {

void register_cpu_data(CpuKernelTable& t) {
  t.set(OpKind::copy, cpu::copy_kernel);
  t.set(OpKind::concat, cpu::concat_kernel);
  t.set(OpKind::pad, cpu::pad_kernel);
  t.set(OpKind::embedding, cpu::embedding_kernel);
  t.set(OpKind::slice_update, cpu::slice_update_kernel);
  t.set(OpKind::glu, cpu::glu_kernel);
}

}  // namespace vrun
