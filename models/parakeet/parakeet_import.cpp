#include "models/parakeet/parakeet_import.h"
#include "runtime/base/strings.h"

#include "models/common/json_guard.h"

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>

#include "models/common/files.h"
#include "models/parakeet/yaml_json.h"
#include "models/safetensors/safetensors_file.h"
#include "models/torch_ckpt/torch_checkpoint.h"
#include "runtime/base/mapped_file.h"

namespace vrun::parakeet {

namespace fs = std::filesystem;
using nlohmann::json;

WeightSource ImportedParakeet::source() const {
  return [this](const std::string& name) -> std::optional<Weight> {
    auto it = weights.find(name);
    if (it == weights.end()) return std::nullopt;
    return it->second;
  };
}

namespace {

std::string basename_of(const std::string& p) {
  const size_t s = p.rfind('/');
  return s == std::string::npos ? p : p.substr(s + 1);
}

Result<json> read_json(const fs::path& p) {
  VRUN_ASSIGN_OR_RETURN(std::string text, models::read_file(p));
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    return err(ErrorCode::kInvalidArgument, p.string(), ": invalid JSON: ", e.what());
  }
}

Status check_vocabulary(const ImportedParakeet& m, const std::string& source) {
  if (static_cast<int64_t>(m.vocab.size()) != m.config.vocab_size)
    return err(ErrorCode::kInvalidArgument, source, ": the tokenizer has ", m.vocab.size(), " pieces but the model's ",
               m.config.head == HeadKind::kCtc ? "CTC head" : "joint", " has ", m.config.vocab_size, " tokens (+ blank)");
  return Status::ok();
}

}  // namespace

bool is_nemo_archive(const std::string& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return false;
  if (ends_with(path, ".nemo")) return true;
  std::ifstream in(path, std::ios::binary);
  char h[263] = {};
  in.read(h, sizeof h);
  return in.gcount() == sizeof h && std::string_view(h + 257, 5) == "ustar";
}

bool is_hf_parakeet_folder(const std::string& path) {
  std::error_code ec;
  const fs::path cfg = fs::path(path) / "config.json";
  if (!fs::is_directory(path, ec) || !fs::is_regular_file(cfg, ec)) return false;
  auto j = read_json(cfg);
  if (!j.is_ok()) return false;
  const std::string mt = j->value("model_type", "");
  return mt.rfind("parakeet", 0) == 0;
}

static Result<ImportedParakeet> import_nemo_unguarded(const std::string& path);
Result<ImportedParakeet> import_nemo(const std::string& path) {
  return models::json_guard(path, [&] { return import_nemo_unguarded(path); });
}

static Result<ImportedParakeet> import_nemo_unguarded(const std::string& path) {
  VRUN_ASSIGN_OR_RETURN(torch_ckpt::Bytes bytes, torch_ckpt::read_maybe_gzip(path));
  VRUN_ASSIGN_OR_RETURN(auto entries, torch_ckpt::read_tar(bytes.data, path));
  auto find = [&](auto pred) -> const torch_ckpt::ArchiveEntry* {
    for (const auto& e : entries)
      if (pred(e.name)) return &e;
    return nullptr;
  };
  const auto* cfg_entry = find([](const std::string& n) { return basename_of(n) == "model_config.yaml"; });
  if (!cfg_entry) return err(ErrorCode::kInvalidArgument, path, ": the archive has no model_config.yaml (not a NeMo model)");
  const std::string cfg_source = path + ":model_config.yaml";
  VRUN_ASSIGN_OR_RETURN(json cfg, parse_yaml(std::string_view(reinterpret_cast<const char*>(cfg_entry->data.data()), cfg_entry->data.size()), cfg_source));
  ImportedParakeet m;
  m.format = "nemo";
  VRUN_ASSIGN_OR_RETURN(m.config, config_from_nemo(cfg, cfg_source));
  if (!cfg.contains("preprocessor") || !cfg["preprocessor"].is_object())
    return err(ErrorCode::kNotFound, cfg_source, ": has no 'preprocessor' section");
  m.preprocessor_json = cfg["preprocessor"].dump();

  // The tokenizer: model_path "nemo:<entry>" names it; otherwise the one *tokenizer.model entry.
  const torch_ckpt::ArchiveEntry* tok = nullptr;
  if (cfg.contains("tokenizer") && cfg["tokenizer"].is_object() && cfg["tokenizer"].contains("model_path") &&
      cfg["tokenizer"]["model_path"].is_string()) {
    std::string want = cfg["tokenizer"]["model_path"].get<std::string>();
    if (want.rfind("nemo:", 0) == 0) want = want.substr(5);
    want = basename_of(want);
    tok = find([&](const std::string& n) { return basename_of(n) == want; });
  }
  if (!tok) tok = find([](const std::string& n) { return ends_with(n, "tokenizer.model"); });
  if (!tok) return err(ErrorCode::kNotFound, path, ": the archive has no SentencePiece tokenizer.model");
  m.spm_model.assign(reinterpret_cast<const char*>(tok->data.data()), tok->data.size());
  VRUN_ASSIGN_OR_RETURN(m.vocab, vocabulary_from_spm(m.spm_model, path + ":" + tok->name));
  VRUN_RETURN_IF_ERROR(check_vocabulary(m, path));

  const auto* ckpt = find([](const std::string& n) { return basename_of(n) == "model_weights.ckpt"; });
  if (!ckpt) return err(ErrorCode::kNotFound, path, ": the archive has no model_weights.ckpt");
  VRUN_ASSIGN_OR_RETURN(torch_ckpt::Checkpoint ck, torch_ckpt::read_torch_checkpoint(ckpt->data, bytes.keep, path + ":" + ckpt->name));
  for (auto& [name, t] : ck.tensors) {
    if (name.rfind("preprocessor.", 0) == 0) continue;  // the featurizer's window and filterbank
    m.weights[name] = Weight{t.dtype, t.shape, t.data, t.keep};
  }
  return m;
}

std::string hf_to_nemo_name(const std::string& hf) {
  // The inverse of convert_nemo_to_hf.py's tables, most specific patterns first.
  static const std::pair<std::regex, const char*> rules[] = {
      {std::regex(R"(^encoder\.subsampling\.layers\.)"), "encoder.pre_encode.conv."},
      {std::regex(R"(^encoder\.subsampling\.linear\.)"), "encoder.pre_encode.out."},
      {std::regex(R"(^encoder\.encode_positions\.)"), "encoder.pos_enc."},
      {std::regex(R"(^encoder\.layers\.(\d+)\.conv\.norm\.)"), "encoder.layers.$1.conv.batch_norm."},
      {std::regex(R"(^ctc_head\.(weight|bias)$)"), "decoder.decoder_layers.0.$1"},
      {std::regex(R"(\.relative_k_proj\.)"), ".linear_pos."},
      {std::regex(R"(\.q_proj\.)"), ".linear_q."},
      {std::regex(R"(\.k_proj\.)"), ".linear_k."},
      {std::regex(R"(\.v_proj\.)"), ".linear_v."},
      {std::regex(R"(\.o_proj\.)"), ".linear_out."},
      {std::regex(R"(\.self_attn\.bias_([uv])$)"), ".self_attn.pos_bias_$1"},
      {std::regex(R"(^decoder\.decoder_projector\.)"), "joint.pred."},
      {std::regex(R"(^decoder\.embedding\.)"), "decoder.prediction.embed."},
      {std::regex(R"(^decoder\.lstm\.)"), "decoder.prediction.dec_rnn.lstm."},
      {std::regex(R"(^encoder_projector\.)"), "joint.enc."},
      {std::regex(R"(^joint\.head\.)"), "joint.joint_net.2."},
  };
  std::string n = hf;
  for (const auto& [re, to] : rules) n = std::regex_replace(n, re, to);
  return n;
}

static Result<ImportedParakeet> import_hf_parakeet_unguarded(const std::string& folder);
Result<ImportedParakeet> import_hf_parakeet(const std::string& folder) {
  return models::json_guard(folder, [&] { return import_hf_parakeet_unguarded(folder); });
}

static Result<ImportedParakeet> import_hf_parakeet_unguarded(const std::string& folder) {
  const fs::path dir(folder);
  ImportedParakeet m;
  m.format = "hf";
  VRUN_ASSIGN_OR_RETURN(json cfg, read_json(dir / "config.json"));
  VRUN_ASSIGN_OR_RETURN(m.config, config_from_hf(cfg, (dir / "config.json").string()));

  std::vector<fs::path> shards;
  std::error_code ec;
  if (fs::is_regular_file(dir / "model.safetensors", ec)) {
    shards.push_back(dir / "model.safetensors");
  } else if (fs::is_regular_file(dir / "model.safetensors.index.json", ec)) {
    VRUN_ASSIGN_OR_RETURN(json index, read_json(dir / "model.safetensors.index.json"));
    if (!index.contains("weight_map") || !index["weight_map"].is_object())
      return err(ErrorCode::kInvalidArgument, folder, ": model.safetensors.index.json has no weight_map");
    std::set<std::string> files;
    for (const auto& f : index["weight_map"]) {
      const std::string name = f.is_string() ? f.get<std::string>() : "";
      if (name.empty() || name.find('/') != std::string::npos || name.find("..") != std::string::npos)
        return err(ErrorCode::kInvalidArgument, folder, ": weight_map names shard '", name, "'");
      files.insert(name);
    }
    for (const auto& f : files) shards.push_back(dir / f);
  } else {
    return err(ErrorCode::kNotFound, folder, ": no model.safetensors (or model.safetensors.index.json)");
  }
  for (const auto& shard : shards) {
    VRUN_ASSIGN_OR_RETURN(auto file, safetensors::File::open(shard.string()));
    for (const auto& t : file->tensors()) {
      if (!t.dtype) {
        if (t.dtype_name == "I64" && t.name.find("num_batches_tracked") != std::string::npos) continue;
        return err(ErrorCode::kUnsupported, shard.string(), ": tensor '", t.name, "' has dtype ", t.dtype_name);
      }
      m.weights[hf_to_nemo_name(t.name)] = Weight{*t.dtype, t.shape, t.data, file->keep_alive()};
    }
  }
  if (m.config.head == HeadKind::kTdt) {
    auto it = m.weights.find("joint.enc.weight");
    if (it == m.weights.end() || it->second.shape.size() != 2)
      return err(ErrorCode::kNotFound, folder, ": no encoder projection (encoder_projector.weight) for the joint");
    m.config.joint_hidden = it->second.shape[0];
  }
  VRUN_RETURN_IF_ERROR(m.config.validate().with_context(folder));

  // Preprocessor: transformers' ParakeetFeatureExtractor keys to NeMo's (its defaults where absent).
  json pre = json::object();
  if (fs::is_regular_file(dir / "preprocessor_config.json", ec)) {
    VRUN_ASSIGN_OR_RETURN(pre, read_json(dir / "preprocessor_config.json"));
  } else if (fs::is_regular_file(dir / "processor_config.json", ec)) {
    VRUN_ASSIGN_OR_RETURN(pre, read_json(dir / "processor_config.json"));
  } else {
    return err(ErrorCode::kNotFound, folder, ": no preprocessor_config.json or processor_config.json");
  }
  if (pre.contains("feature_extractor") && pre["feature_extractor"].is_object()) pre = pre["feature_extractor"];
  const std::string fe_type = pre.value("feature_extractor_type", "ParakeetFeatureExtractor");
  if (fe_type != "ParakeetFeatureExtractor")
    return err(ErrorCode::kUnsupported, folder, ": preprocessor_config.json feature extractor is ", fe_type);
  json p = json::object();
  try {
    p["sample_rate"] = pre.value("sampling_rate", 16000);
    p["n_window_size"] = pre.value("win_length", 400);
    p["n_window_stride"] = pre.value("hop_length", 160);
    p["n_fft"] = pre.value("n_fft", 512);
    p["features"] = pre.value("feature_size", 80);
    p["preemph"] = pre.value("preemphasis", 0.97);
    p["pad_value"] = pre.value("padding_value", 0.0);
    p["normalize"] = "per_feature";
    p["window"] = "hann";
    p["pad_to"] = 0;
    m.config.window_stride = p["n_window_stride"].get<double>() / p["sample_rate"].get<double>();
  } catch (const json::exception& e) {
    return err(ErrorCode::kInvalidArgument, folder, ": preprocessor_config.json: ", e.what());
  }
  m.preprocessor_json = p.dump();

  if (fs::is_regular_file(dir / "tokenizer.model", ec)) {
    VRUN_ASSIGN_OR_RETURN(m.spm_model, models::read_file(dir / "tokenizer.model"));
    VRUN_ASSIGN_OR_RETURN(m.vocab, vocabulary_from_spm(m.spm_model, (dir / "tokenizer.model").string()));
    if (static_cast<int64_t>(m.vocab.size()) > m.config.vocab_size) {
      m.vocab.pieces.resize(static_cast<size_t>(m.config.vocab_size));
      m.vocab.kinds.resize(static_cast<size_t>(m.config.vocab_size));
    }
  } else {
    VRUN_ASSIGN_OR_RETURN(std::string tj, models::read_file(dir / "tokenizer.json"));
    VRUN_ASSIGN_OR_RETURN(m.vocab, vocabulary_from_tokenizer_json(tj, m.config.vocab_size, (dir / "tokenizer.json").string()));
  }
  VRUN_RETURN_IF_ERROR(check_vocabulary(m, folder));
  return m;
}

}  // namespace vrun::parakeet
