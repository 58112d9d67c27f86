// Silero VAD (silero_vad_16k_op15.onnx from the silero-vad wheel) on vrun: speech probability
// of each 512-sample window of 16 kHz audio. The model sees each window with the 64 samples
// before it (zeros before the first) and carries its LSTM state [2, 1, 128] from window to
// window, as the model's own wrapper does.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "runtime/executor.h"

namespace vrun::onnx {

class SileroVad {
 public:
  static constexpr int kWindow = 512, kContext = 64, kSampleRate = 16000;
  static Result<std::unique_ptr<SileroVad>> load(const std::string& path, BackendKind backend = BackendKind::kCpu);
  // One probability per window; the last window is zero-padded.
  Result<std::vector<float>> probabilities(const float* samples, int64_t n);

 private:
  std::unique_ptr<Executor> ex_;
  std::vector<std::string> input_order_;  // "input", "state", "sr" in the method's order
  std::string prob_output_, state_output_;
  int prob_index_ = 0, state_index_ = 1;
};

}  // namespace vrun::onnx
