// One interface for speech recognition, whichever family the model is (Whisper, Parakeet): load a
// checkpoint or program, check what the options ask of it, transcribe one input or many. The CLI,
// the server and the bindings all reach speech models through it.
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "apps/common/transcript/transcript.h"
#include "apps/whisper/whisper_runner.h"
#include "runtime/executor.h"

namespace vrun::speech {

// Backend, threads, Vulkan device and (Whisper only) the rows of the batched decoder. Each loaded
// recogniser has its own executor, so several may run at once in different threads (one per
// device, or several on one).
using LoadOptions = whisper::RunnerOptions;

struct Options {
  // Whisper's decoding (language, task, beam search, temperature fallback, prompt, ...).
  whisper::TranscribeOptions whisper;
  // Parakeet: NeMo's limited-context attention instead of full attention.
  bool local_attention = false;
};

using OnSegment = std::function<void(const transcript::Segment&)>;
using OnProgress = std::function<void(double seconds_done)>;

class Recognizer {
 public:
  virtual ~Recognizer() = default;
  // "whisper" or "parakeet" (models/registry).
  virtual const std::string& family() const = 0;
  virtual std::string device_description() const = 0;
  // Import and conversion notes for the user.
  virtual const std::vector<std::string>& notes() const = 0;
  // What the options ask that this model cannot do (a language an English-only model lacks,
  // translation, ...), before any audio is read; warnings for options it ignores go to `ignored`.
  virtual Status check(const Options& options, std::vector<std::string>* ignored) const = 0;
  // 16-kHz mono samples.
  virtual Result<transcript::Transcript> transcribe(std::span<const float> samples, const Options& options,
                                                    const OnSegment& on_segment = {}, const OnProgress& on_progress = {}) = 0;
  // Several inputs together where the model batches them (Parakeet's encoder, Whisper's streams),
  // one after another otherwise; `options` holds one set for every input or one per input. Each
  // transcript is what the input alone gives. Whisper fails an input alone; where the model
  // cannot tell whose input failed, every input of the call carries the error.
  virtual std::vector<Result<transcript::Transcript>> transcribe_many(const std::vector<std::span<const float>>& inputs,
                                                                      const std::vector<Options>& options);
  // Inputs transcribe_many takes together (1: it goes one input after another).
  virtual int batch() const { return 1; }
  // Inputs a caller that was not told how many should pass transcribe_many at once: Parakeet on
  // a GPU, batch(); else 1 (on a CPU the matrix products already use every core for one input).
  virtual int default_batch() const { return 1; }
  // Inputs longer than this many seconds are transcribed alone even within transcribe_many (0:
  // none are): a job hands them to its workers one at a time, so that one worker does not hold a
  // share of them while another device idles.
  virtual double alone_above_s() const { return 0; }
};

// The family is found once (models::detect); a .vrp is loaded once.
Result<std::unique_ptr<Recognizer>> load(const std::string& path, const LoadOptions& options);

}  // namespace vrun::speech
