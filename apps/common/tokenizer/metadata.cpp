#include "apps/common/tokenizer/metadata.h"

namespace vrun::tok {

std::optional<std::string_view> MetadataMap::get_string(std::string_view key) const {
  auto it = values_.find(key);
  if (it == values_.end()) return std::nullopt;
  if (const auto* s = std::get_if<std::string>(&it->second)) return std::string_view(*s);
  return std::nullopt;
}

std::optional<int64_t> MetadataMap::get_int(std::string_view key) const {
  auto it = values_.find(key);
  if (it == values_.end()) return std::nullopt;
  if (const auto* i = std::get_if<int64_t>(&it->second)) return *i;
  return std::nullopt;
}

std::optional<std::vector<int64_t>> MetadataMap::get_ints(std::string_view key) const {
  auto it = values_.find(key);
  if (it == values_.end()) return std::nullopt;
  if (const auto* v = std::get_if<std::vector<int64_t>>(&it->second)) return *v;
  return std::nullopt;
}

const std::vector<std::string>* MetadataMap::get_strings(std::string_view key) const {
  auto it = values_.find(key);
  if (it == values_.end()) return nullptr;
  return std::get_if<std::vector<std::string>>(&it->second);
}

}  // namespace vrun::tok
