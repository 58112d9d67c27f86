// The graph builder used by models/: declare symbols, inputs, constants and state, add ops with
// attributes (int attributes may be symbolic), mark outputs; finish() runs the passes (dead-code
// and common-subexpression elimination, view-copy elimination, batch_norm folding), plans
// memory and returns a verified Program ready to run or to write.
//
// Errors are collected: after the first failure every call returns an invalid Val and finish()
// reports that first error, so model code can build without checking every step.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "runtime/program.h"

namespace vrun {

struct Val {
  int id = -1;
  bool valid() const { return id >= 0; }
  static Val none() { return {}; }  // an absent optional input
};

// One attribute argument: ints, symbolic ints, floats, strings or lists of them. An int given
// for a float attribute is converted; the op's schema decides.
struct AttrArg {
  enum class Kind { kInt, kFloat, kStr, kInts, kFloats } kind;
  SymExpr i;
  double f = 0;
  std::string s;
  std::vector<SymExpr> ints;
  std::vector<double> floats;

  AttrArg(int v) : kind(Kind::kInt), i(v) {}                    // NOLINT
  AttrArg(int64_t v) : kind(Kind::kInt), i(v) {}                // NOLINT
  AttrArg(const SymExpr& v) : kind(Kind::kInt), i(v) {}         // NOLINT
  AttrArg(double v) : kind(Kind::kFloat), f(v) {}               // NOLINT
  AttrArg(float v) : kind(Kind::kFloat), f(v) {}                // NOLINT
  AttrArg(const char* v) : kind(Kind::kStr), s(v) {}            // NOLINT
  AttrArg(std::string v) : kind(Kind::kStr), s(std::move(v)) {}  // NOLINT
  AttrArg(const std::vector<int64_t>& v) : kind(Kind::kInts) {  // NOLINT
    for (int64_t x : v) ints.emplace_back(x);
  }
  AttrArg(std::initializer_list<int64_t> v) : AttrArg(std::vector<int64_t>(v)) {}  // NOLINT
  AttrArg(std::vector<SymExpr> v) : kind(Kind::kInts), ints(std::move(v)) {}       // NOLINT
  AttrArg(std::vector<double> v) : kind(Kind::kFloats), floats(std::move(v)) {}    // NOLINT
};

struct NamedAttr {
  std::string name;
  AttrArg value;
};

struct BuilderState;  // graph/builder_ir.h

class MethodBuilder {
 public:
  // Symbols must be declared before any value.
  SymExpr symbol(const std::string& name, int64_t min, int64_t max);
  // dims: static sizes or single symbols.
  Val input(const std::string& name, DType dtype, const std::vector<SymExpr>& dims);
  Val constant(int constant_index);
  Val state(int state_index);
  Val op(OpKind op, const std::vector<Val>& inputs, const std::vector<NamedAttr>& attrs = {},
         const std::string& name = "");
  std::vector<Val> op_n(OpKind op, const std::vector<Val>& inputs, const std::vector<NamedAttr>& attrs = {},
                        const std::string& name = "");
  void output(Val v, const std::string& name = "");

  // Shape and dtype at the symbols' upper bounds.
  Shape max_shape(Val v) const;
  DType dtype(Val v) const;
  // Per dim: whether its size depends on the method's symbols (differs between the bindings the
  // builder evaluates); all false in a method without symbols.
  std::vector<bool> symbolic_dims(Val v) const;
  int rank(Val v) const { return max_shape(v).rank; }
  const std::string& name() const;

 private:
  friend class ProgramBuilder;
  MethodBuilder(BuilderState* program, int index) : p_(program), index_(index) {}
  BuilderState* p_;
  int index_;
};

struct BuildOptions {
  bool fold_batch_norm = true;
  bool cse = true;
};

class ProgramBuilder {
 public:
  ProgramBuilder();
  ~ProgramBuilder();
  ProgramBuilder(const ProgramBuilder&) = delete;
  ProgramBuilder& operator=(const ProgramBuilder&) = delete;

  // Borrowed bytes (kept alive by `keep`, e.g. a mapped checkpoint; one piece when not 32-byte
  // aligned) or an owned copy.
  int add_constant(const std::string& name, DType dtype, const Shape& shape, const void* data,
                   std::shared_ptr<const void> keep);
  // Bytes borrowed in pieces, one after another (e.g. projections stacked into one matrix),
  // copied only where the host reads them (ConstantDef). -1 when the pieces do not add up.
  int add_constant_pieces(const std::string& name, DType dtype, const Shape& shape, std::vector<ConstantPiece> pieces);
  int add_constant_copy(const std::string& name, DType dtype, const Shape& shape, const void* data);
  int add_state(const std::string& name, DType dtype, const Shape& shape);
  void set_meta(const std::string& key, MetaValue value);
  MethodBuilder method(const std::string& name);

  // The first error so far (ok while building has gone well).
  const Status& status() const;
  Result<std::shared_ptr<Program>> finish(const BuildOptions& options = {});

 private:
  std::unique_ptr<BuilderState> s_;
};

}  // namespace vrun
