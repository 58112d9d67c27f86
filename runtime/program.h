// A program in memory: what the loader produces from a .vrp file (after verification), what the
// graph builder produces from a checkpoint, and what the writer serialises. The executor runs it.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kernels/ops/attrs.h"
#include "runtime/base/dtype.h"
#include "runtime/base/status.h"
#include "runtime/base/sym_expr.h"
#include "runtime/base/tensor.h"

namespace vrun {

enum class ValueKind : uint8_t { kIntermediate = 0, kInput = 1, kConstant = 2, kState = 3 };
const char* value_kind_name(ValueKind k);

struct SymbolDef {
  std::string name;
  int64_t min = 0, max = 0;
};

// A dimension: `size` is the static size or the upper bound; `expr` is set when the dim is an
// affine expression of symbols; `derived` when it depends on symbols in another way (known at
// run time through shape inference).
struct DimDef {
  int64_t size = 0;
  std::optional<SymExpr> expr;
  bool derived = false;
  bool is_static() const { return !expr && !derived; }
};

struct ValueDef {
  std::string name;
  DType dtype = DType::f32;
  std::vector<DimDef> dims;
  ValueKind kind = ValueKind::kIntermediate;
  int index = -1;             // constant/state index
  int64_t arena_offset = -1;  // intermediates owning storage
  int64_t arena_size = 0;
  int view_base = -1;  // the value whose storage this view reads (-1: owns or is not a view)
  int64_t view_offset = 0;
  std::vector<int64_t> view_strides;  // at the symbols' upper bounds
  Shape max_shape() const;
};

// An attribute set whose int/ints entries may be symbolic.
struct AttrTemplate {
  explicit AttrTemplate(OpKind op) : values(op) {}
  Attrs values;
  std::map<int, SymExpr> int_exprs;                // attribute index -> expression
  std::map<int, std::vector<SymExpr>> ints_exprs;  // attribute index -> per-element expressions
  bool symbolic() const { return !int_exprs.empty() || !ints_exprs.empty(); }
  // Concrete attributes for the given symbol values.
  Attrs resolve(const std::vector<int64_t>& symbol_values) const;
};

struct NodeDef {
  OpKind op;
  std::vector<int> inputs;  // -1: absent optional input
  std::vector<int> outputs;
  AttrTemplate attrs;
  std::string name;
  NodeDef(OpKind k) : op(k), attrs(k) {}  // NOLINT(google-explicit-constructor)
};

struct MethodDef {
  std::string name;
  std::vector<SymbolDef> symbols;
  std::vector<ValueDef> values;
  std::vector<int> inputs;
  std::vector<int> outputs;
  std::vector<NodeDef> nodes;
  int64_t arena_size = 0;
  std::vector<std::string> symbol_names() const;
  int symbol_index(const std::string& name) const;  // -1 when absent
  // The value whose storage value `id` reads: its view base, or itself.
  int storage_root(int id) const { return values[id].view_base >= 0 ? values[id].view_base : id; }
};

// A run of a constant's bytes, borrowed and kept alive by `keep`.
struct ConstantPiece {
  const uint8_t* data = nullptr;
  uint64_t size = 0;
  std::shared_ptr<const void> keep;
};

// Constant bytes: in `data`, 32-byte aligned, owned or borrowed from a mapping/checkpoint kept
// alive by `keep`; or, when data is null, in `pieces` one after another: parts the builder did
// not copy (projections stacked into one matrix, a checkpoint's tensor that is not 32-byte
// aligned). Executors make a contiguous copy of a pieced constant only where the host reads it;
// a GPU uploads the pieces as they are.
struct ConstantDef {
  std::string name;
  DType dtype = DType::f32;
  Shape shape;
  const uint8_t* data = nullptr;
  uint64_t size = 0;
  std::shared_ptr<const void> keep;
  std::vector<ConstantPiece> pieces;

  // Calls f(bytes, n) for each run of the bytes in order.
  template <class F>
  void for_each_run(F&& f) const {
    if (data) {
      if (size) f(data, size);
      return;
    }
    for (const ConstantPiece& piece : pieces)
      if (piece.size) f(piece.data, piece.size);
  }
  // Copies all `size` bytes to dst.
  void copy_to(uint8_t* dst) const;
};

struct StateDef {
  std::string name;
  DType dtype = DType::f32;
  Shape shape;
};

enum class MetaType : uint8_t { kString = 0, kInt = 1, kFloat = 2, kBytes = 3, kInts = 4, kStrings = 5, kFloats = 6 };

struct MetaValue {
  MetaType type = MetaType::kString;
  std::string s;  // kString; kBytes also stores its bytes here
  int64_t i = 0;
  double f = 0;
  std::vector<int64_t> ints;
  std::vector<std::string> strings;
  std::vector<double> floats;
  static MetaValue str(std::string v);
  static MetaValue integer(int64_t v);
  static MetaValue real(double v);
  static MetaValue bytes(std::string v);
  static MetaValue int_list(std::vector<int64_t> v);
  static MetaValue string_list(std::vector<std::string> v);
  static MetaValue float_list(std::vector<double> v);
};

// Metadata naming methods that share one scratch arena (sized to the largest of them): a string
// list, each entry method names separated by commas. For methods a caller never needs the
// outputs of after calling another of them (e.g. Parakeet's encode_batch for different lengths).
inline constexpr const char* kSharedArenasMeta = "vrun.shared_arenas";

struct Program {
  uint32_t version = 0;
  std::vector<MethodDef> methods;
  std::vector<ConstantDef> constants;
  std::vector<StateDef> states;
  std::map<std::string, MetaValue> metadata;
  std::shared_ptr<const void> mapping;  // keeps a loaded file's bytes alive
  std::string source;                   // file the program came from (for messages)

  const MethodDef* method(const std::string& name) const;
  const MetaValue* meta(const std::string& key) const;
  uint64_t constant_bytes() const;
};

// Loads and fully verifies a .vrp file (mmapped; constants are not copied).
Result<std::shared_ptr<Program>> load_program(const std::string& path);
// The same from bytes in memory (copied); `name` is used in messages.
Result<std::shared_ptr<Program>> load_program_from_memory(const uint8_t* data, size_t size,
                                                          const std::string& name = "<memory>");
// Semantic checks on a program in memory (run by the loader, and after building).
Status verify_program(const Program& p);
// Serialises to a .vrp file (written to a temporary name, then renamed).
Status write_program(const Program& p, const std::string& path);
// The same into a byte vector. verify = false writes whatever the structs hold: only for tests
// that make corrupt programs on purpose.
Result<std::vector<uint8_t>> serialize_program(const Program& p, bool verify = true);

}  // namespace vrun
