#include "models/whisper/ct2_whisper.h"

#include "models/common/json_guard.h"

#include <filesystem>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "models/common/files.h"
#include "models/ct2/ct2_file.h"
#include "models/whisper/whisper_import.h"

namespace vrun::whisper {

namespace fs = std::filesystem;

namespace {

Result<std::vector<int64_t>> int_list(const nlohmann::json& j, const char* key, const std::string& source) {
  std::vector<int64_t> out;
  if (!j.contains(key)) return out;
  const auto& v = j[key];
  if (!v.is_array()) return err(ErrorCode::kInvalidProgram, source, ": '", key, "' is not a list");
  for (const auto& x : v) {
    if (x.is_number_integer()) {
      out.push_back(x.get<int64_t>());
    } else if (x.is_array()) {  // alignment_heads: [[layer, head], ...]
      for (const auto& y : x) {
        if (!y.is_number_integer()) return err(ErrorCode::kInvalidProgram, source, ": '", key, "' holds a non-integer");
        out.push_back(y.get<int64_t>());
      }
    } else {
      return err(ErrorCode::kInvalidProgram, source, ": '", key, "' holds a non-integer");
    }
  }
  return out;
}

// An int8 matrix with per-row scales (value = q / scale) is q8_0 with each row's 1 / scale as the
// scale of its blocks: the int8 values are kept as they are, only the scale is rounded to f16.
bool fits_q8_0(const ct2::File& f, const ct2::Variable& v) {
  if (v.dtype != ct2::Ct2DType::kInt8 || v.shape.size() != 2 || v.shape[1] % kQuantBlock != 0) return false;
  const ct2::Variable* s = f.find(v.name + "_scale");
  return s && (s->numel() == 1 || s->numel() == v.shape[0]);
}

std::optional<Weight> int8_as_q8_0(const ct2::File& f, const ct2::Variable& v) {
  auto scales = ct2::load_f32(f, v.name + "_scale");
  if (!scales) return std::nullopt;
  const int64_t rows = v.shape[0], cols = v.shape[1], blocks = cols / kQuantBlock;
  auto buf = std::make_shared<std::vector<uint8_t>>(static_cast<size_t>(dtype_bytes(DType::q8_0, rows * cols)));
  const auto* q = reinterpret_cast<const int8_t*>(v.data);
  for (int64_t r = 0; r < rows; ++r) {
    const float s = (*scales)[scales->size() == 1 ? 0 : static_cast<size_t>(r)];
    if (!(s != 0.0f)) return std::nullopt;
    BlockQ8_0 b;
    b.d = f32_to_f16(1.0f / s);
    for (int64_t k = 0; k < blocks; ++k) {
      std::memcpy(b.qs, q + r * cols + k * kQuantBlock, kQuantBlock);
      std::memcpy(buf->data() + (r * blocks + k) * sizeof(BlockQ8_0), &b, sizeof(BlockQ8_0));
    }
  }
  return Weight{DType::q8_0, v.shape, buf->data(), buf};
}

// CTranslate2's converter writes vocabulary.json (a JSON list) or vocabulary.txt (one token a
// line) in byte-level form when the source had no tokenizer.json to copy.
Result<std::string> tokenizer_from_vocabulary(const fs::path& dir, int64_t n_vocab) {
  std::vector<std::string> tokens;
  std::error_code ec;
  const fs::path js = dir / "vocabulary.json", txt = dir / "vocabulary.txt";
  if (fs::exists(js, ec)) {
    VRUN_ASSIGN_OR_RETURN(std::string text, models::read_file(js));
    nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_array()) return err(ErrorCode::kInvalidProgram, js.string(), ": not a JSON list of tokens");
    for (const auto& t : j) {
      if (!t.is_string()) return err(ErrorCode::kInvalidProgram, js.string(), ": entry ", tokens.size(), " is not a string");
      tokens.push_back(t.get<std::string>());
    }
  } else if (fs::exists(txt, ec)) {
    VRUN_ASSIGN_OR_RETURN(std::string text, models::read_file(txt));
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) tokens.push_back(line);
  } else {
    return err(ErrorCode::kNotFound, dir.string(), ": no tokenizer.json, vocabulary.json or vocabulary.txt beside model.bin");
  }
  VRUN_ASSIGN_OR_RETURN(SpecialLayout s, special_layout(n_vocab));
  std::vector<std::string> bytes;
  for (int64_t i = 0; i < s.eot && i < static_cast<int64_t>(tokens.size()); ++i) {
    auto b = byte_level_to_bytes(tokens[static_cast<size_t>(i)]);
    if (!b) return err(ErrorCode::kInvalidProgram, dir.string(), ": vocabulary entry ", i, " '", tokens[static_cast<size_t>(i)],
                       "' is not a byte-level token");
    bytes.push_back(std::move(*b));
  }
  return tokenizer_json_from_token_bytes(bytes, n_vocab, dir.string());
}

int64_t count_layers(const ct2::File& f, const std::string& prefix) {
  int64_t n = 0;
  while (f.find(prefix + "/layer_" + std::to_string(n) + "/ffn/linear_0/weight")) ++n;
  return n;
}

}  // namespace

bool is_ct2_folder(const std::string& path) {
  std::error_code ec;
  return fs::is_directory(path, ec) ? fs::exists(fs::path(path) / "model.bin", ec)
                                    : fs::path(path).filename() == "model.bin";
}

static Result<ImportedWhisper> import_ct2_whisper_unguarded(const std::string& path);
Result<ImportedWhisper> import_ct2_whisper(const std::string& path) {
  return models::json_guard(path, [&] { return import_ct2_whisper_unguarded(path); });
}

static Result<ImportedWhisper> import_ct2_whisper_unguarded(const std::string& path) {
  std::error_code ec;
  const fs::path dir = fs::is_directory(path, ec) ? fs::path(path) : fs::path(path).parent_path();
  const fs::path bin = dir / "model.bin";
  VRUN_ASSIGN_OR_RETURN(std::shared_ptr<ct2::File> f, ct2::File::open(bin.string()));
  if (f->spec() != "WhisperSpec")
    return err(ErrorCode::kUnsupported, bin.string(), ": spec '", f->spec(), "' is not WhisperSpec");
  ImportedWhisper m;
  WhisperConfig& c = m.config;
  const ct2::Variable* conv1 = f->find("encoder/conv1/weight");
  const ct2::Variable* enc_pos = f->find("encoder/position_encodings/encodings");
  const ct2::Variable* dec_pos = f->find("decoder/position_encodings/encodings");
  const ct2::Variable* embed = f->find("decoder/embeddings/weight");
  if (!conv1 || !enc_pos || !dec_pos || !embed)
    return err(ErrorCode::kNotFound, bin.string(), ": missing one of encoder/conv1/weight, encoder/position_encodings/encodings, "
               "decoder/position_encodings/encodings, decoder/embeddings/weight");
  if (conv1->shape.size() != 3 || enc_pos->shape.size() != 2 || dec_pos->shape.size() != 2 || embed->shape.size() != 2)
    return err(ErrorCode::kInvalidProgram, bin.string(), ": conv1 / position / embedding tensors have the wrong rank");
  c.n_mels = conv1->shape[1];
  c.n_audio_state = conv1->shape[0];
  c.n_audio_ctx = enc_pos->shape[0];
  c.n_text_ctx = dec_pos->shape[0];
  c.n_vocab = embed->shape[0];
  c.n_text_state = embed->shape[1];
  VRUN_ASSIGN_OR_RETURN(c.n_audio_head, f->scalar_int("encoder/num_heads"));
  VRUN_ASSIGN_OR_RETURN(c.n_text_head, f->scalar_int("decoder/num_heads"));
  c.n_audio_layer = count_layers(*f, "encoder");
  c.n_text_layer = count_layers(*f, "decoder");
  VRUN_RETURN_IF_ERROR(c.validate().with_context(bin.string()));

  std::map<std::string, int> converted;
  int as_q8 = 0;
  for (const auto& v : f->variables()) {
    if (fits_q8_0(*f, v)) ++as_q8;
    else if ((v.dtype == ct2::Ct2DType::kInt8 || v.dtype == ct2::Ct2DType::kInt16) && f->find(v.name + "_scale"))
      ++converted[ct2::ct2_dtype_name(v.dtype)];  // quantised weights (int scalars are settings)
  }
  if (as_q8)
    m.notes.push_back(bin.string() + ": " + std::to_string(as_q8) +
                      " int8 weights kept as q8_0 (the int8 values unchanged, 1 / per-row scale as each block's f16 scale)");
  for (const auto& [dt, n] : converted)
    m.notes.push_back(bin.string() + ": " + std::to_string(n) + " " + dt + " weights dequantised to " +
                      (dt == std::string("int8") ? "f16" : "f32") + " (with their per-row scales)");
  m.weights = [f](const std::string& name) -> std::optional<Weight> {
    const ct2::Variable* v = f->find(name);
    if (!v) return std::nullopt;
    if (fits_q8_0(*f, *v)) return int8_as_q8_0(*f, *v);
    auto t = ct2::load_tensor(*f, name);
    if (!t) return std::nullopt;
    return Weight{t->dtype, t->shape, t->data, t->keep};
  };

  const fs::path cfg = dir / "config.json";
  if (fs::exists(cfg, ec)) {
    VRUN_ASSIGN_OR_RETURN(std::string text, models::read_file(cfg));
    nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object()) return err(ErrorCode::kInvalidProgram, cfg.string(), ": not a JSON object");
    VRUN_ASSIGN_OR_RETURN(m.extras.suppress_tokens, int_list(j, "suppress_ids", cfg.string()));
    VRUN_ASSIGN_OR_RETURN(m.extras.suppress_begin, int_list(j, "suppress_ids_begin", cfg.string()));
    VRUN_ASSIGN_OR_RETURN(m.extras.alignment_heads, int_list(j, "alignment_heads", cfg.string()));
    if (m.extras.alignment_heads.size() % 2)
      return err(ErrorCode::kInvalidProgram, cfg.string(), ": alignment_heads must be [layer, head] pairs");
    for (int64_t t : m.extras.suppress_tokens)
      if (t < -1 || t >= c.n_vocab)
        return err(ErrorCode::kInvalidProgram, cfg.string(), ": suppress_ids entry ", t, " outside the vocabulary of ", c.n_vocab);
  }
  const fs::path tok = dir / "tokenizer.json";
  if (fs::exists(tok, ec)) {
    VRUN_ASSIGN_OR_RETURN(m.extras.tokenizer_json, models::read_file(tok));
  } else {
    VRUN_ASSIGN_OR_RETURN(m.extras.tokenizer_json, tokenizer_from_vocabulary(dir, c.n_vocab));
    m.notes.push_back(dir.string() + ": no tokenizer.json; the tokenizer is built from the vocabulary file and Whisper's special-token layout");
  }
  if (m.extras.alignment_heads.empty()) {
    std::string which;
    m.extras.alignment_heads = default_alignment_heads(c, &which);
    m.notes.push_back(dir.string() + ": no alignment_heads in config.json; using " + which);
  }
  return m;
}

}  // namespace vrun::whisper
