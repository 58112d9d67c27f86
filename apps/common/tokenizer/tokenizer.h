// The tokenizer interface the runners use, whatever the vocabulary kind (byte-level BPE from
// tokenizer.json / GGUF / tiktoken ranks, or SentencePiece).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace vrun::tok {

using TokenId = int32_t;

struct EncodeOptions {
  // Special-token strings in the text (e.g. "<|im_start|>") become their single id when true and
  // are tokenised as ordinary text when false.
  bool allow_special = true;
  bool add_bos = false;
};

// Ids a runner needs; -1 where the vocabulary has none.
struct SpecialIds {
  TokenId bos = -1;
  TokenId eos = -1;
  TokenId eot = -1;  // end of turn (Llama-3 <|eot_id|>, ChatML <|im_end|>)
  TokenId unk = -1;
  TokenId pad = -1;
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  virtual std::vector<TokenId> encode(std::string_view text, const EncodeOptions& options) const = 0;
  std::vector<TokenId> encode(std::string_view text) const { return encode(text, EncodeOptions{}); }

  // Appends the bytes token id stands for in decoded text. at_start is true for the first token
  // that produces text (SentencePiece drops the dummy-prefix space there). Special tokens give
  // their text unless skip_special; ids outside the vocabulary give nothing.
  virtual void append_token_bytes(TokenId id, bool at_start, bool skip_special, std::string& out) const = 0;

  // Whole-sequence decode: token bytes, then invalid UTF-8 replaced by U+FFFD (maximal subparts).
  std::string decode(std::span<const TokenId> ids, bool skip_special = false) const;

  virtual size_t vocab_size() const = 0;
  // The vocabulary's own spelling of a token (byte-level characters, "▁" pieces).
  virtual std::string id_to_piece(TokenId id) const = 0;
  virtual std::optional<TokenId> piece_to_id(std::string_view piece) const = 0;
  virtual bool is_special(TokenId id) const = 0;
  virtual const SpecialIds& special_ids() const = 0;
  // "bpe" or "sentencepiece", for `vrun info` and error messages.
  virtual std::string kind() const = 0;
};

// Emits text token by token without ever splitting a UTF-8 character; the concatenation of
// everything push() and finish() return equals Tokenizer::decode of the same ids.
class StreamingDecoder {
 public:
  explicit StreamingDecoder(const Tokenizer& tokenizer, bool skip_special = false)
      : tokenizer_(tokenizer), skip_special_(skip_special) {}
  // Text that became complete with this token (possibly empty).
  std::string push(TokenId id);
  // Whatever is left (an unfinished character becomes U+FFFD, as in decode()).
  std::string finish();

 private:
  const Tokenizer& tokenizer_;
  bool skip_special_;
  bool at_start_ = true;
  std::string pending_;
};

}  // namespace vrun::tok
