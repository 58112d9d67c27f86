#include "apps/common/tokenizer/tokenizer.h"

#include "apps/common/tokenizer/utf8.h"

namespace vrun::tok {

std::string Tokenizer::decode(std::span<const TokenId> ids, bool skip_special) const {
  std::string bytes;
  bool at_start = true;
  for (TokenId id : ids) {
    const size_t before = bytes.size();
    append_token_bytes(id, at_start, skip_special, bytes);
    if (bytes.size() != before) at_start = false;
  }
  return repair_utf8(bytes, InvalidUtf8::kReplaceMaximalSubpart);
}

std::string StreamingDecoder::push(TokenId id) {
  const size_t before = pending_.size();
  tokenizer_.append_token_bytes(id, at_start_, skip_special_, pending_);
  if (pending_.size() != before) at_start_ = false;
  // Emit up to the last position where a character could still be unfinished: a trailing valid
  // prefix of a multi-byte sequence waits for the next token, everything before it is final
  // because maximal-subpart repair never looks past the end of an invalid subpart.
  size_t cut = pending_.size();
  const size_t scan_from = pending_.size() > 3 ? pending_.size() - 3 : 0;
  for (size_t i = scan_from; i < pending_.size(); ++i) {
    bool more = false;
    const auto b = static_cast<uint8_t>(pending_[i]);
    if (b < 0xC0) continue;
    if (utf8_sequence_length(std::string_view(pending_).substr(i), &more) == 0 && more) {
      cut = i;
      break;
    }
  }
  std::string out = repair_utf8(std::string_view(pending_).substr(0, cut), InvalidUtf8::kReplaceMaximalSubpart);
  pending_.erase(0, cut);
  return out;
}

std::string StreamingDecoder::finish() {
  std::string out = repair_utf8(pending_, InvalidUtf8::kReplaceMaximalSubpart);
  pending_.clear();
  at_start_ = true;
  return out;
}

}  // namespace vrun::tok
