#include "models/onnx/silero_vad.h"

#include <algorithm>
#include <cstring>

#include "models/onnx/onnx_import.h"

namespace vrun::onnx {

Result<std::unique_ptr<SileroVad>> SileroVad::load(const std::string& path, BackendKind backend) {
  ImportOptions io;
  io.dims["batch"] = {1, 1};
  io.dims["sequence"] = {kWindow + kContext, kWindow + kContext};
  VRUN_ASSIGN_OR_RETURN(auto prog, import_onnx(path, io));
  const MethodDef* m = prog->method("forward");
  auto vad = std::unique_ptr<SileroVad>(new SileroVad());
  for (int id : m->inputs) vad->input_order_.push_back(m->values[static_cast<size_t>(id)].name);
  for (const auto& want : {"input", "state", "sr"})
    if (std::find(vad->input_order_.begin(), vad->input_order_.end(), want) == vad->input_order_.end())
      return err(ErrorCode::kInvalidArgument, path, ": not a Silero VAD model (no input '", want,
                 "'; use silero_vad_16k_op15.onnx from the silero-vad package)");
  if (m->outputs.size() != 2) return err(ErrorCode::kInvalidArgument, path, ": a Silero VAD model has 2 outputs");
  for (int k = 0; k < 2; ++k)
    if (m->values[static_cast<size_t>(m->outputs[static_cast<size_t>(k)])].name == "stateN") vad->state_index_ = k;
  vad->prob_index_ = 1 - vad->state_index_;
  ExecutorOptions eo;
  eo.backend = backend;
  eo.threads = 1;
  VRUN_ASSIGN_OR_RETURN(vad->ex_, Executor::create(prog, eo));
  return vad;
}

Result<std::vector<float>> SileroVad::probabilities(const float* samples, int64_t n) {
  std::vector<float> probs;
  std::vector<float> x(kWindow + kContext, 0.f), state(2 * 128, 0.f);
  int64_t sr = kSampleRate;
  const TensorView xv = TensorView::dense(x.data(), DType::f32, Shape{1, kWindow + kContext});
  const TensorView sv = TensorView::dense(state.data(), DType::f32, Shape{2, 1, 128});
  const TensorView rv = TensorView::dense(&sr, DType::i64, Shape{});
  std::vector<TensorView> inputs;
  for (const auto& name : input_order_) inputs.push_back(name == "input" ? xv : name == "state" ? sv : rv);
  for (int64_t at = 0; at < n; at += kWindow) {
    // The previous window's last kContext samples, then this window (zero-padded at the end).
    std::memmove(x.data(), x.data() + kWindow, kContext * sizeof(float));
    const int64_t take = std::min<int64_t>(kWindow, n - at);
    std::memcpy(x.data() + kContext, samples + at, static_cast<size_t>(take) * sizeof(float));
    std::fill(x.begin() + kContext + take, x.end(), 0.f);
    VRUN_ASSIGN_OR_RETURN(auto outs, ex_->run("forward", inputs));
    const TensorView& p = outs[static_cast<size_t>(prob_index_)];
    const TensorView& s = outs[static_cast<size_t>(state_index_)];
    if (p.numel() != 1 || s.numel() != 2 * 128 || p.dtype != DType::f32 || !s.is_contiguous())
      return err(ErrorCode::kInvalidProgram, "Silero VAD: unexpected outputs ", p.shape.str(), " and ", s.shape.str());
    probs.push_back(*static_cast<const float*>(p.data));
    std::memcpy(state.data(), s.data, state.size() * sizeof(float));
  }
  return probs;
}

}  // namespace vrun::onnx
