#include "models/whisper/whisper_convert.h"

#include <cstring>
#include <map>
#include <mutex>

#include "models/whisper/whisper_import.h"

namespace vrun::whisper {

bool is_whisper_matrix(const std::string& name) {
  if (name == "decoder/embeddings/weight") return true;
  // encoder|decoder/layer_N/<block>/linear_K/weight
  const bool top = name.rfind("encoder/layer_", 0) == 0 || name.rfind("decoder/layer_", 0) == 0;
  const std::string suffix = "/weight";
  return top && name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0 &&
         name.find("/linear_") != std::string::npos;
}

namespace {

// One row of any float or block type as f32.
void row_to_f32(const Weight& w, int64_t row, int64_t cols, float* out) {
  const auto* src = static_cast<const uint8_t*>(w.data) + row * dtype_bytes(w.dtype, cols);
  if (is_quantized(w.dtype)) {
    dequantize_row(w.dtype, src, out, cols);
    return;
  }
  for (int64_t i = 0; i < cols; ++i) {
    switch (w.dtype) {
      case DType::f32: std::memcpy(&out[i], src + 4 * i, 4); break;
      case DType::f64: {
        double v;
        std::memcpy(&v, src + 8 * i, 8);
        out[i] = static_cast<float>(v);
        break;
      }
      default: {
        uint16_t h;
        std::memcpy(&h, src + 2 * i, 2);
        out[i] = w.dtype == DType::f16 ? f16_to_f32(h) : bf16_to_f32(h);
      }
    }
  }
}

void row_from_f32(const float* in, int64_t cols, DType t, uint8_t* dst) {
  if (is_quantized(t)) {
    quantize_row(t, in, dst, cols);
    return;
  }
  for (int64_t i = 0; i < cols; ++i) {
    if (t == DType::f32) {
      std::memcpy(dst + 4 * i, &in[i], 4);
    } else {
      const uint16_t h = t == DType::f16 ? f32_to_f16(in[i]) : f32_to_bf16(in[i]);
      std::memcpy(dst + 2 * i, &h, 2);
    }
  }
}

Weight convert(const Weight& w, DType to) {
  const int64_t rows = w.shape[0], cols = w.shape[1];
  auto bytes = std::make_shared<std::vector<uint8_t>>(static_cast<size_t>(rows * dtype_bytes(to, cols)));
  std::vector<float> row(static_cast<size_t>(cols));
  const int64_t dst_row = dtype_bytes(to, cols);
  for (int64_t r = 0; r < rows; ++r) {
    row_to_f32(w, r, cols, row.data());
    row_from_f32(row.data(), cols, to, bytes->data() + r * dst_row);
  }
  return Weight{to, w.shape, bytes->data(), bytes};
}

}  // namespace

Result<WeightSource> convert_whisper_matrices(const WeightSource& weights, const WhisperConfig& config, DType dtype,
                                              std::vector<std::string>* notes) {
  if (dtype != DType::f32 && dtype != DType::f16 && dtype != DType::bf16 && dtype != DType::q8_0)
    return err(ErrorCode::kInvalidArgument, "whisper export dtype ", dtype_name(dtype), ": choose f32, f16, bf16 or q8_0");
  if (notes) {
    // The model width is every matrix's input width but the second feed-forward linear's (4x).
    if (is_quantized(dtype) && config.n_text_state % kQuantBlock != 0)
      notes->push_back("whisper matrices keep their types: model width " + std::to_string(config.n_text_state) +
                       " is not a multiple of " + std::to_string(kQuantBlock) + " (" + dtype_name(dtype) + " blocks)");
    else
      notes->push_back(std::string("whisper linear weights and token embedding converted to ") + dtype_name(dtype));
  }
  auto cache = std::make_shared<std::map<std::string, Weight>>();
  auto mu = std::make_shared<std::mutex>();
  WeightSource out = [weights, dtype, cache, mu](const std::string& name) -> std::optional<Weight> {
    std::optional<Weight> w = weights(name);
    if (!w || !is_whisper_matrix(name) || w->shape.size() != 2 || w->dtype == dtype) return w;
    if (!is_float(w->dtype) && !is_quantized(w->dtype)) return w;  // the graph builder reports the dtype
    if (is_quantized(dtype) && w->shape[1] % kQuantBlock != 0) return w;
    std::lock_guard<std::mutex> lock(*mu);
    auto it = cache->find(name);
    if (it == cache->end()) it = cache->emplace(name, convert(*w, dtype)).first;
    return it->second;
  };
  return out;
}

Result<std::shared_ptr<Program>> export_whisper_program(const std::string& checkpoint, std::optional<DType> dtype,
                                                        std::vector<std::string>* notes, int64_t streams) {
  VRUN_ASSIGN_OR_RETURN(ImportedWhisper m, import_whisper(checkpoint));
  if (notes) notes->insert(notes->end(), m.notes.begin(), m.notes.end());
  WeightSource weights = m.weights;
  if (dtype) {
    VRUN_ASSIGN_OR_RETURN(weights, convert_whisper_matrices(weights, m.config, *dtype, notes));
  }
  BuildSettings bs;
  bs.decode_batch = 5;
  bs.streams = streams;
  return build_whisper_program(m.config, weights, m.extras, bs);
}

}  // namespace vrun::whisper
