// Parakeet speed: RTFx (audio seconds / wall seconds) of vrun's transcription, through the same
// ParakeetRunner that `vrun transcribe` uses (NeMo features, chunked FastConformer encoding when
// the audio exceeds one call's max_encoder_frames, greedy TDT decoding, word timestamps).
//
//   parakeet_bench --model MODEL [--audio FILE] [options]
//     a .nemo, a Hugging Face Parakeet folder or a .vrp.
//   parakeet_bench --random-0.6b [--vrp PATH] [--dtype f32|f16|bf16] [--blank-bias B] [options]
//     a random-weight model of parakeet-tdt-0.6b-v2's shape (its model_config.yaml: 128 mels,
//     dw_striding x8 with 256 channels, 24 layers of d_model 1024, 8 heads, ff 4096, conv kernel 9,
//     rel_pos attention with xscaling, a 2-layer LSTM prediction network of 640, joint 640,
//     1024 tokens + blank, durations 0..4, max_symbols 10) made here. The weights are uniform with
//     variance 1/fan_in (activations stay finite through 24 layers); f32 as the released checkpoint
//     holds them, the linear weights stored in --dtype by the program builder (BuildSettings::
//     weight_dtype, what `vrun export` offers). The program goes to the runner in memory; with
//     --vrp PATH it is written there (or read from there when the file exists) and loaded back
//     from the file, the way `vrun transcribe` loads an exported model. --max-frames sets its
//     max_encoder_frames (default 2000 as `vrun transcribe` builds, 160 s a call; smaller needs
//     less device memory, e.g. on lavapipe) and --max-batch its max_batch (chunks per
//     encode_batch call, default 4; 1 encodes chunk by chunk), --attention the encoder's
//     attention (sdpa: fused, the default; bmm: materialised scores; local: NeMo's limited-context
//     attention, [128, 128] over up to 7500 frames a call, as `vrun transcribe --attention local`
//     and NeMo's change_attention_model("rel_pos_local_attn", [128, 128])), --runtime-positions W_pos
//     applied to the positions in every call instead of when the program is built
//     (BuildSettings::projected_positions false). A random joint has no notion of
//     speech: --blank-bias (added to the blank logit) sets how often it emits; the default 1.4 gives a few tokens a second on the synthetic audio,
//     about what English speech gives (0: a token at nearly every decision, 2.5: almost none).
//
//   Common options: --audio FILE (tiled or cut to --seconds when both are given; without it
//   synthetic audio: tones and noise), --seconds S (default 600), --backend cpu|vulkan|auto,
//   --threads N, --batch N (N streams through ParakeetRunner::transcribe_batch, whose encoder
//   calls take up to max_batch chunks of them at once; RTFx counts the audio of all of them),
//   --warmup 0|1 (one untimed pass over the same audio first, its time printed: what a fresh
//   process's first call takes; default 1).
// Prints one markdown row. Any runner error ends the program with status 1.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "apps/parakeet/parakeet_runner.h"
#include "bench_common.h"
#include "preprocess/audio_loader.h"

using namespace vrun;
using namespace vrun::bench;

namespace {

struct Args : RunOptions {
  Args() { seconds = 600; }
  std::string vrp, dtype = "f32";
  double blank_bias = 1.4;
  int batch = 1, warmup = 1;
  int64_t max_frames = parakeet::BuildSettings{}.max_encoder_frames;
  int64_t max_batch = parakeet::BuildSettings{}.max_batch;
  std::string attention = "sdpa";
  bool runtime_positions = false;
  bool random = false;
};

constexpr Usage kUsage{
    "parakeet_bench",
    "usage: parakeet_bench --model MODEL [--audio FILE] [options]\n"
    "       parakeet_bench --random-0.6b [--vrp PATH] [--dtype f32|f16|bf16] [--blank-bias B] [--max-frames N] [--max-batch N] [--attention sdpa|bmm|local] [--runtime-positions] [options]\n"
    "options: --seconds S (600) --backend cpu|vulkan|auto --threads N --batch N --warmup 0|1\n"};

Args parse(int argc, char** argv) {
  Args a;
  parse_options(argc, argv, kUsage, &a,
                {{"--batch", &a.batch}, {"--warmup", &a.warmup}, {"--vrp", &a.vrp}, {"--dtype", &a.dtype},
                 {"--blank-bias", &a.blank_bias}, {"--max-frames", &a.max_frames}, {"--max-batch", &a.max_batch},
                 {"--attention", &a.attention}, {"--random-0.6b", &a.random}, {"--runtime-positions", &a.runtime_positions}});
  if (a.random == !a.model.empty()) kUsage.fail("give either --model or --random-0.6b");
  if (!(a.seconds > 0) || a.batch < 1 || a.threads < 0) kUsage.fail("--seconds and --batch must be positive, --threads not negative");
  if (a.attention != "sdpa" && a.attention != "bmm" && a.attention != "local")
    kUsage.fail("--attention " + a.attention + " (sdpa, bmm or local)");
  if (a.dtype != "f32" && a.dtype != "f16" && a.dtype != "bf16") kUsage.fail("--dtype " + a.dtype + " (f32, f16 or bf16)");
  return a;
}

// ---- the random parakeet-tdt-0.6b-v2-shaped model

parakeet::ParakeetConfig config_0p6b_v2() {
  parakeet::ParakeetConfig c;
  c.head = parakeet::HeadKind::kTdt;
  c.feat_in = 128;
  c.d_model = 1024;
  c.n_layers = 24;
  c.n_heads = 8;
  c.ff_dim = 4096;
  c.conv_kernel = 9;
  c.subsampling_factor = 8;
  c.subsampling_channels = 256;
  c.pos_emb_max_len = 5000;
  c.xscaling = true;
  c.use_bias = true;
  c.vocab_size = 1024;
  c.pred_hidden = 640;
  c.pred_layers = 2;
  c.joint_hidden = 640;
  c.durations = {0, 1, 2, 3, 4};
  c.max_symbols = 10;
  c.window_stride = 0.01;
  return c;
}

// Fills the model's tensors under their NeMo names: weights uniform with variance 1/fan_in,
// biases small, norms at one, batch norm statistics at the identity.
class RandomWeights {
 public:
  explicit RandomWeights(std::map<std::string, parakeet::Weight>* out) : out_(out) {}

  void dense(const std::string& name, std::vector<int64_t> shape, int64_t fan_in, float gain = 1.0f) {
    fill(name, std::move(shape), 0.0f, gain * std::sqrt(3.0f / static_cast<float>(fan_in)));
  }
  void constant(const std::string& name, std::vector<int64_t> shape, float value) { fill(name, std::move(shape), value, 0.0f); }
  void around(const std::string& name, std::vector<int64_t> shape, float centre, float spread) { fill(name, std::move(shape), centre, spread); }
  // Sets element i of a tensor made before (the joint's blank bias).
  void set(const std::string& name, int64_t i, float v) {
    const parakeet::Weight& w = out_->at(name);
    const_cast<float*>(static_cast<const float*>(w.data))[i] = v;
  }
  size_t count() const { return count_; }

 private:
  void fill(const std::string& name, std::vector<int64_t> shape, float centre, float spread) {
    int64_t n = 1;
    for (int64_t v : shape) n *= v;
    Rng rng{(std::hash<std::string>{}(name) * 0x9E3779B97F4A7C15ull) | 1};
    parakeet::Weight w;
    w.shape = std::move(shape);
    w.dtype = DType::f32;
    auto buf = std::make_shared<std::vector<float>>(static_cast<size_t>(n));
    for (auto& f : *buf) f = centre + spread * rng.next();
    w.data = buf->data();
    w.keep = buf;
    count_ += static_cast<size_t>(n);
    (*out_)[name] = std::move(w);
  }
  std::map<std::string, parakeet::Weight>* out_;
  size_t count_ = 0;
};

// Random attention mostly averages over frames; at full gain 24 such layers wash out what tells
// the frames apart (consecutive encoder frames end up with cosine similarity ~0.99 and a random joint
// then decides the same on every frame). Smaller residual branches keep the frames distinct.
constexpr float kBranchGain = 0.2f;
// A random prediction network would otherwise outweigh the frame in the joint: once it favours
// tokens (or blank) it does so on every frame, and the token rate jumps between none and one per
// decision as the blank bias moves. With its projection small, the frame decides.
constexpr float kPredGain = 0.1f;
constexpr float kZeroDurationBias = -4.0f;

parakeet::ImportedParakeet random_0p6b(double blank_bias) {
  parakeet::ImportedParakeet m;
  m.config = config_0p6b_v2();
  m.format = "random";
  const parakeet::ParakeetConfig& c = m.config;
  const int64_t d = c.d_model, C = c.subsampling_channels, K = c.conv_kernel, F = c.ff_dim, H = c.n_heads;
  const int64_t P = c.pred_hidden, J = c.joint_hidden, V1 = c.vocab_size + 1;
  RandomWeights r(&m.weights);
  const std::string pre = "encoder.pre_encode.";
  r.dense(pre + "conv.0.weight", {C, 1, 3, 3}, 9);
  r.around(pre + "conv.0.bias", {C}, 0.0f, 0.02f);
  for (int s = 1; s < 3; ++s) {
    const std::string dw = pre + "conv." + std::to_string(3 * s - 1), pw = pre + "conv." + std::to_string(3 * s);
    r.dense(dw + ".weight", {C, 1, 3, 3}, 9);
    r.around(dw + ".bias", {C}, 0.0f, 0.02f);
    r.dense(pw + ".weight", {C, C, 1, 1}, C);
    r.around(pw + ".bias", {C}, 0.0f, 0.02f);
  }
  r.dense(pre + "out.weight", {d, C * c.subsampled_features()}, C * c.subsampled_features());
  r.around(pre + "out.bias", {d}, 0.0f, 0.02f);
  auto linear = [&](const std::string& p, int64_t out, int64_t in, bool bias, float gain = 1.0f) {
    r.dense(p + ".weight", {out, in}, in, gain);
    if (bias) r.around(p + ".bias", {out}, 0.0f, 0.02f);
  };
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const std::string p = "encoder.layers." + std::to_string(l) + ".";
    for (const char* n : {"norm_feed_forward1", "norm_self_att", "norm_conv", "norm_feed_forward2", "norm_out"}) {
      r.around(p + n + ".weight", {d}, 1.0f, 0.05f);
      r.around(p + n + ".bias", {d}, 0.0f, 0.02f);
    }
    for (const char* ff : {"feed_forward1", "feed_forward2"}) {
      linear(p + ff + ".linear1", F, d, true);
      linear(p + ff + ".linear2", d, F, true, kBranchGain);
    }
    for (const char* n : {"linear_q", "linear_k", "linear_v"}) linear(p + "self_attn." + n, d, d, true);
    linear(p + "self_attn.linear_out", d, d, true, kBranchGain);
    linear(p + "self_attn.linear_pos", d, d, false);
    r.around(p + "self_attn.pos_bias_u", {H, d / H}, 0.0f, 0.02f);
    r.around(p + "self_attn.pos_bias_v", {H, d / H}, 0.0f, 0.02f);
    r.dense(p + "conv.pointwise_conv1.weight", {2 * d, d, 1}, d);
    r.around(p + "conv.pointwise_conv1.bias", {2 * d}, 0.0f, 0.02f);
    r.dense(p + "conv.depthwise_conv.weight", {d, 1, K}, K);
    r.around(p + "conv.depthwise_conv.bias", {d}, 0.0f, 0.02f);
    r.around(p + "conv.batch_norm.running_mean", {d}, 0.0f, 0.05f);
    r.around(p + "conv.batch_norm.running_var", {d}, 1.0f, 0.05f);
    r.around(p + "conv.batch_norm.weight", {d}, 1.0f, 0.05f);
    r.around(p + "conv.batch_norm.bias", {d}, 0.0f, 0.02f);
    r.dense(p + "conv.pointwise_conv2.weight", {d, d, 1}, d, kBranchGain);
    r.around(p + "conv.pointwise_conv2.bias", {d}, 0.0f, 0.02f);
  }
  r.around("decoder.prediction.embed.weight", {V1, P}, 0.0f, 1.0f);
  for (int64_t l = 0; l < c.pred_layers; ++l) {
    const std::string p = "decoder.prediction.dec_rnn.lstm.", n = std::to_string(l);
    r.dense(p + "weight_ih_l" + n, {4 * P, P}, P);
    r.dense(p + "weight_hh_l" + n, {4 * P, P}, P);
    r.around(p + "bias_ih_l" + n, {4 * P}, 0.0f, 0.02f);
    r.around(p + "bias_hh_l" + n, {4 * P}, 0.0f, 0.02f);
  }
  linear("joint.enc", J, d, true);
  linear("joint.pred", J, P, true, kPredGain);
  linear("joint.joint_net.2", c.joint_outputs(), J, true);
  r.set("joint.joint_net.2.bias", c.blank_id(), static_cast<float>(blank_bias));
  // Duration 0 (another symbol at the same frame) is rare in trained models; a random joint that
  // liked it would spend max_symbols decisions on one frame, and transformers' TDT decoding has
  // no max_symbols bound at all.
  r.set("joint.joint_net.2.bias", c.blank_id() + 1, kZeroDurationBias);
  std::fprintf(stderr, "random parakeet-tdt-0.6b-v2-shaped weights: %.1fM parameters\n", static_cast<double>(r.count()) / 1e6);

  // The preprocessor parakeet-tdt-0.6b-v2 ships (NeMo keys).
  m.preprocessor_json = R"({"_target_": "nemo.collections.asr.modules.AudioToMelSpectrogramPreprocessor", "sample_rate": 16000,
    "normalize": "per_feature", "window_size": 0.025, "window_stride": 0.01, "window": "hann", "features": 128, "n_fft": 512,
    "log": true, "frame_splicing": 1, "dither": 1e-05, "pad_to": 0, "pad_value": 0.0})";
  // Pieces: distinct lower-case words (word-initial) and suffixes, enough for text and timestamps.
  for (int64_t i = 0; i < c.vocab_size; ++i) {
    std::string s;
    for (int64_t v = i; ; v /= 26) {
      s += static_cast<char>('a' + v % 26);
      if (v < 26) break;
    }
    m.vocab.pieces.push_back(i % 3 == 0 ? s : "\xE2\x96\x81" + s);
    m.vocab.kinds.push_back(parakeet::PieceKind::kNormal);
  }
  return m;
}

// Tones that glide and change every half second over low noise, deterministic.
std::vector<float> synthetic_audio(size_t n, uint64_t seed) {
  std::vector<float> x(n);
  Rng rng{seed | 1};
  double phase = 0;
  for (size_t i = 0; i < n; ++i) {
    const size_t part = i / 8000;
    const double f = 150.0 + 60.0 * static_cast<double>((part * 7 + seed) % 11) + 40.0 * std::sin(static_cast<double>(i) * 1e-4);
    phase += 2.0 * M_PI * f / 16000.0;
    const double env = (part % 4 == 3) ? 0.02 : 0.3;  // a quieter stretch every 2 s
    x[i] = static_cast<float>(env * (std::sin(phase) + 0.5 * std::sin(2.0 * phase)) + 0.02 * rng.next());
  }
  return x;
}

const Table kTable({{"model", 34, 0, true},
                    {"device", 30, 0, true},
                    {"threads", 7},
                    {"batch", 5},
                    {"audio s", 8, 1},
                    {"wall s", 8, 2},
                    {"RTFx", 8, 1},
                    {"encode s", 8, 2},
                    {"decode s", 8, 2},
                    {"tokens", 7},
                    {"tok/s", 6, 2}});

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  auto backend = parse_backend_kind(a.backend);
  if (!backend.is_ok()) kUsage.fail(backend.status().to_string());
  auto fail = [](const Status& s) {
    std::fprintf(stderr, "parakeet_bench: %s\n", s.to_string().c_str());
    return 1;
  };

  std::string name;
  parakeet::RunnerOptions ro;
  ro.backend = *backend;
  ro.threads = a.threads;
  Result<std::unique_ptr<parakeet::ParakeetRunner>> runner = err(ErrorCode::kInternal, "no model");
  auto t0 = Clock::now();
  if (a.random) {
    name = "random parakeet-tdt-0.6b " + a.dtype;
    if (!a.vrp.empty() && std::filesystem::exists(a.vrp)) {
      std::fprintf(stderr, "using the program in %s (its weights, dtype and blank bias)\n", a.vrp.c_str());
      runner = parakeet::ParakeetRunner::load(a.vrp, ro);
    } else {
      parakeet::BuildSettings bs;
      bs.max_encoder_frames = a.max_frames;
      bs.max_batch = a.max_batch;
      bs.fused_attention = a.attention != "bmm";
      bs.projected_positions = !a.runtime_positions;
      bs.weight_dtype = *dtype_from_name(a.dtype);
      auto program = parakeet::build_parakeet_program(random_0p6b(a.blank_bias), bs);
      if (!program.is_ok()) return fail(program.status());
      std::fprintf(stderr, "program built in %.1f s\n", since(t0));
      if (!a.vrp.empty()) {
        if (Status s = write_program(**program, a.vrp); !s.is_ok()) return fail(s);
        std::fprintf(stderr, "program written to %s in %.1f s\n", a.vrp.c_str(), since(t0));
        runner = parakeet::ParakeetRunner::load(a.vrp, ro);
      } else {
        runner = parakeet::ParakeetRunner::load(std::move(*program), ro, name);
      }
    }
  } else {
    name = "vrun " + model_basename(a.model);
    runner = parakeet::ParakeetRunner::load(a.model, ro);
  }
  if (!runner.is_ok()) return fail(runner.status());
  parakeet::ParakeetRunner& r = **runner;
  const std::string device = r.device_description();
  std::fprintf(stderr, "model ready in %.2f s on %s: %s\n", since(t0), device.c_str(), r.config().describe().c_str());
  for (const MethodDef& m : r.program().methods)
    if (m.name.starts_with("encode"))
      std::fprintf(stderr, "method %s: scratch arena %.2f GB\n", m.name.c_str(), static_cast<double>(m.arena_size) / 1e9);

  const size_t want = static_cast<size_t>(a.seconds * 16000.0);
  std::vector<std::vector<float>> streams;
  if (!a.audio.empty()) {
    auto audio = preprocess::load_audio(a.audio);
    if (!audio.is_ok()) return fail(audio.status());
    if (audio->samples.empty()) return fail(err(ErrorCode::kInvalidArgument, a.audio, ": no samples"));
    const std::vector<float> tiled = tile_audio(audio->samples, want);
    // Batched streams are the same audio, each starting a little later (not identical work).
    for (int b = 0; b < a.batch; ++b) {
      std::vector<float> s(want);
      for (size_t i = 0; i < want; ++i) s[i] = tiled[(i + static_cast<size_t>(b) * 16000 * 7) % want];
      streams.push_back(std::move(s));
    }
  } else {
    for (int b = 0; b < a.batch; ++b) streams.push_back(synthetic_audio(want, 1000 + static_cast<uint64_t>(b)));
  }

  parakeet::TranscribeOptions o;
  o.local_attention = a.attention == "local";
  if (o.local_attention) name += " local";
  // One stream goes through transcribe(), as `vrun transcribe FILE` does (the encoder chunk by
  // chunk); several through transcribe_batch, as `--batch-size` does (chunks of all streams in
  // shared encode_batch calls).
  auto run = [&](const std::vector<std::span<const float>>& spans) -> Result<std::vector<parakeet::Transcript>> {
    if (spans.size() > 1) return r.transcribe_batch(spans, o);
    VRUN_ASSIGN_OR_RETURN(parakeet::Transcript t, r.transcribe(spans[0], o));
    std::vector<parakeet::Transcript> one;
    one.push_back(std::move(t));
    return one;
  };
  std::vector<std::span<const float>> spans(streams.begin(), streams.end());
  if (a.warmup) {  // pipelines, recordings and the methods' scratch arenas: the timed calls' shapes once
    t0 = Clock::now();
    auto t = run(spans);
    if (!t.is_ok()) return fail(t.status());
    const double first = since(t0);
    double audio = 0;
    for (const auto& s : spans) audio += static_cast<double>(s.size()) / 16000.0;
    std::fprintf(stderr, "first pass (a fresh process's) %.3f s, RTFx %.1f\n", first, audio / first);
  }
  kTable.header();
  t0 = Clock::now();
  auto out = run(spans);
  const double wall = since(t0);
  if (!out.is_ok()) return fail(out.status());
  double audio_s = 0, enc_s = 0, dec_s = 0, feat_s = 0;
  int tokens = 0;
  for (const auto& t : *out) {
    audio_s += t.stats.audio_s;
    enc_s += t.stats.encode_s;
    dec_s += t.stats.decode_s;
    feat_s += t.stats.features_s;
    tokens += t.stats.tokens;
  }
  if (!(audio_s > 0) || !std::isfinite(wall)) return fail(err(ErrorCode::kInternal, "no audio was transcribed"));
  // A fingerprint of all the text, to see that two backends (or runs) emitted the same tokens.
  uint64_t hash = 1469598103934665603ull;
  for (const auto& t : *out)
    for (unsigned char ch : t.text()) hash = (hash ^ ch) * 1099511628211ull;
  std::fprintf(stderr, "features %.2f s; text fnv1a %016llx; first words: %.60s\n", feat_s, static_cast<unsigned long long>(hash),
               (*out)[0].text().c_str());
  if (!r.batched_calls().empty()) {
    std::string calls;
    for (const auto& [method, n] : r.batched_calls()) calls += " " + method + " x" + std::to_string(n);
    std::fprintf(stderr, "batched calls (first pass and timed):%s\n", calls.c_str());
  }
  kTable.row({name, device.substr(0, 30), int64_t{a.threads}, int64_t{a.batch}, audio_s, wall, audio_s / wall, enc_s, dec_s,
              int64_t{tokens}, tokens / audio_s});
  return 0;
}
