// SentencePiece (Llama-2, Parakeet) through libsentencepiece itself, so BPE and unigram models
// tokenise exactly as the reference. Decoding is done piece by piece here, following
// SentencePiece's rules (see FORMATS.md), because streaming needs one token's bytes at a time.
#include <sentencepiece_processor.h>

#include "apps/common/tokenizer/loaders.h"
#include "apps/common/tokenizer/utf8.h"
#include "runtime/base/strings.h"

namespace vrun::tok {

namespace {

constexpr std::string_view kSpaceSymbol = "\xE2\x96\x81";        // U+2581
constexpr std::string_view kUnknownSurface = " \xE2\x81\x87 ";  // SentencePiece's default " ⁇ "

class SentencePieceTokenizer final : public Tokenizer {
 public:
  SentencePieceTokenizer(std::unique_ptr<sentencepiece::SentencePieceProcessor> sp) : sp_(std::move(sp)) {
    specials_.bos = sp_->bos_id();
    specials_.eos = sp_->eos_id();
    specials_.unk = sp_->unk_id();
    specials_.pad = sp_->pad_id();
    const int n = sp_->GetPieceSize();
    surfaces_.resize(n);
    flags_.resize(n);
    for (int id = 0; id < n; ++id) {
      const std::string piece = sp_->IdToPiece(id);
      if (sp_->IsControl(id)) {
        flags_[id] = kControl;
      } else if (sp_->IsUnknown(id)) {
        flags_[id] = kUnknown;
        surfaces_[id] = kUnknownSurface;
      } else if (sp_->IsByte(id)) {  // "<0xNN>"
        surfaces_[id] = static_cast<char>(std::stoi(piece.substr(3, 2), nullptr, 16));
      } else {
        surfaces_[id] += replace_all(piece, kSpaceSymbol, " ");
        if (strip_first_space_ < 0 && piece.rfind(kSpaceSymbol, 0) == 0 && piece.size() > kSpaceSymbol.size()) {
          // Whether the model drops the space of a leading "▁" (add_dummy_prefix or
          // remove_extra_whitespaces): ask the library once rather than parse its proto.
          std::string decoded;
          strip_first_space_ = sp_->Decode(std::vector<int>{id}, &decoded).ok() && !decoded.empty() && decoded[0] != ' ';
        }
      }
    }
  }

  using Tokenizer::encode;
  std::vector<TokenId> encode(std::string_view text, const EncodeOptions& options) const override {
    // Callers of the reference pass Python text, so invalid bytes arrive as U+FFFD already.
    const std::string repaired = repair_utf8(text, InvalidUtf8::kReplaceMaximalSubpart);
    std::vector<int> ids;
    if (!sp_->Encode(repaired, &ids).ok()) ids.clear();
    std::vector<TokenId> out;
    out.reserve(ids.size() + 1);
    if (options.add_bos && specials_.bos >= 0) out.push_back(specials_.bos);
    out.insert(out.end(), ids.begin(), ids.end());
    return out;
  }

  void append_token_bytes(TokenId id, bool at_start, bool skip_special, std::string& out) const override {
    if (id < 0 || static_cast<size_t>(id) >= surfaces_.size()) return;
    if (skip_special && flags_[id] != kNormal) return;
    std::string_view s = surfaces_[id];
    if (at_start && strip_first_space_ > 0 && !sp_->IsByte(id) && flags_[id] == kNormal && !s.empty() && s[0] == ' ') {
      s.remove_prefix(1);
    }
    out += s;
  }

  size_t vocab_size() const override { return surfaces_.size(); }
  std::string id_to_piece(TokenId id) const override {
    return id >= 0 && static_cast<size_t>(id) < surfaces_.size() ? sp_->IdToPiece(id) : std::string();
  }
  std::optional<TokenId> piece_to_id(std::string_view piece) const override {
    const int id = sp_->PieceToId(piece);
    if (id == sp_->unk_id() && piece != sp_->IdToPiece(id)) return std::nullopt;
    return id;
  }
  bool is_special(TokenId id) const override {
    return id >= 0 && static_cast<size_t>(id) < flags_.size() && flags_[id] != kNormal;
  }
  const SpecialIds& special_ids() const override { return specials_; }
  std::string kind() const override { return "sentencepiece"; }

 private:
  enum Flag : uint8_t { kNormal, kControl, kUnknown };
  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
  std::vector<std::string> surfaces_;
  std::vector<uint8_t> flags_;
  int strip_first_space_ = -1;
  SpecialIds specials_;
};

}  // namespace

Result<std::unique_ptr<Tokenizer>> load_sentencepiece(std::string_view model_proto, const std::string& source) {
  auto sp = std::make_unique<sentencepiece::SentencePieceProcessor>();
  sentencepiece::util::Status status;
  try {
    status = sp->LoadFromSerializedProto(model_proto);
  } catch (const std::exception& e) {
    // libsentencepiece's trie builder throws on some malformed models (a zero-length piece).
    return err(ErrorCode::kInvalidProgram, source, ": not a usable SentencePiece model: ", e.what());
  }
  if (!status.ok()) {
    return err(ErrorCode::kInvalidProgram, source, ": not a SentencePiece model: ", status.ToString());
  }
  return std::unique_ptr<Tokenizer>(std::make_unique<SentencePieceTokenizer>(std::move(sp)));
}

}  // namespace vrun::tok
