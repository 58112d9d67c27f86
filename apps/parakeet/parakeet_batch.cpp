// transcribe_batch: the encoder chunks of all files (several files, or the chunks of one long
// file), longest file first, go through the batched methods in groups (as many as the method for
// the group's longest takes: 4 of 160 s, 64 of 10 s), zero-padded to the longest with a frame
// mask; greedy decoding then walks each file in turn, reading the frames of its chunks where the
// last call left them. Groups follow decoding order, so a chunk's frames are still there when
// the walk reaches it.
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
  if (info_.batch_shapes.empty() || method != "encode") {  // the batched methods attend to every frame
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

// Jobs (chunks, files longest first) in groups for the batched methods: a group grows while the
// method that bounds its longest job takes one more.
std::vector<ParakeetRunner::JobGroup> ParakeetRunner::plan_groups(const std::vector<int64_t>& job_frames) const {
  const std::vector<BatchShape>& shapes = info_.batch_shapes;  // longest first
  auto fitting = [&](int64_t frames) {  // the shape with the most jobs whose bound holds `frames`
    size_t best = 0;
    for (size_t i = 0; i < shapes.size(); ++i)
      if (shapes[i].frames >= frames) best = i;
    return best;
  };
  std::vector<JobGroup> groups;
  const int64_t n = static_cast<int64_t>(job_frames.size());
  for (int64_t j = 0; j < n;) {
    JobGroup g{j, 1, fitting(job_frames[static_cast<size_t>(j)])};
    int64_t longest = job_frames[static_cast<size_t>(j)];
    while (j + g.jobs < n) {
      const int64_t l = std::max(longest, job_frames[static_cast<size_t>(j + g.jobs)]);
      const size_t s = fitting(l);
      if (g.jobs + 1 > shapes[s].jobs) break;
      longest = l;
      g.shape = s;
      ++g.jobs;
    }
    groups.push_back(g);
    j += g.jobs;
  }
  return groups;
}

Result<std::vector<Decoded>> ParakeetRunner::decode_batched(const std::vector<std::span<const float>>& files,
                                                            const TranscribeOptions& o, std::vector<Transcript>* out) {
  const ParakeetConfig& c = info_.config;
  const int64_t n_mels = c.feat_in;
  const bool tdt = c.head == HeadKind::kTdt;
  const int64_t width = tdt ? c.joint_hidden : c.vocab_size + 1;
  struct File {
    preprocess::NemoMelSpectrogram::Stream stream;
    int64_t E = 0;
    std::vector<ChunkPlan> chunks;
    int64_t first_job = 0;
  };
  std::vector<File> fs;
  for (size_t i = 0; i < files.size(); ++i) {
    auto t0 = Clock::now();
    File f{mel_->stream(files[i]), 0, {}, 0};
    (*out)[i].stats.features_s += seconds_since(t0);
    const int64_t valid = f.stream.valid_frames();
    f.E = c.encoded_length(valid);
    if (f.E < 1)
      return err(ErrorCode::kInvalidArgument, "parakeet: file ", i, ": ", files[i].size(), " samples is shorter than one feature frame (",
                 mel_->config().hop_length, " samples)");
    f.chunks = plan_chunks(valid, f.E, frames_per_call("encode"), o);
    fs.push_back(std::move(f));
  }
  // Longest file first, so that a call's jobs are of similar lengths (it pads them to its
  // longest); transcripts stay in the callers' order.
  std::vector<size_t> order(fs.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return fs[a].E > fs[b].E; });
  struct Job {
    const File* file;
    const ChunkPlan* chunk;
  };
  std::vector<Job> jobs;
  std::vector<int64_t> job_frames;
  for (size_t i : order) {
    fs[i].first_job = static_cast<int64_t>(jobs.size());
    for (const ChunkPlan& k : fs[i].chunks) {
      jobs.push_back({&fs[i], &k});
      job_frames.push_back(c.encoded_length(k.f1 - k.f0));
    }
  }
  const std::vector<JobGroup> groups = plan_groups(job_frames);
  std::vector<size_t> group_of(jobs.size());
  for (size_t g = 0; g < groups.size(); ++g)
    for (int64_t j = groups[g].first; j < groups[g].first + groups[g].jobs; ++j) group_of[static_cast<size_t>(j)] = g;

  // The group the last batched call holds, padded to T encoder frames each.
  size_t group = groups.size();
  int64_t T = 0;
  const float* logits = nullptr;  // CTC: [jobs, T, vocab + 1], valid until the next call
  std::vector<float> feats, mask;
  auto encode_group = [&](size_t g) -> Status {
    const int64_t j0 = groups[g].first, nb = groups[g].jobs;
    int64_t frames = 0;
    for (int64_t j = j0; j < j0 + nb; ++j) frames = std::max(frames, jobs[static_cast<size_t>(j)].chunk->f1 - jobs[static_cast<size_t>(j)].chunk->f0);
    feats.assign(static_cast<size_t>(nb * n_mels * frames), 0.0f);
    mask.assign(static_cast<size_t>(nb * frames), 0.0f);
    for (int64_t j = j0; j < j0 + nb; ++j) {
      const auto [f, k] = jobs[static_cast<size_t>(j)];
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
    const std::string method = batch_method_name(info_.batch_shapes[groups[g].shape], info_.max_encoder_frames);
    auto outs = executor_->run(method,
                               {TensorView::dense(feats.data(), DType::f32, {nb, n_mels, frames}),
                                TensorView::dense(mask.data(), DType::f32, {nb, 1, frames, 1})},
                               {{"enc_len", T}});
    if (!outs.is_ok()) return outs.status();
    ++batched_calls_[method];
    logits = tdt ? nullptr : (*outs)[1].ptr<float>();
    group = g;
    return Status::ok();
  };

  std::vector<Decoded> decoded(fs.size());
  for (size_t i : order) {
    const File& f = fs[i];
    Transcript& stats = (*out)[i];
    size_t next = 0;
    auto load = [&](int64_t from) -> Result<ChunkRows> {
      if (next >= f.chunks.size() || f.chunks[next].a != from)
        return err(ErrorCode::kInternal, "parakeet decode: no chunk starts at encoder frame ", from);
      const int64_t job = f.first_job + static_cast<int64_t>(next);
      const ChunkPlan& k = f.chunks[next++];
      if (group_of[static_cast<size_t>(job)] != group) {
        auto t1 = Clock::now();
        VRUN_RETURN_IF_ERROR(encode_group(group_of[static_cast<size_t>(job)]));
        stats.stats.encode_s += seconds_since(t1);
      }
      ++stats.stats.windows;
      if (o.on_progress) o.on_progress(k.a, f.E);
      const int64_t row = (job - groups[group].first) * T + (k.a - k.s);
      return ChunkRows{k.a, k.b, tdt ? row : 0, tdt ? nullptr : logits + row * width};
    };
    VRUN_ASSIGN_OR_RETURN(decoded[i], decode_frames(f.E, load, &stats));
  }
  return decoded;
}

}  // namespace vrun::parakeet
