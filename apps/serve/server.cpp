#include "apps/serve/server.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <thread>

#include "apps/serve/request_parser.h"
#include "apps/serve/responses.h"
#include "apps/serve/server_context.h"

namespace vrun::serve {

void send_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status;
  res.set_content(error_body(e), "application/json");
}

ApiError too_many_requests(const std::string& model) {
  ApiError e;
  e.status = 429;
  e.type = "rate_limit_exceeded";
  e.code = "rate_limit_exceeded";
  e.message = "model '" + model + "' has as many requests queued as --max-concurrent allows; retry later";
  return e;
}

ApiError timed_out() {
  ApiError e;
  e.status = 504;
  e.type = "timeout";
  e.message = "the request ran past the server's --timeout-s and was cancelled";
  return e;
}

ApiError payload_too_large(int max_body_mb) {
  ApiError e;
  e.status = 413;
  e.message =
      "the request body is larger than this server's limit of " + std::to_string(max_body_mb) + " MiB";
  return e;
}

ApiError runner_error(const Status& st) {
  ApiError e;
  if (st.code() == ErrorCode::kInvalidArgument || st.code() == ErrorCode::kUnsupported ||
      st.code() == ErrorCode::kNotFound) {
    e.status = 400;
  } else if (st.code() == ErrorCode::kUnavailable) {
    e.status = 503;  // the model's device is gone (a lost GPU): a restart is the way back
    e.type = "server_error";
  } else {
    e.status = 500;
    e.type = "server_error";
  }
  e.message = st.message();
  return e;
}

Parsed<ServedModel*> ServerContext::find(const std::string& name, ModelKind kind, const char* endpoint) {
  for (auto& m : models) {
    if (std::find(m->names.begin(), m->names.end(), name) == m->names.end()) continue;
    if (m->kind != kind)
      return Parsed<ServedModel*>::fail(bad_request(
          "model '" + name + "' is a " + (m->kind == ModelKind::kText ? "text" : "speech") + " model; " +
              endpoint + " needs a " + (kind == ModelKind::kText ? "text" : "speech") + " model",
          "model", "model_not_supported"));
    return {m.get(), {}};
  }
  ApiError e;
  e.status = 404;
  e.message = "The model '" + name.substr(0, 200) + "' does not exist or you do not have access to it.";
  e.param = "model";
  e.code = "model_not_found";
  return Parsed<ServedModel*>::fail(e);
}

namespace {

using Clock = std::chrono::steady_clock;
int stop_pipe[2] = {-1, -1};

void on_stop_signal(int sig) {
  const unsigned char c = static_cast<unsigned char>(sig);
  [[maybe_unused]] auto n = write(stop_pipe[1], &c, 1);
}

thread_local Clock::time_point request_start;
thread_local bool request_counted = false;  // counted in ServerContext::active

const char* endpoint_label(const std::string& path) {
  static const char* known[] = {"/v1/chat/completions",
                                "/v1/completions",
                                "/v1/audio/transcriptions",
                                "/v1/audio/translations",
                                "/v1/models",
                                "/health",
                                "/metrics"};
  for (const char* k : known)
    if (path == k) return k;
  return "other";
}

void add_info_routes(httplib::Server& server, ServerContext& ctx) {
  server.Get("/health", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("{\"status\":\"ok\"}", "application/json");
  });
  server.Get("/metrics", [&ctx](const httplib::Request&, httplib::Response& res) {
    res.set_content(ctx.metrics.render(), "text/plain; version=0.0.4; charset=utf-8");
  });
  server.Get("/v1/models", [&ctx](const httplib::Request&, httplib::Response& res) {
    std::vector<ModelEntry> list;
    for (const auto& m : ctx.models)
      list.push_back({m->id, "vrun", m->created, m->kind == ModelKind::kText ? "text" : "speech"});
    res.set_content(models_body(list), "application/json");
  });
}

// Authorization, the access log, and OpenAI-shaped bodies for the errors the library answers
// itself (unknown path, body too large, unreadable request).
void add_policies(httplib::Server& server, ServerContext& ctx) {
  server.set_pre_routing_handler([&ctx](const httplib::Request& req, httplib::Response& res) {
    request_start = Clock::now();
    if (ctx.draining) {
      ApiError e;
      e.status = 503;
      e.type = "server_error";
      e.message = "the server is shutting down";
      send_error(res, e);
      res.set_header("Connection", "close");
      return httplib::Server::HandlerResponse::Handled;
    }
    request_counted = true;
    ++ctx.active;
    if (ctx.options.api_key.empty() || req.path == "/health")
      return httplib::Server::HandlerResponse::Unhandled;
    if (bearer_matches(req.get_header_value("Authorization"), ctx.options.api_key))
      return httplib::Server::HandlerResponse::Unhandled;
    ApiError e;
    e.status = 401;
    e.message = "missing or wrong API key: send the header 'Authorization: Bearer KEY'";
    e.code = "invalid_api_key";
    send_error(res, e);
    return httplib::Server::HandlerResponse::Handled;
  });
  server.set_error_handler([&ctx](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;  // ours already
    ApiError e;
    e.status = res.status;
    if (res.status == 404)
      e.message = "Unknown request URL: " + req.method + " " + req.path.substr(0, 200);
    else if (res.status == 413)
      e = payload_too_large(ctx.options.max_body_mb);
    else
      e.message = "the request could not be read (HTTP " + std::to_string(res.status) + ")";
    send_error(res, e);
  });
  server.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
    ApiError e;
    e.status = 500;
    e.type = "server_error";
    e.message = "internal error while serving the request";
    send_error(res, e);
  });
  // One line per request; nothing from the body.
  server.set_logger([&ctx](const httplib::Request& req, const httplib::Response& res) {
    const double s = std::chrono::duration<double>(Clock::now() - request_start).count();
    std::fprintf(stderr, "vrun serve: %s %s %d %.1f ms\n", req.method.c_str(),
                 req.path.substr(0, 200).c_str(), res.status, s * 1e3);
    ctx.metrics.request_done(endpoint_label(req.path), res.status, s);
    if (request_counted) --ctx.active;
    request_counted = false;
  });
}

}  // namespace

int run_server(const ServeOptions& o) {
  // SIGTERM and SIGINT may land on any thread (libraries start their own before main), so the
  // handler only writes the signal's number into a pipe that one thread waits on.
  if (pipe(stop_pipe) != 0) {
    std::fprintf(stderr, "vrun serve: cannot create the shutdown pipe\n");
    return 1;
  }
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);  // a client gone mid-write is an error value, not a signal

  ServerContext ctx;
  ctx.options = o;
  auto backend = parse_backend_kind(o.backend);
  if (!backend.is_ok()) {
    std::fprintf(stderr, "vrun serve: %s\n", backend.status().message().c_str());
    return 1;
  }
  if (o.vad) {
    auto vad = speech::VoiceActivity::load(o.vad_model);
    if (!vad.is_ok()) {
      std::fprintf(stderr, "vrun serve: --vad: %s\n", vad.status().message().c_str());
      return 1;
    }
    ctx.vad = std::move(*vad);
  } else if (!o.vad_model.empty()) {
    std::fprintf(stderr, "vrun serve: --vad-model is given without --vad\n");
    return 1;
  }
  int total_pending = 0;
  for (size_t k = 0; k < o.models.size(); ++k) {
    ModelSpec spec;
    spec.path = o.models[k];
    spec.alias = k < o.aliases.size() ? o.aliases[k] : "";
    spec.backend = *backend;
    spec.threads = o.threads;
    spec.context = o.context;
    spec.parallel = o.parallel;
    spec.devices = o.devices;
    spec.prefill_chunk = o.prefill_chunk;
    spec.max_pending = o.max_concurrent;
    const auto t0 = Clock::now();
    auto m = load_model(spec, ctx.metrics);
    if (!m.is_ok()) {
      std::fprintf(stderr, "vrun serve: %s\n", m.status().message().c_str());
      return 1;
    }
    for (const auto& other : ctx.models)
      for (const auto& n : (*m)->names)
        if (std::find(other->names.begin(), other->names.end(), n) != other->names.end()) {
          std::fprintf(stderr, "vrun serve: two models are both named '%s'; give one an --alias\n",
                       n.c_str());
          return 1;
        }
    std::string what = (*m)->kind == ModelKind::kText ? "text" : "speech";
    if ((*m)->llama)
      what += (*m)->slots > 0 ? ", " + std::to_string((*m)->slots) + " slots of " +
                                    std::to_string((*m)->llama->context()) + " tokens"
                              : ", one request at a time";
    if (o.devices.size() > 1) what += ", on " + std::to_string(o.devices.size()) + " devices, a worker each";
    std::fprintf(stderr, "vrun serve: loaded %s as '%s' (%s) in %.2f s\n", o.models[k].c_str(),
                 (*m)->id.c_str(), what.c_str(), std::chrono::duration<double>(Clock::now() - t0).count());
    ctx.models.push_back(std::move(*m));
    total_pending += o.max_concurrent;
  }

  httplib::Server server;
  const size_t http_threads =
      o.http_threads > 0 ? static_cast<size_t>(o.http_threads) : static_cast<size_t>(total_pending + 8);
  server.new_task_queue = [http_threads] { return new httplib::ThreadPool(http_threads); };
  server.set_payload_max_length(static_cast<size_t>(o.max_body_mb) << 20);
  server.set_read_timeout(std::min(o.timeout_s, 60), 0);
  server.set_write_timeout(std::min(o.timeout_s, 60), 0);
  add_policies(server, ctx);
  add_info_routes(server, ctx);
  add_text_routes(server, ctx);
  add_audio_routes(server, ctx);

  int port = o.port;
  if (port == 0)
    port = server.bind_to_any_port(o.host);
  else if (!server.bind_to_port(o.host, port))
    port = -1;
  if (port < 0) {
    std::fprintf(stderr, "vrun serve: cannot listen on %s:%d (in use, or not an address of this host)\n",
                 o.host.c_str(), o.port);
    return 1;
  }
  std::fprintf(stderr, "vrun serve: listening on http://%s:%d\n", o.host.c_str(), port);

  std::atomic<bool> listen_done{false};
  std::thread stopper([&] {
    unsigned char sig = 0;
    while (read(stop_pipe[0], &sig, 1) < 0 && errno == EINTR) {
    }
    if (sig != 0)
      std::fprintf(stderr, "vrun serve: %s: finishing the requests in flight, refusing new ones (503)\n",
                   sig == SIGINT ? "SIGINT" : "SIGTERM");
    // The library aborts responses still streaming when it stops, so the requests in flight are
    // finished first; new ones meanwhile get 503.
    ctx.draining = true;
    // No request outlives --timeout-s; the bound covers a response the library dropped unlogged
    // (a client gone before the headers), which would otherwise never leave `active`.
    const auto give_up = Clock::now() + std::chrono::seconds(o.timeout_s + 5);
    while ((ctx.active > 0 && Clock::now() < give_up) || (!server.is_running() && !listen_done))
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    server.stop();
  });
  const bool listened = server.listen_after_bind();
  listen_done = true;
  // listen returned on its own (error): wake the stopper so that it can be joined.
  if (!listened) {
    const unsigned char none = 0;
    [[maybe_unused]] auto n = write(stop_pipe[1], &none, 1);
  }
  stopper.join();
  for (auto& m : ctx.models) m->scheduler->stop();
  std::fprintf(stderr, "vrun serve: stopped\n");
  return listened ? 0 : 1;
}

}  // namespace vrun::serve
