#include "models/whisper/hf_whisper.h"

#include "models/common/json_guard.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "models/common/files.h"
#include "models/safetensors/safetensors_file.h"
#include "models/whisper/whisper_import.h"

namespace vrun::whisper {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

fs::path folder_of(const std::string& path) {
  std::error_code ec;
  return fs::is_directory(path, ec) ? fs::path(path) : fs::path(path).parent_path();
}

Result<json> read_json(const fs::path& p) {
  VRUN_ASSIGN_OR_RETURN(std::string text, models::read_file(p));
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return err(ErrorCode::kInvalidProgram, p.string(), ": not a JSON object");
  return j;
}

Result<int64_t> need_int(const json& j, const char* key, const std::string& source) {
  if (!j.contains(key) || !j[key].is_number_integer())
    return err(ErrorCode::kInvalidProgram, source, ": '", key, "' is missing or not an integer");
  return j[key].get<int64_t>();
}

// A flat integer list; [[layer, head], ...] pairs are flattened. Absent or null: empty.
Result<std::vector<int64_t>> int_list(const json& j, const char* key, const std::string& source) {
  std::vector<int64_t> out;
  if (!j.contains(key) || j[key].is_null()) return out;
  if (!j[key].is_array()) return err(ErrorCode::kInvalidProgram, source, ": '", key, "' is not a list");
  for (const json& x : j[key]) {
    if (x.is_number_integer()) {
      out.push_back(x.get<int64_t>());
      continue;
    }
    if (!x.is_array()) return err(ErrorCode::kInvalidProgram, source, ": '", key, "' holds ", x.dump());
    for (const json& y : x) {
      if (!y.is_number_integer()) return err(ErrorCode::kInvalidProgram, source, ": '", key, "' holds ", x.dump());
      out.push_back(y.get<int64_t>());
    }
  }
  return out;
}

// Tensors by name across one or several safetensors files.
struct TensorIndex {
  std::vector<std::shared_ptr<safetensors::File>> files;
  std::map<std::string, std::pair<const safetensors::File*, const safetensors::TensorInfo*>> by_name;
};

Result<TensorIndex> open_tensors(const fs::path& dir) {
  TensorIndex idx;
  std::error_code ec;
  std::vector<fs::path> shards;
  const fs::path single = dir / "model.safetensors", index = dir / "model.safetensors.index.json";
  if (fs::exists(single, ec)) {
    shards.push_back(single);
  } else if (fs::exists(index, ec)) {
    VRUN_ASSIGN_OR_RETURN(json j, read_json(index));
    if (!j.contains("weight_map") || !j["weight_map"].is_object())
      return err(ErrorCode::kInvalidProgram, index.string(), ": no 'weight_map' object");
    std::set<std::string> names;
    for (const auto& [tensor, file] : j["weight_map"].items()) {
      if (!file.is_string()) return err(ErrorCode::kInvalidProgram, index.string(), ": weight_map entry '", tensor, "' is not a file name");
      const std::string f = file.get<std::string>();
      if (f.find('/') != std::string::npos || f.find("..") != std::string::npos)
        return err(ErrorCode::kInvalidProgram, index.string(), ": shard name '", f, "' is not a file in the folder");
      names.insert(f);
    }
    for (const std::string& n : names) shards.push_back(dir / n);
  } else {
    const bool torch_bin = fs::exists(dir / "pytorch_model.bin", ec);
    return err(ErrorCode::kNotFound, dir.string(), ": no model.safetensors or model.safetensors.index.json",
               torch_bin ? " (only pytorch_model.bin: save the model with safe_serialization, the default of save_pretrained)" : "");
  }
  for (const fs::path& p : shards) {
    VRUN_ASSIGN_OR_RETURN(std::shared_ptr<safetensors::File> f, safetensors::File::open(p.string()));
    for (const auto& t : f->tensors()) {
      if (!t.dtype)
        return err(ErrorCode::kUnsupported, p.string(), ": tensor '", t.name, "' has dtype ", t.dtype_name,
                   "; Whisper weights must be F32, F16 or BF16");
      idx.by_name[t.name] = {f.get(), &t};
    }
    idx.files.push_back(std::move(f));
  }
  return idx;
}

// lang_to_id / task_to_id must agree with the tokenizer's added tokens, or the start sequence
// the runner builds from token names would differ from the one the model was trained with.
Status check_token_ids(const json& gen, const json& tok, const std::string& gen_source) {
  std::map<std::string, int64_t> added;
  if (tok.contains("added_tokens") && tok["added_tokens"].is_array())
    for (const json& a : tok["added_tokens"])
      if (a.contains("content") && a["content"].is_string() && a.contains("id") && a["id"].is_number_integer())
        added[a["content"].get<std::string>()] = a["id"].get<int64_t>();
  auto check = [&](const char* key, bool wrap) -> Status {
    if (!gen.contains(key) || !gen[key].is_object()) return Status::ok();
    for (const auto& [name, id] : gen[key].items()) {
      const std::string piece = wrap ? "<|" + name + "|>" : name;
      auto it = added.find(piece);
      if (!id.is_number_integer() || it == added.end() || it->second != id.get<int64_t>())
        return err(ErrorCode::kInvalidProgram, gen_source, ": ", key, " maps '", name, "' to ", id.dump(),
                   " but tokenizer.json has ", it == added.end() ? std::string("no token '") + piece + "'" : piece + " = " + std::to_string(it->second));
    }
    return Status::ok();
  };
  VRUN_RETURN_IF_ERROR(check("lang_to_id", false));
  return check("task_to_id", true);
}

}  // namespace

bool is_hf_whisper_folder(const std::string& path) {
  const fs::path cfg = folder_of(path) / "config.json";
  std::error_code ec;
  if (!fs::is_regular_file(cfg, ec) || fs::file_size(cfg, ec) > (1u << 20)) return false;
  auto j = read_json(cfg);
  if (!j.is_ok()) return false;
  return j->value("model_type", std::string()) == "whisper";
}

static Result<ImportedWhisper> import_hf_whisper_unguarded(const std::string& path);
Result<ImportedWhisper> import_hf_whisper(const std::string& path) {
  return models::json_guard(path, [&] { return import_hf_whisper_unguarded(path); });
}

static Result<ImportedWhisper> import_hf_whisper_unguarded(const std::string& path) {
  const fs::path dir = folder_of(path);
  const fs::path cfg_path = dir / "config.json";
  const std::string cfg_src = cfg_path.string();
  VRUN_ASSIGN_OR_RETURN(json cfg, read_json(cfg_path));
  if (cfg.value("model_type", std::string()) != "whisper")
    return err(ErrorCode::kUnsupported, cfg_src, ": model_type '", cfg.value("model_type", std::string()), "' is not 'whisper'");
  ImportedWhisper m;
  WhisperConfig& c = m.config;
  VRUN_ASSIGN_OR_RETURN(c.n_mels, need_int(cfg, "num_mel_bins", cfg_src));
  VRUN_ASSIGN_OR_RETURN(c.n_audio_ctx, need_int(cfg, "max_source_positions", cfg_src));
  VRUN_ASSIGN_OR_RETURN(c.n_audio_state, need_int(cfg, "d_model", cfg_src));
  VRUN_ASSIGN_OR_RETURN(c.n_audio_head, need_int(cfg, "encoder_attention_heads", cfg_src));
  VRUN_ASSIGN_OR_RETURN(c.n_audio_layer, need_int(cfg, "encoder_layers", cfg_src));
  VRUN_ASSIGN_OR_RETURN(c.n_vocab, need_int(cfg, "vocab_size", cfg_src));
  VRUN_ASSIGN_OR_RETURN(c.n_text_ctx, need_int(cfg, "max_target_positions", cfg_src));
  c.n_text_state = c.n_audio_state;
  VRUN_ASSIGN_OR_RETURN(c.n_text_head, need_int(cfg, "decoder_attention_heads", cfg_src));
  VRUN_ASSIGN_OR_RETURN(c.n_text_layer, need_int(cfg, "decoder_layers", cfg_src));
  VRUN_RETURN_IF_ERROR(c.validate().with_context(cfg_src));
  for (const char* key : {"encoder_ffn_dim", "decoder_ffn_dim"})
    if (cfg.contains(key) && cfg[key].is_number_integer() && cfg[key].get<int64_t>() != 4 * c.n_text_state)
      return err(ErrorCode::kUnsupported, cfg_src, ": ", key, " is ", cfg[key].get<int64_t>(), "; Whisper's blocks use 4 x d_model = ",
                 4 * c.n_text_state);
  if (cfg.value("scale_embedding", false))
    return err(ErrorCode::kUnsupported, cfg_src, ": scale_embedding is true; Whisper does not scale its embeddings");
  if (const std::string act = cfg.value("activation_function", std::string("gelu")); act != "gelu")
    return err(ErrorCode::kUnsupported, cfg_src, ": activation_function '", act, "' (Whisper's graph uses gelu)");

  VRUN_ASSIGN_OR_RETURN(TensorIndex idx, open_tensors(dir));
  auto index = std::make_shared<TensorIndex>(std::move(idx));
  TensorLookup lookup = [index](const std::string& name) -> std::optional<Weight> {
    auto it = index->by_name.find(name);
    if (it == index->by_name.end() && name.rfind("model.", 0) == 0) it = index->by_name.find(name.substr(6));  // WhisperModel
    if (it == index->by_name.end()) return std::nullopt;
    const safetensors::TensorInfo& t = *it->second.second;
    return Weight{*t.dtype, t.shape, t.data, it->second.first->keep_alive()};
  };
  m.weights = fused_weight_source(lookup, WeightNaming::kHuggingFace);
  std::map<std::string, int> dtypes;
  for (const auto& [name, ft] : index->by_name) ++dtypes[dtype_name(*ft.second->dtype)];
  if (dtypes.size() > 1) {
    std::string mix;
    for (const auto& [dt, n] : dtypes) mix += (mix.empty() ? "" : ", ") + std::to_string(n) + " " + dt;
    m.notes.push_back(dir.string() + ": tensors of mixed dtypes (" + mix + "), each kept as stored");
  }

  const fs::path tok_path = dir / "tokenizer.json";
  std::error_code ec;
  if (!fs::exists(tok_path, ec))
    return err(ErrorCode::kNotFound, dir.string(), ": no tokenizer.json (save the WhisperProcessor or tokenizer beside the model)");
  VRUN_ASSIGN_OR_RETURN(m.extras.tokenizer_json, models::read_file(tok_path));
  json tok = json::parse(m.extras.tokenizer_json, nullptr, false);
  if (tok.is_discarded() || !tok.is_object()) return err(ErrorCode::kInvalidProgram, tok_path.string(), ": not a JSON object");

  // generation_config.json is what generate() reads; older folders kept the lists in config.json.
  const fs::path gen_path = dir / "generation_config.json";
  json gen = json::object();
  std::string gen_src = cfg_src;
  if (fs::exists(gen_path, ec)) {
    VRUN_ASSIGN_OR_RETURN(gen, read_json(gen_path));
    gen_src = gen_path.string();
  }
  auto list = [&](const char* key) -> Result<std::vector<int64_t>> {
    if (gen.contains(key) && !gen[key].is_null()) return int_list(gen, key, gen_src);
    return int_list(cfg, key, cfg_src);
  };
  VRUN_ASSIGN_OR_RETURN(m.extras.suppress_tokens, list("suppress_tokens"));
  VRUN_ASSIGN_OR_RETURN(m.extras.suppress_begin, list("begin_suppress_tokens"));
  VRUN_ASSIGN_OR_RETURN(m.extras.alignment_heads, list("alignment_heads"));
  if (m.extras.alignment_heads.size() % 2)
    return err(ErrorCode::kInvalidProgram, gen_src, ": alignment_heads must be [layer, head] pairs");
  for (size_t i = 0; i < m.extras.alignment_heads.size(); i += 2)
    if (m.extras.alignment_heads[i] < 0 || m.extras.alignment_heads[i] >= c.n_text_layer || m.extras.alignment_heads[i + 1] < 0 ||
        m.extras.alignment_heads[i + 1] >= c.n_text_head)
      return err(ErrorCode::kInvalidProgram, gen_src, ": alignment head [", m.extras.alignment_heads[i], ", ",
                 m.extras.alignment_heads[i + 1], "] outside ", c.n_text_layer, " layers x ", c.n_text_head, " heads");
  if (m.extras.alignment_heads.empty()) {
    std::string which;
    m.extras.alignment_heads = default_alignment_heads(c, &which);
    m.notes.push_back(dir.string() + ": no alignment_heads; using " + which);
  }
  for (const auto* l : {&m.extras.suppress_tokens, &m.extras.suppress_begin})
    for (int64_t t : *l)
      if (t < -1 || t >= c.n_vocab)
        return err(ErrorCode::kInvalidProgram, gen_src, ": suppressed token ", t, " outside the vocabulary of ", c.n_vocab);
  if (gen.contains("is_multilingual") && gen["is_multilingual"].is_boolean() && gen["is_multilingual"].get<bool>() != c.multilingual())
    return err(ErrorCode::kInvalidProgram, gen_src, ": is_multilingual is ", gen["is_multilingual"].dump(), " but vocab_size ",
               c.n_vocab, " is ", c.multilingual() ? "multilingual" : "English-only");
  VRUN_RETURN_IF_ERROR(check_token_ids(gen, tok, gen_src));
  return m;
}

}  // namespace vrun::whisper
