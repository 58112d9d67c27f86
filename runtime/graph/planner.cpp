// Memory planning and emission: live values get compact ids, dims become static sizes,
// affine expressions or derived bounds, and every intermediate that owns storage gets an arena
// slot; slots are shared between values whose lifetimes do not overlap (greedy by size).
#include <algorithm>
#include <limits>

#include "runtime/graph/builder_ir.h"

namespace vrun {

namespace {

constexpr int64_t kSlotAlign = 64;
// Values up to this size keep a one-node gap before their slot is reused (see the placement).
constexpr int64_t kSmallValue = 256 << 10;

int64_t align_up(int64_t x) { return (x + kSlotAlign - 1) / kSlotAlign * kSlotAlign; }

// Fits dim d of value v as an affine expression over the bindings (see builder_ir.h).
DimDef fit_dim(const BMethod& m, const BValue& v, int d) {
  DimDef out;
  const int nb = m.num_bindings();
  const int ns = static_cast<int>(m.symbols.size());
  int64_t hi = 0;
  bool all_same = true;
  for (int b = 0; b < nb; ++b) {
    if (!m.binding_ok[b]) continue;
    hi = std::max(hi, v.at[b].shape[d]);
    all_same = all_same && v.at[b].shape[d] == v.at[0].shape[d];
  }
  out.size = hi;
  if (all_same) return out;
  // Coefficients from bindings 1..ns (symbol k lowered by one from its maximum).
  SymExpr e(v.at[0].shape[d]);
  for (int k = 0; k < ns; ++k) {
    const int b = 1 + k;
    if (!m.binding_ok[b]) {
      out.derived = true;
      return out;
    }
    const int64_t step = m.bindings[0][k] - m.bindings[b][k];
    const int64_t delta = v.at[0].shape[d] - v.at[b].shape[d];
    if (step == 0) continue;
    const int64_t coef = delta / step;
    if (coef * step != delta) {
      out.derived = true;
      return out;
    }
    e = e + SymExpr::symbol(k, coef) - SymExpr(coef * m.bindings[0][k]);
  }
  // Check the fit at the remaining bindings (all at minimum, middle point).
  int checked = 0;
  for (int b = ns + 1; b < nb; ++b) {
    if (!m.binding_ok[b]) continue;
    ++checked;
    if (e.eval(m.bindings[b]) != v.at[b].shape[d]) {
      out.derived = true;
      return out;
    }
  }
  if (checked == 0) out.derived = true;
  else out.expr = e;
  return out;
}

int64_t max_bytes(const BMethod& m, const BValue& v) {
  int64_t hi = 0;
  for (int b = 0; b < m.num_bindings(); ++b)
    if (m.binding_ok[b]) hi = std::max(hi, dtype_bytes(v.def.dtype, v.at[b].shape.numel()));
  return hi;
}

}  // namespace

Result<MethodDef> plan_method(const BuilderState& p, const BMethod& m) {
  (void)p;
  MethodDef out;
  out.name = m.name;
  out.symbols = m.symbols;
  const int nv = static_cast<int>(m.values.size());

  // Live values and their compact ids.
  std::vector<bool> used(nv, false);
  std::vector<int> order;  // live node indices
  for (int id : m.inputs) used[id] = true;
  for (int id : m.outputs) used[id] = true;
  for (size_t i = 0; i < m.nodes.size(); ++i) {
    const BNode& n = m.nodes[i];
    if (n.dead) continue;
    order.push_back(static_cast<int>(i));
    for (int id : n.def.inputs)
      if (id >= 0) used[id] = true;
    for (int id : n.def.outputs) used[id] = true;
  }
  // Roots of live aliases stay too (their storage is what the view reads).
  for (int v = 0; v < nv; ++v)
    if (used[v]) used[m.values[v].root] = true;
  std::vector<int> remap(nv, -1);
  for (int v = 0; v < nv; ++v)
    if (used[v]) {
      remap[v] = static_cast<int>(out.values.size());
      ValueDef def = m.values[v].def;
      def.dims.clear();
      for (int d = 0; d < m.values[v].at[0].shape.rank; ++d) def.dims.push_back(fit_dim(m, m.values[v], d));
      if (m.values[v].alias) {
        const int root = m.values[v].root;
        const TensorView& t = m.values[v].at[0];
        const int es = std::max(1, dtype_elem_size(t.dtype));
        def.view_base = root;  // remapped below
        def.view_offset = (static_cast<const char*>(t.data) - synthetic_base(root)) / es;
        def.view_strides.assign(t.strides.s.begin(), t.strides.s.begin() + t.shape.rank);
      }
      out.values.push_back(std::move(def));
    }
  for (auto& def : out.values)
    if (def.view_base >= 0) def.view_base = remap[def.view_base];

  // Lifetimes of storage-owning intermediates, in positions of the live schedule.
  const int inf = std::numeric_limits<int>::max();
  std::vector<int> first(nv, -1), last(nv, -1);
  for (size_t pos = 0; pos < order.size(); ++pos) {
    const BNode& n = m.nodes[order[pos]];
    for (int id : n.def.outputs) {
      const int r = m.values[id].root;
      if (first[r] < 0) first[r] = static_cast<int>(pos);
      last[r] = std::max(last[r], static_cast<int>(pos));
    }
    for (int id : n.def.inputs)
      if (id >= 0) last[m.values[id].root] = std::max(last[m.values[id].root], static_cast<int>(pos));
  }
  for (int id : m.outputs) last[m.values[id].root] = inf;

  struct Slot {
    int value;
    int64_t size;
    int begin, end;
    int64_t offset = -1;
  };
  std::vector<Slot> slots;
  for (int v = 0; v < nv; ++v) {
    const BValue& val = m.values[v];
    if (!used[v] || val.alias || val.def.kind != ValueKind::kIntermediate || first[v] < 0) continue;
    slots.push_back({v, align_up(std::max<int64_t>(max_bytes(m, val), 1)), first[v], last[v]});
  }
  std::vector<size_t> by_size(slots.size());
  for (size_t i = 0; i < slots.size(); ++i) by_size[i] = i;
  std::stable_sort(by_size.begin(), by_size.end(), [&](size_t a, size_t b) { return slots[a].size > slots[b].size; });
  std::vector<size_t> placed;
  int64_t arena = 0;
  for (size_t i : by_size) {
    Slot& s = slots[i];
    std::vector<std::pair<int64_t, int64_t>> busy;  // overlapping-lifetime slots' [offset, end)
    for (size_t j : placed) {
      const Slot& o = slots[j];
      // A small value does not take the slot of one whose last reader is the node just before
      // its own producer: the write after that read would order two kernels that could
      // otherwise run side by side (a GPU backend waits on such a hazard), and in the
      // latency-bound small kernels of a decode step every wait shows. Large values pack tightly.
      const int64_t gap = std::min(s.size, o.size) <= kSmallValue ? 1 : 0;  // ends may be INT_MAX (outputs)
      if (o.begin <= int64_t{s.end} + gap && s.begin <= int64_t{o.end} + gap) busy.push_back({o.offset, o.offset + o.size});
    }
    std::sort(busy.begin(), busy.end());
    int64_t at = 0;
    for (const auto& [b, e] : busy) {
      if (at + s.size <= b) break;
      at = std::max(at, e);
    }
    s.offset = at;
    arena = std::max(arena, at + s.size);
    placed.push_back(i);
  }
  for (const Slot& s : slots) {
    ValueDef& def = out.values[remap[s.value]];
    def.arena_offset = s.offset;
    def.arena_size = s.size;
  }
  out.arena_size = arena;

  for (int id : m.inputs) out.inputs.push_back(remap[id]);
  for (size_t k = 0; k < m.outputs.size(); ++k) {
    out.outputs.push_back(remap[m.outputs[k]]);
    if (!m.output_names[k].empty()) out.values[remap[m.outputs[k]]].name = m.output_names[k];
  }
  for (int i : order) {
    NodeDef n = m.nodes[i].def;
    for (int& id : n.inputs)
      if (id >= 0) id = remap[id];
    for (int& id : n.outputs) id = remap[id];
    out.nodes.push_back(std::move(n));
  }
  return out;
}

}  // namespace vrun
