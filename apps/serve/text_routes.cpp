// POST /v1/chat/completions and /v1/completions: parse, render the prompt (chat template as
// `vrun generate` renders it), check it against the context, queue the job on the model's
// scheduler, answer with one JSON body or a server-sent event stream.
#include <chrono>
#include <condition_variable>
#include <deque>
#include <future>
#include <mutex>

#include "apps/serve/engines.h"
#include "apps/serve/request_parser.h"
#include "apps/serve/responses.h"
#include "apps/serve/server_context.h"

namespace vrun::serve {
namespace {

using Clock = std::chrono::steady_clock;

// Events from the worker to the connection thread that writes them: whole server-sent events,
// or text pieces that the connection thread wraps in chunk objects itself (the worker's step
// loop only queues them).
struct StreamChannel {
  struct Event {
    bool piece = false;  // text for a chunk object, not a whole event
    std::string s;
  };
  std::mutex mu;
  std::condition_variable cv;
  std::deque<Event> events;
  bool finished = false;
  void push(std::string event, bool last = false) { add({false, std::move(event)}, last); }
  void push_piece(std::string piece) { add({true, std::move(piece)}, false); }

 private:
  void add(Event e, bool last) {
    {
      std::lock_guard<std::mutex> lock(mu);
      events.push_back(std::move(e));
      finished = finished || last;
    }
    cv.notify_one();
  }
};

std::string sse(const std::string& data) {
  return "data: " + data + "\n\n";
}

// What both endpoints produce after parsing: the job's inputs and how to shape the answer.
struct Prepared {
  ServedModel* model = nullptr;
  std::vector<int32_t> prompt;
  llama::GenerateOptions options;
  GenerationFields gen;
  bool chat = true;
};

Parsed<Prepared> prepare(ServerContext& ctx, const GenerationFields& gen, bool chat,
                         const std::vector<ChatMessage>& messages, const std::string& prompt_text) {
  using Out = Parsed<Prepared>;
  auto found = ctx.find(gen.model, ModelKind::kText, chat ? "/v1/chat/completions" : "/v1/completions");
  if (!found.ok()) return Out::fail(found.error);
  Prepared p;
  p.model = *found.value;
  p.gen = gen;
  p.chat = chat;
  llama::LlamaRunner& r = *p.model->llama;
  tok::EncodeOptions eo;
  std::string text = prompt_text;
  if (chat) {
    std::vector<tok::ChatMessage> msgs;
    for (const auto& m : messages) msgs.push_back({m.role, m.content});
    text = tok::render_chat(p.model->chat_format, msgs, true);
    eo.allow_special = p.model->chat_format.kind != tok::ChatFormat::Kind::kRaw;
  }
  eo.add_bos = r.add_bos();
  p.prompt = r.tokenizer().encode(text, eo);
  const char* param = chat ? "messages" : "prompt";
  if (p.prompt.empty()) return Out::fail(bad_request("the prompt encodes to no tokens", param));
  const int64_t room = r.context() - 1;
  if (static_cast<int64_t>(p.prompt.size()) > room)
    return Out::fail(bad_request("This model's maximum context length is " + std::to_string(r.context()) +
                                     " tokens; the prompt has " + std::to_string(p.prompt.size()) +
                                     " tokens.",
                                 param, "context_length_exceeded"));
  const int limit = ctx.options.max_tokens;
  if (gen.max_tokens && *gen.max_tokens > limit)
    return Out::fail(
        bad_request("'max_tokens' is above this server's limit of " + std::to_string(limit), "max_tokens"));
  p.options.max_tokens = gen.max_tokens ? static_cast<int>(*gen.max_tokens) : limit;
  p.options.stop = gen.stop;
  p.options.cache_prompt = gen.cache_prompt;
  // OpenAI's sampling: temperature and nucleus only (no top-k, min-p or repetition penalty).
  p.options.sampling.temperature = static_cast<float>(gen.temperature);
  p.options.sampling.top_p = static_cast<float>(gen.top_p);
  p.options.sampling.top_k = 0;
  p.options.sampling.min_p = 0;
  p.options.sampling.repeat_penalty = 1;
  // The sampler reads seed 0 as "random"; a request's explicit 0 is kept reproducible.
  if (gen.seed)
    p.options.sampling.seed = *gen.seed == 0 ? 0x9e3779b97f4a7c15ull : static_cast<uint64_t>(*gen.seed);
  return {std::move(p), {}};
}

std::string final_body(const Prepared& p, const CompletionId& id, const std::string& text,
                       const llama::GenerateStats& st) {
  const Usage u{static_cast<int64_t>(p.prompt.size()), st.generated_tokens, st.cached_prompt_tokens};
  const std::string finish = finish_reason(st.stop_reason);
  return p.chat ? chat_completion_body(id, text, finish, u) : completion_body(id, text, finish, u);
}

void respond_whole(ServerContext& ctx, const Prepared& p, const CompletionId& id, httplib::Response& res) {
  auto job = std::make_shared<TextJob>();
  job->prompt = p.prompt;
  job->options = p.options;
  auto text = std::make_shared<std::string>();
  job->on_text = [text](const std::string& piece) {
    *text += piece;
    return true;
  };
  auto done = std::make_shared<std::promise<Result<llama::GenerateStats>>>();
  auto future = done->get_future();
  job->on_done = [done](Result<llama::GenerateStats> st) { done->set_value(std::move(st)); };
  if (!p.model->scheduler->submit(job)) return send_error(res, too_many_requests(p.model->id));
  if (future.wait_for(std::chrono::seconds(ctx.options.timeout_s)) != std::future_status::ready) {
    job->cancelled = true;
    return send_error(res, timed_out());
  }
  auto st = future.get();
  if (!st.is_ok()) return send_error(res, runner_error(st.status()));
  res.set_content(final_body(p, id, *text, *st), "application/json");
}

void respond_stream(ServerContext& ctx, const Prepared& p, const CompletionId& id, httplib::Response& res) {
  auto job = std::make_shared<TextJob>();
  job->prompt = p.prompt;
  job->options = p.options;
  auto ch = std::make_shared<StreamChannel>();
  const bool chat = p.chat, usage = p.gen.include_usage;
  const int64_t prompt_tokens = static_cast<int64_t>(p.prompt.size());
  if (chat) ch->push(sse(chat_chunk_body(id, std::string(), true, std::nullopt)));
  job->on_text = [ch](const std::string& piece) {
    ch->push_piece(piece);
    return true;
  };
  job->on_done = [ch, id, chat, usage, prompt_tokens](Result<llama::GenerateStats> st) {
    if (!st.is_ok()) {
      ch->push(sse(error_body(runner_error(st.status()))));
    } else {
      const std::string finish = finish_reason(st->stop_reason);
      ch->push(sse(chat ? chat_chunk_body(id, std::nullopt, false, finish)
                        : completion_chunk_body(id, "", finish)));
      if (usage) ch->push(sse(usage_chunk_body(id, chat, Usage{prompt_tokens, st->generated_tokens, st->cached_prompt_tokens})));
    }
    ch->push("data: [DONE]\n\n", true);
  };
  if (!p.model->scheduler->submit(job)) return send_error(res, too_many_requests(p.model->id));
  const auto deadline = Clock::now() + std::chrono::seconds(ctx.options.timeout_s);
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
      [ch, job, deadline, id, chat](size_t, httplib::DataSink& sink) {
        std::deque<StreamChannel::Event> ready;
        bool finished = false;
        {
          std::unique_lock<std::mutex> lock(ch->mu);
          ch->cv.wait_for(lock, std::chrono::milliseconds(200),
                          [&] { return !ch->events.empty() || ch->finished; });
          ready.swap(ch->events);
          finished = ch->finished;
        }
        for (const auto& ev : ready) {
          const std::string e = !ev.piece ? ev.s
                                : sse(chat ? chat_chunk_body(id, ev.s, false, std::nullopt)
                                           : completion_chunk_body(id, ev.s, std::nullopt));
          if (!sink.write(e.data(), e.size())) {
            job->cancelled = true;  // the client went away: stop generating for it
            return false;
          }
        }
        if (finished) {
          sink.done();
        } else if (Clock::now() > deadline || !sink.is_writable()) {
          job->cancelled = true;
          return false;
        }
        return true;
      },
      [job](bool success) {
        if (!success) job->cancelled = true;
      });
}

void handle_generation(ServerContext& ctx, const httplib::Request& req, httplib::Response& res, bool chat) {
  Parsed<Prepared> prepared;
  if (chat) {
    auto parsed = parse_chat_request(req.body);
    if (!parsed.ok()) return send_error(res, parsed.error);
    prepared = prepare(ctx, parsed.value->gen, true, parsed.value->messages, "");
  } else {
    auto parsed = parse_completion_request(req.body);
    if (!parsed.ok()) return send_error(res, parsed.error);
    prepared = prepare(ctx, parsed.value->gen, false, {}, parsed.value->prompt);
  }
  if (!prepared.ok()) return send_error(res, prepared.error);
  const Prepared& p = *prepared.value;
  CompletionId id{
      new_id(chat ? "chatcmpl-" : "cmpl-"),
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
          .count(),
      p.model->id};
  if (p.gen.stream)
    respond_stream(ctx, p, id, res);
  else
    respond_whole(ctx, p, id, res);
}

}  // namespace

void add_text_routes(httplib::Server& server, ServerContext& ctx) {
  server.Post("/v1/chat/completions", [&ctx](const httplib::Request& req, httplib::Response& res) {
    handle_generation(ctx, req, res, true);
  });
  server.Post("/v1/completions", [&ctx](const httplib::Request& req, httplib::Response& res) {
    handle_generation(ctx, req, res, false);
  });
}

}  // namespace vrun::serve
