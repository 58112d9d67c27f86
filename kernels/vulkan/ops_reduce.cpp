// reduce_sum, reduce_mean, reduce_max and reduce_min over any set of axes (the reduce family's
// softmax, log_softmax and argmax are ops_norm.cpp's). x is read through its strides: its dims
// split into kept dims (the output rows, in order) and reduced dims (in any order: a reduction
// does not care which way it walks), each group collapsed where strides allow, so a permuted or
// sliced x needs no copy unless a group still has more than 4 dims.
#include <algorithm>
#include <limits>

#include "kernels/vulkan/context.h"
#include "kernels/vulkan/ops.h"

namespace vrun::vulkan {

namespace {

constexpr int kGroupDims = 4;     // dims per group reduce.comp takes
constexpr int64_t kWorkgroup = 256;
// CPU implementations of Vulkan end a shader loop after 65535 iterations; each thread's loop
// walks count / T elements, T at most the workgroup.
constexpr int64_t kLoopLimit = 65535;

bool is_reduction(OpKind op) {
  return op == OpKind::reduce_sum || op == OpKind::reduce_mean || op == OpKind::reduce_max ||
         op == OpKind::reduce_min;
}

// reduced[d] for every dim of a rank-r x; false when an axis is out of range.
bool reduced_dims(const Attrs& attrs, int r, bool* reduced) {
  const auto& axes = attrs.ints("axes");
  for (int d = 0; d < r; ++d) reduced[d] = axes.empty();
  for (int64_t a : axes) {
    const int ax = normalize_axis(a, r);
    if (ax < 0) return false;
    reduced[ax] = true;
  }
  return true;
}

struct Dim {
  int64_t size, stride;
};

// x's dims split into kept and reduced groups, each collapsed: neighbours in a group merge when
// the outer one's stride spans the inner one. Reduced dims are first sorted by stride (largest
// first), so a permuted view collapses as its memory does. Size-1 dims drop out.
struct Split {
  std::vector<Dim> kept, red;
  int64_t rows = 1, count = 1;
};

void push_merged(std::vector<Dim>& g, Dim d) {
  if (!g.empty() && g.back().stride == d.stride * d.size) {
    g.back().size *= d.size;
    g.back().stride = d.stride;
    return;
  }
  g.push_back(d);
}

Split split_dims(const DeviceView& x, const bool* reduced) {
  Split s;
  std::vector<Dim> red;
  for (int d = 0; d < x.shape.rank; ++d) {
    const Dim dim{x.shape[d], x.strides[d]};
    if (reduced[d]) {
      s.count *= dim.size;
      if (dim.size != 1) red.push_back(dim);
    } else {
      s.rows *= dim.size;
      if (dim.size != 1) push_merged(s.kept, dim);
    }
  }
  std::stable_sort(red.begin(), red.end(), [](const Dim& a, const Dim& b) { return a.stride > b.stride; });
  for (const Dim& d : red) push_merged(s.red, d);
  return s;
}

// Whether reduce.comp takes the split: at most 4 dims a group, every offset in 31 bits.
bool split_fits(const Split& s) {
  if (s.kept.size() > kGroupDims || s.red.size() > kGroupDims) return false;
  int64_t span = 0;
  for (const auto* g : {&s.kept, &s.red})
    for (const Dim& d : *g) {
      if (d.stride < 0) return false;
      span += (d.size - 1) * d.stride;
    }
  return span < std::numeric_limits<int32_t>::max();
}

int64_t pow2_ceil(int64_t v) {
  int64_t p = 1;
  while (p < v) p <<= 1;
  return p;
}
int64_t pow2_floor(int64_t v) {
  int64_t p = 1;
  while (2 * p <= v) p <<= 1;
  return p;
}

// Threads a row: about 4 elements each, up to a workgroup. When the reduced dims are strided and
// the kept ones dense (a reduction over channels), adjacent threads take adjacent rows (lane-major)
// and a row gets fewer threads while there are rows enough to fill the device, but never so few
// that a thread's loop passes kLoopLimit.
struct Threads {
  int64_t per_row = 1;
  bool lane_major = false;
};

Threads choose_threads(const Split& s) {
  Threads t;
  t.per_row = std::clamp<int64_t>(pow2_ceil((s.count + 3) / 4), 1, kWorkgroup);
  const bool unit_red = !s.red.empty() && s.red.back().stride == 1;
  const bool unit_kept = !s.kept.empty() && s.kept.back().stride == 1;
  if (!unit_red && unit_kept && s.count > 1) {
    t.lane_major = true;
    const int64_t fill = pow2_floor(std::max<int64_t>(1, (kWorkgroup * 1024) / std::max<int64_t>(s.rows, 1)));
    const int64_t floor = pow2_ceil((s.count + kLoopLimit - 1) / kLoopLimit);
    t.per_row = std::clamp<int64_t>(std::min(t.per_row, fill), std::min(floor, kWorkgroup), kWorkgroup);
  }
  return t;
}

Status record_reduction(Recorder& rec, OpKind op, const DeviceView& x_in, const DeviceView& y, const Attrs& attrs) {
  bool reduced[kMaxRank] = {};
  if (!reduced_dims(attrs, x_in.shape.rank, reduced))
    return err(ErrorCode::kInvalidArgument, "vulkan: ", op_name(op), " axes out of range for ", x_in.shape.str());
  DeviceView x = x_in;
  Split s = split_dims(x, reduced);
  if (s.rows == 0) return Status::ok();
  if (!split_fits(s)) {  // a dense copy collapses to at most 4 dims a group for rank <= 8
    VRUN_ASSIGN_OR_RETURN(x, rec.dense_view(x_in));
    s = split_dims(x, reduced);
    if (!split_fits(s))
      return err(ErrorCode::kUnsupported, "vulkan: ", op_name(op), " of ", x.shape.str(), " exceeds the kernel's layout");
  }
  if (s.rows != y.numel())
    return err(ErrorCode::kInvalidArgument, "vulkan: ", op_name(op), " output ", y.shape.str(), " does not match x ",
               x.shape.str());
  if (s.kept.empty()) s.kept.push_back({1, 0});
  if (s.red.empty()) s.red.push_back({1, 0});
  const Threads th = choose_threads(s);
  std::vector<Binding> bindings = {{&y, true}, {&x, false}};
  VRUN_ASSIGN_OR_RETURN(auto offs, rec.binding_offsets(bindings));
  PushWords pw;
  pw.u(static_cast<uint64_t>(s.rows)).u(static_cast<uint64_t>(s.count));
  for (const auto* g : {&s.kept, &s.red}) {
    for (int k = 0; k < kGroupDims; ++k) pw.u(k < static_cast<int>(g->size()) ? (*g)[k].size : 1);
    for (int k = 0; k < kGroupDims; ++k) pw.u(k < static_cast<int>(g->size()) ? (*g)[k].stride : 0);
  }
  pw.u(offs[0]).u(offs[1]);
  const int32_t mode = op == OpKind::reduce_sum    ? 0
                       : op == OpKind::reduce_mean ? 1
                       : op == OpKind::reduce_max  ? 2
                                                   : 3;
  const int64_t rows_per_group = kWorkgroup / th.per_row;
  uint32_t gx, gy;
  rec.grid_1d(static_cast<uint64_t>((s.rows + rows_per_group - 1) / rows_per_group), &gx, &gy);
  return rec.dispatch("reduce",
                      {mode, dt_code(x.dtype), dt_code(y.dtype), static_cast<int32_t>(th.per_row),
                       th.lane_major ? 1 : 0, static_cast<int32_t>(s.kept.size()), static_cast<int32_t>(s.red.size())},
                      bindings, pw.w, pw.bytes(), gx, gy, 1);
}

}  // namespace

bool supports_reduce(const Context& ctx, OpKind op, const std::vector<const TensorDesc*>& inputs,
                     const Attrs& attrs) {
  if (!is_reduction(op)) return supports_norm(ctx, op, inputs, attrs);
  const TensorDesc* x = inputs[0];
  bool reduced[kMaxRank] = {};
  if (!is_act(x->dtype) || !reduced_dims(attrs, x->shape.rank, reduced)) return false;
  int64_t count = 1;
  for (int d = 0; d < x->shape.rank; ++d)
    if (reduced[d]) count *= x->shape[d];
  // Longer rows would cut a thread's loop short there (see kLoopLimit).
  return ctx.info().type != "cpu" || count <= kLoopLimit * kWorkgroup;
}

Status record_reduce(Recorder& rec, OpKind op, const std::vector<DeviceView>& in, const std::vector<DeviceView>& out,
                     const Attrs& attrs) {
  if (!is_reduction(op)) return record_norm(rec, op, in, out, attrs);
  return record_reduction(rec, op, in[0], out[0], attrs);
}

}  // namespace vrun::vulkan
