// The builder's working representation, shared by builder.cpp, passes.cpp and planner.cpp.
//
// Shapes are tracked at several bindings of the symbols at once: all at their maximum (for
// memory planning), each one lowered by one (to read off affine coefficients), all at their
// minimum and at a middle point (to check the fit). A dim that fits an affine expression at
// every binding is stored as that expression; otherwise it is marked derived.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "runtime/graph/builder.h"

namespace vrun {

struct BValue {
  ValueDef def;                 // name, dtype, kind, index (dims and arena filled at the end)
  std::vector<TensorView> at;   // per binding: shape, strides and a synthetic address
  int producer = -1;            // node index
  int root = -1;                // the value whose storage this one occupies (itself when it owns)
  bool alias = false;           // a view, or the output an op writes in place (aliases its state)
};

struct BNode {
  NodeDef def;
  bool dead = false;
  explicit BNode(NodeDef d) : def(std::move(d)) {}
};

struct BMethod {
  std::string name;
  std::vector<SymbolDef> symbols;
  bool frozen = false;
  std::vector<std::vector<int64_t>> bindings;
  std::vector<bool> binding_ok;
  std::vector<BValue> values;
  std::vector<BNode> nodes;
  std::vector<int> inputs, outputs;
  std::vector<std::string> output_names;
  std::map<int, int> const_values, state_values;  // program index -> value id

  void freeze();
  int num_bindings() const { return static_cast<int>(bindings.size()); }
};

struct BuilderState {
  Status status;
  std::vector<ConstantDef> constants;
  std::vector<StateDef> states;
  std::map<std::string, MetaValue> metadata;
  std::vector<BMethod> methods;
  void fail(const Status& s) {
    if (status.is_ok()) status = s;
  }
};

// A synthetic base address per value, far apart, so views of different values never meet.
inline char* synthetic_base(int value_id) {
  return reinterpret_cast<char*>((static_cast<uintptr_t>(value_id) + 1) << 40);
}

// Adds a node computing views/shapes at every binding. Returns the output value ids, or an
// error naming the node. Inserts a copy where a view is impossible or an input must be dense.
Result<std::vector<int>> add_node(BuilderState& p, BMethod& m, NodeDef node);

// Passes (passes.cpp).
void eliminate_dead_code(BMethod& m);
void eliminate_common_subexpressions(BMethod& m);
void eliminate_view_copies(BMethod& m);
void fold_batch_norms(BuilderState& p, BMethod& m);
// After passes re-point views at new bases: recomputes their roots and sampled layouts.
void refresh_views(BMethod& m);

// Memory planning and emission (planner.cpp).
Result<MethodDef> plan_method(const BuilderState& p, const BMethod& m);

}  // namespace vrun
