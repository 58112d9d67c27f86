#include "models/onnx/onnx_import.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <set>

#include "models/onnx/onnx_fold.h"
#include "models/onnx/onnx_importer.h"

namespace vrun::onnx {

namespace detail {

Val Importer::constant(const Tensor& t, DType dtype) {
  Shape s;
  s.rank = static_cast<int>(t.dims.size());
  for (int i = 0; i < s.rank; ++i) s[i] = t.dims[static_cast<size_t>(i)];
  const std::string name = t.name.empty() ? "onnx_const_" + std::to_string(constants_++) : t.name;
  std::vector<uint8_t> bytes(static_cast<size_t>(dtype_bytes(dtype, t.numel())));
  for (size_t i = 0; i < t.values.size(); ++i) {
    const double v = t.values[i];
    switch (dtype) {
      case DType::f32: {
        const float f = static_cast<float>(v);
        std::memcpy(&bytes[i * 4], &f, 4);
        break;
      }
      case DType::i64: {
        const int64_t x = int_of(v);
        std::memcpy(&bytes[i * 8], &x, 8);
        break;
      }
      case DType::i32: {
        const int32_t x = static_cast<int32_t>(std::clamp<int64_t>(int_of(v), INT32_MIN, INT32_MAX));
        std::memcpy(&bytes[i * 4], &x, 4);
        break;
      }
      case DType::bool_:
        bytes[i] = v != 0;
        break;
      default:
        break;
    }
  }
  return mb_.constant(pb_.add_constant_copy(name, dtype, s, bytes.data()));
}

Result<Val> Importer::val_in(const Node& n, size_t k, DType like) {
  const Value* v = in(n, k);
  if (!v) return err(ErrorCode::kInvalidProgram, "input ", k, " is missing");
  if (!v->known) return v->v;
  DType d = like;
  if (like != DType::f32 && like != DType::f16) d = is_int_type(v->t.elem_type) ? like : DType::f32;
  if (d == DType::f16) d = DType::f32;
  return constant(v->t, d);
}

// A reshape to out_dims where out dim i comes from input dim src[i] (-1: a new or merged dim, its
// size in out_dims). Symbolic input dims stay symbolic: 0 where the dim keeps its place, -1 once.
Result<Val> Importer::reshape_keep(Val x, const std::vector<int64_t>& out_dims, const std::vector<int>& src) {
  const std::vector<bool> sym = mb_.symbolic_dims(x);
  std::vector<int64_t> shape;
  bool inferred = false;
  for (size_t i = 0; i < out_dims.size(); ++i) {
    const int s = src[i];
    if (s >= 0 && sym[static_cast<size_t>(s)]) {
      if (s == static_cast<int>(i)) {
        shape.push_back(0);
      } else {
        if (inferred)
          return err(ErrorCode::kUnsupported, "more than one symbolic dim moves; fix dims with --dim");
        inferred = true;
        shape.push_back(-1);
      }
    } else {
      shape.push_back(out_dims[i]);
    }
  }
  return mb_.op(OpKind::reshape, {x}, {{"shape", shape}});
}

Status Importer::add_inputs() {
  std::set<std::string> inits;
  for (const auto& t : model_.graph.initializers) inits.insert(t.name);
  // Symbols first: the builder wants them before any value.
  std::vector<const ValueInfo*> inputs;
  for (const auto& vi : model_.graph.inputs) {
    if (inits.count(vi.name)) continue;
    inputs.push_back(&vi);
    if (!vi.has_shape) return err(ErrorCode::kUnsupported, "input '", vi.name, "' has no shape");
    for (const Dim& d : vi.dims) {
      if (d.value > 0 || d.param.empty() || symbols_.count(d.param)) continue;
      auto it = opts_.dims.find(d.param);
      int64_t lo = 1, hi = opts_.default_max;
      if (it != opts_.dims.end()) std::tie(lo, hi) = it->second;
      if (lo == hi) continue;
      symbols_[d.param] = mb_.symbol(d.param, lo, hi);
    }
  }
  for (const ValueInfo* vi : inputs) {
    auto dt = dtype_of(vi->elem_type);
    if (!dt)
      return err(ErrorCode::kUnsupported, "input '", vi->name, "' has element type ",
                 elem_type_name(vi->elem_type));
    std::vector<SymExpr> dims;
    for (const Dim& d : vi->dims) {
      if (d.value > 0) {
        dims.emplace_back(d.value);
      } else if (!d.param.empty()) {
        auto it = opts_.dims.find(d.param);
        if (it != opts_.dims.end() && it->second.first == it->second.second)
          dims.emplace_back(it->second.first);
        else
          dims.push_back(symbols_.at(d.param));
      } else {
        return err(ErrorCode::kUnsupported, "input '", vi->name,
                   "' has a dim with neither a size nor a name");
      }
    }
    set(vi->name, mb_.input(vi->name, *dt, dims));
  }
  for (const auto& t : model_.graph.initializers) {
    Value v;
    v.known = true;
    v.t = t;
    env_[t.name] = v;
  }
  return Status::ok();
}

static void count_uses(const Graph& g, std::map<std::string, int>* uses) {
  for (const auto& n : g.nodes) {
    for (const auto& i : n.inputs) (*uses)[i]++;
    for (const auto& a : n.attributes)
      if (a.g) {
        count_uses(*a.g, uses);
        for (const auto& o : a.g->outputs) (*uses)[o.name]++;
      }
  }
}

Status Importer::run_graph(const Graph& g) {
  for (const auto& t : g.initializers) {
    Value v;
    v.known = true;
    v.t = t;
    env_[t.name] = v;
  }
  for (const Node& n : g.nodes) {
    Status s = run_node(n);
    // The builder keeps its first error and returns invalid values after it: report it here,
    // at the node that caused it.
    if (s.is_ok() && !pb_.status().is_ok()) {
      s = pb_.status();
      if (!symbols_.empty())
        s = err(s.code(), s.message(), " (symbolic dims range over [1, ", opts_.default_max,
                "] unless bounded; --dim NAME=SIZE fixes one)");
    }
    if (!s.is_ok())
      return err(s.code(), "ONNX node '", n.name, "' (", n.op_type, ", opset ", opset_, "): ", s.message());
  }
  return Status::ok();
}

Status Importer::run_node(const Node& n) {
  if (!n.domain.empty() && n.domain != "ai.onnx")
    return err(ErrorCode::kUnsupported, "operator domain '", n.domain, "' is not supported");
  for (size_t k = 0; k < n.inputs.size(); ++k)
    if (!n.inputs[k].empty() && !env_.count(n.inputs[k]))
      return err(ErrorCode::kInvalidProgram, "input '", n.inputs[k], "' is not defined before it is used");
  // Every ONNX operator has outputs (an optional one may be named ""); the mappings index them.
  if (n.outputs.empty())
    return err(ErrorCode::kInvalidProgram, n.op_type, " node '", n.name, "' has no output");
  if (n.op_type == "If") {
    const Value* c = in(n, 0);
    if (!c || !c->known || c->t.values.empty())
      return err(
          ErrorCode::kUnsupported,
          "If needs a condition known at import; fix the symbolic dims it depends on with --dim NAME=SIZE");
    const Attribute* branch = n.attr(c->t.values[0] != 0 ? "then_branch" : "else_branch");
    if (!branch || !branch->g) return err(ErrorCode::kInvalidProgram, "If lacks its branch subgraph");
    VRUN_RETURN_IF_ERROR(run_graph(*branch->g));
    if (branch->g->outputs.size() != n.outputs.size())
      return err(ErrorCode::kInvalidProgram, "If branch has ", branch->g->outputs.size(),
                 " outputs, the node ", n.outputs.size());
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      auto it = env_.find(branch->g->outputs[k].name);
      if (it == env_.end())
        return err(ErrorCode::kInvalidProgram, "If branch output '", branch->g->outputs[k].name,
                   "' undefined");
      env_[n.outputs[k]] = it->second;
    }
    return Status::ok();
  }
  // Shape of a method value whose dims are all static is known.
  if (n.op_type == "Shape") {
    const Value* x = in(n, 0);
    if (x && !x->known) {
      if (symbolic(x->v))
        return err(ErrorCode::kUnsupported,
                   "Shape of a value with symbolic dims; fix them with --dim NAME=SIZE");
      Tensor probe;
      probe.elem_type = 1;
      probe.dims = shape(x->v).vec();
      std::vector<const Tensor*> ins{&probe};
      VRUN_ASSIGN_OR_RETURN(auto outs, fold_node(n, ins, opset_));
      Value v;
      v.known = true;
      v.t = outs[0];
      env_[n.outputs[0]] = v;
      return Status::ok();
    }
  }
  bool all_known = true;
  std::vector<const Tensor*> ins;
  for (size_t k = 0; k < n.inputs.size(); ++k) {
    const Value* v = in(n, k);
    if (v && !v->known) all_known = false;
    ins.push_back(v ? &v->t : nullptr);
  }
  if (all_known) {
    auto outs = fold_node(n, ins, opset_);
    if (outs.is_ok()) {
      for (size_t k = 0; k < n.outputs.size() && k < outs->size(); ++k) {
        Value v;
        v.known = true;
        v.t = (*outs)[k];
        v.t.name.clear();
        env_[n.outputs[k]] = v;
      }
      return Status::ok();
    }
    if (outs.status().code() != ErrorCode::kUnsupported) return outs.status();
  }
  return map_node(n);
}

Result<std::shared_ptr<Program>> Importer::run(const std::string& name) {
  count_uses(model_.graph, &uses_);
  for (const auto& o : model_.graph.outputs) uses_[o.name]++;
  VRUN_RETURN_IF_ERROR(add_inputs());
  VRUN_RETURN_IF_ERROR(run_graph(model_.graph));
  for (const auto& o : model_.graph.outputs) {
    auto it = env_.find(o.name);
    if (it == env_.end())
      return err(ErrorCode::kInvalidProgram, name, ": graph output '", o.name, "' is never computed");
    Val v = it->second.known
                ? constant(it->second.t, is_int_type(it->second.t.elem_type) ? DType::i64 : DType::f32)
                : it->second.v;
    // An output that is an input or a view gets its own storage.
    v = mb_.op(OpKind::copy, {v});
    mb_.output(v, o.name);
  }
  pb_.set_meta("model.family", MetaValue::str("onnx"));
  pb_.set_meta("onnx.opset", MetaValue::integer(opset_));
  if (!model_.producer.empty()) pb_.set_meta("onnx.producer", MetaValue::str(model_.producer));
  if (!pb_.status().is_ok()) return pb_.status().with_context(name);
  auto p = pb_.finish();
  if (!p.is_ok()) return p.status().with_context(name);
  return *p;
}

}  // namespace detail

using detail::Importer;

Status parse_dim_option(const std::string& text, ImportOptions* options) {
  const size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0)
    return err(ErrorCode::kInvalidArgument, "--dim '", text, "': expected NAME=SIZE or NAME=MIN:MAX");
  const std::string name = text.substr(0, eq), v = text.substr(eq + 1);
  try {
    size_t used = 0;
    const size_t colon = v.find(':');
    const int64_t lo = std::stoll(v.substr(0, colon), &used);
    int64_t hi = lo;
    if (colon != std::string::npos) hi = std::stoll(v.substr(colon + 1));
    if (lo < 1 || hi < lo || hi > (int64_t{1} << 24)) throw std::out_of_range("range");
    options->dims[name] = {lo, hi};
  } catch (const std::exception&) {
    return err(ErrorCode::kInvalidArgument, "--dim '", text,
               "': sizes must be integers with 1 <= MIN <= MAX <= 2^24");
  }
  return Status::ok();
}

bool is_onnx_path(const std::string& path) {
  return path.size() > 5 && path.compare(path.size() - 5, 5, ".onnx") == 0;
}

Result<std::shared_ptr<Program>> import_onnx_model(const Model& model, const std::string& name,
                                                   const ImportOptions& options) {
  Importer imp(model, options);
  return imp.run(name);
}

Result<std::shared_ptr<Program>> import_onnx(const std::string& path, const ImportOptions& options) {
  VRUN_ASSIGN_OR_RETURN(Model m, read_model(path));
  return import_onnx_model(m, path, options);
}

Result<std::shared_ptr<Program>> load_program_or_onnx(const std::string& path, const ImportOptions& options) {
  if (is_onnx_path(path)) return import_onnx(path, options);
  return load_program(path);
}

}  // namespace vrun::onnx
