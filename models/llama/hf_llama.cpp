#include "models/llama/hf_llama.h"

#include "models/common/json_guard.h"

#include <sys/stat.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>

#include "models/common/tokenizer_keys.h"
#include "models/common/files.h"
#include "models/safetensors/safetensors_file.h"

namespace vrun::llama {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

Result<json> read_json(const std::string& path) {
  VRUN_ASSIGN_OR_RETURN(std::string bytes, models::read_file(path));
  json j = json::parse(bytes, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return err(ErrorCode::kInvalidProgram, path, ": not a JSON object");
  return j;
}

// Hugging Face parameter name -> canonical (GGUF) name; empty for tensors the graph does not use
// (e.g. rotary_emb.inv_freq buffers saved by old checkpoints).
std::string canonical_name(const std::string& hf) {
  static const std::map<std::string, std::string> top = {
      {"model.embed_tokens.weight", "token_embd.weight"},
      {"model.norm.weight", "output_norm.weight"},
      {"lm_head.weight", "output.weight"},
  };
  static const std::map<std::string, std::string> layer = {
      {"input_layernorm.weight", "attn_norm.weight"},     {"self_attn.q_proj.weight", "attn_q.weight"},
      {"self_attn.k_proj.weight", "attn_k.weight"},       {"self_attn.v_proj.weight", "attn_v.weight"},
      {"self_attn.q_proj.bias", "attn_q.bias"},           {"self_attn.k_proj.bias", "attn_k.bias"},
      {"self_attn.v_proj.bias", "attn_v.bias"},           {"self_attn.o_proj.weight", "attn_output.weight"},
      {"post_attention_layernorm.weight", "ffn_norm.weight"}, {"mlp.gate_proj.weight", "ffn_gate.weight"},
      {"mlp.up_proj.weight", "ffn_up.weight"},            {"mlp.down_proj.weight", "ffn_down.weight"},
  };
  if (auto it = top.find(hf); it != top.end()) return it->second;
  static const std::regex re(R"(model\.layers\.(\d+)\.(.+))");
  std::smatch m;
  if (!std::regex_match(hf, m, re)) return {};
  auto it = layer.find(m[2].str());
  return it == layer.end() ? std::string() : "blk." + m[1].str() + "." + it->second;
}

// Llama 3.x "llama3" rope scaling as transformers computes it (_compute_llama3_parameters): long
// wavelengths are slowed by `factor`, short ones kept, the band between interpolated. Returned as
// the factors that divide each frequency (GGUF's rope_freqs).
std::vector<float> llama3_freq_factors(const LlamaConfig& c, double factor, double low, double high, double old_ctx) {
  std::vector<float> out(static_cast<size_t>(c.head_dim / 2));
  const double low_wavelen = old_ctx / low, high_wavelen = old_ctx / high;
  for (int64_t i = 0; i < c.head_dim / 2; ++i) {
    const double freq = std::pow(c.rope_theta, -2.0 * static_cast<double>(i) / static_cast<double>(c.head_dim));
    const double wavelen = 2.0 * M_PI / freq;
    double f = 1.0;
    if (wavelen > low_wavelen) {
      f = factor;
    } else if (wavelen >= high_wavelen) {
      const double smooth = (old_ctx / wavelen - low) / (high - low);
      f = 1.0 / ((1.0 - smooth) / factor + smooth);
    }
    out[static_cast<size_t>(i)] = static_cast<float>(f);
  }
  return out;
}

Status read_config(const json& j, const std::string& path, LlamaConfig* c, std::vector<std::string>* notes) {
  std::string model_type = j.value("model_type", "");
  std::string archs;
  if (j.contains("architectures") && j["architectures"].is_array())
    for (const auto& a : j["architectures"])
      if (a.is_string()) archs += (archs.empty() ? "" : ", ") + a.get<std::string>();
  static const std::map<std::string, std::string> known = {{"llama", "llama"}, {"mistral", "mistral"}, {"qwen2", "qwen2"}};
  auto it = known.find(model_type);
  if (it == known.end())
    return err(ErrorCode::kUnsupported, path, ": model_type '", model_type, "' (architectures: ", archs.empty() ? "none" : archs,
               ") is not a Llama-family model; vrun runs LlamaForCausalLM, MistralForCausalLM and Qwen2ForCausalLM");
  c->arch = it->second;
  auto need = [&](const char* key, int64_t* out) -> Status {
    if (!j.contains(key) || !j[key].is_number_integer())
      return err(ErrorCode::kInvalidProgram, path, ": missing integer '", key, "'");
    *out = j[key].get<int64_t>();
    return Status::ok();
  };
  VRUN_RETURN_IF_ERROR(need("hidden_size", &c->dim));
  VRUN_RETURN_IF_ERROR(need("num_hidden_layers", &c->layers));
  VRUN_RETURN_IF_ERROR(need("num_attention_heads", &c->heads));
  VRUN_RETURN_IF_ERROR(need("intermediate_size", &c->ffn));
  VRUN_RETURN_IF_ERROR(need("vocab_size", &c->vocab));
  auto int_or = [&](const char* key, int64_t fallback) {
    return j.contains(key) && j[key].is_number_integer() ? j[key].get<int64_t>() : fallback;
  };
  auto num_or = [&](const char* key, double fallback) { return j.contains(key) && j[key].is_number() ? j[key].get<double>() : fallback; };
  c->kv_heads = int_or("num_key_value_heads", c->heads);
  c->head_dim = int_or("head_dim", c->heads > 0 ? c->dim / c->heads : 0);
  c->max_context = int_or("max_position_embeddings", 2048);
  // transformers 5 writes rope_theta and the scaling together under rope_parameters; older
  // configs have rope_theta and rope_scaling at the top level.
  const json rope = j.contains("rope_parameters") && j["rope_parameters"].is_object() ? j["rope_parameters"]
                    : j.contains("rope_scaling") && j["rope_scaling"].is_object()       ? j["rope_scaling"]
                                                                                        : json();
  c->rope_theta = num_or("rope_theta", rope.is_object() && rope.contains("rope_theta") && rope["rope_theta"].is_number()
                                           ? rope["rope_theta"].get<double>()
                                           : 10000.0);
  c->rms_eps = num_or("rms_norm_eps", 1e-6);
  // transformers' LlamaConfig, MistralConfig and Qwen2Config all default to untied embeddings.
  c->tied_embeddings = j.contains("tie_word_embeddings") && j["tie_word_embeddings"].is_boolean() && j["tie_word_embeddings"].get<bool>();
  c->rope_mode = RopeMode::kHalf;  // HF keeps q/k in the half-split layout
  if (c->arch == "mistral" && j.contains("sliding_window") && j["sliding_window"].is_number_integer()) {
    const int64_t w = j["sliding_window"].get<int64_t>();
    if (w > 0 && w < c->max_context) {
      notes->push_back(path + ": sliding-window attention (" + std::to_string(w) + " tokens) is run as full attention; context capped at " +
                       std::to_string(w));
      c->max_context = w;
    }
  }
  if (rope.is_object()) {
    const json& rs = rope;
    const std::string type = rs.value("rope_type", rs.value("type", ""));
    const double factor = rs.contains("factor") && rs["factor"].is_number() ? rs["factor"].get<double>() : 1.0;
    if (type == "llama3") {
      const double low = rs.value("low_freq_factor", 1.0), high = rs.value("high_freq_factor", 4.0);
      const double old_ctx = rs.value("original_max_position_embeddings", 8192.0);
      if (!(factor > 0) || !(high > low) || !(old_ctx > 0))
        return err(ErrorCode::kInvalidProgram, path, ": rope_scaling llama3 needs factor > 0, high_freq_factor > low_freq_factor, got ",
                   rs.dump());
      c->rope_freq_factors = llama3_freq_factors(*c, factor, low, high, old_ctx);
    } else if (type == "linear") {
      if (!(factor > 0)) return err(ErrorCode::kInvalidProgram, path, ": rope_scaling linear needs factor > 0, got ", rs.dump());
      c->rope_freq_factors.assign(static_cast<size_t>(c->head_dim / 2), static_cast<float>(factor));
    } else if (type != "default" && !type.empty()) {
      return err(ErrorCode::kUnsupported, path, ": rope_scaling type '", type, "' (vrun applies llama3 and linear scaling)");
    }
  }
  return c->validate().with_context(path);
}

// The tokenizer and chat template, under the keys of apps/common/tokenizer/metadata.h.
Status read_tokenizer(const std::string& dir, std::map<std::string, MetaValue>* meta) {
  namespace k = tok::keys;
  const std::string tj = dir + "/tokenizer.json", tm = dir + "/tokenizer.model";
  bool bos_in_template = false;
  if (fs::exists(tj)) {
    VRUN_ASSIGN_OR_RETURN(std::string bytes, models::read_file(tj));
    (*meta)[k::kKind] = MetaValue::str("hf_json");
    json j = json::parse(bytes, nullptr, false);
    if (j.is_discarded() || !j.is_object()) return err(ErrorCode::kInvalidProgram, tj, ": not a JSON object");
    // Llama 3 puts BOS in the post-processor's single-sequence template.
    const json& pp = j.contains("post_processor") ? j["post_processor"] : json();
    auto template_starts_special = [](const json& p) {
      return p.is_object() && p.value("type", "") == "TemplateProcessing" && p.contains("single") && p["single"].is_array() &&
             !p["single"].empty() && p["single"][0].contains("SpecialToken");
    };
    if (template_starts_special(pp)) bos_in_template = true;
    if (pp.is_object() && pp.value("type", "") == "Sequence" && pp.contains("processors") && pp["processors"].is_array())
      for (const auto& p : pp["processors"]) bos_in_template = bos_in_template || template_starts_special(p);
    (*meta)[k::kHfJson] = MetaValue::bytes(std::move(bytes));
  } else if (fs::exists(tm)) {
    VRUN_ASSIGN_OR_RETURN(std::string bytes, models::read_file(tm));
    // SentencePiece protos start with a field tag byte; tiktoken rank files are base64 text lines.
    const bool tiktoken = !bytes.empty() && bytes[0] != 0x0a && bytes.find('\n') != std::string::npos &&
                          bytes.find(' ') < bytes.find('\n');
    (*meta)[k::kKind] = MetaValue::str(tiktoken ? "tiktoken" : "sentencepiece");
    (*meta)[tiktoken ? k::kTiktokenRanks : k::kSpmModel] = MetaValue::bytes(std::move(bytes));
  } else {
    return err(ErrorCode::kNotFound, dir, ": no tokenizer.json or tokenizer.model");
  }
  bool add_bos = bos_in_template;
  const std::string tc = dir + "/tokenizer_config.json";
  if (fs::exists(tc)) {
    VRUN_ASSIGN_OR_RETURN(json j, read_json(tc));
    if (j.contains("add_bos_token") && j["add_bos_token"].is_boolean()) add_bos = j["add_bos_token"].get<bool>();
    if (j.contains("chat_template")) {
      const json& t = j["chat_template"];
      if (t.is_string()) (*meta)[k::kChatTemplate] = MetaValue::str(t.get<std::string>());
      // Some models list named templates; "default" is the one chat uses.
      if (t.is_array())
        for (const auto& e : t)
          if (e.is_object() && e.value("name", "") == "default" && e.contains("template") && e["template"].is_string())
            (*meta)[k::kChatTemplate] = MetaValue::str(e["template"].get<std::string>());
    }
  }
  if (!meta->count(k::kChatTemplate) && fs::exists(dir + "/chat_template.jinja")) {
    VRUN_ASSIGN_OR_RETURN(std::string t, models::read_file(dir + "/chat_template.jinja"));
    (*meta)[k::kChatTemplate] = MetaValue::str(std::move(t));
  }
  (*meta)[k::kGgmlAddBos] = MetaValue::integer(add_bos ? 1 : 0);
  return Status::ok();
}

// The safetensors files of a folder: the index's shards, or every *.safetensors.
Result<std::vector<std::string>> weight_files(const std::string& dir) {
  const std::string index = dir + "/model.safetensors.index.json";
  std::set<std::string> files;
  if (fs::exists(index)) {
    VRUN_ASSIGN_OR_RETURN(json j, read_json(index));
    if (!j.contains("weight_map") || !j["weight_map"].is_object())
      return err(ErrorCode::kInvalidProgram, index, ": no weight_map object");
    for (const auto& [name, file] : j["weight_map"].items()) {
      if (!file.is_string() || file.get<std::string>().find('/') != std::string::npos)
        return err(ErrorCode::kInvalidProgram, index, ": weight_map entry for '", name, "' is not a file name in the folder");
      files.insert(dir + "/" + file.get<std::string>());
    }
  } else {
    for (const auto& e : fs::directory_iterator(dir))
      if (e.path().extension() == ".safetensors") files.insert(e.path().string());
  }
  if (files.empty()) return err(ErrorCode::kNotFound, dir, ": no *.safetensors weights");
  return std::vector<std::string>(files.begin(), files.end());
}

// Shapes the graph expects, in torch order, so a wrong checkpoint is reported by tensor name.
std::optional<std::vector<int64_t>> expected_shape(const std::string& name, const LlamaConfig& c) {
  const int64_t q = c.heads * c.head_dim, kv = c.kv_heads * c.head_dim;
  if (name == "token_embd.weight" || name == "output.weight") return std::vector<int64_t>{c.vocab, c.dim};
  if (name == "output_norm.weight") return std::vector<int64_t>{c.dim};
  const size_t dot = name.find('.', 4);
  if (name.rfind("blk.", 0) != 0 || dot == std::string::npos) return std::nullopt;
  static const std::map<std::string, int> kinds = {
      {"attn_norm.weight", 0}, {"ffn_norm.weight", 0}, {"attn_q.weight", 1}, {"attn_k.weight", 2}, {"attn_v.weight", 2},
      {"attn_output.weight", 3}, {"attn_q.bias", 4}, {"attn_k.bias", 5}, {"attn_v.bias", 5}, {"ffn_gate.weight", 6},
      {"ffn_up.weight", 6}, {"ffn_down.weight", 7}};
  auto it = kinds.find(name.substr(dot + 1));
  if (it == kinds.end()) return std::nullopt;
  switch (it->second) {
    case 0: return std::vector<int64_t>{c.dim};
    case 1: return std::vector<int64_t>{q, c.dim};
    case 2: return std::vector<int64_t>{kv, c.dim};
    case 3: return std::vector<int64_t>{c.dim, q};
    case 4: return std::vector<int64_t>{q};
    case 5: return std::vector<int64_t>{kv};
    case 6: return std::vector<int64_t>{c.ffn, c.dim};
    default: return std::vector<int64_t>{c.dim, c.ffn};
  }
}

std::string shape_str(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

bool is_projection(const std::string& name) {
  for (const char* p : {"attn_q.weight", "attn_k.weight", "attn_v.weight", "attn_output.weight", "ffn_gate.weight",
                        "ffn_up.weight", "ffn_down.weight"})
    if (name.size() > std::strlen(p) && name.compare(name.size() - std::strlen(p), std::strlen(p), p) == 0) return true;
  return name == "output.weight";
}

}  // namespace

static Result<ImportedModel> import_hf_folder_unguarded(const std::string& dir);
Result<ImportedModel> import_hf_folder(const std::string& dir) {
  return models::json_guard(dir, [&] { return import_hf_folder_unguarded(dir); });
}

static Result<ImportedModel> import_hf_folder_unguarded(const std::string& dir) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return err(ErrorCode::kNotFound, dir, ": not a folder");
  ImportedModel m;
  const std::string config_path = dir + "/config.json";
  VRUN_ASSIGN_OR_RETURN(json cj, read_json(config_path));
  VRUN_RETURN_IF_ERROR(read_config(cj, config_path, &m.config, &m.notes));
  LlamaConfig& c = m.config;

  struct Entry {
    std::shared_ptr<safetensors::File> file;
    const safetensors::TensorInfo* info;
  };
  auto by_name = std::make_shared<std::map<std::string, Entry>>();
  VRUN_ASSIGN_OR_RETURN(std::vector<std::string> files, weight_files(dir));
  for (const auto& path : files) {
    VRUN_ASSIGN_OR_RETURN(std::shared_ptr<safetensors::File> f, safetensors::File::open(path));
    for (const auto& t : f->tensors()) {
      const std::string name = canonical_name(t.name);
      if (name.empty()) continue;
      const std::string where = path + ": tensor '" + t.name + "'";
      if (by_name->count(name)) return err(ErrorCode::kInvalidProgram, where, ": appears in more than one file");
      if (!t.dtype)
        return err(ErrorCode::kUnsupported, where, ": dtype ", t.dtype_name, " (vrun imports F32, F16 and BF16 safetensors)");
      auto shape = expected_shape(name, c);
      if (!shape) return err(ErrorCode::kInvalidProgram, where, ": layer index outside the config's ", c.layers, " layers");
      if (*shape != t.shape)
        return err(ErrorCode::kInvalidProgram, where, ": shape ", shape_str(t.shape), ", config.json implies ", shape_str(*shape));
      (*by_name)[name] = {f, &t};
    }
  }
  if (!by_name->count("output.weight")) {
    if (!c.tied_embeddings) m.notes.push_back(dir + ": no lm_head.weight; the output projection uses the embedding (tied)");
    c.tied_embeddings = true;
  } else if (c.tied_embeddings) {
    by_name->erase("output.weight");  // tied: the stored copy is the embedding
  }
  for (int64_t l = 0; l < c.layers; ++l)
    for (const char* w : {"attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm", "ffn_gate", "ffn_up", "ffn_down"}) {
      const std::string name = "blk." + std::to_string(l) + "." + w + ".weight";
      if (!by_name->count(name)) return err(ErrorCode::kNotFound, dir, ": no weight for layer ", l, " '", name, "' in the safetensors files");
    }
  for (const char* name : {"token_embd.weight", "output_norm.weight"})
    if (!by_name->count(name)) return err(ErrorCode::kNotFound, dir, ": no '", name, "' in the safetensors files");

  m.weights = [by_name](const std::string& name) -> std::optional<Weight> {
    auto it = by_name->find(name);
    if (it == by_name->end()) return std::nullopt;
    Weight w;
    w.dtype = *it->second.info->dtype;
    w.shape = Shape::of(it->second.info->shape);
    w.data = it->second.info->data;
    w.keep = it->second.file->keep_alive();
    return w;
  };
  VRUN_RETURN_IF_ERROR(read_tokenizer(dir, &m.metadata));
  m.metadata["vrun.source"] = MetaValue::str(dir);
  return m;
}

Result<ImportedModel> import_llama_checkpoint(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) return import_hf_folder(path);
  return import_gguf(path);
}

Result<WeightSource> convert_projections(const WeightSource& weights, const LlamaConfig& config, DType dtype,
                                         std::vector<std::string>* notes) {
  if (dtype != DType::f32 && dtype != DType::f16 && dtype != DType::bf16 && dtype != DType::q8_0 && dtype != DType::q4_0)
    return err(ErrorCode::kInvalidArgument, "export dtype ", dtype_name(dtype), " (choose f32, f16, bf16, q8_0 or q4_0)");
  if (notes && is_quantized(dtype)) {
    // Quantised rows are whole 32-element blocks; a matrix whose input width is not keeps its type.
    const std::pair<const char*, int64_t> widths[] = {{"attention q/k/v, feed-forward gate/up and output projections", config.dim},
                                                      {"attention output projections", config.heads * config.head_dim},
                                                      {"feed-forward down projections", config.ffn}};
    for (const auto& [what, width] : widths)
      if (width % kQuantBlock != 0)
        notes->push_back(std::string(what) + " keep their type: input width " + std::to_string(width) + " is not a multiple of " +
                         std::to_string(kQuantBlock));
  }
  auto cache = std::make_shared<std::map<std::string, Weight>>();
  auto mu = std::make_shared<std::mutex>();
  WeightSource out = [weights, dtype, cache, mu](const std::string& name) -> std::optional<Weight> {
    std::optional<Weight> w = weights(name);
    if (!w || !is_projection(name) || w->shape.rank != 2 || w->dtype == dtype) return w;
    std::lock_guard<std::mutex> lock(*mu);
    if (auto it = cache->find(name); it != cache->end()) return it->second;
    const int64_t rows = w->shape[0], cols = w->shape[1];
    if (is_quantized(dtype) && cols % kQuantBlock != 0) return w;
    auto bytes = std::make_shared<std::vector<uint8_t>>(static_cast<size_t>(rows * dtype_bytes(dtype, cols)));
    std::vector<float> row(static_cast<size_t>(cols));
    const int64_t src_row = dtype_bytes(w->dtype, cols), dst_row = dtype_bytes(dtype, cols);
    for (int64_t r = 0; r < rows; ++r) {
      const uint8_t* src = static_cast<const uint8_t*>(w->data) + r * src_row;
      if (w->dtype == DType::f32) {
        std::memcpy(row.data(), src, static_cast<size_t>(cols) * 4);
      } else if (w->dtype == DType::f16 || w->dtype == DType::bf16) {
        for (int64_t i = 0; i < cols; ++i) {
          uint16_t h;
          std::memcpy(&h, src + 2 * i, 2);
          row[static_cast<size_t>(i)] = w->dtype == DType::f16 ? f16_to_f32(h) : bf16_to_f32(h);
        }
      } else {
        dequantize_row(w->dtype, src, row.data(), cols);
      }
      uint8_t* dst = bytes->data() + r * dst_row;
      if (dtype == DType::f32) {
        std::memcpy(dst, row.data(), static_cast<size_t>(cols) * 4);
      } else if (dtype == DType::f16 || dtype == DType::bf16) {
        for (int64_t i = 0; i < cols; ++i) {
          const uint16_t h = dtype == DType::f16 ? f32_to_f16(row[static_cast<size_t>(i)]) : f32_to_bf16(row[static_cast<size_t>(i)]);
          std::memcpy(dst + 2 * i, &h, 2);
        }
      } else {
        quantize_row(dtype, row.data(), dst, cols);
      }
    }
    Weight q;
    q.dtype = dtype;
    q.shape = w->shape;
    q.data = bytes->data();
    q.keep = bytes;
    (*cache)[name] = q;
    return q;
  };
  return out;
}

Status export_llama_program(const std::string& checkpoint, const std::string& out_path, const ExportOptions& options,
                            std::vector<std::string>* notes) {
  VRUN_ASSIGN_OR_RETURN(std::shared_ptr<Program> program, build_llama_export(checkpoint, options, notes));
  return write_program(*program, out_path).with_context("writing " + out_path);
}

Result<std::shared_ptr<Program>> build_llama_export(const std::string& checkpoint, const ExportOptions& options,
                                                    std::vector<std::string>* notes) {
  VRUN_ASSIGN_OR_RETURN(ImportedModel m, import_llama_checkpoint(checkpoint));
  if (notes) notes->insert(notes->end(), m.notes.begin(), m.notes.end());
  WeightSource weights = m.weights;
  if (options.dtype) {
    VRUN_ASSIGN_OR_RETURN(weights, convert_projections(m.weights, m.config, *options.dtype, notes));
    m.metadata["vrun.export_dtype"] = MetaValue::str(dtype_name(*options.dtype));
  }
  BuildSettings s;
  s.context = options.context > 0 ? options.context : m.config.max_context;
  s.chunk = options.chunk;
  return build_llama_program(m.config, weights, s, m.metadata);
}

}  // namespace vrun::llama
