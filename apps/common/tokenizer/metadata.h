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

namespace vrun::tok {

// Keys a program stores its tokenizer under.
namespace keys {
// "hf_json", "sentencepiece", "tiktoken" or "ggml" (the tokenizer.ggml.* keys below).
inline constexpr const char* kKind = "tokenizer.kind";
inline constexpr const char* kHfJson = "tokenizer.json";               // bytes of tokenizer.json
inline constexpr const char* kSpmModel = "tokenizer.spm_model";        // bytes of tokenizer.model
inline constexpr const char* kTiktokenRanks = "tokenizer.tiktoken";    // bytes of the rank file
inline constexpr const char* kChatTemplate = "tokenizer.chat_template";  // Jinja source, as in GGUF
// GGUF's own keys, kept verbatim.
inline constexpr const char* kGgmlModel = "tokenizer.ggml.model";
inline constexpr const char* kGgmlPre = "tokenizer.ggml.pre";
inline constexpr const char* kGgmlTokens = "tokenizer.ggml.tokens";
inline constexpr const char* kGgmlTokenType = "tokenizer.ggml.token_type";
inline constexpr const char* kGgmlMerges = "tokenizer.ggml.merges";
inline constexpr const char* kGgmlBos = "tokenizer.ggml.bos_token_id";
inline constexpr const char* kGgmlEos = "tokenizer.ggml.eos_token_id";
inline constexpr const char* kGgmlEot = "tokenizer.ggml.eot_token_id";
inline constexpr const char* kGgmlUnk = "tokenizer.ggml.unknown_token_id";
inline constexpr const char* kGgmlPad = "tokenizer.ggml.padding_token_id";
inline constexpr const char* kGgmlAddBos = "tokenizer.ggml.add_bos_token";
}  // namespace keys

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
