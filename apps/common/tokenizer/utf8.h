// UTF-8 handling shared by the tokenizers: repairing invalid input the way each reference does,
// finding where a byte stream can be cut without splitting a character, and GPT-2's byte-level
// alphabet (every byte as a printable character, so vocabularies can be stored as text).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "runtime/base/utf8.h"

namespace vrun::tok {

// How invalid UTF-8 in the input text becomes valid text before tokenisation. The references
// differ: Python's bytes.decode(errors="replace") (what a Hugging Face or SentencePiece caller
// sees) replaces each maximal invalid subpart with U+FFFD; llama.cpp replaces byte by byte and
// accepts overlong forms, which it re-encodes canonically.
enum class InvalidUtf8 { kReplaceMaximalSubpart, kReplacePerByteLenient };

// Returns text unchanged when it is valid UTF-8, else a repaired copy.
std::string repair_utf8(std::string_view text, InvalidUtf8 policy);
bool is_valid_utf8(std::string_view text);

using vrun::utf8_sequence_length;

// Appends the UTF-8 encoding of cp.
void append_utf8(uint32_t cp, std::string& out);
// Decodes one code point of valid UTF-8 at text[pos], advancing pos.
uint32_t decode_utf8(std::string_view text, size_t& pos);

// GPT-2's byte <-> printable character mapping.
class ByteLevelAlphabet {
 public:
  ByteLevelAlphabet();
  // UTF-8 of the character that stands for byte b.
  const std::string& encode(uint8_t b) const { return byte_to_text_[b]; }
  // Maps a byte-level token text back to raw bytes; false when a character is outside the
  // alphabet (then out holds that character's own UTF-8, which is what the references print).
  bool decode(std::string_view token_text, std::string& out) const;

 private:
  std::array<std::string, 256> byte_to_text_;
  std::array<int16_t, 512> char_to_byte_;  // index: code point (all lie below 512), -1 if none
};

const ByteLevelAlphabet& byte_level_alphabet();

}  // namespace vrun::tok
