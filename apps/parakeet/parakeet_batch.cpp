// transcribe_batch: the encoder chunks of all files (several files, or the chunks of one long
// file) go through encode_batch up to max_batch at a time, zero-padded to the longest with a
// frame mask; greedy decoding then walks each file in turn, reading the frames of its chunks
// where the last call left them. Chunks are packed in decoding order, so a chunk's frames are
// still there when the walk reaches it.
#include <algorithm>
#include <chrono>
#include <cstring>

#include "apps/parakeet/parakeet_runner.h"
#include "runtime/base/clock.h"

namespace vrun::parakeet {

Result<std::vector<Transcript>> ParakeetRunner::transcribe_batch(const std::vector<std::span<const float>>& files,
                                                                 const TranscribeOptions& o) {
  std::vector<Transcript> out(files.size());
  VRUN_ASSIGN_OR_RETURN(const std::string method, encode_method(o));
  if (info_.max_batch <= 1 || method != "encode") {  // encode_batch attends to every frame
    for (size_t i = 0; i < files.size(); ++i) {
      VRUN_ASSIGN_OR_RETURN(out[i], transcribe(files[i], o));
    }
    return out;
  }
  for (size_t i = 0; i < files.size(); ++i) out[i].stats.audio_s = static_cast<double>(files[i].size()) / 16000.0;
  VRUN_ASSIGN_OR_RETURN(std::vector<Decoded> decoded, decode_batched(files, o, &out));
  for (size_t i = 0; i < files.size(); ++i) fill_segments(decoded[i], o.word_timestamps, &out[i]);
  return out;
}

Result<std::vector<Decoded>> ParakeetRunner::decode_batched(const std::vector<std::span<const float>>& files,
                                                            const TranscribeOptions& o, std::vector<Transcript>* out) {
  const ParakeetConfig& c = info_.config;
  const int64_t B = info_.max_batch, n_mels = c.feat_in;
  const bool tdt = c.head == HeadKind::kTdt;
  const int64_t width = tdt ? c.joint_hidden : c.vocab_size + 1;
  struct File {
    preprocess::NemoMelSpectrogram::Stream stream;
    int64_t E = 0;
    std::vector<ChunkPlan> chunks;
    int64_t first_job = 0;
  };
  std::vector<File> fs;
  int64_t n_jobs = 0;
  for (size_t i = 0; i < files.size(); ++i) {
    auto t0 = Clock::now();
    File f{mel_->stream(files[i]), 0, {}, n_jobs};
    (*out)[i].stats.features_s += seconds_since(t0);
    const int64_t valid = f.stream.valid_frames();
    f.E = c.encoded_length(valid);
    if (f.E < 1)
      return err(ErrorCode::kInvalidArgument, "parakeet: file ", i, ": ", files[i].size(), " samples is shorter than one feature frame (",
                 mel_->config().hop_length, " samples)");
    f.chunks = plan_chunks(valid, f.E, frames_per_call("encode"), o);
    n_jobs += static_cast<int64_t>(f.chunks.size());
    fs.push_back(std::move(f));
  }
  auto job_at = [&](int64_t job) -> std::pair<const File*, const ChunkPlan*> {
    for (const File& f : fs)
      if (job < f.first_job + static_cast<int64_t>(f.chunks.size())) return {&f, &f.chunks[static_cast<size_t>(job - f.first_job)]};
    return {nullptr, nullptr};
  };

  // The group of jobs [group * B, group * B + B) the last encode_batch call holds, padded to T
  // encoder frames each.
  int64_t group = -1, T = 0;
  const float* logits = nullptr;  // CTC: [jobs, T, vocab + 1], valid until the next call
  std::vector<float> feats, mask;
  auto encode_group = [&](int64_t g) -> Status {
    const int64_t j0 = g * B, nb = std::min(B, n_jobs - j0);
    int64_t frames = 0;
    for (int64_t j = j0; j < j0 + nb; ++j) frames = std::max(frames, job_at(j).second->f1 - job_at(j).second->f0);
    feats.assign(static_cast<size_t>(nb * n_mels * frames), 0.0f);
    mask.assign(static_cast<size_t>(nb * frames), 0.0f);
    for (int64_t j = j0; j < j0 + nb; ++j) {
      const auto [f, k] = job_at(j);
      const int64_t count = k->f1 - k->f0;
      if (c.encoded_length(count) < k->b - k->s)
        return err(ErrorCode::kInternal, "parakeet encode: ", c.encoded_length(count), " encoder frames, rows up to ", k->b - k->s, " wanted");
      const preprocess::Features x = f->stream.frames(k->f0, count);
      float* dst = feats.data() + (j - j0) * n_mels * frames;
      for (int64_t m = 0; m < n_mels; ++m)
        std::memcpy(dst + m * frames, x.data.data() + m * count, static_cast<size_t>(count) * sizeof(float));
      std::fill_n(mask.begin() + (j - j0) * frames, count, 1.0f);
    }
    T = c.encoded_length(frames);
    auto outs = executor_->run("encode_batch",
                               {TensorView::dense(feats.data(), DType::f32, {nb, n_mels, frames}),
                                TensorView::dense(mask.data(), DType::f32, {nb, 1, frames, 1})},
                               {{"enc_len", T}});
    if (!outs.is_ok()) return outs.status();
    logits = tdt ? nullptr : (*outs)[1].ptr<float>();
    group = g;
    return Status::ok();
  };

  std::vector<Decoded> decoded;
  for (size_t i = 0; i < fs.size(); ++i) {
    const File& f = fs[i];
    Transcript& stats = (*out)[i];
    size_t next = 0;
    auto load = [&](int64_t from) -> Result<ChunkRows> {
      if (next >= f.chunks.size() || f.chunks[next].a != from)
        return err(ErrorCode::kInternal, "parakeet decode: no chunk starts at encoder frame ", from);
      const int64_t job = f.first_job + static_cast<int64_t>(next);
      const ChunkPlan& k = f.chunks[next++];
      if (job / B != group) {
        auto t1 = Clock::now();
        VRUN_RETURN_IF_ERROR(encode_group(job / B));
        stats.stats.encode_s += seconds_since(t1);
      }
      ++stats.stats.windows;
      if (o.on_progress) o.on_progress(k.a, f.E);
      const int64_t row = (job - group * B) * T + (k.a - k.s);
      return ChunkRows{k.a, k.b, tdt ? row : 0, tdt ? nullptr : logits + row * width};
    };
    VRUN_ASSIGN_OR_RETURN(Decoded d, decode_frames(f.E, load, &stats));
    decoded.push_back(std::move(d));
  }
  return decoded;
}

}  // namespace vrun::parakeet
