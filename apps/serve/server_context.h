// What the HTTP handlers share: the options, the models, the metrics; and the helpers that turn
// failures into OpenAI error responses.
#pragma once

#include <httplib.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "apps/serve/api_types.h"
#include "apps/serve/metrics.h"
#include "apps/serve/models.h"
#include "apps/serve/server.h"
#include "apps/speech/voice_activity.h"

namespace vrun::serve {

struct ServerContext {
  ServeOptions options;
  Metrics metrics;
  std::vector<std::unique_ptr<ServedModel>> models;
  std::shared_ptr<speech::VoiceActivity> vad;  // --vad
  // Shutdown: while draining, new requests get 503; the listener stops once `active` (requests
  // past routing and not yet answered, streams included) is back to 0.
  std::atomic<bool> draining{false};
  std::atomic<int> active{0};

  // The model a request names, or the 404 (model_not_found) / 400 (wrong kind) to answer.
  Parsed<ServedModel*> find(const std::string& name, ModelKind kind, const char* endpoint_hint);
};

void send_error(httplib::Response& res, const ApiError& e);
ApiError too_many_requests(const std::string& model);
ApiError timed_out();
ApiError payload_too_large(int max_body_mb);
// A runner's failure: 400 for what the request asked (bad language, task), 500 otherwise.
ApiError runner_error(const Status& st);

void add_text_routes(httplib::Server& server, ServerContext& ctx);
void add_audio_routes(httplib::Server& server, ServerContext& ctx);

}  // namespace vrun::serve
