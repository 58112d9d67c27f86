#include "models/llama/gguf_llama.h"

#include <map>

namespace vrun::llama {

namespace {

using gguf::GgmlType;

// GGUF types kept as they are.
std::optional<DType> direct_dtype(uint32_t t) {
  switch (static_cast<GgmlType>(t)) {
    case GgmlType::F32: return DType::f32;
    case GgmlType::F16: return DType::f16;
    case GgmlType::BF16: return DType::bf16;
    case GgmlType::Q8_0: return DType::q8_0;
    case GgmlType::Q4_0: return DType::q4_0;
    case GgmlType::Q4_1: return DType::q4_1;
    default: return std::nullopt;
  }
}

MetaValue to_meta(const gguf::Value& v) {
  if (auto* s = std::get_if<std::string>(&v)) return MetaValue::str(*s);
  if (auto* i = std::get_if<int64_t>(&v)) return MetaValue::integer(*i);
  if (auto* b = std::get_if<bool>(&v)) return MetaValue::integer(*b ? 1 : 0);
  if (auto* d = std::get_if<double>(&v)) return MetaValue::real(*d);
  if (auto* is = std::get_if<std::vector<int64_t>>(&v)) return MetaValue::int_list(*is);
  if (auto* ss = std::get_if<std::vector<std::string>>(&v)) return MetaValue::string_list(*ss);
  if (auto* ds = std::get_if<std::vector<double>>(&v)) return MetaValue::float_list(*ds);
  return MetaValue::str("");
}

}  // namespace

Result<ImportedModel> import_gguf(const std::string& path) {
  VRUN_ASSIGN_OR_RETURN(std::shared_ptr<gguf::File> f, gguf::File::open(path));
  ImportedModel m;
  LlamaConfig& c = m.config;
  const auto arch = f->get_string("general.architecture");
  if (!arch) return err(ErrorCode::kInvalidProgram, path, ": no general.architecture key");
  if (*arch != "llama" && *arch != "mistral" && *arch != "qwen2")
    return err(ErrorCode::kUnsupported, path, ": architecture '", *arch,
               "' is not a Llama-family model (vrun generate runs llama, mistral and qwen2)");
  c.arch = *arch;
  auto need = [&](const std::string& key, int64_t* out) -> Status {
    auto v = f->get_int(*arch + "." + key);
    if (!v) return err(ErrorCode::kInvalidProgram, path, ": missing ", *arch, ".", key);
    *out = *v;
    return Status::ok();
  };
  VRUN_RETURN_IF_ERROR(need("embedding_length", &c.dim));
  VRUN_RETURN_IF_ERROR(need("block_count", &c.layers));
  VRUN_RETURN_IF_ERROR(need("attention.head_count", &c.heads));
  VRUN_RETURN_IF_ERROR(need("feed_forward_length", &c.ffn));
  c.kv_heads = f->get_int(*arch + ".attention.head_count_kv").value_or(c.heads);
  c.head_dim = f->get_int(*arch + ".attention.key_length").value_or(c.heads ? c.dim / c.heads : 0);
  c.max_context = f->get_int(*arch + ".context_length").value_or(2048);
  c.rope_theta = f->get_float(*arch + ".rope.freq_base").value_or(10000.0);
  c.rms_eps = f->get_float(*arch + ".attention.layer_norm_rms_epsilon").value_or(1e-5);
  // llama.cpp's converter permutes Llama q/k rows for pairwise (interleaved) rotation; Qwen2 keeps
  // the Hugging Face half-split layout.
  c.rope_mode = *arch == "qwen2" ? RopeMode::kHalf : RopeMode::kInterleaved;
  const gguf::TensorInfo* embd = f->tensor("token_embd.weight");
  if (!embd || embd->ne.size() != 2) return err(ErrorCode::kInvalidProgram, path, ": missing or malformed token_embd.weight");
  c.vocab = f->get_int(*arch + ".vocab_size").value_or(embd->ne[1]);
  c.tied_embeddings = f->tensor("output.weight") == nullptr;
  if (const gguf::TensorInfo* rf = f->tensor("rope_freqs.weight")) {
    if (rf->type != static_cast<uint32_t>(GgmlType::F32) || rf->numel() != c.head_dim / 2)
      return err(ErrorCode::kInvalidProgram, path, ": rope_freqs.weight must be f32 [", c.head_dim / 2, "]");
    const float* p = reinterpret_cast<const float*>(rf->data);
    c.rope_freq_factors.assign(p, p + c.head_dim / 2);
  }
  VRUN_RETURN_IF_ERROR(c.validate().with_context(path));

  std::map<uint32_t, int> unsupported;
  for (const auto& t : f->tensors())
    if (!direct_dtype(t.type)) unsupported[t.type]++;
  if (!unsupported.empty()) {
    std::string list;
    for (const auto& [t, n] : unsupported) list += std::string(list.empty() ? "" : ", ") + gguf::ggml_type_name(t) + " (" + std::to_string(n) + " tensors)";
    return err(ErrorCode::kUnsupported, path, ": tensor types ", list,
               " cannot be converted by this version; vrun runs f32, f16, bf16, q8_0, q4_0 and q4_1 GGUF files");
  }
  m.weights = [f](const std::string& name) -> std::optional<Weight> {
    const gguf::TensorInfo* t = f->tensor(name);
    if (!t) return std::nullopt;
    Weight w;
    w.dtype = *direct_dtype(t->type);
    w.shape.rank = static_cast<int>(t->ne.size());
    for (int i = 0; i < w.shape.rank; ++i) w.shape[i] = t->ne[w.shape.rank - 1 - i];
    w.data = t->data;
    w.keep = f->keep_alive();
    return w;
  };
  for (const auto& [key, v] : f->metadata())
    if (key.rfind("tokenizer.", 0) == 0) m.metadata[key] = to_meta(v);
  m.metadata["tokenizer.kind"] = MetaValue::str("ggml");
  m.metadata["vrun.source"] = MetaValue::str(path);
  return m;
}

}  // namespace vrun::llama
