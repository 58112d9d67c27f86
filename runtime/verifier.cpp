// Semantic verification of a program: every id, size, dtype, shape and attribute in range, so
// the executor can trust what it reads. Runs after the structural (flatbuffers) check.
#include <set>
#include <string>

#include "kernels/ops/op_registry.h"
#include "runtime/program.h"

namespace vrun {

namespace {

constexpr int64_t kMaxDim = int64_t{1} << 40;
constexpr int64_t kMaxBytes = int64_t{1} << 42;

Status bad(const std::string& where, const auto&... parts) {
  return err(ErrorCode::kInvalidProgram, where, ": ", parts...);
}

// numel and bytes without overflow; false when out of range.
bool checked_bytes(DType dt, const Shape& s, int64_t* bytes) {
  int64_t n = 1;
  for (int i = 0; i < s.rank; ++i) {
    if (s[i] < 0 || s[i] > kMaxDim) return false;
    if (s[i] && n > kMaxBytes / s[i]) return false;
    n *= s[i];
  }
  const DTypeInfo& info = dtype_info(dt);
  if (n % info.block_elems) return false;
  *bytes = n / info.block_elems * info.block_bytes;
  return *bytes <= kMaxBytes;
}

Status check_shape(const std::string& where, DType dt, const Shape& s) {
  if (s.rank < 0 || s.rank > kMaxRank) return bad(where, "rank ", s.rank, " exceeds ", kMaxRank);
  int64_t bytes;
  if (!checked_bytes(dt, s, &bytes))
    return bad(where, "shape ", s.str(), " of ", dtype_name(dt), " is out of range",
               is_quantized(dt) ? " (or not a whole number of 32-element blocks)" : "");
  if (is_quantized(dt) && s.rank > 0 && s[s.rank - 1] % kQuantBlock)
    return bad(where, dtype_name(dt), " rows must hold a multiple of 32 elements, last dim is ", s[s.rank - 1]);
  return Status::ok();
}

Status check_expr(const std::string& where, const SymExpr& e, size_t n_symbols) {
  for (const auto& [s, c] : e.terms)
    if (s < 0 || static_cast<size_t>(s) >= n_symbols) return bad(where, "expression uses symbol ", s, " of ", n_symbols);
  return Status::ok();
}

// A constant or state value: its index names one of the program's `defs` ("constant"s or "state"s),
// whose dtype and shape it has.
template <typename Def>
Status check_program_level(const std::string& w, const ValueDef& val, const std::vector<Def>& defs, const char* what) {
  if (val.index < 0 || static_cast<size_t>(val.index) >= defs.size())
    return bad(w, what, " index ", val.index, " out of range (", defs.size(), " ", what, "s)");
  const Def& d = defs[val.index];
  if (d.dtype != val.dtype || d.shape != val.max_shape())
    return bad(w, "disagrees with ", what, " '", d.name, "' (", dtype_name(d.dtype), d.shape.str(), ")");
  return Status::ok();
}

Status verify_method(const Program& p, const MethodDef& m) {
  const std::string mw = "method '" + m.name + "'";
  std::set<std::string> sym_names;
  for (const auto& s : m.symbols) {
    if (s.name.empty() || !sym_names.insert(s.name).second) return bad(mw, "symbol names must be unique and non-empty");
    if (s.min < 0 || s.max < s.min || s.max > kMaxDim)
      return bad(mw, "symbol ", s.name, " has bounds [", s.min, ", ", s.max, "]");
  }
  const int nv = static_cast<int>(m.values.size());
  if (m.arena_size < 0 || m.arena_size > kMaxBytes) return bad(mw, "arena size ", m.arena_size, " out of range");
  for (int v = 0; v < nv; ++v) {
    const ValueDef& val = m.values[v];
    const std::string w = mw + " value " + std::to_string(v) + " '" + val.name + "'";
    if (val.dims.size() > static_cast<size_t>(kMaxRank)) return bad(w, "rank ", val.dims.size(), " exceeds ", kMaxRank);
    for (const auto& d : val.dims) {
      if (d.size < 0 || d.size > kMaxDim) return bad(w, "dim size ", d.size, " out of range");
      if (d.expr) VRUN_RETURN_IF_ERROR(check_expr(w, *d.expr, m.symbols.size()));
    }
    VRUN_RETURN_IF_ERROR(check_shape(w, val.dtype, val.max_shape()));
    switch (val.kind) {
      case ValueKind::kConstant: VRUN_RETURN_IF_ERROR(check_program_level(w, val, p.constants, "constant")); break;
      case ValueKind::kState: VRUN_RETURN_IF_ERROR(check_program_level(w, val, p.states, "state")); break;
      case ValueKind::kInput:
        for (const auto& d : val.dims)
          if (d.derived || (d.expr && !(d.expr->terms.size() == 1 && d.expr->terms[0].second == 1 && d.expr->constant == 0)))
            return bad(w, "input dims must be static sizes or single symbols");
        break;
      case ValueKind::kIntermediate:
        if (val.view_base >= nv || val.view_base < -1 || val.view_base == v)
          return bad(w, "view base ", val.view_base, " out of range");
        if (val.view_base < 0) {
          int64_t bytes = 0;
          checked_bytes(val.dtype, val.max_shape(), &bytes);
          // Kernels read and write aligned elements: the planner places every slot on 64 bytes.
          if (val.arena_offset % 64 != 0)
            return bad(w, "arena offset ", val.arena_offset, " is not 64-byte aligned");
          if (val.arena_offset < 0 || val.arena_size < bytes || val.arena_offset > m.arena_size ||
              val.arena_size > m.arena_size - val.arena_offset)
            return bad(w, "arena slot [", val.arena_offset, ", +", val.arena_size, ") does not hold its ", bytes,
                       " bytes inside the ", m.arena_size, "-byte arena");
        }
        break;
    }
  }
  std::vector<int> producer(nv, -1);
  std::set<int> seen_inputs;
  for (int id : m.inputs) {
    if (id < 0 || id >= nv || m.values[id].kind != ValueKind::kInput || !seen_inputs.insert(id).second)
      return bad(mw, "input id ", id, " is not a distinct input value");
  }
  for (int v = 0; v < nv; ++v)
    if (m.values[v].kind == ValueKind::kInput && !seen_inputs.count(v))
      return bad(mw, "value ", v, " is an input but not listed among the method inputs");
  auto defined = [&](int id) {
    const ValueKind k = m.values[id].kind;
    return k != ValueKind::kIntermediate || producer[id] >= 0;
  };
  for (size_t n = 0; n < m.nodes.size(); ++n) {
    const NodeDef& node = m.nodes[n];
    const OpSchema& sch = op_schema(node.op);
    const std::string w = mw + " node " + std::to_string(n) + " (" + sch.name + (node.name.empty() ? "" : " " + node.name) + ")";
    const int ni = static_cast<int>(node.inputs.size());
    if (ni < sch.min_inputs() || (sch.max_inputs() >= 0 && ni > sch.max_inputs()))
      return bad(w, ni, " inputs, expected ", sch.min_inputs(), sch.max_inputs() < 0 ? " or more" : " to " + std::to_string(sch.max_inputs()));
    for (int k = 0; k < ni; ++k) {
      const int id = node.inputs[k];
      const InputSpec& spec = sch.inputs[std::min<size_t>(k, sch.inputs.size() - 1)];
      if (id == -1) {
        if (!spec.optional) return bad(w, "required input '", spec.name, "' is absent");
        continue;
      }
      if (id < 0 || id >= nv) return bad(w, "input ", k, " refers to value ", id, " of ", nv);
      if (!defined(id)) return bad(w, "input ", k, " (value ", id, ") is used before it is produced");
    }
    const int no = static_cast<int>(node.outputs.size());
    if (sch.variadic_outputs ? no < 1 : no != static_cast<int>(sch.outputs.size()))
      return bad(w, no, " outputs, expected ", sch.outputs.size());
    if (node.op == OpKind::split && static_cast<size_t>(no) != node.attrs.values.ints("sizes").size())
      return bad(w, no, " outputs for ", node.attrs.values.ints("sizes").size(), " sizes");
    for (size_t o = 0; o < node.outputs.size(); ++o) {
      const int id = node.outputs[o];
      if (id < 0 || id >= nv) return bad(w, "output refers to value ", id, " of ", nv);
      if (m.values[id].kind != ValueKind::kIntermediate) return bad(w, "output value ", id, " is not an intermediate");
      if (producer[id] >= 0) return bad(w, "value ", id, " is produced twice");
      producer[id] = static_cast<int>(n);
      const ValueDef& out = m.values[id];
      const bool is_alias = sch.is_view() || (o == 0 && sch.writes_input0());
      if (is_alias != (out.view_base >= 0))
        return bad(w, "output value ", id, is_alias ? " must be a view" : " must own storage");
    }
    if (sch.writes_input0()) {
      // What the op writes in place is its input 0's storage: output 0 views the same root.
      auto root = [&](int v) {
        for (int steps = 0; v >= 0 && m.values[v].view_base >= 0 && steps <= nv; ++steps) v = m.values[v].view_base;
        return v;
      };
      if (node.inputs.empty() || node.inputs[0] < 0 || root(node.outputs[0]) != root(node.inputs[0]))
        return bad(w, "output 0 must view the storage of input 0, which the op writes in place");
    }
    for (int k = 0; k < node.attrs.values.size(); ++k) {
      if (!node.attrs.values.at(k).set)
        return bad(w, "required attribute '", sch.attrs[k].name, "' is missing");
    }
    for (const auto& [k, e] : node.attrs.int_exprs) {
      if (k < 0 || k >= static_cast<int>(sch.attrs.size()) || sch.attrs[k].type != AttrType::kInt)
        return bad(w, "symbolic value for attribute ", k, " which is not an int");
      VRUN_RETURN_IF_ERROR(check_expr(w, e, m.symbols.size()));
    }
    for (const auto& [k, es] : node.attrs.ints_exprs) {
      if (k < 0 || k >= static_cast<int>(sch.attrs.size()) || sch.attrs[k].type != AttrType::kInts)
        return bad(w, "symbolic values for attribute ", k, " which is not ints");
      for (const auto& e : es) VRUN_RETURN_IF_ERROR(check_expr(w, e, m.symbols.size()));
    }
  }
  for (int id : m.outputs) {
    if (id < 0 || id >= nv || !defined(id)) return bad(mw, "output id ", id, " is not a produced value");
  }
  for (int v = 0; v < nv; ++v) {
    const ValueDef& val = m.values[v];
    if (val.kind == ValueKind::kIntermediate && val.view_base >= 0 && producer[v] >= 0) {
      // A view's base must exist before the view.
      const int b = val.view_base;
      if (m.values[b].kind == ValueKind::kIntermediate && (producer[b] < 0 || producer[b] > producer[v]))
        return bad(mw, "value ", v, " views value ", b, " which is produced later");
    }
  }
  return Status::ok();
}

// A constant's or state's name (not empty, not taken: `names` holds those seen), dtype and shape;
// its size in bytes.
template <typename Def>
Result<int64_t> check_def(const std::string& w, const Def& d, std::set<std::string>& names) {
  if (d.name.empty() || !names.insert(d.name).second) return bad(w, "names must be unique and non-empty");
  VRUN_RETURN_IF_ERROR(check_shape(w, d.dtype, d.shape));
  int64_t bytes = 0;
  checked_bytes(d.dtype, d.shape, &bytes);
  return bytes;
}

}  // namespace

Status verify_program(const Program& p) {
  std::set<std::string> names;
  for (size_t i = 0; i < p.constants.size(); ++i) {
    const ConstantDef& c = p.constants[i];
    const std::string w = "constant " + std::to_string(i) + " '" + c.name + "'";
    VRUN_ASSIGN_OR_RETURN(const int64_t bytes, check_def(w, c, names));
    if (static_cast<uint64_t>(bytes) != c.size)
      return bad(w, "holds ", c.size, " bytes but ", dtype_name(c.dtype), c.shape.str(), " needs ", bytes);
    if (c.data && !c.pieces.empty()) return bad(w, "has both data and pieces");
    uint64_t held = c.data ? c.size : 0;
    for (const ConstantPiece& piece : c.pieces) {
      if (piece.size && !piece.data) return bad(w, "has a piece with no data");
      held += piece.size;
    }
    if (held != c.size) return bad(w, "holds ", held, " bytes of data for its ", c.size);
  }
  names.clear();
  int64_t state_bytes = 0;
  for (size_t i = 0; i < p.states.size(); ++i) {
    const StateDef& s = p.states[i];
    const std::string w = "state " + std::to_string(i) + " '" + s.name + "'";
    VRUN_ASSIGN_OR_RETURN(const int64_t bytes, check_def(w, s, names));
    state_bytes += bytes;
    if (state_bytes > kMaxBytes) return bad(w, "states total more than ", kMaxBytes, " bytes");
  }
  names.clear();
  for (const auto& m : p.methods) {
    if (m.name.empty() || !names.insert(m.name).second)
      return bad("method '" + m.name + "'", "method names must be unique and non-empty");
    VRUN_RETURN_IF_ERROR(verify_method(p, m));
  }
  return Status::ok();
}

}  // namespace vrun
