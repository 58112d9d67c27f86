// Splits text into the words BPE merges within, as a sequence of regex steps (Hugging Face's
// Split/ByteLevel/Digits pre-tokenizers and llama.cpp's per-`pre` regex lists are both this).
// Regexes run in PCRE2 with UTF, UCP (\p{L}, \p{N}, Unicode \s) and JIT.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/base/status.h"

namespace vrun::tok {

// The patterns of the vocabularies we run.
inline constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
inline constexpr const char* kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
inline constexpr const char* kQwen2Pattern =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

class CompiledRegex;

struct SplitStep {
  std::string pattern;
  // Isolated keeps matches and the text between them as separate words; Removed drops matches.
  bool remove_matches = false;
};

class PreTokenizer {
 public:
  // source names where the steps came from, for error messages.
  static Result<PreTokenizer> create(const std::vector<SplitStep>& steps, const std::string& source);
  PreTokenizer(PreTokenizer&&) noexcept;
  PreTokenizer& operator=(PreTokenizer&&) noexcept;
  ~PreTokenizer();

  // Appends the words of text (valid UTF-8) to words, as views into text.
  void split(std::string_view text, std::vector<std::string_view>& words) const;
  bool empty() const { return steps_.empty(); }

 private:
  PreTokenizer() = default;
  struct Step {
    std::unique_ptr<CompiledRegex> regex;
    bool remove_matches;
  };
  std::vector<Step> steps_;
};

}  // namespace vrun::tok
