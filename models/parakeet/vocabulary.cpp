#include "models/parakeet/vocabulary.h"

#include "models/common/json_guard.h"
#include "runtime/base/strings.h"
#include "runtime/base/utf8.h"

#include <nlohmann/json.hpp>

namespace vrun::parakeet {

namespace {

constexpr std::string_view kSpace = "\xE2\x96\x81";  // U+2581
constexpr std::string_view kUnknownText = " \xE2\x81\x87 ";

bool is_byte_piece(const std::string& p, uint8_t* value) {
  if (p.size() != 6 || p.compare(0, 3, "<0x") != 0 || p[5] != '>') return false;
  auto hex = [](char c) { return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1; };
  const int hi = hex(p[3]), lo = hex(p[4]);
  if (hi < 0 || lo < 0) return false;
  *value = static_cast<uint8_t>(hi * 16 + lo);
  return true;
}

// Protobuf varint / length-delimited reading for the two messages we need.
struct Proto {
  std::string_view b;
  size_t p = 0;
  bool varint(uint64_t* v) {
    *v = 0;
    for (int shift = 0; shift < 64 && p < b.size(); shift += 7) {
      const uint8_t c = static_cast<uint8_t>(b[p++]);
      *v |= static_cast<uint64_t>(c & 0x7f) << shift;
      if (!(c & 0x80)) return true;
    }
    return false;
  }
  // Skips or returns the field's payload; false on malformed input.
  bool field(uint64_t* number, int* wire, std::string_view* payload, uint64_t* value) {
    uint64_t key;
    if (!varint(&key)) return false;
    *number = key >> 3;
    *wire = static_cast<int>(key & 7);
    switch (*wire) {
      case 0: return varint(value);
      case 1:
        if (b.size() - p < 8) return false;
        p += 8;
        return true;
      case 5:
        if (b.size() - p < 4) return false;
        p += 4;
        return true;
      case 2: {
        uint64_t len;
        if (!varint(&len) || len > b.size() - p) return false;
        *payload = b.substr(p, static_cast<size_t>(len));
        p += static_cast<size_t>(len);
        return true;
      }
      default: return false;
    }
  }
};

}  // namespace

std::string Vocabulary::token_bytes(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= pieces.size()) return {};
  const std::string& piece = pieces[static_cast<size_t>(id)];
  switch (kinds[static_cast<size_t>(id)]) {
    case PieceKind::kControl: return {};
    case PieceKind::kUnknown: return std::string(kUnknownText);
    case PieceKind::kByte: {
      uint8_t v = 0;
      is_byte_piece(piece, &v);
      return std::string(1, static_cast<char>(v));
    }
    case PieceKind::kNormal: break;
  }
  return replace_all(piece, kSpace, " ");
}

bool Vocabulary::starts_word(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= pieces.size()) return false;
  return kinds[static_cast<size_t>(id)] == PieceKind::kNormal && pieces[static_cast<size_t>(id)].rfind(kSpace, 0) == 0;
}

std::string Vocabulary::decode(std::span<const int32_t> ids) const {
  std::string bytes;
  bool first = true, strip = false;
  for (int32_t id : ids) {
    const std::string b = token_bytes(id);
    // SentencePiece drops the dummy-prefix space of the first piece only (not the space of
    // " ⁇ " or of a byte piece).
    if (first && !b.empty()) {
      strip = starts_word(id);
      first = false;
    }
    bytes += b;
  }
  std::string text = repair_utf8(bytes);
  if (strip && !text.empty() && text[0] == ' ') text.erase(0, 1);
  return text;
}

std::string repair_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  append_utf8_replacing_invalid(s, out);
  return out;
}

Result<Vocabulary> vocabulary_from_spm(std::string_view model_proto, const std::string& source) {
  Vocabulary v;
  Proto top{model_proto};
  while (top.p < model_proto.size()) {
    uint64_t num, value = 0;
    int wire;
    std::string_view payload;
    if (!top.field(&num, &wire, &payload, &value))
      return err(ErrorCode::kInvalidArgument, source, ": not a SentencePiece model (malformed protobuf at byte ", top.p, ")");
    if (num != 1 || wire != 2) continue;
    Proto sp{payload};
    std::string piece;
    uint64_t type = 1;
    while (sp.p < payload.size()) {
      uint64_t n2, v2 = 0;
      int w2;
      std::string_view p2;
      if (!sp.field(&n2, &w2, &p2, &v2)) return err(ErrorCode::kInvalidArgument, source, ": malformed SentencePiece piece ", v.size());
      if (n2 == 1 && w2 == 2) piece = std::string(p2);
      if (n2 == 3 && w2 == 0) type = v2;
    }
    PieceKind kind = PieceKind::kNormal;
    uint8_t byte;
    if (type == 2) kind = PieceKind::kUnknown;
    else if (type == 3 || type == 5) kind = PieceKind::kControl;
    else if (type == 6 && is_byte_piece(piece, &byte)) kind = PieceKind::kByte;
    v.pieces.push_back(std::move(piece));
    v.kinds.push_back(kind);
  }
  if (v.pieces.empty()) return err(ErrorCode::kInvalidArgument, source, ": a SentencePiece model without pieces");
  return v;
}

static Result<Vocabulary> vocabulary_from_tokenizer_json_unguarded(std::string_view text, int64_t count, const std::string& source);
Result<Vocabulary> vocabulary_from_tokenizer_json(std::string_view text, int64_t count, const std::string& source) {
  return models::json_guard(source, [&] { return vocabulary_from_tokenizer_json_unguarded(text, count, source); });
}

static Result<Vocabulary> vocabulary_from_tokenizer_json_unguarded(std::string_view text, int64_t count, const std::string& source) {
  using nlohmann::json;
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    return err(ErrorCode::kInvalidArgument, source, ": invalid JSON: ", e.what());
  }
  if (!j.contains("model") || !j["model"].is_object() || !j["model"].contains("vocab"))
    return err(ErrorCode::kInvalidArgument, source, ": no model.vocab");
  Vocabulary v;
  v.pieces.assign(static_cast<size_t>(count), std::string());
  v.kinds.assign(static_cast<size_t>(count), PieceKind::kNormal);
  std::vector<bool> seen(static_cast<size_t>(count), false);
  auto put = [&](int64_t id, const std::string& piece) {
    if (id < 0 || id >= count) return;
    v.pieces[static_cast<size_t>(id)] = piece;
    uint8_t b;
    if (is_byte_piece(piece, &b)) v.kinds[static_cast<size_t>(id)] = PieceKind::kByte;
    seen[static_cast<size_t>(id)] = true;
  };
  const json& vocab = j["model"]["vocab"];
  if (vocab.is_array()) {  // Unigram: [[piece, score], ...] in id order
    for (size_t i = 0; i < vocab.size(); ++i)
      if (vocab[i].is_array() && !vocab[i].empty() && vocab[i][0].is_string()) put(static_cast<int64_t>(i), vocab[i][0].get<std::string>());
  } else if (vocab.is_object()) {  // BPE: piece -> id
    for (auto it = vocab.begin(); it != vocab.end(); ++it)
      if (it.value().is_number_integer()) put(it.value().get<int64_t>(), it.key());
  } else {
    return err(ErrorCode::kInvalidArgument, source, ": model.vocab is neither a list nor a map");
  }
  if (j["model"].contains("unk_id") && j["model"]["unk_id"].is_number_integer()) {
    const int64_t u = j["model"]["unk_id"].get<int64_t>();
    if (u >= 0 && u < count) v.kinds[static_cast<size_t>(u)] = PieceKind::kUnknown;
  }
  if (j.contains("added_tokens") && j["added_tokens"].is_array())
    for (const json& t : j["added_tokens"]) {
      if (!t.is_object() || !t.contains("id") || !t["id"].is_number_integer() || !t.contains("content")) continue;
      const int64_t id = t["id"].get<int64_t>();
      if (id < 0 || id >= count) continue;
      put(id, t["content"].get<std::string>());
      const bool special = t.value("special", false);
      if (t["content"] == "<unk>") v.kinds[static_cast<size_t>(id)] = PieceKind::kUnknown;
      else if (special) v.kinds[static_cast<size_t>(id)] = PieceKind::kControl;
    }
  for (int64_t i = 0; i < count; ++i)
    if (!seen[static_cast<size_t>(i)])
      return err(ErrorCode::kInvalidArgument, source, ": the tokenizer has no token ", i, "; the model's vocabulary has ", count);
  return v;
}

}  // namespace vrun::parakeet
