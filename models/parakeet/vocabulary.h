// The output vocabulary of a Parakeet model as decoding needs it: each id's piece and kind, read
// from the SentencePiece model proto of a .nemo archive or from a Hugging Face tokenizer.json. Text
// is made as SentencePiece decodes (see FORMATS.md): pieces concatenated, U+2581 as space, byte
// pieces as raw bytes, invalid UTF-8 replaced by U+FFFD, control pieces empty, unknown " ⁇ ".
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/base/status.h"

namespace vrun::parakeet {

enum class PieceKind : uint8_t { kNormal = 0, kByte = 1, kControl = 2, kUnknown = 3 };

struct Vocabulary {
  std::vector<std::string> pieces;
  std::vector<PieceKind> kinds;

  size_t size() const { return pieces.size(); }
  // Raw bytes of one token's piece (the U+2581 marks turned into spaces).
  std::string token_bytes(int32_t id) const;
  // Whole-sequence text: bytes, then UTF-8 repair; the first leading space dropped.
  std::string decode(std::span<const int32_t> ids) const;
  // True when the piece starts a word (it begins with U+2581).
  bool starts_word(int32_t id) const;
};

// Pieces of a SentencePiece ModelProto (tokenizer.model bytes).
Result<Vocabulary> vocabulary_from_spm(std::string_view model_proto, const std::string& source);
// Pieces with ids below `count` from a Hugging Face tokenizer.json (Unigram or BPE model).
Result<Vocabulary> vocabulary_from_tokenizer_json(std::string_view json_text, int64_t count, const std::string& source);

// Invalid UTF-8 sequences replaced by U+FFFD, maximal subpart by maximal subpart (as Python's
// bytes.decode(errors='replace')).
std::string repair_utf8(std::string_view bytes);

}  // namespace vrun::parakeet
