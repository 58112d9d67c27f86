#include "runtime/graph/builder.h"

#include <cstdlib>
#include <cstring>

#include "kernels/ops/shape_infer.h"
#include "kernels/ops/views.h"
#include "runtime/graph/builder_ir.h"
#include "runtime/program_file.h"

namespace vrun {

void BMethod::freeze() {
  if (frozen) return;
  frozen = true;
  const size_t n = symbols.size();
  std::vector<int64_t> maxb(n), minb(n), midb(n);
  for (size_t i = 0; i < n; ++i) {
    maxb[i] = symbols[i].max;
    minb[i] = symbols[i].min;
    midb[i] = symbols[i].min + (symbols[i].max - symbols[i].min) / 3;
  }
  bindings.push_back(maxb);
  for (size_t i = 0; i < n; ++i) {
    auto b = maxb;
    if (b[i] > symbols[i].min) --b[i];
    bindings.push_back(b);
  }
  bindings.push_back(minb);
  bindings.push_back(midb);
  binding_ok.assign(bindings.size(), true);
}

namespace {

Status node_error(const BMethod& m, const NodeDef& node, const Status& s) {
  return s.with_context("method '" + m.name + "' node " + std::to_string(m.nodes.size()) + " (" +
                        op_name(node.op) + (node.name.empty() ? "" : " " + node.name) + ")");
}

int new_value(BMethod& m, DType dtype, ValueKind kind, const std::string& name) {
  BValue v;
  v.def.dtype = dtype;
  v.def.kind = kind;
  v.def.name = name;
  const int id = static_cast<int>(m.values.size());
  v.root = id;
  v.at.resize(m.bindings.size());
  m.values.push_back(std::move(v));
  return id;
}

void set_dense(BMethod& m, int id, int b, DType dtype, const Shape& shape) {
  TensorView& t = m.values[id].at[b];
  t = TensorView::dense(synthetic_base(id), dtype, shape);
}

// Inserts `copy` of value x, returning the dense copy's id.
Result<int> insert_copy(BuilderState& p, BMethod& m, int x) {
  NodeDef c(OpKind::copy);
  c.inputs = {x};
  c.name = "contiguous";
  VRUN_ASSIGN_OR_RETURN(auto outs, add_node(p, m, std::move(c)));
  return outs[0];
}

}  // namespace

Result<std::vector<int>> add_node(BuilderState& p, BMethod& m, NodeDef node) {
  m.freeze();
  const OpSchema& sch = op_schema(node.op);
  const int nb = m.num_bindings();
  for (int id : node.inputs)
    if (id < -1 || id >= static_cast<int>(m.values.size()))
      return node_error(m, node, err(ErrorCode::kInvalidArgument, "input value ", id, " does not exist"));
  const int ni = static_cast<int>(node.inputs.size());
  if (ni < sch.min_inputs() || (sch.max_inputs() >= 0 && ni > sch.max_inputs()))
    return node_error(m, node, err(ErrorCode::kInvalidArgument, ni, " inputs given, ", sch.min_inputs(), " to ",
                                   sch.max_inputs(), " expected"));
  for (int k = 0; k < ni; ++k)
    if (node.inputs[k] < 0 && !sch.inputs[std::min<size_t>(k, sch.inputs.size() - 1)].optional)
      return node_error(m, node, err(ErrorCode::kInvalidArgument, "required input ", k, " is absent"));

  // Dense inputs where the kernel needs them; a reshape that is no view reads a dense copy.
  for (int k = 0; k < ni; ++k) {
    const InputSpec& spec = sch.inputs[std::min<size_t>(k, sch.inputs.size() - 1)];
    const int id = node.inputs[k];
    if (id < 0) continue;
    bool needs_copy = false;
    for (int b = 0; b < nb; ++b) {
      if (!m.binding_ok[b]) continue;
      if (spec.contiguous && !m.values[id].at[b].is_contiguous()) needs_copy = true;
      if (node.op == OpKind::reshape) {
        std::vector<TensorView> tmp;
        const Status s = compute_view(node.op, m.values[id].at[b], node.attrs.resolve(m.bindings[b]), &tmp);
        if (s.code() == ErrorCode::kUnsupported && !is_quantized(m.values[id].def.dtype)) needs_copy = true;
      }
    }
    if (needs_copy) {
      VRUN_ASSIGN_OR_RETURN(node.inputs[k], insert_copy(p, m, id));
    }
  }

  // Shapes (and views) at every binding.
  const bool is_view = sch.is_view();
  std::vector<std::vector<TensorView>> outs(nb);
  for (int b = 0; b < nb; ++b) {
    if (!m.binding_ok[b]) continue;
    const Attrs attrs = node.attrs.resolve(m.bindings[b]);
    Status s;
    if (is_view) {
      s = compute_view(node.op, m.values[node.inputs[0]].at[b], attrs, &outs[b]);
    } else {
      std::vector<TensorDesc> descs(ni);
      std::vector<const TensorDesc*> ptrs(ni, nullptr);
      for (int k = 0; k < ni; ++k) {
        if (node.inputs[k] < 0) continue;
        const TensorView& t = m.values[node.inputs[k]].at[b];
        descs[k] = {t.dtype, t.shape};
        ptrs[k] = &descs[k];
      }
      std::vector<TensorDesc> out_descs;
      s = infer_shapes(node.op, ptrs, attrs, &out_descs);
      for (const auto& d : out_descs) outs[b].push_back(TensorView::dense(nullptr, d.dtype, d.shape));
      if (s.is_ok() && op_schema(node.op).writes_input0()) outs[b][0] = m.values[node.inputs[0]].at[b];
    }
    if (!s.is_ok()) {
      if (b == 0) return node_error(m, node, s);
      m.binding_ok[b] = false;  // this binding is no longer a valid sample; dims relying on it become derived
    }
  }
  const int n_out = static_cast<int>(outs[0].size());
  if (sch.variadic_outputs ? n_out < 1 : n_out != static_cast<int>(sch.outputs.size()))
    return node_error(m, node, err(ErrorCode::kInternal, n_out, " outputs inferred"));
  std::vector<int> ids;
  for (int o = 0; o < n_out; ++o) {
    const std::string name = node.name.empty() ? "" : (n_out > 1 ? node.name + "." + std::to_string(o) : node.name);
    const int id = new_value(m, outs[0][o].dtype, ValueKind::kIntermediate, name);
    BValue& v = m.values[id];
    v.producer = static_cast<int>(m.nodes.size());
    const bool alias = is_view || (o == 0 && op_schema(node.op).writes_input0());
    v.alias = alias;
    if (alias) v.root = m.values[node.inputs[0]].root;
    for (int b = 0; b < nb; ++b) {
      if (!m.binding_ok[b] || static_cast<int>(outs[b].size()) <= o) continue;
      if (alias) v.at[b] = outs[b][o];
      else set_dense(m, id, b, outs[b][o].dtype, outs[b][o].shape);
    }
    ids.push_back(id);
  }
  node.outputs = ids;
  m.nodes.emplace_back(std::move(node));
  return ids;
}

// ---- MethodBuilder

static BMethod& meth(BuilderState* p, int i) { return p->methods[i]; }

SymExpr MethodBuilder::symbol(const std::string& name, int64_t min, int64_t max) {
  BMethod& m = meth(p_, index_);
  if (m.frozen) {
    p_->fail(err(ErrorCode::kInternal, "method '", m.name, "': symbol ", name, " declared after the first value"));
    return SymExpr(0);
  }
  if (min < 0 || max < min) {
    p_->fail(err(ErrorCode::kInvalidArgument, "symbol ", name, " has bounds [", min, ", ", max, "]"));
    return SymExpr(0);
  }
  m.symbols.push_back({name, min, max});
  return SymExpr::symbol(static_cast<int>(m.symbols.size()) - 1);
}

Val MethodBuilder::input(const std::string& name, DType dtype, const std::vector<SymExpr>& dims) {
  BMethod& m = meth(p_, index_);
  if (!p_->status.is_ok()) return {};
  m.freeze();
  for (const auto& d : dims) {
    const bool ok = d.is_constant() ? d.constant >= 0
                                    : (d.constant == 0 && d.terms.size() == 1 && d.terms[0].second == 1);
    if (!ok) {
      p_->fail(err(ErrorCode::kInvalidArgument, "input ", name, ": dims must be sizes or single symbols"));
      return {};
    }
  }
  const int id = new_value(m, dtype, ValueKind::kInput, name);
  for (int b = 0; b < m.num_bindings(); ++b) {
    Shape s;
    s.rank = static_cast<int>(dims.size());
    for (int i = 0; i < s.rank; ++i) s[i] = dims[i].eval(m.bindings[b]);
    set_dense(m, id, b, dtype, s);
  }
  m.inputs.push_back(id);
  return {id};
}

// The value standing for the program's constant or state `index` (`defs[index]`) in method m: made
// on first use, the same value after (`made` maps program indices to value ids).
template <typename Def>
static Val program_value(BuilderState* p, BMethod& m, const std::vector<Def>& defs, std::map<int, int>& made, int index,
                         ValueKind kind, const char* what) {
  if (!p->status.is_ok()) return {};
  if (index < 0 || index >= static_cast<int>(defs.size())) {
    p->fail(err(ErrorCode::kInvalidArgument, what, " index ", index, " out of range"));
    return {};
  }
  auto it = made.find(index);
  if (it != made.end()) return {it->second};
  m.freeze();
  const Def& d = defs[index];
  const int id = new_value(m, d.dtype, kind, d.name);
  m.values[id].def.index = index;
  for (int b = 0; b < m.num_bindings(); ++b) set_dense(m, id, b, d.dtype, d.shape);
  made[index] = id;
  return {id};
}

Val MethodBuilder::constant(int c) {
  BMethod& m = meth(p_, index_);
  return program_value(p_, m, p_->constants, m.const_values, c, ValueKind::kConstant, "constant");
}

Val MethodBuilder::state(int s) {
  BMethod& m = meth(p_, index_);
  return program_value(p_, m, p_->states, m.state_values, s, ValueKind::kState, "state");
}

std::vector<Val> MethodBuilder::op_n(OpKind op, const std::vector<Val>& inputs, const std::vector<NamedAttr>& attrs,
                                     const std::string& name) {
  BMethod& m = meth(p_, index_);
  if (!p_->status.is_ok()) return {};
  NodeDef node(op);
  node.name = name;
  const OpSchema& sch = op_schema(op);
  for (const Val& v : inputs) node.inputs.push_back(v.id);
  for (const auto& a : attrs) {
    const int k = sch.attr_index(a.name);
    if (k < 0) {
      p_->fail(err(ErrorCode::kInvalidArgument, "op ", sch.name, " has no attribute '", a.name, "'"));
      return {};
    }
    AttrValue& v = node.attrs.values.at(k);
    v.set = true;
    const AttrType t = sch.attrs[k].type;
    using K = AttrArg::Kind;
    const K given = a.value.kind;
    const bool ok = (t == AttrType::kInt && given == K::kInt) || (t == AttrType::kFloat && (given == K::kFloat || (given == K::kInt && a.value.i.is_constant()))) ||
                    (t == AttrType::kStr && given == K::kStr) || (t == AttrType::kInts && given == K::kInts) ||
                    (t == AttrType::kFloats && given == K::kFloats);
    if (!ok) {
      p_->fail(err(ErrorCode::kInvalidArgument, "op ", sch.name, ": attribute '", a.name, "' expects ", attr_type_name(t)));
      return {};
    }
    switch (t) {
      case AttrType::kInt:
        v.i = a.value.i.eval(m.bindings.empty() ? std::vector<int64_t>{} : m.bindings[0]);
        if (!a.value.i.is_constant()) node.attrs.int_exprs[k] = a.value.i;
        else v.i = a.value.i.constant;
        break;
      case AttrType::kFloat: v.f = given == K::kInt ? static_cast<double>(a.value.i.constant) : a.value.f; break;
      case AttrType::kStr: v.s = a.value.s; break;
      case AttrType::kInts: {
        bool symbolic = false;
        v.ints.clear();
        for (const auto& e : a.value.ints) {
          v.ints.push_back(e.constant);
          symbolic |= !e.is_constant();
        }
        if (symbolic) node.attrs.ints_exprs[k] = a.value.ints;
        break;
      }
      case AttrType::kFloats: v.floats = a.value.floats; break;
    }
  }
  auto r = add_node(*p_, m, std::move(node));
  if (!r.is_ok()) {
    p_->fail(r.status());
    return {};
  }
  std::vector<Val> out;
  for (int id : r.value()) out.push_back({id});
  return out;
}

Val MethodBuilder::op(OpKind op, const std::vector<Val>& inputs, const std::vector<NamedAttr>& attrs,
                      const std::string& name) {
  auto outs = op_n(op, inputs, attrs, name);
  if (outs.size() != 1) {
    if (!outs.empty()) p_->fail(err(ErrorCode::kInternal, op_name(op), " has ", outs.size(), " outputs; use op_n"));
    return {};
  }
  return outs[0];
}

void MethodBuilder::output(Val v, const std::string& name) {
  BMethod& m = meth(p_, index_);
  if (!p_->status.is_ok()) return;
  if (!v.valid() || v.id >= static_cast<int>(m.values.size())) {
    p_->fail(err(ErrorCode::kInvalidArgument, "method '", m.name, "': output ", name, " is not a value"));
    return;
  }
  m.outputs.push_back(v.id);
  m.output_names.push_back(name);
}

Shape MethodBuilder::max_shape(Val v) const {
  const BMethod& m = meth(p_, index_);
  if (!v.valid() || v.id >= static_cast<int>(m.values.size())) return {};
  return m.values[v.id].at[0].shape;
}

std::vector<bool> MethodBuilder::symbolic_dims(Val v) const {
  const BMethod& m = meth(p_, index_);
  if (!v.valid() || v.id >= static_cast<int>(m.values.size())) return {};
  const auto& at = m.values[v.id].at;
  std::vector<bool> out(static_cast<size_t>(at[0].shape.rank), false);
  for (size_t b = 1; b < at.size(); ++b)
    for (int d = 0; d < at[0].shape.rank && d < at[b].shape.rank; ++d)
      if (at[b].shape[d] != at[0].shape[d]) out[static_cast<size_t>(d)] = true;
  return out;
}

DType MethodBuilder::dtype(Val v) const {
  const BMethod& m = meth(p_, index_);
  if (!v.valid() || v.id >= static_cast<int>(m.values.size())) return DType::f32;
  return m.values[v.id].def.dtype;
}

const std::string& MethodBuilder::name() const { return meth(p_, index_).name; }

// ---- ProgramBuilder

ProgramBuilder::ProgramBuilder() : s_(std::make_unique<BuilderState>()) {}
ProgramBuilder::~ProgramBuilder() = default;

namespace {

// Owned, 64-byte aligned storage for `bytes` bytes (at least 64).
std::shared_ptr<uint8_t> aligned_bytes(size_t bytes) {
  const size_t n = std::max<size_t>(64, (bytes + 63) / 64 * 64);
  return std::shared_ptr<uint8_t>(static_cast<uint8_t*>(std::aligned_alloc(64, n)), [](uint8_t* p) { std::free(p); });
}

}  // namespace

int ProgramBuilder::add_constant(const std::string& name, DType dtype, const Shape& shape, const void* data,
                                 std::shared_ptr<const void> keep) {
  // Kernels read constants in place with element and unaligned vector loads, so 32-byte aligned
  // tensors (GGUF's default alignment) are read where they lie; checkpoints such as whisper.cpp's
  // or CTranslate2's do not align theirs, so those stay one piece, which the host copies where it
  // reads it and a GPU uploads as it is.
  constexpr uintptr_t kInPlaceAlignment = 32;
  const size_t bytes = static_cast<size_t>(dtype_bytes(dtype, shape.numel()));
  if (bytes && reinterpret_cast<uintptr_t>(data) % kInPlaceAlignment != 0)
    return add_constant_pieces(name, dtype, shape, {{static_cast<const uint8_t*>(data), bytes, std::move(keep)}});
  ConstantDef c;
  c.name = name;
  c.dtype = dtype;
  c.shape = shape;
  c.size = static_cast<uint64_t>(bytes);
  c.data = static_cast<const uint8_t*>(data);
  c.keep = std::move(keep);
  s_->constants.push_back(std::move(c));
  return static_cast<int>(s_->constants.size()) - 1;
}

int ProgramBuilder::add_constant_pieces(const std::string& name, DType dtype, const Shape& shape,
                                        std::vector<ConstantPiece> pieces) {
  ConstantDef c;
  c.name = name;
  c.dtype = dtype;
  c.shape = shape;
  c.size = static_cast<uint64_t>(dtype_bytes(dtype, shape.numel()));
  uint64_t total = 0;
  for (const ConstantPiece& piece : pieces) total += piece.size;
  if (total != c.size) {
    s_->fail(err(ErrorCode::kInvalidArgument, "constant '", name, "': its pieces hold ", total, " bytes but ",
                 dtype_name(dtype), shape.str(), " needs ", c.size));
    return -1;
  }
  c.pieces = std::move(pieces);
  s_->constants.push_back(std::move(c));
  return static_cast<int>(s_->constants.size()) - 1;
}

int ProgramBuilder::add_constant_copy(const std::string& name, DType dtype, const Shape& shape, const void* data) {
  const size_t bytes = static_cast<size_t>(dtype_bytes(dtype, shape.numel()));
  auto buf = aligned_bytes(bytes);
  if (bytes) std::memcpy(buf.get(), data, bytes);
  return add_constant(name, dtype, shape, buf.get(), std::shared_ptr<const void>(buf, buf.get()));
}

int ProgramBuilder::add_state(const std::string& name, DType dtype, const Shape& shape) {
  s_->states.push_back({name, dtype, shape});
  return static_cast<int>(s_->states.size()) - 1;
}

void ProgramBuilder::set_meta(const std::string& key, MetaValue value) { s_->metadata[key] = std::move(value); }

MethodBuilder ProgramBuilder::method(const std::string& name) {
  for (size_t i = 0; i < s_->methods.size(); ++i)
    if (s_->methods[i].name == name) return MethodBuilder(s_.get(), static_cast<int>(i));
  BMethod m;
  m.name = name;
  s_->methods.push_back(std::move(m));
  return MethodBuilder(s_.get(), static_cast<int>(s_->methods.size()) - 1);
}

const Status& ProgramBuilder::status() const { return s_->status; }

Result<std::shared_ptr<Program>> ProgramBuilder::finish(const BuildOptions& options) {
  if (!s_->status.is_ok()) return s_->status;
  auto prog = std::make_shared<Program>();
  for (BMethod& m : s_->methods) {
    m.freeze();
    if (options.fold_batch_norm) fold_batch_norms(*s_, m);
    eliminate_view_copies(m);
    if (options.cse) eliminate_common_subexpressions(m);
    eliminate_dead_code(m);
    refresh_views(m);
  }
  // Constants no method reads any more (e.g. folded batch-norm statistics) are dropped.
  std::vector<int> remap(s_->constants.size(), -1);
  std::vector<bool> used(s_->constants.size(), false);
  for (const BMethod& m : s_->methods)
    for (const BNode& n : m.nodes)
      if (!n.dead)
        for (int id : n.def.inputs)
          if (id >= 0 && m.values[id].def.kind == ValueKind::kConstant) used[m.values[id].def.index] = true;
  for (const BMethod& m : s_->methods)
    for (int id : m.outputs)
      if (m.values[id].def.kind == ValueKind::kConstant) used[m.values[id].def.index] = true;
  for (size_t c = 0; c < s_->constants.size(); ++c) {
    if (!used[c]) continue;
    remap[c] = static_cast<int>(prog->constants.size());
    prog->constants.push_back(s_->constants[c]);
  }
  for (BMethod& m : s_->methods)
    for (BValue& v : m.values)
      if (v.def.kind == ValueKind::kConstant) v.def.index = remap[v.def.index];
  for (const BMethod& m : s_->methods) {
    VRUN_ASSIGN_OR_RETURN(MethodDef md, plan_method(*s_, m));
    prog->methods.push_back(std::move(md));
  }
  prog->states = s_->states;
  prog->metadata = s_->metadata;
  prog->version = kProgramFormatVersion;
  VRUN_RETURN_IF_ERROR(verify_program(*prog).with_context("built program"));
  return prog;
}

}  // namespace vrun
