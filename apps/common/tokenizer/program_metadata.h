// The .vrp adapter: a loaded program's metadata map seen as a tokenizer MetadataView. Header-only
// so vrun_common does not depend on the runtime; users of this header link vrun_runtime.
#pragma once

#include "apps/common/tokenizer/metadata.h"
#include "runtime/program.h"

namespace vrun::tok {

class ProgramMetadataView final : public MetadataView {
 public:
  explicit ProgramMetadataView(const Program& program) : program_(program) {}

  std::optional<std::string_view> get_string(std::string_view key) const override {
    const MetaValue* v = find(key);
    if (v && (v->type == MetaType::kString || v->type == MetaType::kBytes)) return std::string_view(v->s);
    return std::nullopt;
  }
  std::optional<int64_t> get_int(std::string_view key) const override {
    const MetaValue* v = find(key);
    if (v && v->type == MetaType::kInt) return v->i;
    return std::nullopt;
  }
  std::optional<std::vector<int64_t>> get_ints(std::string_view key) const override {
    const MetaValue* v = find(key);
    if (v && v->type == MetaType::kInts) return v->ints;
    return std::nullopt;
  }
  const std::vector<std::string>* get_strings(std::string_view key) const override {
    const MetaValue* v = find(key);
    return v && v->type == MetaType::kStrings ? &v->strings : nullptr;
  }

 private:
  const MetaValue* find(std::string_view key) const { return program_.meta(std::string(key)); }
  const Program& program_;
};

}  // namespace vrun::tok
