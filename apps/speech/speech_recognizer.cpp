#include "apps/speech/speech_recognizer.h"

#include "models/registry/families.h"
#if VRUN_PARAKEET
#include "apps/parakeet/parakeet_runner.h"
#endif

namespace vrun::speech {

std::vector<Result<transcript::Transcript>> Recognizer::transcribe_many(const std::vector<std::span<const float>>& inputs,
                                                                        const std::vector<Options>& options) {
  std::vector<Result<transcript::Transcript>> out;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (options.size() != 1 && options.size() != inputs.size())
      out.emplace_back(err(ErrorCode::kInvalidArgument, options.size(), " option sets for ", inputs.size(), " inputs"));
    else
      out.push_back(transcribe(inputs[i], options.size() == 1 ? options[0] : options[i]));
  }
  return out;
}

namespace {

class WhisperRecognizer final : public Recognizer {
 public:
  explicit WhisperRecognizer(std::unique_ptr<whisper::WhisperRunner> r) : runner_(std::move(r)) {}
  const std::string& family() const override { return name_; }
  std::string device_description() const override { return runner_->device_description(); }
  const std::vector<std::string>& notes() const override { return runner_->notes(); }
  Status check(const Options& o, std::vector<std::string>* ignored) const override {
    if (o.local_attention && ignored) ignored->push_back("--attention applies to Parakeet models; Whisper attends to its whole window");
    return runner_->check_options(o.whisper);
  }
  Result<transcript::Transcript> transcribe(std::span<const float> samples, const Options& o, const OnSegment& seg,
                                            const OnProgress& prog) override {
    return runner_->transcribe(samples, o.whisper, seg, prog);
  }
  std::vector<Result<transcript::Transcript>> transcribe_many(const std::vector<std::span<const float>>& inputs,
                                                              const std::vector<Options>& options) override {
    std::vector<whisper::TranscribeOptions> w;
    for (const Options& o : options) w.push_back(o.whisper);
    return runner_->transcribe_many(inputs, w);
  }
  int batch() const override { return runner_->streams(); }

 private:
  std::unique_ptr<whisper::WhisperRunner> runner_;
  const std::string name_ = "whisper";
};

#if VRUN_PARAKEET
class ParakeetRecognizer final : public Recognizer {
 public:
  explicit ParakeetRecognizer(std::unique_ptr<parakeet::ParakeetRunner> r) : runner_(std::move(r)) {}
  const std::string& family() const override { return name_; }
  std::string device_description() const override { return runner_->device_description(); }
  const std::vector<std::string>& notes() const override { return notes_; }
  Status check(const Options& o, std::vector<std::string>* ignored) const override {
    const auto& w = o.whisper;
    if (w.task != "transcribe") return err(ErrorCode::kInvalidArgument, "--task ", w.task, ": Parakeet models only transcribe");
    if (ignored && !w.language.empty() && w.language != "auto" && w.language != "en")
      ignored->push_back("-l " + w.language + " ignored: Parakeet models transcribe the language they were trained on");
    return Status::ok();
  }
  Result<transcript::Transcript> transcribe(std::span<const float> samples, const Options& o, const OnSegment& seg,
                                            const OnProgress& prog) override {
    return runner_->transcribe(samples, parakeet_options(o), seg, prog);
  }
  std::vector<Result<transcript::Transcript>> transcribe_many(const std::vector<std::span<const float>>& inputs,
                                                              const std::vector<Options>& options) override {
    // Local attention goes file by file (its chunks are as long as a call takes); the batch
    // takes one set of options (Parakeet's only one is the attention).
    bool same = !options.empty() && (options.size() == 1 || options.size() == inputs.size());
    for (const Options& o : options) same = same && o.local_attention == options.front().local_attention;
    if (!same || options.front().local_attention) return Recognizer::transcribe_many(inputs, options);
    auto batch = runner_->transcribe_batch(inputs, parakeet_options(options.front()));
    std::vector<Result<transcript::Transcript>> out;
    for (size_t i = 0; i < inputs.size(); ++i)
      out.push_back(batch.is_ok() ? Result<transcript::Transcript>(std::move((*batch)[i])) : Result<transcript::Transcript>(batch.status()));
    return out;
  }
  int batch() const override { return runner_->max_batch(); }
  int default_batch() const override { return runner_->on_gpu() ? runner_->max_batch() : 1; }
  double alone_above_s() const override { return runner_->alone_above_s(); }

 private:
  static parakeet::TranscribeOptions parakeet_options(const Options& o) {
    parakeet::TranscribeOptions p;
    p.word_timestamps = true;
    p.local_attention = o.local_attention;
    return p;
  }
  std::unique_ptr<parakeet::ParakeetRunner> runner_;
  std::vector<std::string> notes_;
  const std::string name_ = "parakeet";
};
#endif

}  // namespace

Result<std::unique_ptr<Recognizer>> load(const std::string& path, const LoadOptions& options) {
  VRUN_ASSIGN_OR_RETURN(models::Detected d, models::detect(path));
  if (d.family->task != models::Task::kSpeechRecognition)
    return err(ErrorCode::kInvalidArgument, path, ": a ", d.family->name, " model, not a speech recogniser");
#if VRUN_PARAKEET
  if (d.family->name == "parakeet") {
    parakeet::RunnerOptions po;
    po.backend = options.backend;
    po.threads = options.threads;
    po.device = options.device;
    std::unique_ptr<parakeet::ParakeetRunner> r;
    if (d.program) {
      VRUN_ASSIGN_OR_RETURN(r, parakeet::ParakeetRunner::load(d.program, po, path));
    } else {
      VRUN_ASSIGN_OR_RETURN(r, parakeet::ParakeetRunner::load(path, po));
    }
    return std::unique_ptr<Recognizer>(std::make_unique<ParakeetRecognizer>(std::move(r)));
  }
#endif
  if (d.family->name != "whisper") return err(ErrorCode::kUnsupported, path, ": ", d.family->name, " models are not built into this vrun");
  VRUN_ASSIGN_OR_RETURN(auto r, d.program ? whisper::WhisperRunner::load(d.program, options, path)
                                          : whisper::WhisperRunner::load(path, options));
  return std::unique_ptr<Recognizer>(std::make_unique<WhisperRecognizer>(std::move(r)));
}

}  // namespace vrun::speech
