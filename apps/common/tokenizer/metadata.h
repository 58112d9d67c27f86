// Where a tokenizer is stored inside a model: a generic key/value view, so a GGUF header and a
// .vrp program's metadata map both work through one adapter each.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "models/common/tokenizer_keys.h"

namespace vrun::tok {


class MetadataView {
 public:
  virtual ~MetadataView() = default;
  // A string or bytes value.
  virtual std::optional<std::string_view> get_string(std::string_view key) const = 0;
  virtual std::optional<int64_t> get_int(std::string_view key) const = 0;
  virtual std::optional<std::vector<int64_t>> get_ints(std::string_view key) const = 0;
  virtual const std::vector<std::string>* get_strings(std::string_view key) const = 0;
};

// An in-memory map; what the GGUF reader fills and what tests build by hand.
class MetadataMap final : public MetadataView {
 public:
  using Value = std::variant<std::string, int64_t, double, std::vector<int64_t>, std::vector<double>,
                             std::vector<std::string>>;
  void set(std::string key, Value value) { values_[std::move(key)] = std::move(value); }
  bool contains(std::string_view key) const { return values_.find(key) != values_.end(); }

  std::optional<std::string_view> get_string(std::string_view key) const override;
  std::optional<int64_t> get_int(std::string_view key) const override;
  std::optional<std::vector<int64_t>> get_ints(std::string_view key) const override;
  const std::vector<std::string>* get_strings(std::string_view key) const override;

 private:
  std::map<std::string, Value, std::less<>> values_;
};

}  // namespace vrun::tok
