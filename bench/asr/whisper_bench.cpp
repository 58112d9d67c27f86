// Whisper speed: RTFx (audio seconds / wall seconds) of vrun's transcription.
//
//   whisper_bench --model MODEL --audio FILE [--seconds S] [--threads N] [--backend cpu|vulkan|auto]
//                 [--text-out FILE] [--encoder fused|matmuls]
//     transcribes FILE (tiled or cut to S seconds when given) greedily at temperature 0 only (no
//     fallback), timestamps on, conditioned on previous text: faster-whisper's settings with
//     beam_size=1, temperature=0, vad_filter=False. Prints one table row; --text-out keeps the text.
//
//   whisper_bench --random-turbo [--windows W] [--tokens T] [--threads N] [--backend ...]
//     a random-weight large-v3-turbo-shaped model (128 mels, d 1280, 32 encoder and 4 decoder
//     layers, 20 heads, 51866 ids, f16 weights) made here, no files: W 30-s windows, each one
//     encoder pass and T greedy decoder steps (T = 100 is about what 30 s of speech takes).
//     RTFx = 30 W / (encode + decode time). --batch B: B windows at a time, as `vrun transcribe
//     --batch-size B` runs B files: one encode_streams call for the B windows, then T steps of
//     step_streams_B (every window's token in one call). --encoder fused|matmuls (both modes): the
//     encoder's form (whisper::BuildSettings::fused_encoder), fused by default as the runner
//     builds it, or the conv1d ops and two batched matmuls around a softmax it replaced.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "apps/whisper/whisper_runner.h"
#include "bench_common.h"
#include "preprocess/audio_loader.h"

using namespace vrun;
using namespace vrun::bench;

namespace {

struct Args : RunOptions {
  std::string text_out, encoder;
  int windows = 4, tokens = 100, batch = 1;
  bool random_turbo = false;
};

constexpr Usage kUsage{"whisper_bench",
                       "usage: whisper_bench --model MODEL --audio FILE [--seconds S] [--threads N] [--backend cpu|vulkan|auto] [--text-out FILE]\n"
                       "                     [--encoder fused|matmuls]\n"
                       "       whisper_bench --random-turbo [--windows W] [--tokens T] [--batch B] [--encoder fused|matmuls]\n"
                       "                     [--threads N] [--backend cpu|vulkan|auto]\n"};

Args parse(int argc, char** argv) {
  Args a;
  parse_options(argc, argv, kUsage, &a,
                {{"--text-out", &a.text_out}, {"--windows", &a.windows}, {"--tokens", &a.tokens}, {"--batch", &a.batch},
                 {"--encoder", &a.encoder}, {"--random-turbo", &a.random_turbo}});
  if (!a.random_turbo && (a.model.empty() || a.audio.empty())) kUsage.fail("--model and --audio are needed");
  if (a.windows < 1 || a.tokens < 1 || a.batch < 1) kUsage.fail("--windows, --tokens and --batch must be positive");
  if (!a.encoder.empty() && a.encoder != "fused" && a.encoder != "matmuls") kUsage.fail("--encoder must be fused or matmuls");
  return a;
}

const Table kTable({{"model", 28, 0, true},
                    {"device", 30, 0, true},
                    {"threads", 7},
                    {"audio s", 8, 1},
                    {"wall s", 8, 2},
                    {"RTFx", 8, 1},
                    {"encode s", 8, 2},
                    {"decode s", 8, 2}});

void row(const std::string& model, const std::string& device, int threads, double audio_s, double wall_s, double enc_s,
         double dec_s) {
  kTable.row({model, device, int64_t{threads}, audio_s, wall_s, audio_s / wall_s, enc_s, dec_s});
}

// ---- the random large-v3-turbo-shaped model

std::vector<int64_t> turbo_shape(const std::string& n, const whisper::WhisperConfig& c) {
  const int64_t d = c.n_text_state;
  auto ends = [&](const char* s) { return n.size() >= std::strlen(s) && n.compare(n.size() - std::strlen(s), std::strlen(s), s) == 0; };
  if (n == "encoder/conv1/weight") return {d, c.n_mels, 3};
  if (n == "encoder/conv2/weight") return {d, d, 3};
  if (n == "encoder/position_encodings/encodings") return {c.n_audio_ctx, d};
  if (n == "decoder/position_encodings/encodings") return {c.n_text_ctx, d};
  if (n == "decoder/embeddings/weight") return {c.n_vocab, d};
  const bool weight = ends("/weight");
  int64_t rows = d, cols = d;
  if (n.find("self_attention/linear_0") != std::string::npos) rows = 3 * d;
  else if (n.find("attention/linear_1") != std::string::npos && n.find("self_attention") == std::string::npos) rows = 2 * d;
  else if (n.find("ffn/linear_0") != std::string::npos) rows = 4 * d;
  else if (n.find("ffn/linear_1") != std::string::npos) cols = 4 * d;
  if (weight && n.find("layer_norm") == std::string::npos) return {rows, cols};
  return {rows};
}

whisper::WeightSource random_turbo_weights(const whisper::WhisperConfig& c) {
  return [c](const std::string& name) -> std::optional<whisper::Weight> {
    const std::vector<int64_t> shape = turbo_shape(name, c);
    int64_t n = 1;
    for (int64_t v : shape) n *= v;
    Rng rng{std::hash<std::string>{}(name) | 1};
    const bool gamma = name.size() > 6 && name.compare(name.size() - 6, 6, "/gamma") == 0;
    const float scale = gamma ? 0.1f : 0.02f;
    auto buf = std::make_shared<std::vector<uint16_t>>(static_cast<size_t>(n));
    for (auto& h : *buf) h = f32_to_f16((gamma ? 1.0f : 0.0f) + scale * rng.next());
    return whisper::Weight{DType::f16, shape, buf->data(), buf};
  };
}

int run_random_turbo(const Args& a, BackendKind backend) {
  whisper::WhisperConfig c;
  c.n_mels = 128;
  c.n_audio_ctx = 1500;
  c.n_audio_state = c.n_text_state = 1280;
  c.n_audio_head = c.n_text_head = 20;
  c.n_audio_layer = 32;
  c.n_text_layer = 4;
  c.n_vocab = 51866;
  c.n_text_ctx = 448;
  whisper::BuildSettings bs;
  bs.decode_batch = 1;
  bs.streams = a.batch > 1 ? a.batch : 0;
  bs.fused_encoder = a.encoder != "matmuls";
  auto t0 = Clock::now();
  auto program = whisper::build_whisper_program(c, random_turbo_weights(c), {}, bs);
  if (!program.is_ok()) return std::fprintf(stderr, "%s\n", program.status().to_string().c_str()), 1;
  ExecutorOptions eo;
  eo.backend = backend;
  eo.threads = a.threads;
  auto exec = Executor::create(*program, eo);
  if (!exec.is_ok()) return std::fprintf(stderr, "%s\n", exec.status().to_string().c_str()), 1;
  std::fprintf(stderr, "random large-v3-turbo-shaped model (encoder %s) ready in %.1f s on %s\n",
               bs.fused_encoder ? "fused" : "matmuls", since(t0), (*exec)->device_description().c_str());
  std::vector<float> mel(static_cast<size_t>(c.n_mels * 3000));
  Rng rng{12345};
  for (float& v : mel) v = 0.5f * rng.next();
  double enc_s = 0, dec_s = 0;
  const int max_tokens = std::min<int>(a.tokens, static_cast<int>(c.n_text_ctx) - 4);
  if (a.batch > 1) {
    const int64_t B = a.batch;
    std::vector<float> mels;
    for (int64_t b = 0; b < B; ++b) mels.insert(mels.end(), mel.begin(), mel.end());
    // As many windows an encoder call as its attention scores fit one device tensor.
    const uint64_t most = (*exec)->max_tensor_bytes(), scores = uint64_t{20} * 1500 * 1500 * 4;
    const int64_t chunk = most > 0 ? std::clamp<int64_t>(static_cast<int64_t>(most / scores), 1, B) : B;
    const std::string step = "step_streams_" + std::to_string(B);
    const int rounds = (a.windows + a.batch - 1) / a.batch;
    for (int round = -1; round < rounds; ++round) {  // round -1 warms the pipelines up, untimed
      t0 = Clock::now();
      for (int64_t first = 0; first < B; first += chunk) {
        const int64_t k = std::min(chunk, B - first);
        auto e = (*exec)->run("encode_streams", {TensorView::dense(mels.data() + first * c.n_mels * 3000, DType::f32, {k, c.n_mels, 3000})},
                              {{"first", first}});
        if (!e.is_ok()) return std::fprintf(stderr, "%s\n", e.status().to_string().c_str()), 1;
      }
      if (round >= 0) enc_s += since(t0);
      t0 = Clock::now();
      std::vector<int32_t> tokens(static_cast<size_t>(B), 50258), pos(static_cast<size_t>(B)), rows(static_cast<size_t>(B));
      for (int i = 0; i < max_tokens; ++i) {
        for (int64_t b = 0; b < B; ++b) {
          pos[static_cast<size_t>(b)] = i;
          rows[static_cast<size_t>(b)] = static_cast<int32_t>(b * c.n_text_ctx + i);
        }
        auto out = (*exec)->run(step, {TensorView::dense(tokens.data(), DType::i32, {B, 1}), TensorView::dense(pos.data(), DType::i32, {B, 1}),
                                       TensorView::dense(rows.data(), DType::i32, {B})});
        if (!out.is_ok()) return std::fprintf(stderr, "%s\n", out.status().to_string().c_str()), 1;
        for (int64_t b = 0; b < B; ++b) {
          const float* l = (*out)[0].ptr<float>() + b * c.n_vocab;
          tokens[static_cast<size_t>(b)] = static_cast<int32_t>(std::max_element(l, l + 50257) - l);
        }
      }
      if (round >= 0) dec_s += since(t0);
    }
    const double audio_s = 30.0 * rounds * a.batch;
    row("random large-v3-turbo f16 x" + std::to_string(B), (*exec)->device_description().substr(0, 30), a.threads, audio_s, enc_s + dec_s,
        enc_s, dec_s);
    return 0;
  }
  for (int w = -1; w < a.windows; ++w) {  // window -1 warms the pipelines up, untimed
    t0 = Clock::now();
    auto e = (*exec)->run("encode", {TensorView::dense(mel.data(), DType::f32, {1, c.n_mels, 3000})});
    if (!e.is_ok()) return std::fprintf(stderr, "%s\n", e.status().to_string().c_str()), 1;
    if (w >= 0) enc_s += since(t0);
    t0 = Clock::now();
    int32_t token = 50258;
    // The one-token method the runner uses (programs built now always have it).
    const char* step = (*program)->method("step") ? "step" : "decode";
    for (int i = 0; i < max_tokens; ++i) {
      int32_t pos = i;
      auto out = (*exec)->run(step, {TensorView::dense(&token, DType::i32, {1, 1}), TensorView::dense(&pos, DType::i32, {1, 1})},
                              {{"pos", i}});
      if (!out.is_ok()) return std::fprintf(stderr, "%s\n", out.status().to_string().c_str()), 1;
      const float* l = (*out)[0].ptr<float>();
      token = static_cast<int32_t>(std::max_element(l, l + 50257) - l);  // text tokens only
    }
    if (w >= 0) dec_s += since(t0);
  }
  const double audio_s = 30.0 * a.windows;
  row("random large-v3-turbo f16", (*exec)->device_description().substr(0, 30), a.threads, audio_s, enc_s + dec_s, enc_s, dec_s);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  auto backend = parse_backend_kind(a.backend);
  if (!backend.is_ok()) kUsage.fail(backend.status().to_string());
  kTable.header();
  if (a.random_turbo) return run_random_turbo(a, *backend);

  auto audio = preprocess::load_audio(a.audio);
  if (!audio.is_ok()) return std::fprintf(stderr, "%s\n", audio.status().to_string().c_str()), 1;
  std::vector<float> samples = std::move(audio->samples);
  if (samples.empty()) return std::fprintf(stderr, "%s: no samples\n", a.audio.c_str()), 1;
  if (a.seconds > 0) samples = tile_audio(samples, static_cast<size_t>(a.seconds * 16000.0));
  whisper::RunnerOptions ro;
  ro.backend = *backend;
  ro.threads = a.threads;
  ro.decode_batch = 1;  // greedy: no batched decoder
  if (!a.encoder.empty()) ro.fused_encoder = a.encoder == "fused";
  auto t0 = Clock::now();
  auto runner = whisper::WhisperRunner::load(a.model, ro);
  if (!runner.is_ok()) return std::fprintf(stderr, "%s\n", runner.status().to_string().c_str()), 1;
  std::fprintf(stderr, "model loaded in %.2f s on %s\n", since(t0), (*runner)->device_description().c_str());
  whisper::TranscribeOptions o;
  o.temperatures = {0.0};
  o.beam_size = 1;
  t0 = Clock::now();
  auto t = (*runner)->transcribe(samples, o);
  const double wall = since(t0);
  if (!t.is_ok()) return std::fprintf(stderr, "%s\n", t.status().to_string().c_str()), 1;
  if (!a.text_out.empty()) {
    std::ofstream out(a.text_out);
    for (const auto& s : t->segments) out << s.text << "\n";
  }
  row("vrun " + model_basename(a.model), (*runner)->device_description().substr(0, 30), a.threads, t->stats.audio_s, wall, t->stats.encode_s,
      t->stats.decode_s);
  return 0;
}
