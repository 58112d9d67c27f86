// Speech to text with a NeMo Parakeet model (TDT, RNN-T or CTC head), decoding as NeMo's greedy
// decoders do (FORMATS.md): NeMo features for the whole file, the FastConformer encoder over all
// of it when it fits max_encoder_frames (full attention), otherwise over overlapping chunks whose
// edges are dropped, and greedy TDT / CTC over the encoder frames with the prediction-network
// state carried across chunks. Text, words and segments as NeMo's timestamp code makes them.
#pragma once

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "apps/common/transcript/transcript.h"
#include "apps/parakeet/timestamps.h"
#include "models/parakeet/parakeet_model.h"
#include "preprocess/nemo_mel.h"
#include "runtime/executor.h"

namespace vrun::parakeet {

struct RunnerOptions {
  BackendKind backend = BackendKind::kAuto;
  int threads = 0;
  BuildSettings build;  // for checkpoints built on load
  int device = -1;  // Vulkan device index; -1: VRUN_DEVICE or the best one
};

struct TranscribeOptions {
  bool word_timestamps = true;
  // Long audio: encoder frames per chunk kept (centre) and seen on each side (context). 0 = the
  // program's max_encoder_frames less twice the context.
  int64_t chunk_frames = 0;
  int64_t context_frames = 250;  // 20 s on each side
  // NeMo's limited-context attention (the program's encode_local: each frame attends to the
  // frames within its window) instead of full attention: no quadratic term, and chunks as long
  // as the program's max_local_frames. A checkpoint trained with local attention always uses it.
  bool local_attention = false;
  // Progress: encoder frames decoded so far and in total.
  std::function<void(int64_t done, int64_t total)> on_progress;
};

using transcript::Segment;
using transcript::Transcript;

// The raw decode: tokens with their frames (TDT: emission frame and duration; CTC: the run).
struct Decoded {
  std::vector<EmittedToken> tokens;
  std::vector<int64_t> durations;  // TDT: predicted duration of each token
  int64_t frames = 0;              // encoder frames of the audio
};

// A .nemo archive, a Hugging Face Parakeet folder, or a .vrp exported from either.
bool is_parakeet_checkpoint(const std::string& path);
// `vrun export`: the program for a checkpoint (a .vrp is returned as loaded).
Result<std::shared_ptr<Program>> export_parakeet(const std::string& path, const BuildSettings& settings = {});

class ParakeetRunner {
 public:
  static Result<std::unique_ptr<ParakeetRunner>> load(const std::string& path, const RunnerOptions& options = {});
  // A program already in memory (e.g. just built by build_parakeet_program): no file written or
  // read. options.build is not used. `source` names it in errors.
  static Result<std::unique_ptr<ParakeetRunner>> load(std::shared_ptr<Program> program, const RunnerOptions& options = {},
                                                      const std::string& source = "");

  const ParakeetConfig& config() const { return info_.config; }
  const Vocabulary& vocabulary() const { return info_.vocab; }
  // Jobs (files, or chunks of a long one) one batched encoder call takes at most: the shortest
  // batched method's (64 of up to 10 s with the default build); 1: the program has none.
  int max_batch() const {
    int64_t most = 1;
    for (const BatchShape& b : info_.batch_shapes) most = std::max(most, b.jobs);
    return static_cast<int>(most);
  }
  // Files longer than this (seconds) go alone even in transcribe_batch: encode_long attends over
  // them whole, one file a call (0: none do; the program has no batched methods or no
  // encode_long, or its attention is local).
  double alone_above_s() const {
    if (info_.batch_shapes.empty() || info_.max_long_frames <= info_.max_encoder_frames || info_.config.local_window > 0) return 0;
    return static_cast<double>(info_.max_encoder_frames * info_.config.subsampling_factor) * info_.config.window_stride;
  }
  // Batched calls made so far, by method (encode_batch, encode_batch_500, ..., greedy_batch).
  const std::map<std::string, int64_t>& batched_calls() const { return batched_calls_; }
  const preprocess::NemoMelConfig& mel_config() const { return mel_->config(); }
  const Program& program() const { return *program_; }
  // Whether it was loaded for a GPU (runs_on_gpu): where batching files pays.
  bool on_gpu() const { return on_gpu_; }
  std::string device_description() const { return executor_->device_description(); }
  // The backend each node of a method runs on ("cpu", "vulkan"), for `vrun info` and tests.
  std::vector<std::string> node_backends(const std::string& method) const { return executor_->node_backends(method); }

  // 16-kHz mono samples. on_segment sees each segment when the transcript is complete;
  // progress gets the seconds of audio encoded so far (as the Whisper runner's does).
  Result<Transcript> transcribe(std::span<const float> samples, const TranscribeOptions& options = {},
                                const std::function<void(const Segment&)>& on_segment = {},
                                const std::function<void(double done_s)>& progress = {});
  // Several files: one transcript each (in order). When the program has encode_batch, the files'
  // encoder chunks (longest file first) go through the batched methods, as many in a call as
  // the method for the longest of them takes (the files' tokens are those of transcribe() on
  // each, up to float rounding); decoding then walks each file in turn.
  Result<std::vector<Transcript>> transcribe_batch(const std::vector<std::span<const float>>& files, const TranscribeOptions& options = {});

  // The pieces, for tests and tools.
  Result<preprocess::Features> features(std::span<const float> samples) const;
  // Encoder output [enc_len, d_model] of features [n_mels, frames] (one call; full attention, or
  // the program's local attention).
  Result<std::vector<float>> encoder_output(const preprocess::Features& feats, int64_t valid_frames, bool local_attention = false);
  Result<Decoded> decode(std::span<const float> samples, const TranscribeOptions& options, Transcript* stats);
  // NeMo's hypothesis text of decoded tokens (the space before punctuation removed).
  std::string text(const Decoded& d) const { return builder_->text(d.tokens); }

 private:
  ParakeetRunner() = default;
  // Encoder frames [a, b) kept from encoder frames [s, ...) of feature frames [f0, f1).
  struct ChunkPlan {
    int64_t a = 0, b = 0, s = 0, f0 = 0, f1 = 0;
  };
  // Where a loaded chunk's frames are: TDT, row0 = the enc_proj state row of frame a; CTC, rows =
  // the host logits of frame a on.
  struct ChunkRows {
    int64_t a = 0, b = 0, row0 = 0;
    const float* rows = nullptr;
  };
  using ChunkLoader = std::function<Result<ChunkRows>(int64_t from)>;
  // frames_per_call: the encode method's bound (frames_per_call(method)).
  std::vector<ChunkPlan> plan_chunks(int64_t valid_frames, int64_t encoder_frames, int64_t frames_per_call,
                                     const TranscribeOptions& o) const;
  // The encode method the options ask for, for E encoder frames: "encode_local", or with full
  // attention "encode_long" where E is over max_encoder_frames and long_fits(E), else "encode";
  // or why the program has no such method.
  Result<std::string> encode_method(const TranscribeOptions& o, int64_t E) const;
  // Whether E frames go through encode_long in one call: within its bound, and its scratch
  // arena (allocated on first use), with those of encode and the batched methods not yet
  // allocated, fits the memory free where the program runs.
  bool long_fits(int64_t E) const;
  // decode() of a stream of E encoder frames through `method` (chunked past its bound).
  Result<Decoded> decode_stream(const preprocess::NemoMelSpectrogram::Stream& stream, int64_t E, const std::string& method,
                                const TranscribeOptions& o, Transcript* out);
  // Encoder frames one call of that method takes.
  int64_t frames_per_call(const std::string& method) const;
  // Greedy TDT / CTC over encoder frames [0, E), loading the chunk that starts at frame `from`
  // through `load` when the walk reaches it (chunks come in order).
  Result<Decoded> decode_frames(int64_t E, const ChunkLoader& load, Transcript* out);
  // Jobs [first, first + jobs) through one call of batch shape `shape` (info_.batch_shapes).
  struct JobGroup {
    int64_t first = 0, jobs = 0;
    size_t shape = 0;
  };
  std::vector<JobGroup> plan_groups(const std::vector<int64_t>& job_frames) const;
  // transcribe_batch with encode_batch: the files' chunks, in groups of similar length, each
  // group through one call of a batched method.
  Result<std::vector<Decoded>> decode_batched(const std::vector<std::span<const float>>& files, const TranscribeOptions& o,
                                              std::vector<Transcript>* out);
  struct BatchJobs;   // parakeet_batch.cpp
  struct GroupInput;  // parakeet_batch.cpp
  // Group g's encoder input (its files' feature streams made where they are not yet); touches
  // only the group's files and `in`, so it may run beside run_group of another group.
  Status prepare_group(BatchJobs& b, size_t g, GroupInput* in) const;
  // The group through its batched encode method (the rows then held in b).
  Status run_group(BatchJobs& b, const GroupInput& in);
  // Each job's feature seconds of a prepared group, to its file's stats.
  static void add_features_time(const BatchJobs& b, const GroupInput& in, std::vector<Transcript>* out);
  // TDT: the groups' frames walked by greedy_batch, the files of a group in its lanes.
  Result<std::vector<Decoded>> decode_lanes(BatchJobs& b, const TranscribeOptions& o, std::vector<Transcript>* out);
  // One greedy call's emitted rows for frames [t, end) (t, symbols: where the call started),
  // checked and appended to d.
  Status take_emitted(const int32_t* em, int64_t rows, int64_t t, int64_t symbols, int64_t end, Decoded* d) const;
  // Text, words and segments of decoded tokens.
  void fill_segments(const Decoded& d, bool word_timestamps, Transcript* out) const;
  // f: the stream's feature frames [first, first + count) (stream.frames); the executor only reads them.
  Status encode_range(const std::string& method, const preprocess::NemoMelSpectrogram::Stream& stream, const preprocess::Features& f,
                      int64_t first, int64_t count, int64_t keep_from, int64_t keep_count, std::vector<float>* out);

  std::shared_ptr<Program> program_;
  std::unique_ptr<Executor> executor_;
  std::unique_ptr<preprocess::NemoMelSpectrogram> mel_;
  std::map<std::string, int64_t> batched_calls_;
  bool on_gpu_ = false;
  bool long_refused_ = false;  // encode_long's arena could not be allocated: chunks from then on
  std::unique_ptr<TranscriptBuilder> builder_;
  ProgramInfo info_;
};

}  // namespace vrun::parakeet
