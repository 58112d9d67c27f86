// tiktoken rank files (Llama-3's tokenizer.model): "<base64 bytes> <rank>" per line. A pair of
// adjacent parts may merge when their concatenation is a token, at that token's rank; listing
// every split of every token as a merge gives exactly that rule to the shared BPE encoder.
#include <algorithm>
#include <array>

#include "apps/common/tokenizer/bpe_tokenizer.h"
#include "apps/common/tokenizer/loaders.h"

namespace vrun::tok {

namespace {

Result<std::string> base64_decode(std::string_view s, const std::string& source, size_t line) {
  static const std::array<int8_t, 256> table = [] {
    std::array<int8_t, 256> t{};
    t.fill(-1);
    const char* alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (int i = 0; i < 64; ++i) t[static_cast<uint8_t>(alphabet[i])] = static_cast<int8_t>(i);
    return t;
  }();
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : s) {
    if (c == '=') break;
    const int8_t v = table[static_cast<uint8_t>(c)];
    if (v < 0) return err(ErrorCode::kInvalidProgram, source, ": line ", line, ": invalid base64 character");
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xFF);
    }
  }
  return out;
}

// Llama-3's 256 special tokens follow the 128000 ranks (names as in Llama 3.1's tokenizer).
std::vector<std::string> llama3_special_tokens() {
  std::vector<std::string> names = {"<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>",
                                    "<|reserved_special_token_1|>", "<|finetune_right_pad_id|>", "<|step_id|>",
                                    "<|start_header_id|>", "<|end_header_id|>", "<|eom_id|>", "<|eot_id|>",
                                    "<|python_tag|>"};
  for (int i = 2; names.size() < 256; ++i) names.push_back("<|reserved_special_token_" + std::to_string(i) + "|>");
  return names;
}

}  // namespace

Result<std::unique_ptr<Tokenizer>> load_tiktoken_ranks(std::string_view text, const std::string& source) {
  BpeVocabulary v;
  v.source = source;
  v.ignore_merges = true;  // tiktoken emits a pre-token whole when it is a token
  v.pre_steps = {{kLlama3Pattern, false}};
  std::unordered_map<std::string, TokenId> ids;
  // Ranks are distinct, one a line: one past the lines the file has is a lie, and would size the
  // vocabulary from a single line (a rank of 10^8 is 3 GB of empty entries).
  const size_t n_lines = static_cast<size_t>(std::count(text.begin(), text.end(), '\n')) + 1;
  size_t line_no = 0, pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) continue;
    const size_t space = line.find(' ');
    if (space == std::string_view::npos) return err(ErrorCode::kInvalidProgram, source, ": line ", line_no, ": expected '<base64> <rank>'");
    VRUN_ASSIGN_OR_RETURN(std::string bytes, base64_decode(line.substr(0, space), source, line_no));
    int64_t rank = 0;
    for (char c : line.substr(space + 1)) {
      if (c < '0' || c > '9' || rank > (1 << 24)) return err(ErrorCode::kInvalidProgram, source, ": line ", line_no, ": bad rank");
      rank = rank * 10 + (c - '0');
    }
    if (static_cast<size_t>(rank) >= n_lines)
      return err(ErrorCode::kInvalidProgram, source, ": line ", line_no, ": rank ", rank, " but the file has only ", n_lines,
                 " lines (ranks are distinct, one a line)");
    if (static_cast<size_t>(rank) >= v.token_bytes.size()) v.token_bytes.resize(rank + 1);
    if (bytes.empty() || !v.token_bytes[rank].empty()) {
      return err(ErrorCode::kInvalidProgram, source, ": line ", line_no, ": empty token or rank ", rank, " given twice");
    }
    v.token_bytes[rank] = bytes;
    ids.emplace(std::move(bytes), static_cast<TokenId>(rank));
  }
  const size_t n_ranks = v.token_bytes.size();
  for (size_t id = 0; id < n_ranks; ++id) {
    const std::string& t = v.token_bytes[id];
    for (size_t k = 1; k < t.size(); ++k) {
      auto l = ids.find(t.substr(0, k));
      if (l == ids.end()) continue;
      auto r = ids.find(t.substr(k));
      if (r == ids.end()) continue;
      v.merges.push_back({l->second, r->second, static_cast<TokenId>(id), static_cast<int32_t>(id)});
    }
  }
  if (n_ranks == 128000) {
    const auto specials = llama3_special_tokens();
    for (size_t i = 0; i < specials.size(); ++i) {
      const auto id = static_cast<TokenId>(n_ranks + i);
      v.token_bytes.push_back(specials[i]);
      v.added.push_back({specials[i], id, true});
    }
    v.specials.bos = 128000;
    v.specials.eos = 128001;
    v.specials.eot = 128009;
  }
  v.pieces.resize(v.token_bytes.size());
  const ByteLevelAlphabet& alphabet = byte_level_alphabet();
  for (size_t id = 0; id < v.token_bytes.size(); ++id) {
    if (id >= n_ranks) {
      v.pieces[id] = v.token_bytes[id];
      continue;
    }
    for (char c : v.token_bytes[id]) v.pieces[id] += alphabet.encode(static_cast<uint8_t>(c));
  }
  VRUN_ASSIGN_OR_RETURN(auto tokenizer, BpeTokenizer::create(std::move(v)));
  return std::unique_ptr<Tokenizer>(std::move(tokenizer));
}

}  // namespace vrun::tok
