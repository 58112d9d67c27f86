#include "apps/common/tokenizer/bpe_tokenizer.h"

#include <algorithm>
#include <climits>
#include <queue>

namespace vrun::tok {

namespace {

uint64_t pair_key(TokenId left, TokenId right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

uint64_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  return x;
}

// Words up to this many bytes merge with a flat rank array (cheap for the short words that make
// up almost all text); longer ones use a heap so a huge whitespace run stays O(n log n).
constexpr size_t kShortWord = 96;

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

bool is_word_byte(char c) {
  const auto b = static_cast<uint8_t>(c);
  return b >= 0x80 || (b >= '0' && b <= '9') || (b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z') || b == '_';
}

}  // namespace

BpeTokenizer::BpeTokenizer(BpeVocabulary vocab, PreTokenizer pre) : vocab_(std::move(vocab)), pre_(std::move(pre)) {}

Result<std::unique_ptr<BpeTokenizer>> BpeTokenizer::create(BpeVocabulary vocab) {
  VRUN_ASSIGN_OR_RETURN(PreTokenizer pre, PreTokenizer::create(vocab.pre_steps, vocab.source));
  const std::string source = vocab.source;
  std::unique_ptr<BpeTokenizer> t(new BpeTokenizer(std::move(vocab), std::move(pre)));
  const BpeVocabulary& v = t->vocab_;
  const auto n = static_cast<TokenId>(v.token_bytes.size());
  if (v.pieces.size() != v.token_bytes.size()) {
    return err(ErrorCode::kInternal, source, ": ", v.pieces.size(), " pieces for ", v.token_bytes.size(), " tokens");
  }
  for (TokenId id = 0; id < n; ++id) {
    if (!v.token_bytes[id].empty()) t->bytes_to_id_.emplace(v.token_bytes[id], id);
    if (!v.pieces[id].empty()) t->piece_to_id_.emplace(v.pieces[id], id);
  }
  // Added tokens override plain entries with the same bytes only for matching in text, which
  // happens before BPE; the byte map keeps the first (ordinary) id, as the references do.
  // A byte without a token (some vocabularies lack bytes that never occur in UTF-8 text, or rare
  // lead bytes) is dropped from the output, as both references do when no token covers it.
  for (int b = 0; b < 256; ++b) {
    auto it = t->bytes_to_id_.find(std::string_view(reinterpret_cast<const char*>(&b), 1));
    t->byte_ids_[b] = it == t->bytes_to_id_.end() ? -1 : it->second;
  }
  size_t cap = 16;
  while (cap < v.merges.size() * 2) cap <<= 1;
  t->pairs_.assign(cap, PairEntry{});
  t->pair_mask_ = cap - 1;
  for (const auto& m : v.merges) {
    for (TokenId id : {m.left, m.right, m.merged}) {
      if (id < 0 || id >= n) return err(ErrorCode::kInvalidProgram, source, ": merge refers to token id ", id, " outside the vocabulary of ", n);
    }
    const uint64_t key = pair_key(m.left, m.right);
    for (uint64_t slot = mix(key) & t->pair_mask_;; slot = (slot + 1) & t->pair_mask_) {
      PairEntry& e = t->pairs_[slot];
      if (e.key == key) break;  // a repeated pair keeps its first (lowest) rank
      if (e.key == ~0ull) {
        e = PairEntry{key, m.rank, m.merged};
        break;
      }
    }
  }
  t->special_flags_.assign(n, 0);
  for (const AddedToken& a : v.added) {
    if (a.id < 0 || a.id >= n) return err(ErrorCode::kInvalidProgram, source, ": added token '", a.content, "' has id ", a.id, " outside the vocabulary of ", n);
    if (a.content.empty()) return err(ErrorCode::kInvalidProgram, source, ": added token ", a.id, " is empty");
    if (a.special) t->special_flags_[a.id] = 1;
    t->added_first_byte_[static_cast<uint8_t>(a.content[0])] = true;
  }
  // Longest first, so the first candidate that matches at a position is the longest one.
  std::stable_sort(t->vocab_.added.begin(), t->vocab_.added.end(),
                   [](const AddedToken& x, const AddedToken& y) { return x.content.size() > y.content.size(); });
  return t;
}

const BpeTokenizer::PairEntry* BpeTokenizer::find_pair(TokenId left, TokenId right) const {
  if (left < 0 || right < 0) return nullptr;
  const uint64_t key = pair_key(left, right);
  for (uint64_t slot = mix(key) & pair_mask_;; slot = (slot + 1) & pair_mask_) {
    const PairEntry& e = pairs_[slot];
    if (e.key == key) return &e;
    if (e.key == ~0ull) return nullptr;
  }
}

void BpeTokenizer::merge_short(std::string_view word, std::vector<TokenId>& out) const {
  TokenId sym[kShortWord];
  int32_t rank[kShortWord];
  TokenId merged[kShortWord];
  size_t n = word.size();
  for (size_t i = 0; i < n; ++i) sym[i] = byte_ids_[static_cast<uint8_t>(word[i])];
  auto fill = [&](size_t i) {
    const PairEntry* p = find_pair(sym[i], sym[i + 1]);
    rank[i] = p ? p->rank : INT32_MAX;
    merged[i] = p ? p->merged : -1;
  };
  for (size_t i = 0; i + 1 < n; ++i) fill(i);
  while (n > 1) {
    size_t best = 0;
    for (size_t i = 1; i + 1 < n; ++i) {
      if (rank[i] < rank[best]) best = i;
    }
    if (rank[best] == INT32_MAX) break;
    sym[best] = merged[best];
    for (size_t i = best + 1; i + 1 < n; ++i) {
      sym[i] = sym[i + 1];
      rank[i] = rank[i + 1];
      merged[i] = merged[i + 1];
    }
    --n;
    if (best > 0) fill(best - 1);
    if (best + 1 < n) fill(best);
  }
  for (size_t i = 0; i < n; ++i) {
    if (sym[i] >= 0) out.push_back(sym[i]);
  }
}

void BpeTokenizer::merge_long(std::string_view word, std::vector<TokenId>& out) const {
  const size_t n = word.size();
  std::vector<TokenId> sym(n);
  std::vector<int32_t> prev(n), next(n);
  for (size_t i = 0; i < n; ++i) {
    sym[i] = byte_ids_[static_cast<uint8_t>(word[i])];
    prev[i] = static_cast<int32_t>(i) - 1;
    next[i] = i + 1 < n ? static_cast<int32_t>(i + 1) : -1;
  }
  struct Candidate {
    int32_t rank, pos;
    TokenId left, right;
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> queue;
  auto push = [&](int32_t i) {
    if (i < 0 || next[i] < 0) return;
    if (const PairEntry* p = find_pair(sym[i], sym[next[i]])) queue.push({p->rank, i, sym[i], sym[next[i]]});
  };
  for (size_t i = 0; i + 1 < n; ++i) push(static_cast<int32_t>(i));
  while (!queue.empty()) {
    const Candidate c = queue.top();
    queue.pop();
    // Stale entries: the left symbol was merged away or changed, or its neighbour changed.
    if (sym[c.pos] != c.left || next[c.pos] < 0 || sym[next[c.pos]] != c.right) continue;
    const int32_t r = next[c.pos];
    sym[c.pos] = find_pair(c.left, c.right)->merged;
    sym[r] = -1;
    next[c.pos] = next[r];
    if (next[r] >= 0) prev[next[r]] = c.pos;
    push(prev[c.pos]);
    push(c.pos);
  }
  for (int32_t i = 0; i >= 0; i = next[i]) {
    if (sym[i] >= 0) out.push_back(sym[i]);
  }
}

void BpeTokenizer::encode_word(std::string_view word, std::vector<TokenId>& out) const {
  if (word.empty()) return;
  if (vocab_.ignore_merges || word.size() == 1) {
    if (auto it = bytes_to_id_.find(word); it != bytes_to_id_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  const bool cacheable = word.size() <= WordCache::kMaxWordBytes;
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    uint32_t count = 0;
    if (const TokenId* ids = cache_.find(word, count)) {
      out.insert(out.end(), ids, ids + count);
      return;
    }
  }
  const size_t start = out.size();
  if (word.size() <= kShortWord) {
    merge_short(word, out);
  } else {
    merge_long(word, out);
  }
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    cache_.insert(word, out.data() + start, static_cast<uint32_t>(out.size() - start));
  }
}

void BpeTokenizer::encode_fragment(std::string_view text, std::vector<TokenId>& out) const {
  if (text.empty()) return;
  std::string prefixed;
  if (vocab_.add_prefix_space && text[0] != ' ') {
    prefixed = " ";
    prefixed += text;
    text = prefixed;
  }
  thread_local std::vector<std::string_view> words;
  words.clear();
  pre_.split(text, words);
  for (std::string_view w : words) encode_word(w, out);
}

std::vector<TokenId> BpeTokenizer::encode(std::string_view raw, const EncodeOptions& options) const {
  const std::string text = repair_utf8(raw, vocab_.invalid_utf8);
  std::vector<TokenId> out;
  out.reserve(text.size() / 3 + 4);
  if (options.add_bos && vocab_.specials.bos >= 0) out.push_back(vocab_.specials.bos);
  // Added tokens split the text first (leftmost, then longest), as both references do; the
  // stretches between them are tokenised independently.
  size_t fragment_start = 0, pos = 0;
  const std::string_view t(text);
  while (pos < t.size()) {
    if (!added_first_byte_[static_cast<uint8_t>(t[pos])]) {
      ++pos;
      continue;
    }
    const AddedToken* hit = nullptr;
    for (const AddedToken& a : vocab_.added) {
      if (a.special && !options.allow_special) continue;
      if (t.compare(pos, a.content.size(), a.content) != 0) continue;
      if (a.single_word && ((pos > 0 && is_word_byte(t[pos - 1])) ||
                            (pos + a.content.size() < t.size() && is_word_byte(t[pos + a.content.size()])))) {
        continue;
      }
      hit = &a;
      break;
    }
    if (hit == nullptr) {
      ++pos;
      continue;
    }
    size_t left = pos, right = pos + hit->content.size();
    if (hit->lstrip) {
      while (left > fragment_start && is_space(t[left - 1])) --left;
    }
    if (hit->rstrip) {
      while (right < t.size() && is_space(t[right])) ++right;
    }
    encode_fragment(t.substr(fragment_start, left - fragment_start), out);
    out.push_back(hit->id);
    pos = fragment_start = right;
  }
  encode_fragment(t.substr(fragment_start), out);
  return out;
}

void BpeTokenizer::append_token_bytes(TokenId id, bool, bool skip_special, std::string& out) const {
  if (id < 0 || static_cast<size_t>(id) >= vocab_.token_bytes.size()) return;
  if (skip_special && special_flags_[id]) return;
  out += vocab_.token_bytes[id];
}

std::string BpeTokenizer::id_to_piece(TokenId id) const {
  if (id < 0 || static_cast<size_t>(id) >= vocab_.pieces.size()) return {};
  return vocab_.pieces[id];
}

std::optional<TokenId> BpeTokenizer::piece_to_id(std::string_view piece) const {
  if (auto it = piece_to_id_.find(piece); it != piece_to_id_.end()) return it->second;
  return std::nullopt;
}

bool BpeTokenizer::is_special(TokenId id) const {
  return id >= 0 && static_cast<size_t>(id) < special_flags_.size() && special_flags_[id];
}

}  // namespace vrun::tok
