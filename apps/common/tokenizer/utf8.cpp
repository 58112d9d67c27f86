#include "apps/common/tokenizer/utf8.h"

namespace vrun::tok {

bool is_valid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    if (static_cast<uint8_t>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    const int n = utf8_sequence_length(s.substr(i), nullptr);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

void append_utf8(uint32_t cp, std::string& out) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

uint32_t decode_utf8(std::string_view s, size_t& pos) {
  const auto b0 = static_cast<uint8_t>(s[pos]);
  if (b0 < 0x80) return s[pos++];
  const int len = b0 >= 0xF0 ? 4 : b0 >= 0xE0 ? 3 : 2;
  uint32_t cp = b0 & (0x7F >> len);
  for (int i = 1; i < len; ++i) cp = (cp << 6) | (static_cast<uint8_t>(s[pos + i]) & 0x3F);
  pos += len;
  return cp;
}

namespace {

const char kReplacement[] = "\xEF\xBF\xBD";

// llama.cpp's decoder only checks the lead byte's length class and that the continuation bytes
// are 10xxxxxx, so overlong forms and surrogates decode; anything else costs one byte. Surrogates
// and values above U+10FFFF cannot be re-encoded as text, so they become U+FFFD here.
void repair_per_byte_lenient(std::string_view s, std::string& out) {
  size_t i = 0;
  while (i < s.size()) {
    const auto b0 = static_cast<uint8_t>(s[i]);
    int len = 0;
    if (b0 < 0x80) len = 1;
    else if ((b0 & 0xE0) == 0xC0) len = 2;
    else if ((b0 & 0xF0) == 0xE0) len = 3;
    else if ((b0 & 0xF8) == 0xF0) len = 4;
    bool ok = len > 0 && i + len <= s.size();
    for (int k = 1; ok && k < len; ++k) ok = (static_cast<uint8_t>(s[i + k]) & 0xC0) == 0x80;
    if (!ok) {
      out += kReplacement;
      ++i;
      continue;
    }
    uint32_t cp = len == 1 ? b0 : b0 & (0x7F >> len);
    for (int k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<uint8_t>(s[i + k]) & 0x3F);
    if ((cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) {
      out += kReplacement;
    } else {
      append_utf8(cp, out);
    }
    i += len;
  }
}

}  // namespace

std::string repair_utf8(std::string_view text, InvalidUtf8 policy) {
  if (is_valid_utf8(text)) return std::string(text);
  std::string out;
  out.reserve(text.size() + 16);
  if (policy == InvalidUtf8::kReplaceMaximalSubpart) {
    append_utf8_replacing_invalid(text, out);
  } else {
    repair_per_byte_lenient(text, out);
  }
  return out;
}

ByteLevelAlphabet::ByteLevelAlphabet() {
  char_to_byte_.fill(-1);
  int next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
    const int cp = printable ? b : next++;
    append_utf8(cp, byte_to_text_[b]);
    char_to_byte_[cp] = static_cast<int16_t>(b);
  }
}

bool ByteLevelAlphabet::decode(std::string_view text, std::string& out) const {
  bool all = true;
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t start = pos;
    const int n = utf8_sequence_length(text.substr(pos), nullptr);
    if (n == 0) {  // not text at all: keep the byte
      out += text[pos++];
      all = false;
      continue;
    }
    const uint32_t cp = decode_utf8(text, pos);
    if (cp < char_to_byte_.size() && char_to_byte_[cp] >= 0) {
      out += static_cast<char>(char_to_byte_[cp]);
    } else {
      out.append(text.substr(start, pos - start));
      all = false;
    }
  }
  return all;
}

const ByteLevelAlphabet& byte_level_alphabet() {
  static const ByteLevelAlphabet alphabet;
  return alphabet;
}

}  // namespace vrun::tok
