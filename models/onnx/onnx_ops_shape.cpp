// The shape ONNX operators onto vrun's ops: transposes, reshapes, squeezes, concatenation and
// splits, gathers and slices, padding and resizing.
#include <algorithm>
#include <cmath>

#include "models/onnx/onnx_importer.h"
#include "models/onnx/onnx_ops.h"

namespace vrun::onnx::detail {

Status Importer::map_transpose(const Node& n, Val x) {
  const int rank = shape(x).rank;
  std::vector<int64_t> perm = attr_ints(n, "perm", {});
  if (perm.empty())
    for (int i = rank - 1; i >= 0; --i) perm.push_back(i);
  return set_output(n, mb_.op(OpKind::permute, {x}, {{"perm", perm}}, n.name));
}

Status Importer::map_reshape(const Node& n, Val x) {
  VRUN_ASSIGN_OR_RETURN(const Tensor* s, known_in(n, 1, "shape"));
  std::vector<int64_t> dims = ints_of(*s);
  if (attr_i(n, "allowzero", 0))
    for (int64_t d : dims)
      if (d == 0) return err(ErrorCode::kUnsupported, "Reshape with allowzero = 1 and a 0 in the shape");
  return set_output(n, mb_.op(OpKind::reshape, {x}, {{"shape", dims}}, n.name));
}

Status Importer::map_flatten(const Node& n, Val x) {
  const int rank = shape(x).rank;
  const int ax = norm_axis(attr_i(n, "axis", 1), rank + 1);
  if (ax < 0) return err(ErrorCode::kInvalidProgram, "axis out of range");
  const Shape xs = shape(x);
  const auto sym = mb_.symbolic_dims(x);
  int64_t a = 1, b = 1;
  bool sym_a = false, sym_b = false;
  for (int d = 0; d < rank; ++d) {
    (d < ax ? a : b) *= xs[d];
    (d < ax ? sym_a : sym_b) = (d < ax ? sym_a : sym_b) || sym[static_cast<size_t>(d)];
  }
  if (sym_a && sym_b)
    return err(ErrorCode::kUnsupported, "Flatten merges symbolic dims on both sides; fix them with --dim");
  if (sym_a && !(ax == 1)) return err(ErrorCode::kUnsupported, "Flatten of several symbolic leading dims");
  return set_output(n, mb_.op(OpKind::reshape, {x},
                              {{"shape", std::vector<int64_t>{sym_a ? 0 : a, sym_a ? b : -1}}}, n.name));
}

Status Importer::map_squeeze(const Node& n, Val x) {
  const int rank = shape(x).rank;
  VRUN_ASSIGN_OR_RETURN(const std::vector<int64_t> axes, axes_of(n));
  const Shape xs = shape(x);
  const auto sym = mb_.symbolic_dims(x);
  std::vector<int> drop;
  if (axes.empty()) {
    for (int d = 0; d < rank; ++d)
      if (xs[d] == 1 && !sym[static_cast<size_t>(d)]) drop.push_back(d);
  } else {
    for (int64_t a : axes) {
      const int d = norm_axis(a, rank);
      if (d < 0) return err(ErrorCode::kInvalidProgram, "axis ", a, " out of range for rank ", rank);
      drop.push_back(d);
    }
  }
  std::sort(drop.rbegin(), drop.rend());
  Val y = x;
  for (int d : drop) y = mb_.op(OpKind::select, {y}, {{"axis", d}, {"index", 0}});
  return set_output(n, y);
}

Status Importer::map_unsqueeze(const Node& n, Val x) {
  const int rank = shape(x).rank;
  VRUN_ASSIGN_OR_RETURN(const std::vector<int64_t> axes, axes_of(n));
  const int r = rank + static_cast<int>(axes.size());
  std::vector<bool> is_new(static_cast<size_t>(r), false);
  for (int64_t a : axes) {
    const int d = norm_axis(a, r);
    if (d < 0) return err(ErrorCode::kInvalidProgram, "axis ", a, " out of range for rank ", r);
    is_new[static_cast<size_t>(d)] = true;
  }
  const Shape xs = shape(x);
  std::vector<int64_t> dims;
  std::vector<int> src;
  int k = 0;
  for (int i = 0; i < r; ++i) {
    if (is_new[static_cast<size_t>(i)]) {
      dims.push_back(1);
      src.push_back(-1);
    } else {
      dims.push_back(xs[k]);
      src.push_back(k++);
    }
  }
  VRUN_ASSIGN_OR_RETURN(Val y, reshape_keep(x, dims, src));
  return set_output(n, y);
}

Status Importer::map_concat(const Node& n, Val) {
  std::vector<Val> ins;
  DType like = DType::f32;
  for (size_t k = 0; k < n.inputs.size(); ++k)
    if (const Value* v = in(n, k); v && !v->known) like = mb_.dtype(v->v);
  for (size_t k = 0; k < n.inputs.size(); ++k) {
    VRUN_ASSIGN_OR_RETURN(Val v, val_in(n, k, like));
    ins.push_back(v);
  }
  return set_output(n, mb_.op(OpKind::concat, ins, {{"axis", attr_i(n, "axis", 0)}}, n.name));
}

Status Importer::map_split(const Node& n, Val x) {
  const int rank = shape(x).rank;
  const int ax = norm_axis(attr_i(n, "axis", 0), rank);
  if (ax < 0) return err(ErrorCode::kInvalidProgram, "axis out of range");
  std::vector<int64_t> sizes = attr_ints(n, "split", {});
  if (in(n, 1)) {
    VRUN_ASSIGN_OR_RETURN(const Tensor* t, known_in(n, 1, "split"));
    sizes = ints_of(*t);
  }
  const int64_t dim = shape(x)[ax];
  if (mb_.symbolic_dims(x)[static_cast<size_t>(ax)])
    return err(ErrorCode::kUnsupported, "Split along a symbolic dim");
  if (sizes.empty()) {
    const int64_t parts = attr_i(n, "num_outputs", static_cast<int64_t>(n.outputs.size()));
    if (parts < 1) return err(ErrorCode::kInvalidProgram, "Split into ", parts, " parts");
    const int64_t each = (dim + parts - 1) / parts;
    for (int64_t p = 0, left = dim; p < parts; ++p, left -= each)
      sizes.push_back(std::min(each, std::max<int64_t>(left, 0)));
  }
  if (sizes.size() != n.outputs.size())
    return err(ErrorCode::kInvalidProgram, "Split gives ", sizes.size(), " sizes for ", n.outputs.size(),
               " outputs");
  auto parts = mb_.op_n(OpKind::split, {x}, {{"axis", ax}, {"sizes", sizes}}, n.name);
  for (size_t k = 0; k < parts.size() && k < n.outputs.size(); ++k) set(n.outputs[k], parts[k]);
  return Status::ok();
}

Status Importer::map_gather(const Node& n, Val x) {
  const int rank = shape(x).rank;
  // Known indices into a method value: one index is a select, consecutive ones a slice.
  VRUN_ASSIGN_OR_RETURN(const Tensor* idx, known_in(n, 1, "indices"));
  const int ax = norm_axis(attr_i(n, "axis", 0), rank);
  if (ax < 0) return err(ErrorCode::kInvalidProgram, "axis out of range");
  if (mb_.symbolic_dims(x)[static_cast<size_t>(ax)])
    return err(ErrorCode::kUnsupported, "Gather along a symbolic dim");
  const int64_t dim = shape(x)[ax];
  std::vector<int64_t> ids = ints_of(*idx);
  for (int64_t& i : ids) {
    if (i < 0) i += dim;
    if (i < 0 || i >= dim) return err(ErrorCode::kInvalidProgram, "index out of range for dim ", dim);
  }
  if (idx->dims.empty())
    return set_output(n, mb_.op(OpKind::select, {x}, {{"axis", ax}, {"index", ids[0]}}, n.name));
  bool consecutive = idx->dims.size() == 1 && !ids.empty();
  for (size_t i = 1; i < ids.size(); ++i) consecutive = consecutive && ids[i] == ids[i - 1] + 1;
  if (!consecutive)
    return err(ErrorCode::kUnsupported, "Gather of non-consecutive indices from a method value");
  return set_output(
      n, mb_.op(OpKind::slice, {x},
                {{"axis", ax}, {"start", ids[0]}, {"end", ids.back() + 1}, {"step", int64_t{1}}}, n.name));
}

Status Importer::map_slice(const Node& n, Val x) {
  const int rank = shape(x).rank;
  VRUN_ASSIGN_OR_RETURN(const Tensor* st, known_in(n, 1, "starts"));
  VRUN_ASSIGN_OR_RETURN(const Tensor* en, known_in(n, 2, "ends"));
  const auto starts = ints_of(*st), ends = ints_of(*en);
  std::vector<int64_t> axes, steps;
  if (in(n, 3)) {
    VRUN_ASSIGN_OR_RETURN(const Tensor* t, known_in(n, 3, "axes"));
    axes = ints_of(*t);
  } else {
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  }
  if (in(n, 4)) {
    VRUN_ASSIGN_OR_RETURN(const Tensor* t, known_in(n, 4, "steps"));
    steps = ints_of(*t);
  } else {
    steps.assign(starts.size(), 1);
  }
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    return err(ErrorCode::kInvalidProgram, "starts, ends, axes and steps differ in length");
  const Shape xs = shape(x);
  const auto sym = mb_.symbolic_dims(x);
  Val y = x;
  for (size_t k = 0; k < axes.size(); ++k) {
    const int d = norm_axis(axes[k], rank);
    if (d < 0) return err(ErrorCode::kInvalidProgram, "axis ", axes[k], " out of range");
    if (steps[k] < 1)
      return err(ErrorCode::kUnsupported, "Slice with step ", steps[k], " (only positive steps)");
    int64_t s = starts[k], e = ends[k];
    if ((s < 0 || (e < 0 && e != INT64_MIN)) && sym[static_cast<size_t>(d)])
      return err(ErrorCode::kUnsupported, "Slice from the end of a symbolic dim; fix it with --dim");
    const int64_t dim = xs[d];
    if (s < 0) s = std::max<int64_t>(0, s + dim);
    if (e < 0) e = std::max<int64_t>(0, e + dim);
    if (!sym[static_cast<size_t>(d)]) {
      s = std::min(s, dim);
      e = std::min(e, dim);
      if (s == 0 && e == dim && steps[k] == 1) continue;
    }
    if (e < s) e = s;
    y = mb_.op(OpKind::slice, {y}, {{"axis", d}, {"start", s}, {"end", e}, {"step", steps[k]}});
  }
  return set_output(n, y);
}

Status Importer::map_pad(const Node& n, Val x) {
  const int rank = shape(x).rank;
  std::vector<int64_t> pads;
  double value = 0;
  if (opset_ < 11) {
    pads = attr_ints(n, "pads", {});
    value = attr_f(n, "value", 0.0);
  } else {
    VRUN_ASSIGN_OR_RETURN(const Tensor* p, known_in(n, 1, "pads"));
    pads = ints_of(*p);
    if (in(n, 2)) {
      VRUN_ASSIGN_OR_RETURN(const Tensor* v, known_in(n, 2, "constant_value"));
      if (!v->values.empty()) value = v->values[0];
    }
  }
  std::vector<int64_t> axes;
  if (in(n, 3)) {
    VRUN_ASSIGN_OR_RETURN(const Tensor* a, known_in(n, 3, "axes"));
    axes = ints_of(*a);
  } else {
    for (int d = 0; d < rank; ++d) axes.push_back(d);
  }
  if (pads.size() != 2 * axes.size())
    return err(ErrorCode::kInvalidProgram, "pads holds ", pads.size(), " values for ", axes.size(), " axes");
  std::vector<int64_t> before(static_cast<size_t>(rank), 0), after(static_cast<size_t>(rank), 0);
  for (size_t k = 0; k < axes.size(); ++k) {
    const int d = norm_axis(axes[k], rank);
    if (d < 0) return err(ErrorCode::kInvalidProgram, "axis ", axes[k], " out of range");
    before[static_cast<size_t>(d)] = pads[k];
    after[static_cast<size_t>(d)] = pads[k + axes.size()];
  }
  int first = rank;
  for (int d = 0; d < rank; ++d)
    if (before[static_cast<size_t>(d)] || after[static_cast<size_t>(d)]) {
      first = d;
      break;
    }
  if (first == rank) return set_output(n, x);
  std::vector<int64_t> vp;
  for (int d = rank - 1; d >= first; --d) {
    vp.push_back(before[static_cast<size_t>(d)]);
    vp.push_back(after[static_cast<size_t>(d)]);
  }
  std::string mode = attr_s(n, "mode", "constant");
  if (mode == "edge") mode = "replicate";
  if (mode != "constant" && mode != "reflect" && mode != "replicate")
    return err(ErrorCode::kUnsupported, "Pad mode '", mode, "'");
  return set_output(n, mb_.op(OpKind::pad, {x}, {{"pads", vp}, {"mode", mode}, {"value", value}}, n.name));
}

Status Importer::map_resize(const Node& n, Val x) {
  const std::string& op = n.op_type;
  const int rank = shape(x).rank;
  const std::string mode = attr_s(n, "mode", "nearest");
  if (mode != "nearest") return err(ErrorCode::kUnsupported, op, " mode '", mode, "' (nearest only)");
  if (attr_s(n, "coordinate_transformation_mode", "") == "tf_crop_and_resize")
    return err(ErrorCode::kUnsupported, "coordinate_transformation_mode tf_crop_and_resize");
  const Shape xs = shape(x);
  std::vector<double> scales;
  const size_t scales_at = op == "Upsample" ? 1 : (opset_ < 11 ? 1 : 2);
  if (const Value* s = in(n, scales_at); s && s->known && s->t.numel() > 0) {
    scales = s->t.values;
  } else if (const Value* z = in(n, 3); z && op == "Resize" && z->known) {
    for (int d = 0; d < rank && static_cast<size_t>(d) < z->t.values.size(); ++d)
      scales.push_back(z->t.values[static_cast<size_t>(d)] / static_cast<double>(xs[d]));
  } else if (const Attribute* a = n.attr("scales")) {
    scales = a->floats;
  }
  if (scales.size() != static_cast<size_t>(rank) || rank != 4)
    return err(ErrorCode::kUnsupported, op, " needs known scales (or sizes) over a rank-4 input");
  int64_t f[4];
  for (int d = 0; d < 4; ++d) {
    f[d] = static_cast<int64_t>(std::lround(scales[static_cast<size_t>(d)]));
    if (f[d] < 1 || std::fabs(scales[static_cast<size_t>(d)] - static_cast<double>(f[d])) > 1e-6 ||
        (d < 2 && f[d] != 1))
      return err(ErrorCode::kUnsupported, op, " by scales [", scales[0], ", ", scales[1], ", ", scales[2],
                 ", ", scales[3], "]: only whole-number factors on H and W");
  }
  // Each pixel repeated f times: a broadcast view, made dense, seen as the larger image.
  VRUN_ASSIGN_OR_RETURN(Val v6, reshape_keep(x, {xs[0], xs[1], xs[2], 1, xs[3], 1}, {0, 1, 2, -1, 3, -1}));
  Val e = mb_.op(OpKind::expand, {v6}, {{"shape", std::vector<int64_t>{-1, -1, -1, f[2], -1, f[3]}}});
  Val c = mb_.op(OpKind::copy, {e}, {}, n.name);
  VRUN_ASSIGN_OR_RETURN(Val y, reshape_keep(c, {xs[0], xs[1], xs[2] * f[2], xs[3] * f[3]}, {0, 1, -1, -1}));
  return set_output(n, y);
}

}  // namespace vrun::onnx::detail
