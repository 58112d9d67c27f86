// `vrun serve`: the OpenAI-compatible HTTP server (apps/serve) over one text model and any number
// of speech models, loaded once and served together.
#include <memory>

#include "apps/cli/command.h"
#include "apps/cli/model_options.h"

#if VRUN_SERVE
#include "apps/serve/server.h"

namespace vrun::cli {
namespace {

// A numeric option whose default the help shows and whose range the parser checks.
template <typename T, typename Bound>
void add_limit(CLI::App& sub, const std::string& name, T& value, const std::string& help, Bound lo,
               Bound hi) {
  sub.add_option(name, value, help)->capture_default_str()->check(CLI::Range(lo, hi));
}

constexpr const char* kFooter = R"(Endpoints (as the OpenAI API defines them):
  POST /v1/chat/completions     messages through the model's chat template (as `vrun generate`
                                renders them); temperature, top_p, max_tokens, stop, seed, n=1,
                                stream (server-sent events; stream_options.include_usage)
  POST /v1/completions          a raw prompt, the same sampling fields
  POST /v1/audio/transcriptions multipart upload of WAV, FLAC, OGG or MP3; model, language, prompt,
  POST /v1/audio/translations   temperature, response_format json|text|srt|vtt|verbose_json,
                                timestamp_granularities[] word|segment
  GET  /v1/models  GET /health  GET /metrics (Prometheus text)

Each model answers to its file or folder name and to its --alias (given in the order of -m).
Each model has one worker taking requests in arrival order (one per device with --devices), at
most --max-concurrent queued or running; more get 429. A text model decodes up to --parallel requests together (continuous
batching: a request joins at the next step, its prompt prefilled between decode steps, and leaves
when it ends or its client goes); the rest wait in the queue. A slot keeps its last prompt's whole
512-token chunks, and a request that begins with them (a chat's next turn) is prefilled from the
first chunk it does not share (usage.prompt_tokens_details.cached_tokens; "cache_prompt": false
in a request turns that off). Speech requests queued together
(up to 4) share batched calls: Parakeet's encoder, and on a GPU Whisper's encoder and decode steps
(on the CPU Whisper requests run one at a time). At temperature
0 a response is the text `vrun generate --temp 0` / `vrun transcribe` print for the same input. SIGTERM or Ctrl-C: new
requests get 503, the requests in flight (streams included) finish, then the server exits 0.
One access-log line per request goes to stderr (method, path, status, milliseconds); request
bodies are never logged.

Examples:
  vrun serve -m ~/.cache/vrun/models/SmolLM2-135M-Instruct.Q4_1.gguf --alias smollm2 \
             -m ~/.cache/vrun/models/whisper-tiny.en --alias whisper-1 --port 8080

  curl http://127.0.0.1:8080/v1/chat/completions -H 'Content-Type: application/json' \
    -d '{"model": "smollm2", "messages": [{"role": "user", "content": "Name three colours."}],
         "temperature": 0, "max_tokens": 64}'

  curl -N http://127.0.0.1:8080/v1/chat/completions -H 'Content-Type: application/json' \
    -d '{"model": "smollm2", "stream": true, "messages": [{"role": "user", "content": "Hi"}]}'

  curl http://127.0.0.1:8080/v1/audio/transcriptions -F model=whisper-1 -F file=@talk.wav \
    -F response_format=srt

  curl http://127.0.0.1:8080/v1/audio/transcriptions -F model=whisper-1 -F file=@talk.wav \
    -F response_format=verbose_json -F 'timestamp_granularities[]=word'

  With --api-key KEY every request but /health needs -H 'Authorization: Bearer KEY'.
  From Python: OpenAI(base_url="http://127.0.0.1:8080/v1", api_key="KEY"); see docs/serving.md.)";

CommandRegistrar reg(
    "serve", "OpenAI-compatible HTTP server: chat, completions, transcription, translation",
    [](CLI::App& sub) {
      auto o = std::make_shared<serve::ServeOptions>();
      auto run = std::make_shared<BackendArgs>();
      sub.footer(kFooter);
      sub.add_option("-m,--model", o->models,
                     "A model to serve (repeatable): a Llama-family .gguf or .vrp, a Whisper or Parakeet "
                     "checkpoint or .vrp")
          ->required();
      sub.add_option("--alias", o->aliases,
                     "Name for the model given at the same position with -m (repeatable)");
      sub.add_option("--host", o->host, "Address to listen on (0.0.0.0: every interface)")
          ->capture_default_str();
      add_limit(sub, "--port", o->port, "TCP port; 0 picks a free one (printed on stderr)", 0, 65535);
      sub.add_option(
             "--api-key", o->api_key,
             "Require 'Authorization: Bearer KEY' on every request but /health (401 without); default: "
             "$VRUN_API_KEY (keeps the key out of the process list)")
          ->envname("VRUN_API_KEY");
      add_limit(sub, "--max-concurrent", o->max_concurrent,
                "Requests queued or running per model; beyond it: 429", 1, 4096);
      add_limit(sub, "--max-body-mb", o->max_body_mb,
                "Largest request body in MiB (audio uploads); beyond it: 413", 1, 4096);
      add_limit(sub, "--max-tokens", o->max_tokens,
                "Most tokens one request may generate (also the default max_tokens of chat)", 1, 1 << 20);
      add_limit(sub, "--max-audio-s", o->max_audio_s, "Longest audio one request may upload, in seconds", 1.0,
                1e6);
      add_limit(sub, "--timeout-s", o->timeout_s,
                "A request still unanswered after this many seconds is cancelled (504)", 1, 86400);
      add_limit(sub, "--parallel", o->parallel,
                "KV-cache slots of a text model: requests decoded together (continuous batching); "
                "more wait in the queue",
                1, 256);
      sub.add_option("-c,--ctx-size,--ctx", o->context,
                     "KV-cache positions of a text model, all slots together; each slot holds ctx-size / "
                     "parallel (llama-server's rule). Default: min(the model's context, 4096) per slot");
      add_limit(sub, "--prefill-chunk", o->prefill_chunk,
                "Most prompt tokens a text model prefills between two decode steps (0: the program's "
                "chunk, 512, which keeps greedy text equal to `vrun generate`)",
                0, 1 << 20);
      sub.add_flag("--vad", o->vad,
                   "Transcribe only the speech Silero VAD finds (faster-whisper's defaults), times staying those "
                   "of the upload; a request's vad_filter=false turns it off");
      sub.add_option("--vad-model", o->vad_model,
                     "Silero VAD .onnx for --vad (default: the cache's, from scripts/fetch-models.sh silero-vad)");
      auto devices = std::make_shared<std::string>();
      sub.add_option("--devices", *devices,
                     "Load every model on each of these Vulkan devices (all, or indices like 0,1; one may "
                     "repeat), each copy with its own worker pulling from the model's queue; implies "
                     "--backend vulkan");
      add_backend_options(sub, *run);
      return [o, run, devices] {
        o->backend = run->backend;
        o->threads = run->threads;
        if (o->aliases.size() > o->models.size()) return fail("serve", "more --alias than -m");
        if (!devices->empty()) {
          if (run->backend == "cpu") return fail("serve", "--devices picks Vulkan devices; it cannot go with --backend cpu");
          auto list = parse_device_list("--devices", *devices);
          if (!list.is_ok()) return fail("serve", list.status().message());
          o->devices = std::move(*list);
          o->backend = "vulkan";
        }
        return serve::run_server(*o);
      };
    });

}  // namespace
}  // namespace vrun::cli
#endif
