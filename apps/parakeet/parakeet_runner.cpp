#include "apps/parakeet/parakeet_runner.h"
#include "apps/common/sampling/sampler.h"
#include "runtime/base/clock.h"
#include "runtime/base/strings.h"

#include "models/parakeet/parakeet_family.h"
#include "models/registry/families.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <future>

namespace vrun::parakeet {

namespace {

Result<std::shared_ptr<Program>> load_or_build(const std::string& path, const BuildSettings& settings) {
  if (ends_with(path, ".vrp")) return load_program(path);
  return import_and_build(path, settings);
}

}  // namespace

bool is_parakeet_checkpoint(const std::string& path) {
  auto d = models::detect(path);
  return d.is_ok() && d->family->name == "parakeet";
}

Result<std::shared_ptr<Program>> export_parakeet(const std::string& path, const BuildSettings& settings) {
  return load_or_build(path, settings);
}

Result<std::unique_ptr<ParakeetRunner>> ParakeetRunner::load(const std::string& path, const RunnerOptions& options) {
  VRUN_ASSIGN_OR_RETURN(std::shared_ptr<Program> program, load_or_build(path, options.build));
  return load(std::move(program), options, path);
}

Result<std::unique_ptr<ParakeetRunner>> ParakeetRunner::load(std::shared_ptr<Program> program, const RunnerOptions& options,
                                                             const std::string& source) {
  std::unique_ptr<ParakeetRunner> r(new ParakeetRunner());
  const std::string path = !source.empty() ? source : !program->source.empty() ? program->source : "parakeet program";
  r->program_ = std::move(program);
  const MetaValue* runner = r->program_->meta("vrun.runner");
  if (!runner || runner->s != "parakeet")
    return err(ErrorCode::kInvalidProgram, path, ": not a Parakeet program (vrun.runner is '", runner ? runner->s : "", "')");
  VRUN_ASSIGN_OR_RETURN(r->info_, info_from_program(*r->program_));
  if (r->info_.config.head == HeadKind::kTdt) {
    // Programs exported before the greedy loop became one op decode through per-token methods.
    if (!r->program_->method("greedy"))
      return err(ErrorCode::kInvalidProgram, path,
                 ": its TDT decoder has no greedy method (a program from an older vrun); export it again");
  }
  VRUN_ASSIGN_OR_RETURN(auto mel_cfg, preprocess::NemoMelConfig::parse(r->info_.preprocessor_json, path + ": preprocessor"));
  if (mel_cfg.features != r->info_.config.feat_in)
    return err(ErrorCode::kInvalidProgram, path, ": the preprocessor makes ", mel_cfg.features, " features, the encoder takes ", r->info_.config.feat_in);
  if (mel_cfg.sample_rate != 16000)
    return err(ErrorCode::kUnsupported, path, ": preprocessor sample rate ", mel_cfg.sample_rate, " (16000 Hz audio is fed)");
  VRUN_ASSIGN_OR_RETURN(auto mel, preprocess::NemoMelSpectrogram::create(mel_cfg));
  r->mel_ = std::make_unique<preprocess::NemoMelSpectrogram>(std::move(mel));
  r->builder_ = std::make_unique<TranscriptBuilder>(r->info_.vocab, r->info_.config.window_stride, r->info_.config.subsampling_factor);
  ExecutorOptions eo;
  eo.backend = options.backend;
  eo.threads = options.threads;
  eo.device = options.device;
  VRUN_ASSIGN_OR_RETURN(r->executor_, Executor::create(r->program_, eo));
  r->on_gpu_ = r->executor_->uses_gpu() && runs_on_gpu(options.backend, options.device);
  return r;
}

Result<preprocess::Features> ParakeetRunner::features(std::span<const float> samples) const { return mel_->compute(samples); }

// Encodes feature frames [first, first + count), all of them valid: NeMo's subsampling masks the
// frames past the valid length before every convolution, which is the same as leaving them out.
// Appends rows [keep_from, keep_from + keep_count) of the head's output (TDT: the joint's
// encoder projection, CTC: logits) to *out when out is given (TDT decoding reads them from the
// program's enc_proj state instead).
Status ParakeetRunner::encode_range(const std::string& method, const preprocess::NemoMelSpectrogram::Stream& stream,
                                    const preprocess::Features& f, int64_t first, int64_t count, int64_t keep_from, int64_t keep_count,
                                    std::vector<float>* out) {
  const ParakeetConfig& c = info_.config;
  const int64_t valid = std::max<int64_t>(0, std::min(count, stream.valid_frames() - first));
  const int64_t enc_len = c.encoded_length(valid);
  if (enc_len < keep_from + keep_count)
    return err(ErrorCode::kInternal, "parakeet encode: ", enc_len, " encoder frames, rows up to ", keep_from + keep_count, " wanted");
  auto outs = executor_->run(method, {TensorView::dense(const_cast<float*>(f.data.data()), DType::f32, {1, c.feat_in, count})}, {{"enc_len", enc_len}});
  if (!outs.is_ok()) return outs.status();
  if (!out) return Status::ok();
  const TensorView& head = (*outs)[1];
  const int64_t width = head.shape[2];
  const float* p = head.ptr<float>();
  out->insert(out->end(), p + keep_from * width, p + (keep_from + keep_count) * width);
  return Status::ok();
}

Result<std::vector<float>> ParakeetRunner::encoder_output(const preprocess::Features& feats, int64_t valid_frames, bool local_attention) {
  const ParakeetConfig& c = info_.config;
  TranscribeOptions o;
  o.local_attention = local_attention;
  const int64_t frames = std::min<int64_t>(valid_frames, feats.frames);
  const int64_t enc_len = c.encoded_length(frames);
  VRUN_ASSIGN_OR_RETURN(const std::string method, encode_method(o, enc_len));
  const int64_t bound = frames_per_call(method);
  if (enc_len < 1) return err(ErrorCode::kInvalidArgument, "parakeet encode: ", valid_frames, " feature frames make no encoder frame");
  if (enc_len > bound) return err(ErrorCode::kInvalidArgument, "parakeet encode: ", enc_len, " encoder frames exceed one call's ", bound);
  std::vector<float> in = feats.slice_frames(0, frames).data;
  VRUN_ASSIGN_OR_RETURN(auto outs, executor_->run(method, {TensorView::dense(in.data(), DType::f32, {1, c.feat_in, frames})}, {{"enc_len", enc_len}}));
  const float* p = outs[0].ptr<float>();
  return std::vector<float>(p, p + enc_len * c.d_model);
}

Result<std::string> ParakeetRunner::encode_method(const TranscribeOptions& o, int64_t E) const {
  if (!o.local_attention || info_.config.local_window > 0) return std::string(E > info_.max_encoder_frames && long_fits(E) ? "encode_long" : "encode");
  if (info_.local_window < 1)
    return err(ErrorCode::kUnsupported, program_->source, ": the program has no local-attention method (encode_local); export it "
               "again (its local window was 0, or it predates local attention)");
  return std::string("encode_local");
}

int64_t ParakeetRunner::frames_per_call(const std::string& method) const {
  return method == "encode_local" ? info_.max_local_frames : method == "encode_long" ? info_.max_long_frames : info_.max_encoder_frames;
}

bool ParakeetRunner::long_fits(int64_t E) const {
  if (long_refused_ || E > info_.max_long_frames || info_.config.local_window > 0) return false;
  const Executor::ArenaInfo arena = executor_->arena("encode_long");
  if (arena.allocated) return true;
  // Its arena, with a tenth to spare, in the memory free where it runs (unknown: try it), beside
  // the arenas of encode and the batched methods where they are not allocated yet: the other
  // files of a job still need those, and must not find the memory taken.
  uint64_t need = static_cast<uint64_t>(arena.bytes);
  for (const char* other : {"encode", "encode_batch"})
    if (const Executor::ArenaInfo a = executor_->arena(other); !a.allocated) need += static_cast<uint64_t>(a.bytes);
  const uint64_t free = executor_->free_memory_bytes();
  return free == 0 || need * 11 / 10 <= free;
}

std::vector<ParakeetRunner::ChunkPlan> ParakeetRunner::plan_chunks(int64_t valid, int64_t E, int64_t M, const TranscribeOptions& o) const {
  const int64_t factor = info_.config.subsampling_factor;
  // Chunks of encoder frames [a, b): one call when the whole file fits, else centres of
  // `centre` frames with `ctx` frames of context on each side, the context rows dropped.
  int64_t ctx = std::max<int64_t>(0, o.context_frames);
  int64_t centre = o.chunk_frames > 0 ? o.chunk_frames : M - 2 * ctx;
  if (centre < 1 || centre + 2 * ctx > M) {
    ctx = M / 8;
    centre = M - 2 * ctx;
  }
  std::vector<ChunkPlan> chunks;
  if (E <= M) {
    chunks.push_back({0, E, 0, 0, valid});
    return chunks;
  }
  for (int64_t a = 0; a < E;) {
    const int64_t b = std::min(E, a + centre);
    const int64_t s = std::max<int64_t>(0, a - ctx), e = std::min(E, b + ctx);
    chunks.push_back({a, b, s, s * factor, std::min(valid, e * factor)});
    a = b;
  }
  return chunks;
}

Result<Decoded> ParakeetRunner::decode(std::span<const float> samples, const TranscribeOptions& o, Transcript* out) {
  const ParakeetConfig& c = info_.config;
  auto t0 = Clock::now();
  const preprocess::NemoMelSpectrogram::Stream stream = mel_->stream(samples);
  out->stats.features_s += seconds_since(t0);
  const int64_t valid = stream.valid_frames();
  const int64_t E = c.encoded_length(valid);
  if (E < 1)
    return err(ErrorCode::kInvalidArgument, "parakeet: ", samples.size(), " samples is shorter than one feature frame (",
               mel_->config().hop_length, " samples)");
  VRUN_ASSIGN_OR_RETURN(const std::string method, encode_method(o, E));
  Result<Decoded> d = decode_stream(stream, E, method, o, out);
  // encode_long's arena did not fit after all (the memory free was not what the driver gave):
  // this file and the ones after it go in chunks.
  if (!d.is_ok() && d.status().code() == ErrorCode::kOutOfMemory && method == "encode_long") {
    long_refused_ = true;
    return decode_stream(stream, E, "encode", o, out);
  }
  return d;
}

Result<Decoded> ParakeetRunner::decode_stream(const preprocess::NemoMelSpectrogram::Stream& stream, int64_t E, const std::string& method,
                                              const TranscribeOptions& o, Transcript* out) {
  const ParakeetConfig& c = info_.config;
  const int64_t valid = stream.valid_frames();
  const std::vector<ChunkPlan> chunks = plan_chunks(valid, E, frames_per_call(method), o);
  const bool tdt = c.head == HeadKind::kTdt;
  std::vector<float> rows;  // CTC: the logits of the chunk's kept frames
  size_t next = 0;
  // The next chunk's feature frames (their log-mel and normalisation) are computed on another
  // thread while this chunk encodes, so the device does not wait for them.
  auto chunk_features = [&stream](const ChunkPlan& k) { return stream.frames(k.f0, k.f1 - k.f0); };
  std::future<preprocess::Features> ahead;
  auto load = [&](int64_t from) -> Result<ChunkRows> {
    if (next >= chunks.size() || chunks[next].a != from)
      return err(ErrorCode::kInternal, "parakeet decode: no chunk starts at encoder frame ", from);
    const ChunkPlan& k = chunks[next++];
    auto t1 = Clock::now();
    rows.clear();
    const preprocess::Features f = ahead.valid() ? ahead.get() : chunk_features(k);
    if (next < chunks.size()) ahead = std::async(std::launch::async, chunk_features, chunks[next]);
    VRUN_RETURN_IF_ERROR(encode_range(method, stream, f, k.f0, k.f1 - k.f0, k.a - k.s, k.b - k.a, tdt ? nullptr : &rows));
    ++out->stats.windows;
    out->stats.encode_s += seconds_since(t1);
    if (o.on_progress) o.on_progress(k.a, E);
    return ChunkRows{k.a, k.b, tdt ? k.a - k.s : 0, rows.data()};
  };
  return decode_frames(E, load, out);
}

Status ParakeetRunner::take_emitted(const int32_t* em, int64_t rows, int64_t t, int64_t symbols, int64_t end, Decoded* d) const {
  if (em[3] == 1)
    return err(ErrorCode::kInternal, "parakeet greedy: the device did not run the decoder's workgroups side by side (a grid "
               "barrier timed out); VRUN_TDT_GROUPS=1 runs it as one workgroup, --backend cpu on the CPU");
  if (em[3] == 3)
    return err(ErrorCode::kInternal, "parakeet greedy: the Vulkan device ended the decoder's loop early (an implementation "
               "limit on loop iterations, as a CPU implementation's); --backend cpu runs it on the CPU");
  if (em[3] != 0 || em[0] < 0 || em[0] > rows || em[1] < t || (em[1] == t && em[0] == 0 && em[2] <= symbols))
    return err(ErrorCode::kInternal, "parakeet greedy: bad result (", em[0], " tokens, next frame ", em[1], ", status ", em[3],
               ") for frames ", t, " to ", end);
  const int64_t V = info_.config.vocab_size;
  for (int32_t i = 0; i < em[0]; ++i) {
    const int32_t* row = em + 4 * (i + 1);
    if (row[0] < 0 || row[0] >= V || row[1] < t || row[1] >= end || row[2] < 0)
      return err(ErrorCode::kInternal, "parakeet greedy: token ", row[0], " at frame ", row[1], " (frames ", t, " to ", end, ")");
    d->tokens.push_back({row[0], row[1], static_cast<int64_t>(row[1]) + row[2]});
    d->durations.push_back(row[2]);
  }
  return Status::ok();
}

Result<Decoded> ParakeetRunner::decode_frames(int64_t E, const ChunkLoader& load, Transcript* out) {
  const ParakeetConfig& c = info_.config;
  Decoded d;
  d.frames = E;
  const bool tdt = c.head == HeadKind::kTdt;
  const int64_t width = tdt ? c.joint_hidden : c.vocab_size + 1;
  VRUN_ASSIGN_OR_RETURN(ChunkRows cur, load(0));
  auto chunk = [&](int64_t t) -> Status {
    while (t >= cur.b) {
      VRUN_ASSIGN_OR_RETURN(cur, load(cur.b));
    }
    return Status::ok();
  };
  auto t2 = Clock::now();
  double encode_before = out->stats.encode_s;
  const int64_t V = c.vocab_size, blank = c.blank_id();
  if (!tdt) {
    int64_t prev = -1, run_start = 0;
    for (int64_t t = 0; t < E; ++t) {
      VRUN_RETURN_IF_ERROR(chunk(t));
      const int64_t k = argmax(std::span<const float>(cur.rows + (t - cur.a) * width, static_cast<size_t>(V + 1)));
      if (k != prev) {
        if (prev >= 0 && prev != blank) d.tokens.push_back({static_cast<int32_t>(prev), run_start, t});
        prev = k;
        run_start = t;
      }
    }
    if (prev >= 0 && prev != blank) d.tokens.push_back({static_cast<int32_t>(prev), run_start, E});
  } else {
    // One greedy call per chunk (more when a chunk emits over kGreedyCapacity tokens): the loop
    // runs where the program runs, the prediction network's state stays in the program.
    int64_t t = 0, symbols = 0;
    bool fresh = true;
    while (t < E) {
      VRUN_RETURN_IF_ERROR(chunk(t));
      int32_t control[5] = {static_cast<int32_t>(t), static_cast<int32_t>(symbols), static_cast<int32_t>(cur.b),
                            static_cast<int32_t>(cur.row0 - cur.a), fresh ? 1 : 0};
      VRUN_ASSIGN_OR_RETURN(auto outs, executor_->run("greedy", {TensorView::dense(control, DType::i32, {5})}));
      VRUN_RETURN_IF_ERROR(take_emitted(outs[0].ptr<int32_t>(), outs[0].shape[0] - 1, t, symbols, cur.b, &d));
      const int32_t* em = outs[0].ptr<int32_t>();
      t = em[1];
      symbols = em[2];
      fresh = false;
    }
  }
  out->stats.decode_s += seconds_since(t2) - (out->stats.encode_s - encode_before);
  out->stats.tokens += static_cast<int>(d.tokens.size());
  return d;
}

Result<Transcript> ParakeetRunner::transcribe(std::span<const float> samples, const TranscribeOptions& options,
                                              const std::function<void(const Segment&)>& on_segment,
                                              const std::function<void(double done_s)>& progress) {
  Transcript out;
  out.stats.audio_s = static_cast<double>(samples.size()) / 16000.0;
  TranscribeOptions o = options;
  if (progress) {
    const double frame_s = info_.config.window_stride * static_cast<double>(info_.config.subsampling_factor);
    o.on_progress = [&, frame_s, inner = options.on_progress](int64_t done, int64_t total) {
      if (inner) inner(done, total);
      progress(static_cast<double>(done) * frame_s);
    };
  }
  VRUN_ASSIGN_OR_RETURN(Decoded d, decode(samples, o, &out));
  if (progress) progress(out.stats.audio_s);
  fill_segments(d, o.word_timestamps, &out);
  for (const auto& s : out.segments)
    if (on_segment) on_segment(s);
  return out;
}

void ParakeetRunner::fill_segments(const Decoded& d, bool word_timestamps, Transcript* out) const {
  std::vector<EmittedToken> tokens = d.tokens;
  if (info_.config.head == HeadKind::kTdt) {
    builder_->refine_tdt(tokens);
  } else {
    builder_->ctc_offsets(tokens);
  }
  out->segments = builder_->segments(tokens, word_timestamps);
}

}  // namespace vrun::parakeet
