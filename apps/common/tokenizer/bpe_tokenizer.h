// Byte-level BPE (GPT-2 family: Whisper, SmolLM2, Llama-3, Qwen). Loaders (tokenizer.json,
// GGUF metadata, tiktoken ranks) all reduce their input to a BpeVocabulary; the encoder works on
// raw bytes and token ids only.
#pragma once

#include <array>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "apps/common/tokenizer/pre_tokenizer.h"
#include "apps/common/tokenizer/tokenizer.h"
#include "apps/common/tokenizer/utf8.h"
#include "apps/common/tokenizer/word_cache.h"

namespace vrun::tok {

// A token matched in the text before pre-tokenisation (special and other added tokens).
struct AddedToken {
  std::string content;
  TokenId id = -1;
  bool special = true;       // obeys EncodeOptions::allow_special
  bool lstrip = false;       // absorbs whitespace on its left
  bool rstrip = false;       // absorbs whitespace on its right
  bool single_word = false;  // only matches when not inside a word
};

struct BpeVocabulary {
  std::string source;                     // file name, for messages
  std::vector<std::string> token_bytes;   // id -> raw bytes ("" for unused ids)
  std::vector<std::string> pieces;        // id -> the vocabulary's own spelling
  // Merges in rank order, as (left id, right id, merged id). Several pairs may share a rank
  // (tiktoken: every split of a token merges at that token's rank).
  struct Merge {
    TokenId left, right, merged;
    int32_t rank;
  };
  std::vector<Merge> merges;
  std::vector<AddedToken> added;
  std::vector<SplitStep> pre_steps;
  bool add_prefix_space = false;  // per fragment, when it does not start with a space
  bool ignore_merges = false;     // a word that is itself a token is emitted whole
  InvalidUtf8 invalid_utf8 = InvalidUtf8::kReplaceMaximalSubpart;
  SpecialIds specials;
};

class BpeTokenizer final : public Tokenizer {
 public:
  static Result<std::unique_ptr<BpeTokenizer>> create(BpeVocabulary vocab);

  using Tokenizer::encode;
  std::vector<TokenId> encode(std::string_view text, const EncodeOptions& options) const override;
  void append_token_bytes(TokenId id, bool at_start, bool skip_special, std::string& out) const override;
  size_t vocab_size() const override { return vocab_.token_bytes.size(); }
  std::string id_to_piece(TokenId id) const override;
  std::optional<TokenId> piece_to_id(std::string_view piece) const override;
  bool is_special(TokenId id) const override;
  const SpecialIds& special_ids() const override { return vocab_.specials; }
  std::string kind() const override { return "bpe"; }

  // Encodes one pre-token word (raw bytes) with merges only; exposed for tests and the bench.
  void encode_word(std::string_view word, std::vector<TokenId>& out) const;

 private:
  explicit BpeTokenizer(BpeVocabulary vocab, PreTokenizer pre);
  void encode_fragment(std::string_view text, std::vector<TokenId>& out) const;
  void merge_short(std::string_view word, std::vector<TokenId>& out) const;
  void merge_long(std::string_view word, std::vector<TokenId>& out) const;

  struct PairEntry {
    uint64_t key = ~0ull;
    int32_t rank = 0;
    TokenId merged = -1;
  };
  const PairEntry* find_pair(TokenId left, TokenId right) const;

  struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  using StringMap = std::unordered_map<std::string, TokenId, StringHash, std::equal_to<>>;

  BpeVocabulary vocab_;
  PreTokenizer pre_;
  std::array<TokenId, 256> byte_ids_{};
  std::vector<PairEntry> pairs_;  // open addressing, power-of-two size
  uint64_t pair_mask_ = 0;
  StringMap bytes_to_id_;
  StringMap piece_to_id_;
  std::vector<uint8_t> special_flags_;
  std::array<bool, 256> added_first_byte_{};

  mutable std::mutex cache_mutex_;
  mutable WordCache cache_;
};

}  // namespace vrun::tok
