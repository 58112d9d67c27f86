// Well-formed UTF-8 (Unicode table 3-7) and the repair of invalid input the way Python's
// bytes.decode(errors="replace") does it: what the tokenizers and the vocabularies that turn
// token bytes into text share.
#pragma once

#include <string>
#include <string_view>

namespace vrun {

// Length of the well-formed sequence starting at text[0] (1..4), or 0 when text[0] does not start
// one; needed_more is set when the bytes so far are a valid but unfinished prefix.
int utf8_sequence_length(std::string_view text, bool* needed_more);

// Appends s to out with each maximal invalid subpart (the longest prefix of a well-formed
// sequence, or else one byte) replaced by one U+FFFD.
void append_utf8_replacing_invalid(std::string_view s, std::string& out);

}  // namespace vrun
