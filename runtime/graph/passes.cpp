// Graph passes on the builder's representation. Each keeps the node order (a valid schedule:
// state reads stay on the right side of the in-place writes (slice_update, decode_layer) they follow).
#include <cmath>
#include <cstring>
#include <map>
#include <sstream>

#include "kernels/ops/views.h"
#include "runtime/graph/builder_ir.h"

namespace vrun {

namespace {

void replace_uses(BMethod& m, int from, int to) {
  for (BNode& n : m.nodes)
    for (int& id : n.def.inputs)
      if (id == from) id = to;
  for (int& id : m.outputs)
    if (id == from) id = to;
}

bool reads_state(const BMethod& m, const BNode& n) {
  for (int id : n.def.inputs)
    if (id >= 0 && m.values[m.values[id].root].def.kind == ValueKind::kState) return true;
  return false;
}

bool contiguous_everywhere(const BMethod& m, int id) {
  for (int b = 0; b < m.num_bindings(); ++b)
    if (m.binding_ok[b] && !m.values[id].at[b].is_contiguous()) return false;
  return true;
}

std::string node_key(const BNode& n) {
  std::ostringstream os;
  os << static_cast<int>(n.def.op) << '|';
  for (int id : n.def.inputs) os << id << ',';
  os << '|';
  const Attrs& a = n.def.attrs.values;
  for (int k = 0; k < a.size(); ++k) {
    const AttrValue& v = a.at(k);
    os << v.i << ';' << v.f << ';' << v.s << ';';
    for (auto x : v.ints) os << x << ' ';
    for (auto x : v.floats) os << x << ' ';
    os << '#';
  }
  for (const auto& [k, e] : n.def.attrs.int_exprs) {
    os << 'e' << k << ':' << e.constant;
    for (const auto& [s, c] : e.terms) os << '+' << c << '*' << s;
  }
  for (const auto& [k, es] : n.def.attrs.ints_exprs) {
    os << 'E' << k;
    for (const auto& e : es) {
      os << ':' << e.constant;
      for (const auto& [s, c] : e.terms) os << '+' << c << '*' << s;
    }
  }
  return os.str();
}

int use_count(const BMethod& m, int id) {
  int n = 0;
  for (const BNode& node : m.nodes)
    if (!node.dead)
      for (int in : node.def.inputs) n += in == id;
  for (int out : m.outputs) n += out == id;
  return n;
}

const ConstantDef* f32_constant(const BuilderState& p, const BMethod& m, int id) {
  if (id < 0) return nullptr;
  const BValue& v = m.values[id];
  if (v.def.kind != ValueKind::kConstant || v.def.dtype != DType::f32) return nullptr;
  return &p.constants[v.def.index];
}

int add_method_constant(BuilderState& p, BMethod& m, const std::string& name, const Shape& shape,
                        const std::vector<float>& data) {
  auto buf = std::shared_ptr<float[]>(new float[data.size()]);
  std::memcpy(buf.get(), data.data(), data.size() * sizeof(float));
  ConstantDef c;
  c.name = name;
  c.dtype = DType::f32;
  c.shape = shape;
  c.size = data.size() * sizeof(float);
  c.data = reinterpret_cast<const uint8_t*>(buf.get());
  c.keep = std::shared_ptr<const void>(buf, buf.get());
  p.constants.push_back(std::move(c));
  BValue v;
  v.def.dtype = DType::f32;
  v.def.kind = ValueKind::kConstant;
  v.def.index = static_cast<int>(p.constants.size()) - 1;
  v.def.name = name;
  const int id = static_cast<int>(m.values.size());
  v.root = id;
  v.at.assign(m.bindings.size(), TensorView::dense(synthetic_base(id), DType::f32, shape));
  m.values.push_back(std::move(v));
  return id;
}

}  // namespace

void eliminate_dead_code(BMethod& m) {
  std::vector<bool> live(m.values.size(), false);
  for (int id : m.outputs) live[id] = true;
  for (int i = static_cast<int>(m.nodes.size()) - 1; i >= 0; --i) {
    BNode& n = m.nodes[i];
    if (n.dead) continue;
    bool needed = op_schema(n.def.op).writes_input0();  // writes state: always kept
    for (int id : n.def.outputs) needed = needed || live[id];
    if (!needed) {
      n.dead = true;
      continue;
    }
    for (int id : n.def.inputs)
      if (id >= 0) live[id] = true;
  }
}

void eliminate_common_subexpressions(BMethod& m) {
  std::map<std::string, int> seen;  // key -> node index
  for (size_t i = 0; i < m.nodes.size(); ++i) {
    BNode& n = m.nodes[i];
    if (n.dead || op_schema(n.def.op).writes_input0() || reads_state(m, n)) continue;
    const std::string key = node_key(n);
    auto it = seen.find(key);
    if (it == seen.end()) {
      seen[key] = static_cast<int>(i);
      continue;
    }
    const BNode& first = m.nodes[it->second];
    if (first.def.outputs.size() != n.def.outputs.size()) continue;
    for (size_t o = 0; o < n.def.outputs.size(); ++o) replace_uses(m, n.def.outputs[o], first.def.outputs[o]);
    n.dead = true;
  }
}

void eliminate_view_copies(BMethod& m) {
  for (BNode& n : m.nodes) {
    if (n.dead || n.def.op != OpKind::copy) continue;
    const int x = n.def.inputs[0];
    if (m.values[m.values[x].root].def.kind == ValueKind::kState) continue;  // a snapshot of state is real work
    if (!contiguous_everywhere(m, x)) continue;
    replace_uses(m, n.def.outputs[0], x);
    n.dead = true;
  }
}

void fold_batch_norms(BuilderState& p, BMethod& m) {
  for (BNode& bn : m.nodes) {
    if (bn.dead || bn.def.op != OpKind::batch_norm || bn.def.attrs.values.i("axis") != 1) continue;
    const int x = bn.def.inputs[0];
    const int conv_index = m.values[x].producer;
    if (conv_index < 0) continue;
    BNode& conv = m.nodes[conv_index];
    if (conv.dead || (conv.def.op != OpKind::conv1d && conv.def.op != OpKind::conv2d)) continue;
    if (use_count(m, x) != 1) continue;
    auto in = [&](const BNode& n, size_t k) { return k < n.def.inputs.size() ? n.def.inputs[k] : -1; };
    const ConstantDef* w = f32_constant(p, m, in(conv, 1));
    const ConstantDef* b = f32_constant(p, m, in(conv, 2));
    const ConstantDef* mean = f32_constant(p, m, in(bn, 1));
    const ConstantDef* var = f32_constant(p, m, in(bn, 2));
    const ConstantDef* gamma = f32_constant(p, m, in(bn, 3));
    const ConstantDef* beta = f32_constant(p, m, in(bn, 4));
    if (!w || !mean || !var || (in(conv, 2) >= 0 && !b) || (in(bn, 3) >= 0 && !gamma) || (in(bn, 4) >= 0 && !beta)) continue;
    const int64_t cout = w->shape[0];
    if (mean->shape.numel() != cout || var->shape.numel() != cout) continue;
    if ((gamma && gamma->shape.numel() != cout) || (beta && beta->shape.numel() != cout) || (b && b->shape.numel() != cout)) continue;
    const double eps = bn.def.attrs.values.f("eps");
    const int64_t per_out = w->shape.numel() / cout;
    // The values, contiguous whether the constant is one run or pieces.
    auto values = [](const ConstantDef* c) {
      std::vector<float> v;
      if (c) {
        v.resize(static_cast<size_t>(c->size / sizeof(float)));
        c->copy_to(reinterpret_cast<uint8_t*>(v.data()));
      }
      return v;
    };
    const std::vector<float> wv = values(w), bv = values(b), mv = values(mean), vv = values(var), gv = values(gamma),
                             betav = values(beta);
    std::vector<float> nw(static_cast<size_t>(w->shape.numel())), nb(static_cast<size_t>(cout));
    for (int64_t o = 0; o < cout; ++o) {
      const double scale = (gamma ? gv[o] : 1.0) / std::sqrt(static_cast<double>(vv[o]) + eps);
      for (int64_t j = 0; j < per_out; ++j) nw[o * per_out + j] = static_cast<float>(wv[o * per_out + j] * scale);
      nb[o] = static_cast<float>(((b ? bv[o] : 0.0) - mv[o]) * scale + (beta ? betav[o] : 0.0));
    }
    const std::string base = conv.def.name.empty() ? "conv" + std::to_string(conv_index) : conv.def.name;
    const Shape wshape = w->shape;
    const int wid = add_method_constant(p, m, base + ".weight_bn_folded", wshape, nw);
    const int bid = add_method_constant(p, m, base + ".bias_bn_folded", Shape{cout}, nb);
    conv.def.inputs.resize(3);
    conv.def.inputs[1] = wid;
    conv.def.inputs[2] = bid;
    replace_uses(m, bn.def.outputs[0], x);
    bn.dead = true;
  }
}

void refresh_views(BMethod& m) {
  for (BNode& n : m.nodes) {
    if (n.dead) continue;
    const bool view = op_schema(n.def.op).is_view();
    if (!view && !op_schema(n.def.op).writes_input0()) continue;
    const BValue& x = m.values[n.def.inputs[0]];
    for (int b = 0; b < m.num_bindings(); ++b) {
      if (!m.binding_ok[b]) continue;
      std::vector<TensorView> outs;
      if (view) {
        if (!compute_view(n.def.op, x.at[b], n.def.attrs.resolve(m.bindings[b]), &outs).is_ok()) continue;
      } else {
        outs.push_back(x.at[b]);
      }
      for (size_t o = 0; o < outs.size() && o < n.def.outputs.size(); ++o) m.values[n.def.outputs[o]].at[b] = outs[o];
    }
    if (view) {
      for (int id : n.def.outputs) m.values[id].root = x.root;
    } else {
      m.values[n.def.outputs[0]].root = x.root;  // only output 0 is the state written in place
    }
  }
}

}  // namespace vrun
