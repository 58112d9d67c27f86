#include "apps/parakeet/timestamps.h"

#include <algorithm>
#include <string_view>

namespace vrun::parakeet {

namespace {

// Unicode general category P (punctuation) for the code points vocabularies hold: all of ASCII's
// and the common Latin-1, general-punctuation and CJK marks.
bool is_punctuation(std::string_view ch) {
  if (ch.size() == 1) {
    const char c = ch[0];
    return std::string_view("!\"#%&'()*,-./:;?@[\\]_{}").find(c) != std::string_view::npos;
  }
  static const char* const kMarks[] = {"¡", "§", "«", "¶", "·", "»", "¿", "‐", "‑", "‒", "–", "—", "―", "‖", "‘", "’", "‚", "‛", "“", "”",
                                       "„", "‟", "†", "‡", "•", "…", "‰", "′", "″", "‹", "›", "、", "。", "〈", "〉", "《", "》", "「",
                                       "」", "『", "』", "【", "】", "！", "，", "．", "：", "；", "？", "（", "）", "؟", "،", "।"};
  for (const char* m : kMarks)
    if (ch == m) return true;
  return false;
}

// UTF-8 characters of a string.
std::vector<std::string_view> characters(std::string_view s) {
  std::vector<std::string_view> out;
  for (size_t i = 0; i < s.size();) {
    size_t n = 1;
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0xF0) n = 4;
    else if (c >= 0xE0) n = 3;
    else if (c >= 0xC0) n = 2;
    n = std::min(n, s.size() - i);
    out.push_back(s.substr(i, n));
    i += n;
  }
  return out;
}

bool special_piece(const std::string& p) {
  if (p.empty()) return true;
  if (p.size() >= 2 && ((p.front() == '<' && p.back() == '>') || (p.front() == '[' && p.back() == ']'))) return true;
  if (p.rfind("##", 0) == 0 || p.rfind("\xE2\x96\x81", 0) == 0) return true;
  return p.find_first_not_of(" \t\n\r\f\v") == std::string::npos;
}

}  // namespace

TranscriptBuilder::TranscriptBuilder(const Vocabulary& vocab, double window_stride, int64_t subsampling)
    : vocab_(vocab), window_stride_(window_stride), subsampling_(subsampling) {
  for (const std::string& piece : vocab.pieces) {
    if (special_piece(piece)) continue;
    for (std::string_view ch : characters(piece))
      if (is_punctuation(ch)) punctuation_.insert(std::string(ch));
  }
}

std::string TranscriptBuilder::token_text(int32_t id) const { return vocab_.decode(std::span<const int32_t>(&id, 1)); }

std::string TranscriptBuilder::text(const std::vector<EmittedToken>& tokens) const {
  std::vector<int32_t> ids;
  for (const auto& t : tokens) ids.push_back(t.id);
  const std::string raw = vocab_.decode(ids);
  if (punctuation_.empty()) return raw;
  // One whitespace before a punctuation mark goes (NeMo's space_before_punct_pattern).
  const auto chars = characters(raw);
  std::string out;
  for (size_t i = 0; i < chars.size(); ++i) {
    const bool space = chars[i].size() == 1 && std::string_view(" \t\n\r\f\v").find(chars[i][0]) != std::string_view::npos;
    if (space && i + 1 < chars.size() && punctuation_.count(std::string(chars[i + 1]))) continue;
    out.append(chars[i]);
  }
  return out;
}

void TranscriptBuilder::refine_tdt(std::vector<EmittedToken>& tokens) const {
  if (punctuation_.empty()) return;
  for (size_t i = 1; i < tokens.size(); ++i) {
    const std::string t = token_text(tokens[i].id);
    // NeMo compares the first character of the token's text.
    const auto chars = characters(t);
    if (!chars.empty() && punctuation_.count(std::string(chars[0]))) tokens[i].start = tokens[i].end = tokens[i - 1].end;
  }
}

void TranscriptBuilder::ctc_offsets(std::vector<EmittedToken>& tokens) const {
  int64_t previous = tokens.empty() ? 0 : std::max<int64_t>(0, tokens[0].start - 1);
  for (auto& t : tokens) {
    const int64_t first = t.start;
    t.start = previous;
    t.end = first;
    previous = first;
  }
  if (punctuation_.empty()) return;
  for (size_t i = 1; i < tokens.size(); ++i) {
    const std::string text = token_text(tokens[i].id);
    const auto chars = characters(text);
    if (!chars.empty() && punctuation_.count(std::string(chars[0]))) tokens[i].end = tokens[i].start;
  }
}

std::vector<transcript::Word> TranscriptBuilder::words(const std::vector<EmittedToken>& tokens,
                                                       std::vector<std::vector<int32_t>>* word_tokens) const {
  struct W {
    std::string text;
    int64_t start, end;
    std::vector<int32_t> ids;
  };
  std::vector<W> out;
  const size_t n = tokens.size();
  std::vector<std::string> texts(n);
  for (size_t i = 0; i < n; ++i) texts[i] = token_text(tokens[i].id);
  auto piece = [&](int32_t id) { return id >= 0 && static_cast<size_t>(id) < vocab_.size() ? vocab_.pieces[static_cast<size_t>(id)] : std::string(); };
  std::vector<int32_t> built;
  size_t prev = 0;
  for (size_t i = 0; i < n; ++i) {
    const std::string& text = texts[i];
    const std::string tok = piece(tokens[i].id);
    const bool punct = !punctuation_.empty() && punctuation_.count(text) && text != " ";
    // The next token whose text is neither empty nor the delimiter: is it punctuation?
    bool next_punct = false;
    for (size_t j = i + 1; j < n; ++j)
      if (!texts[j].empty() && texts[j] != " ") {
        next_punct = punctuation_.count(texts[j]) > 0;
        break;
      }
    const bool starts = tok != text || (text == " " && !next_punct);
    if (starts && !punct) {
      if (!built.empty()) out.push_back({vocab_.decode(built), tokens[prev].start, tokens[i - 1].end, built});
      built.clear();
      if (text != " ") {
        built.push_back(tokens[i].id);
        prev = i;
      }
    } else if (punct && built.empty() && !out.empty()) {
      W& last = out.back();
      last.end = tokens[i].end;
      if (!last.text.empty() && last.text.back() == ' ') last.text.pop_back();
      last.text += text;
      last.ids.push_back(tokens[i].id);
    } else if (punct && !built.empty()) {
      const std::string last_piece = piece(built.back());
      if (last_piece == " " || last_piece == "_" || last_piece == "\xE2\x96\x81") built.pop_back();
      built.push_back(tokens[i].id);
    } else {
      if (built.empty()) prev = i;
      built.push_back(tokens[i].id);
    }
  }
  if (out.empty()) {
    if (!built.empty()) out.push_back({vocab_.decode(built), tokens[0].start, tokens[n - 1].end, built});
  } else {
    out[0].start = tokens[0].start;
    if (!built.empty()) out.push_back({vocab_.decode(built), tokens[prev].start, tokens[n - 1].end, built});
  }
  std::vector<transcript::Word> words;
  if (word_tokens) word_tokens->clear();
  for (const W& w : out) {
    transcript::Word x;
    x.text = " " + w.text;  // the shared Word convention: the leading space of the decoded word
    x.start = seconds(w.start);
    x.end = seconds(w.end);
    words.push_back(std::move(x));
    if (word_tokens) word_tokens->push_back(w.ids);
  }
  return words;
}

std::vector<transcript::Segment> TranscriptBuilder::segments(const std::vector<EmittedToken>& tokens, bool with_words) const {
  std::vector<std::vector<int32_t>> word_ids;
  const std::vector<transcript::Word> ws = words(tokens, &word_ids);
  std::vector<transcript::Segment> out;
  size_t first = 0;
  auto close = [&](size_t last) {  // words [first, last]
    transcript::Segment s;
    s.start = ws[first].start;
    s.end = ws[last].end;
    for (size_t k = first; k <= last; ++k) {
      s.text += ws[k].text;  // " word": NeMo's ' '.join(words) after the leading space
      s.tokens.insert(s.tokens.end(), word_ids[k].begin(), word_ids[k].end());
      if (with_words) s.words.push_back(ws[k]);
    }
    out.push_back(std::move(s));
    first = last + 1;
  };
  for (size_t i = 0; i < ws.size(); ++i) {
    const std::string& w = ws[i].text;
    const bool ends = !w.empty() && (w.back() == '.' || w.back() == '?' || w.back() == '!');
    if (ends) close(i);
  }
  if (first < ws.size()) close(ws.size() - 1);
  return out;
}

}  // namespace vrun::parakeet
