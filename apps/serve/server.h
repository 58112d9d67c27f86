// `vrun serve`: the OpenAI-compatible HTTP server over the models given on the command line.
#pragma once

#include <string>
#include <vector>

namespace vrun::serve {

struct ServeOptions {
  std::vector<std::string> models, aliases;  // aliases[k] names models[k]
  std::string host = "127.0.0.1";
  int port = 8080;  // 0: any free port (printed on stderr)
  std::string api_key;
  int max_concurrent = 64;  // queued + running requests per model
  int max_body_mb = 64;
  int max_tokens = 2048;  // per request
  double max_audio_s = 3600;
  int timeout_s = 600;  // per request
  int64_t context = 0;  // text models: KV positions of all slots together (0: see ModelSpec)
  int parallel = 8;     // text models: KV-cache slots decoded together
  int64_t prefill_chunk = 0;
  std::string backend = "auto";
  int threads = 0;
  // Vulkan devices each model is loaded on, one engine per entry pulling from the model's queue
  // (--devices 0,1; a device may repeat); empty: one engine on the backend's choice.
  std::vector<int> devices;
  int http_threads = 0;  // 0: enough for every model's max_concurrent plus a few
  // Silero VAD for transcriptions: loaded at start when vad is set (every request then runs it
  // unless it sends vad_filter=false); vad_model empty: the cache's.
  bool vad = false;
  std::string vad_model;
};

// Loads the models, serves until SIGTERM or SIGINT, then finishes the requests in flight.
// Returns the process exit code.
int run_server(const ServeOptions& options);

}  // namespace vrun::serve
