// transcribe_batch: the encoder chunks of all files (several files, or the chunks of one long
// file), longest file first, go through the batched methods in groups (as many as the method for
// the group's longest takes: 4 of 160 s, 64 of 10 s), zero-padded to the longest with a frame
// mask. TDT programs with greedy_batch then decode each group's files side by side (their
// greedy loops as lanes of one call) while the next group's features are made on another
// thread; otherwise decoding walks each file in turn, reading the frames of its chunks where the
// last call left them. Groups follow decoding order, so a chunk's frames are still there when
// the walk reaches it.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <future>
#include <optional>

#include "apps/parakeet/parakeet_runner.h"
#include "runtime/base/clock.h"

namespace vrun::parakeet {

Result<std::vector<Transcript>> ParakeetRunner::transcribe_batch(const std::vector<std::span<const float>>& files,
                                                                 const TranscribeOptions& o) {
  std::vector<Transcript> out(files.size());
  VRUN_ASSIGN_OR_RETURN(const std::string method, encode_method(o, 0));
  if (info_.batch_shapes.empty() || method != "encode") {  // the batched methods attend to every frame
    for (size_t i = 0; i < files.size(); ++i) {
      VRUN_ASSIGN_OR_RETURN(out[i], transcribe(files[i], o));
    }
    return out;
  }
  // Files that encode_long takes whole go alone (as NeMo attends over them); the rest in batches.
  std::vector<size_t> batched;
  std::vector<std::span<const float>> spans;
  for (size_t i = 0; i < files.size(); ++i) {
    const int64_t E = info_.config.encoded_length(mel_->valid_frames(static_cast<int64_t>(files[i].size())));
    if (E > info_.max_encoder_frames && long_fits(E)) {
      VRUN_ASSIGN_OR_RETURN(out[i], transcribe(files[i], o));
      continue;
    }
    batched.push_back(i);
    spans.push_back(files[i]);
  }
  if (spans.empty()) return out;
  std::vector<Transcript> part(spans.size());
  for (size_t k = 0; k < spans.size(); ++k) part[k].stats.audio_s = static_cast<double>(spans[k].size()) / 16000.0;
  VRUN_ASSIGN_OR_RETURN(std::vector<Decoded> decoded, decode_batched(spans, o, &part));
  for (size_t k = 0; k < spans.size(); ++k) {
    fill_segments(decoded[k], o.word_timestamps, &part[k]);
    out[batched[k]] = std::move(part[k]);
  }
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

// The jobs of a batched transcription: every file's chunks (files longest first) and their
// groups, and the group the last batched call holds.
struct ParakeetRunner::BatchJobs {
  struct File {
    std::span<const float> samples;
    // Made by the first group that holds one of the file's chunks (prepare_group), which may
    // run on another thread while the group before it is on the device.
    std::optional<preprocess::NemoMelSpectrogram::Stream> stream;
    int64_t E = 0;
    std::vector<ChunkPlan> chunks;
    int64_t first_job = 0;
  };
  struct Job {
    size_t file;
    size_t chunk;
  };
  std::vector<File> fs;
  std::vector<size_t> order;  // files, longest first
  std::vector<Job> jobs;
  std::vector<JobGroup> groups;
  std::vector<size_t> group_of;  // by job
  // The group the last batched call holds, padded to T encoder frames each.
  size_t group = 0;
  int64_t T = 0;
  const float* logits = nullptr;  // CTC: [jobs, T, vocab + 1], valid until the next call
  const ChunkPlan& chunk(const Job& j) const { return fs[j.file].chunks[j.chunk]; }
  // The enc_proj row (TDT) or logits row (CTC) of encoder frame a of job j in the group held.
  int64_t row(size_t job, int64_t a) const { return (static_cast<int64_t>(job) - groups[group].first) * T + (a - chunk(jobs[job]).s); }
};

// A group's encoder input: its chunks' features, zero-padded to the longest, and the frame mask.
struct ParakeetRunner::GroupInput {
  size_t group = 0;
  int64_t frames = 0;
  std::vector<float> feats, mask;
  std::vector<double> features_s;  // by job of the group: seconds spent on its features
};

Status ParakeetRunner::prepare_group(BatchJobs& b, size_t g, GroupInput* in) const {
  const ParakeetConfig& c = info_.config;
  const int64_t n_mels = c.feat_in, j0 = b.groups[g].first, nb = b.groups[g].jobs;
  in->group = g;
  in->frames = 0;
  in->features_s.assign(static_cast<size_t>(nb), 0.0);
  for (int64_t j = j0; j < j0 + nb; ++j) {
    const ChunkPlan& k = b.chunk(b.jobs[static_cast<size_t>(j)]);
    in->frames = std::max(in->frames, k.f1 - k.f0);
  }
  const int64_t frames = in->frames;
  in->feats.assign(static_cast<size_t>(nb * n_mels * frames), 0.0f);
  in->mask.assign(static_cast<size_t>(nb * frames), 0.0f);
  for (int64_t j = j0; j < j0 + nb; ++j) {
    auto t0 = Clock::now();
    const BatchJobs::Job& job = b.jobs[static_cast<size_t>(j)];
    BatchJobs::File& f = b.fs[job.file];
    const ChunkPlan& k = b.chunk(job);
    const int64_t count = k.f1 - k.f0;
    if (c.encoded_length(count) < k.b - k.s)
      return err(ErrorCode::kInternal, "parakeet encode: ", c.encoded_length(count), " encoder frames, rows up to ", k.b - k.s, " wanted");
    if (!f.stream) f.stream = mel_->stream(f.samples);
    const preprocess::Features x = f.stream->frames(k.f0, count);
    float* dst = in->feats.data() + (j - j0) * n_mels * frames;
    for (int64_t m = 0; m < n_mels; ++m) std::memcpy(dst + m * frames, x.data.data() + m * count, static_cast<size_t>(count) * sizeof(float));
    std::fill_n(in->mask.begin() + (j - j0) * frames, count, 1.0f);
    in->features_s[static_cast<size_t>(j - j0)] = seconds_since(t0);
  }
  return Status::ok();
}

void ParakeetRunner::add_features_time(const BatchJobs& b, const GroupInput& in, std::vector<Transcript>* out) {
  const size_t j0 = static_cast<size_t>(b.groups[in.group].first);
  for (size_t k = 0; k < in.features_s.size(); ++k) (*out)[b.jobs[j0 + k].file].stats.features_s += in.features_s[k];
}

Status ParakeetRunner::run_group(BatchJobs& b, const GroupInput& in) {
  const ParakeetConfig& c = info_.config;
  const int64_t nb = b.groups[in.group].jobs;
  b.T = c.encoded_length(in.frames);
  const std::string method = batch_method_name(info_.batch_shapes[b.groups[in.group].shape], info_.max_encoder_frames);
  auto outs = executor_->run(method,
                             {TensorView::dense(const_cast<float*>(in.feats.data()), DType::f32, {nb, c.feat_in, in.frames}),
                              TensorView::dense(const_cast<float*>(in.mask.data()), DType::f32, {nb, 1, in.frames, 1})},
                             {{"enc_len", b.T}});
  if (!outs.is_ok()) return outs.status();
  ++batched_calls_[method];
  b.logits = c.head == HeadKind::kTdt ? nullptr : (*outs)[1].ptr<float>();
  b.group = in.group;
  return Status::ok();
}

Result<std::vector<Decoded>> ParakeetRunner::decode_batched(const std::vector<std::span<const float>>& files,
                                                            const TranscribeOptions& o, std::vector<Transcript>* out) {
  const ParakeetConfig& c = info_.config;
  BatchJobs b;
  for (size_t i = 0; i < files.size(); ++i) {
    BatchJobs::File f{files[i], std::nullopt, 0, {}, 0};
    const int64_t valid = mel_->valid_frames(static_cast<int64_t>(files[i].size()));
    f.E = c.encoded_length(valid);
    if (f.E < 1)
      return err(ErrorCode::kInvalidArgument, "parakeet: file ", i, ": ", files[i].size(), " samples is shorter than one feature frame (",
                 mel_->config().hop_length, " samples)");
    f.chunks = plan_chunks(valid, f.E, frames_per_call("encode"), o);
    b.fs.push_back(std::move(f));
  }
  // Longest file first, so that a call's jobs are of similar lengths (it pads them to its
  // longest); transcripts stay in the callers' order.
  b.order.resize(b.fs.size());
  for (size_t i = 0; i < b.order.size(); ++i) b.order[i] = i;
  std::stable_sort(b.order.begin(), b.order.end(), [&](size_t x, size_t y) { return b.fs[x].E > b.fs[y].E; });
  std::vector<int64_t> job_frames;
  for (size_t i : b.order) {
    b.fs[i].first_job = static_cast<int64_t>(b.jobs.size());
    for (size_t k = 0; k < b.fs[i].chunks.size(); ++k) {
      b.jobs.push_back({i, k});
      job_frames.push_back(c.encoded_length(b.fs[i].chunks[k].f1 - b.fs[i].chunks[k].f0));
    }
  }
  b.groups = plan_groups(job_frames);
  b.group_of.resize(b.jobs.size());
  for (size_t g = 0; g < b.groups.size(); ++g)
    for (int64_t j = b.groups[g].first; j < b.groups[g].first + b.groups[g].jobs; ++j) b.group_of[static_cast<size_t>(j)] = g;
  if (c.head == HeadKind::kTdt && program_->method("greedy_batch")) return decode_lanes(b, o, out);

  b.group = b.groups.size();
  const bool tdt = c.head == HeadKind::kTdt;
  const int64_t width = tdt ? c.joint_hidden : c.vocab_size + 1;
  std::vector<Decoded> decoded(b.fs.size());
  for (size_t i : b.order) {
    const BatchJobs::File& f = b.fs[i];
    Transcript& stats = (*out)[i];
    size_t next = 0;
    auto load = [&](int64_t from) -> Result<ChunkRows> {
      if (next >= f.chunks.size() || f.chunks[next].a != from)
        return err(ErrorCode::kInternal, "parakeet decode: no chunk starts at encoder frame ", from);
      const size_t job = static_cast<size_t>(f.first_job) + next;
      const ChunkPlan& k = f.chunks[next++];
      if (b.group_of[job] != b.group) {
        GroupInput in;
        VRUN_RETURN_IF_ERROR(prepare_group(b, b.group_of[job], &in));
        add_features_time(b, in, out);
        auto t1 = Clock::now();
        VRUN_RETURN_IF_ERROR(run_group(b, in));
        stats.stats.encode_s += seconds_since(t1);
      }
      ++stats.stats.windows;
      if (o.on_progress) o.on_progress(k.a, f.E);
      const int64_t row = b.row(job, k.a);
      return ChunkRows{k.a, k.b, tdt ? row : 0, tdt ? nullptr : b.logits + row * width};
    };
    VRUN_ASSIGN_OR_RETURN(decoded[i], decode_frames(f.E, load, &stats));
  }
  return decoded;
}

// TDT with greedy_batch: group after group, one encoder call, then greedy calls whose lanes are
// the files with a chunk in the group that their walk has reached (each lane one file's loop
// over that chunk, from its own state), until the group's chunks are all walked. A file's
// prediction-network state stays here between its chunks, whichever lane or group they take.
Result<std::vector<Decoded>> ParakeetRunner::decode_lanes(BatchJobs& b, const TranscribeOptions& o, std::vector<Transcript>* out) {
  const ParakeetConfig& c = info_.config;
  const int64_t n_state = 2 * c.pred_layers * c.pred_hidden + c.joint_hidden;
  struct Walk {
    size_t chunk = 0;  // the file's chunk the walk is in
    int64_t t = 0, symbols = 0;
    bool fresh = true;
    std::vector<float> state;
  };
  std::vector<Walk> walks(b.fs.size());
  std::vector<Decoded> decoded(b.fs.size());
  for (size_t i = 0; i < b.fs.size(); ++i) {
    walks[i].state.assign(static_cast<size_t>(n_state), 0.0f);
    decoded[i].frames = b.fs[i].E;
  }
  std::vector<int32_t> control;
  std::vector<float> states;
  std::vector<size_t> lanes;
  // The next group's features are made on another thread while this group is on the device.
  GroupInput cur, next;
  VRUN_RETURN_IF_ERROR(prepare_group(b, 0, &cur));
  for (size_t g = 0; g < b.groups.size(); ++g) {
    std::future<Status> ahead;
    if (g + 1 < b.groups.size()) ahead = std::async(std::launch::async, [&, g] { return prepare_group(b, g + 1, &next); });
    auto t0 = Clock::now();
    Status ran = run_group(b, cur);
    if (!ran.is_ok()) return ran;  // (ahead's destructor waits for it)
    const int64_t j0 = b.groups[g].first, j1 = j0 + b.groups[g].jobs;
    std::vector<size_t> in_group;  // the files with chunks in this group
    for (int64_t j = j0; j < j1; ++j) {
      const size_t f = b.jobs[static_cast<size_t>(j)].file;
      if (in_group.empty() || in_group.back() != f) in_group.push_back(f);
      ++(*out)[f].stats.windows;
    }
    // The encoder call's time shared by the group's jobs; each job's features as they took (on
    // the other thread for every group after the first, beside the device's work).
    const double encode_share = seconds_since(t0) / static_cast<double>(j1 - j0);
    for (int64_t j = j0; j < j1; ++j) (*out)[b.jobs[static_cast<size_t>(j)].file].stats.encode_s += encode_share;
    add_features_time(b, cur, out);
    for (;;) {
      lanes.clear();
      control.clear();
      states.clear();
      for (size_t f : in_group) {
        const Walk& w = walks[f];
        const size_t job = static_cast<size_t>(b.fs[f].first_job) + w.chunk;
        if (w.t >= b.fs[f].E || b.group_of[job] != g) continue;
        const ChunkPlan& k = b.fs[f].chunks[w.chunk];
        lanes.push_back(f);
        control.insert(control.end(), {static_cast<int32_t>(w.t), static_cast<int32_t>(w.symbols), static_cast<int32_t>(k.b),
                                       static_cast<int32_t>(b.row(job, k.a) - k.a), w.fresh ? 1 : 0});
        states.insert(states.end(), w.state.begin(), w.state.end());
        if (o.on_progress) o.on_progress(w.t, b.fs[f].E);
      }
      if (lanes.empty()) break;
      auto t1 = Clock::now();
      const int64_t B = static_cast<int64_t>(lanes.size());
      VRUN_ASSIGN_OR_RETURN(auto outs, executor_->run("greedy_batch", {TensorView::dense(control.data(), DType::i32, {B, 5}),
                                                                       TensorView::dense(states.data(), DType::f32, {B, n_state})}));
      ++batched_calls_["greedy_batch"];
      const int64_t rows = outs[0].shape[1] - 1;
      for (int64_t l = 0; l < B; ++l) {
        const size_t f = lanes[static_cast<size_t>(l)];
        Walk& w = walks[f];
        const int32_t* em = outs[0].ptr<int32_t>() + l * (rows + 1) * 4;
        const int64_t end = b.fs[f].chunks[w.chunk].b;
        VRUN_RETURN_IF_ERROR(take_emitted(em, rows, w.t, w.symbols, end, &decoded[f]));
        w.t = em[1];
        w.symbols = em[2];
        w.fresh = false;
        std::copy_n(outs[1].ptr<float>() + l * n_state, n_state, w.state.begin());
        while (w.chunk + 1 < b.fs[f].chunks.size() && w.t >= b.fs[f].chunks[w.chunk].b) ++w.chunk;
      }
      const double decode_share = seconds_since(t1) / static_cast<double>(B);
      for (size_t f : lanes) (*out)[f].stats.decode_s += decode_share;
    }
    if (ahead.valid()) {
      VRUN_RETURN_IF_ERROR(ahead.get());
      std::swap(cur, next);
    }
  }
  for (size_t i = 0; i < b.fs.size(); ++i) {
    if (walks[i].t < b.fs[i].E)
      return err(ErrorCode::kInternal, "parakeet decode: file ", i, " walked to encoder frame ", walks[i].t, " of ", b.fs[i].E);
    (*out)[i].stats.tokens += static_cast<int>(decoded[i].tokens.size());
  }
  return decoded;
}

}  // namespace vrun::parakeet
