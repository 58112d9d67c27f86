#include "models/whisper/whisper_import.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "models/whisper/ggml_whisper.h"
#include "models/whisper/hf_whisper.h"
#include "runtime/base/strings.h"

namespace vrun::whisper {

namespace fs = std::filesystem;

bool is_whisper_checkpoint(const std::string& path) {
  return is_ct2_folder(path) || is_hf_whisper_folder(path) || is_ggml_whisper_file(path);
}

Result<ImportedWhisper> import_whisper(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return err(ErrorCode::kNotFound, path, ": no such file or folder");
  if (is_ggml_whisper_file(path)) return import_ggml_whisper(path);
  if (is_ct2_folder(path)) return import_ct2_whisper(path);
  if (is_hf_whisper_folder(path)) return import_hf_whisper(path);
  return err(ErrorCode::kUnsupported, path,
             ": not a Whisper checkpoint vrun reads (a faster-whisper / CTranslate2 folder with model.bin, a Hugging Face "
             "folder whose config.json has model_type 'whisper', or a whisper.cpp ggml .bin file)");
}

// ---------------------------------------------------------------- canonical names -> layout names

std::vector<WeightPart> source_parts(const std::string& canonical, WeightNaming naming) {
  const bool hf = naming == WeightNaming::kHuggingFace;
  const std::vector<std::string> c = split(canonical, '/');
  if (c.size() < 3 || (c[0] != "encoder" && c[0] != "decoder")) return {};
  const std::string& top = c[0];
  const std::string& leaf = c.back();
  const std::string field = leaf == "gamma" ? "weight" : leaf == "beta" ? "bias" : leaf;
  if (field != "weight" && field != "bias" && leaf != "encodings") return {};
  const std::string root = (hf ? "model." : "") + top + ".";
  auto one = [](std::string n) { return std::vector<WeightPart>{{std::move(n), false}}; };
  if (c.size() == 3) {
    if (c[1] == "conv1" || c[1] == "conv2") return one(root + c[1] + "." + field);
    if (c[1] == "position_encodings" && leaf == "encodings")
      return one(root + (hf ? "embed_positions.weight" : "positional_embedding"));
    if (c[1] == "embeddings" && top == "decoder" && field == "weight")
      return one(root + (hf ? "embed_tokens.weight" : "token_embedding.weight"));
    if (c[1] == "layer_norm") return one(root + (hf ? "layer_norm" : top == "encoder" ? "ln_post" : "ln") + "." + field);
    return {};
  }
  if (c.size() != 5 || c[1].rfind("layer_", 0) != 0) return {};
  const std::string block = root + (hf ? "layers." : "blocks.") + c[1].substr(6) + ".";
  const std::string& sub = c[2];
  const std::string& part = c[3];
  if (part == "layer_norm") {
    if (sub == "self_attention") return one(block + (hf ? "self_attn_layer_norm." : "attn_ln.") + field);
    if (sub == "attention") return one(block + (hf ? "encoder_attn_layer_norm." : "cross_attn_ln.") + field);
    if (sub == "ffn") return one(block + (hf ? "final_layer_norm." : "mlp_ln.") + field);
    return {};
  }
  if (sub == "ffn") {
    if (part == "linear_0") return one(block + (hf ? "fc1." : "mlp.0.") + field);
    if (part == "linear_1") return one(block + (hf ? "fc2." : "mlp.2.") + field);
    return {};
  }
  const std::string attn = block + (sub == "self_attention" ? (hf ? "self_attn." : "attn.") : (hf ? "encoder_attn." : "cross_attn."));
  auto proj = [&](const char* which) {  // which: q k v out
    static const std::unordered_map<std::string, std::pair<const char*, const char*>> names = {
        {"q", {"q_proj", "query"}}, {"k", {"k_proj", "key"}}, {"v", {"v_proj", "value"}}, {"out", {"out_proj", "out"}}};
    const auto& n = names.at(which);
    return WeightPart{attn + (hf ? n.first : n.second) + "." + field, std::string(which) == "k" && field == "bias"};
  };
  if (sub == "self_attention") {
    if (part == "linear_0") return {proj("q"), proj("k"), proj("v")};
    if (part == "linear_1") return {proj("out")};
  } else if (sub == "attention") {
    if (part == "linear_0") return {proj("q")};
    if (part == "linear_1") return {proj("k"), proj("v")};
    if (part == "linear_2") return {proj("out")};
  }
  return {};
}

WeightSource fused_weight_source(TensorLookup lookup, WeightNaming naming) {
  return [lookup = std::move(lookup), naming](const std::string& name) -> std::optional<Weight> {
    const std::vector<WeightPart> parts = source_parts(name, naming);
    if (parts.empty()) return std::nullopt;
    std::vector<std::optional<Weight>> found;
    const Weight* model = nullptr;
    for (const WeightPart& p : parts) {
      found.push_back(lookup(p.name));
      if (!found.back() && !p.zero_if_absent) return std::nullopt;
    }
    if (found.size() == 1) return found[0];
    for (const auto& f : found)
      if (f && !model) model = &*f;
    if (!model || model->shape.empty()) return std::nullopt;
    // Rows are concatenated as bytes: every part must share the dtype and the row shape.
    const std::vector<int64_t> row_shape(model->shape.begin() + 1, model->shape.end());
    int64_t row_elems = 1;
    for (int64_t d : row_shape) row_elems *= d;
    if (is_quantized(model->dtype) && row_elems % kQuantBlock != 0) return std::nullopt;
    const int64_t row_bytes = dtype_bytes(model->dtype, row_elems);
    int64_t rows = 0;
    for (const auto& f : found) {
      if (!f) {
        rows += model->shape[0];
        continue;
      }
      if (f->dtype != model->dtype || f->shape.size() != model->shape.size() ||
          !std::equal(row_shape.begin(), row_shape.end(), f->shape.begin() + 1))
        return std::nullopt;  // reported by the graph builder as a shape mismatch of the missing name
      rows += f->shape[0];
    }
    auto buf = std::make_shared<std::vector<uint8_t>>(static_cast<size_t>(rows * row_bytes), uint8_t{0});
    uint8_t* out = buf->data();
    for (const auto& f : found) {
      const int64_t n = (f ? f->shape[0] : model->shape[0]) * row_bytes;
      if (f) std::memcpy(out, f->data, static_cast<size_t>(n));
      out += n;
    }
    Weight w;
    w.dtype = model->dtype;
    w.shape = model->shape;
    w.shape[0] = rows;
    w.data = buf->data();
    w.keep = buf;
    return w;
  };
}

// ---------------------------------------------------------------- vocabulary

Result<SpecialLayout> special_layout(int64_t n_vocab) {
  SpecialLayout s;
  const bool multilingual = n_vocab >= 51865;
  s.n_languages = n_vocab - 51765 - (multilingual ? 1 : 0);
  if (s.n_languages < 1 || s.n_languages > static_cast<int64_t>(whisper_language_codes().size()))
    return err(ErrorCode::kInvalidProgram, "whisper vocabulary of ", n_vocab,
               " ids is not one of Whisper's layouts (51864 English-only, 51865 or 51866 multilingual)");
  s.eot = multilingual ? 50257 : 50256;
  s.sot = s.eot + 1;
  s.translate = s.sot + 1 + s.n_languages;
  s.transcribe = s.translate + 1;
  s.startoflm = s.transcribe + 1;
  s.startofprev = s.startoflm + 1;
  s.nospeech = s.startofprev + 1;
  s.notimestamps = s.nospeech + 1;
  s.timestamp_begin = s.notimestamps + 1;
  return s;
}

const std::vector<std::string>& whisper_language_codes() {
  static const std::vector<std::string> codes = {
      "en", "zh", "de", "es", "ru", "ko", "fr", "ja", "pt", "tr", "pl", "ca", "nl", "ar", "sv", "it", "id", "hi", "fi", "vi",
      "he", "uk", "el", "ms", "cs", "ro", "da", "hu", "ta", "no", "th", "ur", "hr", "bg", "lt", "la", "mi", "ml", "cy", "sk",
      "te", "fa", "lv", "bn", "sr", "az", "sl", "kn", "et", "mk", "br", "eu", "is", "hy", "ne", "mn", "bs", "kk", "sq", "sw",
      "gl", "mr", "pa", "si", "km", "sn", "yo", "so", "af", "oc", "ka", "be", "tg", "sd", "gu", "am", "yi", "lo", "uz", "fo",
      "ht", "ps", "tk", "nn", "mt", "sa", "lb", "my", "bo", "tl", "mg", "as", "tt", "haw", "ln", "ha", "ba", "jw", "su", "yue"};
  return codes;
}

namespace {

// GPT-2's printable stand-ins for bytes: byte b -> code point.
const std::vector<uint32_t>& byte_to_code() {
  static const std::vector<uint32_t> table = [] {
    std::vector<uint32_t> t(256, 0);
    uint32_t next = 256;
    for (uint32_t b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      t[b] = printable ? b : next++;
    }
    return t;
  }();
  return table;
}

void append_utf8(std::string& s, uint32_t cp) {
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    s += static_cast<char>(0xE0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

std::string to_byte_level(const std::string& bytes) {
  std::string s;
  for (unsigned char b : bytes) append_utf8(s, byte_to_code()[b]);
  return s;
}

using Ranks = std::unordered_map<std::string, int64_t>;

Ranks rank_map(const std::vector<std::string>& token_bytes) {
  Ranks r;
  r.reserve(token_bytes.size() * 2);
  for (size_t i = 0; i < token_bytes.size(); ++i)
    if (!token_bytes[i].empty()) r.emplace(token_bytes[i], static_cast<int64_t>(i));  // first id wins
  return r;
}

// Byte-pair encoding as tiktoken does it: merge the adjacent pair whose joined bytes have the
// lowest rank, only ranks below max_rank, until none is left (or `stop_at` parts remain).
std::vector<std::string> bpe(const Ranks& ranks, const std::string& bytes, int64_t max_rank, size_t stop_at = 1) {
  std::vector<std::string> parts;
  for (char b : bytes) parts.emplace_back(1, b);
  while (parts.size() > stop_at) {
    int64_t best = max_rank;
    size_t at = 0;
    for (size_t i = 0; i + 1 < parts.size(); ++i) {
      auto it = ranks.find(parts[i] + parts[i + 1]);
      if (it != ranks.end() && it->second < best) {
        best = it->second;
        at = i;
      }
    }
    if (best == max_rank) break;
    parts[at] += parts[at + 1];
    parts.erase(parts.begin() + static_cast<std::ptrdiff_t>(at) + 1);
  }
  return parts;
}

}  // namespace

std::optional<std::string> byte_level_to_bytes(const std::string& token) {
  static const std::unordered_map<uint32_t, unsigned char> code_to_byte = [] {
    std::unordered_map<uint32_t, unsigned char> m;
    for (uint32_t b = 0; b < 256; ++b) m[byte_to_code()[b]] = static_cast<unsigned char>(b);
    return m;
  }();
  std::string out;
  for (size_t i = 0; i < token.size();) {
    const unsigned char c = static_cast<unsigned char>(token[i]);
    uint32_t cp = 0;
    size_t n = 1;
    if (c < 0x80) cp = c;
    else if ((c >> 5) == 6) cp = c & 0x1F, n = 2;
    else if ((c >> 4) == 14) cp = c & 0x0F, n = 3;
    else return std::nullopt;
    if (i + n > token.size()) return std::nullopt;
    for (size_t k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(token[i + k]) & 0x3F);
    auto it = code_to_byte.find(cp);
    if (it == code_to_byte.end()) return std::nullopt;
    out += static_cast<char>(it->second);
    i += n;
  }
  return out;
}

namespace {

std::vector<int64_t> encode_with(const Ranks& ranks, const std::string& text) {
  std::vector<int64_t> ids;
  for (const std::string& p : bpe(ranks, text, std::numeric_limits<int64_t>::max())) {
    auto it = ranks.find(p);
    if (it == ranks.end()) return {};
    ids.push_back(it->second);
  }
  return ids;
}

}  // namespace

std::vector<int64_t> encode_bytes(const std::vector<std::string>& token_bytes, const std::string& text) {
  return encode_with(rank_map(token_bytes), text);
}

std::vector<int64_t> non_speech_tokens(const std::vector<std::string>& token_bytes) {
  // openai-whisper's Tokenizer.non_speech_tokens. Every symbol is one GPT-2 pre-token (with or
  // without its leading space), so byte-pair encoding it whole matches the tokenizer.
  std::vector<std::string> symbols;
  for (char ch : std::string("\"#()*+/:;<=>@[\\]^_`{|}~")) symbols.emplace_back(1, ch);
  for (const char* s : {"「", "」", "『", "』", "<<", ">>", "<<<", ">>>", "--", "---", "-(", "-[", "('", "(\"", "((", "))",
                        "(((", ")))", "[[", "]]", "{{", "}}", "♪♪", "♪♪♪"})
    symbols.emplace_back(s);
  const std::vector<std::string> misc = {"♩", "♪", "♫", "♬", "♭", "♮", "♯"};
  const Ranks ranks = rank_map(token_bytes);
  auto encode_bytes = [&](const std::vector<std::string>&, const std::string& text) { return encode_with(ranks, text); };
  std::vector<int64_t> out;
  for (const char* s : {" -", " '"}) {
    auto ids = encode_bytes(token_bytes, s);
    if (!ids.empty()) out.push_back(ids[0]);
  }
  for (const std::string& s : symbols)
    for (const std::string& text : {s, " " + s}) {
      auto ids = encode_bytes(token_bytes, text);
      if (ids.size() == 1) out.push_back(ids[0]);
    }
  for (const std::string& s : misc)
    for (const std::string& text : {s, " " + s}) {
      auto ids = encode_bytes(token_bytes, text);
      if (!ids.empty()) out.push_back(ids[0]);
    }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

Result<std::string> tokenizer_json_from_token_bytes(const std::vector<std::string>& token_bytes, int64_t n_vocab,
                                                    const std::string& source) {
  VRUN_ASSIGN_OR_RETURN(SpecialLayout s, special_layout(n_vocab));
  if (static_cast<int64_t>(token_bytes.size()) < s.eot)
    return err(ErrorCode::kInvalidProgram, source, ": vocabulary has ", token_bytes.size(), " tokens; Whisper's layout for ",
               n_vocab, " ids needs the ", s.eot, " byte-level tokens below <|endoftext|>");
  std::vector<std::string> base(token_bytes.begin(), token_bytes.begin() + s.eot);
  const Ranks ranks = rank_map(base);
  nlohmann::json vocab = nlohmann::json::object();
  nlohmann::json merges = nlohmann::json::array();
  nlohmann::json added = nlohmann::json::array();
  auto add_special = [&](int64_t id, const std::string& content) {
    added.push_back({{"id", id}, {"content", content}, {"single_word", false}, {"lstrip", false}, {"rstrip", false},
                     {"normalized", false}, {"special", true}});
  };
  for (int64_t id = 0; id < s.eot; ++id) {
    const std::string& b = base[static_cast<size_t>(id)];
    auto it = ranks.find(b);
    if (b.empty() && !vocab.contains("")) {
      vocab[""] = id;  // multilingual.tiktoken's id 50256 is empty, and so is its vocab.json entry
      continue;
    }
    if (b.empty() || it == ranks.end() || it->second != id) {
      // A repeated token cannot sit in a BPE vocabulary twice: keep its id reserved.
      add_special(id, "<|unused_" + std::to_string(id) + "|>");
      continue;
    }
    vocab[to_byte_level(b)] = id;
    if (b.size() < 2) continue;
    const std::vector<std::string> pair = bpe(ranks, b, id, 2);
    if (pair.size() == 2) merges.push_back(to_byte_level(pair[0]) + " " + to_byte_level(pair[1]));
  }
  const auto& langs = whisper_language_codes();
  add_special(s.eot, "<|endoftext|>");
  add_special(s.sot, "<|startoftranscript|>");
  for (int64_t i = 0; i < s.n_languages; ++i) add_special(s.sot + 1 + i, "<|" + langs[static_cast<size_t>(i)] + "|>");
  const char* tasks[] = {"<|translate|>", "<|transcribe|>", "<|startoflm|>", "<|startofprev|>", "<|nospeech|>", "<|notimestamps|>"};
  for (int i = 0; i < 6; ++i) add_special(s.translate + i, tasks[i]);
  for (int64_t id = s.timestamp_begin; id < n_vocab; ++id) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "<|%.2f|>", static_cast<double>(id - s.timestamp_begin) * 0.02);
    add_special(id, buf);
  }
  nlohmann::json j;
  j["version"] = "1.0";
  j["truncation"] = nullptr;
  j["padding"] = nullptr;
  j["added_tokens"] = added;
  j["normalizer"] = nullptr;
  j["pre_tokenizer"] = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}};
  j["post_processor"] = nullptr;
  j["decoder"] = {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}};
  j["model"] = {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr}, {"continuing_subword_prefix", ""},
                {"end_of_word_suffix", ""}, {"fuse_unk", false}, {"byte_fallback", false}, {"ignore_merges", false},
                {"vocab", vocab}, {"merges", merges}};
  return j.dump();
}

// ---------------------------------------------------------------- alignment heads

std::vector<int64_t> default_alignment_heads(const WhisperConfig& c, std::string* which) {
  struct Preset {
    const char* name;
    int64_t n_vocab, d, audio_layers, text_layers;
    std::vector<int64_t> heads;  // flat (layer, head)
  };
  // openai-whisper's published alignment heads (large-v1 and large-v2 share every dimension, so
  // neither is assumed).
  static const std::vector<Preset> presets = {
      {"tiny.en", 51864, 384, 4, 4, {1, 0, 2, 0, 2, 5, 3, 0, 3, 1, 3, 2, 3, 3, 3, 4}},
      {"tiny", 51865, 384, 4, 4, {2, 2, 3, 0, 3, 2, 3, 3, 3, 4, 3, 5}},
      {"base.en", 51864, 512, 6, 6, {3, 3, 4, 7, 5, 1, 5, 5, 5, 7}},
      {"base", 51865, 512, 6, 6, {3, 1, 4, 2, 4, 3, 4, 7, 5, 1, 5, 2, 5, 4, 5, 6}},
      {"small.en", 51864, 768, 12, 12, {6, 6, 7, 0, 7, 3, 7, 8, 8, 2, 8, 5, 8, 7, 9, 0, 9, 4, 9, 8, 9, 10, 10, 0, 10, 1, 10, 2, 10, 3, 10, 6, 10, 11, 11, 2, 11, 4}},
      {"small", 51865, 768, 12, 12, {5, 3, 5, 9, 8, 0, 8, 4, 8, 7, 8, 8, 9, 0, 9, 7, 9, 9, 10, 5}},
      {"medium.en", 51864, 1024, 24, 24, {11, 4, 14, 1, 14, 12, 14, 14, 15, 4, 16, 0, 16, 4, 16, 9, 17, 12, 17, 14, 18, 7, 18, 10, 18, 15, 20, 0, 20, 3, 20, 9, 20, 14, 21, 12}},
      {"medium", 51865, 1024, 24, 24, {13, 15, 15, 4, 15, 15, 16, 1, 20, 0, 23, 4}},
      {"large-v3", 51866, 1280, 32, 32, {7, 0, 10, 17, 12, 18, 13, 12, 16, 1, 17, 14, 19, 11, 21, 4, 24, 1, 25, 6}},
      {"large-v3-turbo", 51866, 1280, 32, 4, {2, 4, 2, 11, 3, 3, 3, 6, 3, 11, 3, 14}},
  };
  for (const Preset& p : presets)
    if (p.n_vocab == c.n_vocab && p.d == c.n_text_state && p.audio_layers == c.n_audio_layer && p.text_layers == c.n_text_layer) {
      if (which) *which = std::string("openai-whisper's alignment heads of ") + p.name;
      return p.heads;
    }
  std::vector<int64_t> heads;
  for (int64_t l = c.n_text_layer / 2; l < c.n_text_layer; ++l)
    for (int64_t h = 0; h < c.n_text_head; ++h) heads.insert(heads.end(), {l, h});
  if (which) *which = "every head of the second half of the decoder layers (openai-whisper's default)";
  return heads;
}

}  // namespace vrun::whisper
