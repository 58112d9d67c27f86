#include "models/llama/gguf_llama.h"

#include <map>

#include "models/gguf/ggml_dequant.h"

namespace vrun::llama {

namespace {

using gguf::GgmlType;

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

  // Types vrun does not run become the nearest one it does, one note per source type.
  std::map<uint32_t, int> converted, unsupported;
  for (const auto& t : f->tensors()) {
    const auto to = gguf::ggml_import_dtype(t.type);
    if (!to)
      unsupported[t.type]++;
    else if (!gguf::ggml_direct_dtype(t.type))
      converted[t.type]++;
  }
  if (!unsupported.empty()) {
    std::string list;
    for (const auto& [t, n] : unsupported) list += std::string(list.empty() ? "" : ", ") + gguf::ggml_type_name(t) + " (" + std::to_string(n) + " tensors)";
    return err(ErrorCode::kUnsupported, path, ": tensor types ", list,
               " have no conversion in vrun (it has no decoder for their grid code books); re-quantise the model to "
               "q4_0, q4_1, q8_0, a K-quant or f16 with llama.cpp's llama-quantize");
  }
  for (const auto& [t, n] : converted)
    m.notes.push_back(std::to_string(n) + " " + gguf::ggml_type_name(t) + " tensors converted to " +
                      dtype_name(*gguf::ggml_import_dtype(t)) +
                      (t == static_cast<uint32_t>(GgmlType::Q4_K) ? " (exact: same 4-bit quants, per-32 scales)" : ""));
  m.weights = [f](const std::string& name) -> std::optional<Weight> {
    const gguf::TensorInfo* t = f->tensor(name);
    if (!t) return std::nullopt;
    Weight w;
    w.shape.rank = static_cast<int>(t->ne.size());
    for (int i = 0; i < w.shape.rank; ++i) w.shape[i] = t->ne[w.shape.rank - 1 - i];
    if (const auto direct = gguf::ggml_direct_dtype(t->type)) {
      w.dtype = *direct;
      w.data = t->data;
      w.keep = f->keep_alive();
      return w;
    }
    // The reader checked that rows are whole blocks, and every converted type's block is a
    // multiple of 32, so the conversion cannot fail.
    const int64_t cols = t->ne[0];
    auto c = gguf::convert_ggml_tensor(t->type, t->data, t->numel() / cols, cols);
    if (!c.is_ok()) return std::nullopt;
    w.dtype = c->dtype;
    w.data = c->data.get();
    w.keep = c->data;
    return w;
  };
  for (const auto& [key, v] : f->metadata())
    if (key.rfind("tokenizer.", 0) == 0) m.metadata[key] = to_meta(v);
  m.metadata["tokenizer.kind"] = MetaValue::str("ggml");
  m.metadata["vrun.source"] = MetaValue::str(path);
  return m;
}

}  // namespace vrun::llama
