// vrun.LanguageModel: a Llama-family model (GGUF, Hugging Face folder, .vrp) through LlamaRunner,
// prompts encoded as `vrun generate` encodes them (--raw for generate(), the chat template for
// chat()), text returned whole or streamed from a thread of its own.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>

#include "apps/common/tokenizer/chat_template.h"
#include "apps/llama/batch_session.h"
#include "apps/llama/llama_runner.h"
#include "apps/python/bindings.h"
#include "models/registry/families.h"
#include "runtime/base/strings.h"

namespace vrun::python {

namespace {

// generate()/chat() keywords, with `vrun generate`'s defaults and ranges.
llama::GenerateOptions parse_generate(const py::kwargs& kw) {
  llama::GenerateOptions g;
  SamplingOptions& s = g.sampling;
  for (const auto& [key, value] : kw) {
    const std::string k = key.cast<std::string>();
    if (value.is_none()) continue;
    if (k == "max_tokens") g.max_tokens = value.cast<int>();
    else if (k == "temperature") s.temperature = value.cast<float>();
    else if (k == "top_k") s.top_k = value.cast<int>();
    else if (k == "top_p") s.top_p = value.cast<float>();
    else if (k == "min_p") s.min_p = value.cast<float>();
    else if (k == "repeat_penalty") s.repeat_penalty = value.cast<float>();
    else if (k == "repeat_last_n") s.repeat_last_n = value.cast<int>();
    else if (k == "seed") s.seed = value.cast<uint64_t>();
    else if (k == "ignore_eos") g.ignore_eos = value.cast<bool>();
    else if (k == "stop") g.stop = py::isinstance<py::str>(value) ? std::vector<std::string>{value.cast<std::string>()}
                                                                   : value.cast<std::vector<std::string>>();
    else
      throw py::type_error("got an unexpected keyword argument '" + k +
                           "' (max_tokens, temperature, top_k, top_p, min_p, repeat_penalty, repeat_last_n, seed, stop, "
                           "ignore_eos, stream)");
  }
  const auto range = [](const char* name, const char* accepted, double got) {
    std::ostringstream os;
    os << name << " must be " << accepted << ", got " << got;
    throw py::value_error(os.str());
  };
  if (g.max_tokens < -1) range("max_tokens", "-1 (no limit) or more", g.max_tokens);
  if (!(s.temperature >= 0 && s.temperature <= 100)) range("temperature", "in [0, 100]", s.temperature);
  if (s.top_k < 0) range("top_k", ">= 0", s.top_k);
  if (!(s.top_p >= 0 && s.top_p <= 1)) range("top_p", "in [0, 1]", s.top_p);
  if (!(s.min_p >= 0 && s.min_p <= 1)) range("min_p", "in [0, 1]", s.min_p);
  if (!(s.repeat_penalty >= 0 && s.repeat_penalty <= 100)) range("repeat_penalty", "in [0, 100]", s.repeat_penalty);
  if (s.repeat_last_n < 0) range("repeat_last_n", ">= 0", s.repeat_last_n);
  return g;
}

py::dict stats_dict(const llama::GenerateStats& st) {
  py::dict d;
  d["prompt_tokens"] = st.prompt_tokens, d["generated_tokens"] = st.generated_tokens, d["stop_reason"] = st.stop_reason;
  d["tokens"] = st.tokens, d["time_to_first_token_s"] = st.time_to_first_token_s;
  d["prefill_tokens_per_s"] = st.prefill_tok_s(), d["decode_tokens_per_s"] = st.decode_tok_s();
  return d;
}

class LanguageModel : public std::enable_shared_from_this<LanguageModel> {
 public:
  LanguageModel(const py::object& file, const std::string& backend, int threads, int64_t context, const std::string& chat_format,
                int64_t batch_slots) {
    path_ = fspath(file);
    llama::LoadOptions lo;
    lo.backend = backend_kind(backend);
    check_threads(threads);
    lo.threads = threads;
    if (context < 0 || context == 1) throw py::value_error("context must be 0 (the model's) or at least 2, got " + std::to_string(context));
    lo.context = context;
    if (batch_slots < 0 || batch_slots > 64) throw py::value_error("batch_slots must be in 0..64, got " + std::to_string(batch_slots));
    lo.batch_slots = batch_slots;
    lo.batch_context = context;
    batch_slots_ = batch_slots;
    auto format = tok::parse_chat_format(chat_format);
    if (!format.is_ok()) throw py::value_error(format.status().message());
    require_path(path_, "LanguageModel");
    auto r = [&]() -> Result<std::unique_ptr<llama::LlamaRunner>> {
      py::gil_scoped_release release;
      if (!ends_with(path_, ".vrp")) {  // a checkpoint's family from its headers, before the import
        VRUN_ASSIGN_OR_RETURN(models::Detected d, models::detect(path_));
        if (d.family->task != models::Task::kTextGeneration)
          return err(ErrorCode::kInvalidArgument, path_, ": a ", d.family->name, " model, not a text generator (vrun.SpeechModel loads speech models)");
      }
      return llama::LlamaRunner::load(path_, lo);
    }();
    runner_ = take(std::move(r));
    format_ = format->has_value() ? **format : tok::detect_chat_format(runner_->chat_template(), runner_->tokenizer());
  }

  // The prompt's ids, checked against the context: a raw text (generate) or a rendered chat.
  std::vector<int32_t> encode_prompt(const std::string& text, bool special) const {
    tok::EncodeOptions eo;
    eo.allow_special = special;
    eo.add_bos = runner_->add_bos();
    std::vector<int32_t> ids = runner_->tokenizer().encode(text, eo);
    if (ids.empty()) throw py::value_error("the prompt encodes to no tokens");
    const int64_t room = runner_->context() - 1;
    if (static_cast<int64_t>(ids.size()) > room)
      throw py::value_error("the prompt has " + std::to_string(ids.size()) + " tokens but only " + std::to_string(room) +
                            " fit in the context (" + std::to_string(runner_->context()) + ")");
    return ids;
  }

  std::string render_chat(const py::list& messages) const {
    std::vector<tok::ChatMessage> msgs;
    for (const auto& m : messages) {
      if (py::isinstance<py::dict>(m)) {
        auto d = m.cast<py::dict>();
        if (!d.contains("role") || !d.contains("content")) throw py::value_error("a chat message needs 'role' and 'content'");
        msgs.push_back({d["role"].cast<std::string>(), d["content"].cast<std::string>()});
      } else {
        auto t = m.cast<std::pair<std::string, std::string>>();
        msgs.push_back({t.first, t.second});
      }
      const std::string& role = msgs.back().role;
      if (role != "system" && role != "user" && role != "assistant")
        throw py::value_error("chat message role must be system, user or assistant, got '" + role + "'");
    }
    if (msgs.empty()) throw py::value_error("chat needs at least one message");
    return tok::render_chat(format_, msgs, true);
  }

  // The whole reply, the GIL released while the model runs.
  std::string run(const std::vector<int32_t>& ids, const llama::GenerateOptions& g) {
    std::string out;
    auto st = [&] {
      py::gil_scoped_release release;
      std::lock_guard<std::mutex> lock(mu_);
      runner_->reset();
      auto r = runner_->generate(ids, g, [&](const std::string& piece) {
        out += piece;
        return true;
      });
      if (r.is_ok()) set_last(*r);
      return r.status();
    }();
    check(st);
    return out;
  }

  py::object respond(std::vector<int32_t> ids, const py::kwargs& kw, bool stream);

  // Several prompts: with batch slots, sequences of one BatchSession (each joins when a slot is
  // free, every step decodes all of them together); without, one after another.
  std::vector<std::string> run_many(const std::vector<std::vector<int32_t>>& prompts, const llama::GenerateOptions& g) {
    std::vector<std::string> out(prompts.size());
    const Status st = [&]() -> Status {
      py::gil_scoped_release release;
      std::lock_guard<std::mutex> lock(mu_);
      if (batch_slots_ == 0) {
        for (size_t k = 0; k < prompts.size(); ++k) {
          runner_->reset();
          VRUN_ASSIGN_OR_RETURN(auto stats, runner_->generate(prompts[k], g, [&](const std::string& piece) {
            out[k] += piece;
            return true;
          }));
          set_last(stats);
        }
        return Status::ok();
      }
      VRUN_ASSIGN_OR_RETURN(auto session, llama::BatchSession::create(*runner_));
      size_t next = 0;
      while (next < prompts.size() || !session->idle()) {
        for (; next < prompts.size() && session->free_slots() > 0; ++next) {
          std::string* text = &out[next];
          VRUN_RETURN_IF_ERROR(session->add(prompts[next], g, [text](const std::string& piece) {
            *text += piece;
            return true;
          }).status());
        }
        VRUN_RETURN_IF_ERROR(session->step());
        for (const auto& f : session->take_finished()) set_last(f.stats);
      }
      return Status::ok();
    }();
    check(st);
    return out;
  }

  std::mutex& mutex() { return mu_; }
  llama::LlamaRunner& runner() { return *runner_; }
  void set_last(const llama::GenerateStats& st) {
    std::lock_guard<std::mutex> lock(stats_mu_);
    last_ = st;
  }
  py::dict last_stats() {
    std::lock_guard<std::mutex> lock(stats_mu_);
    return stats_dict(last_);
  }
  const tok::ChatFormat& format() const { return format_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::unique_ptr<llama::LlamaRunner> runner_;
  tok::ChatFormat format_;
  std::mutex mu_;  // one generation at a time per model (the cache is the model's)
  std::mutex stats_mu_;
  llama::GenerateStats last_;
  int64_t batch_slots_ = 0;
};

// The iterator generate(stream=True) returns: a thread generates and queues each piece of text;
// __next__ waits (without the GIL) for the next. Closing it, or dropping it, stops the generation.
class TextStream {
 public:
  TextStream(std::shared_ptr<LanguageModel> model, std::vector<int32_t> ids, llama::GenerateOptions g) : model_(std::move(model)) {
    thread_ = std::thread([this, ids = std::move(ids), g = std::move(g)] { produce(ids, g); });
  }
  ~TextStream() { close(); }

  std::string next() {
    std::optional<std::string> piece;
    Status error = Status::ok();
    {
      // m_ is never held while the GIL is wanted: close() takes m_ with the GIL held.
      py::gil_scoped_release release;
      std::unique_lock<std::mutex> lock(m_);
      cv_.wait(lock, [&] { return !pieces_.empty() || done_; });
      if (!pieces_.empty()) {
        piece = std::move(pieces_.front());
        pieces_.pop_front();
      } else {
        std::swap(error, error_);
      }
    }
    if (piece) return *piece;
    check(error);
    throw py::stop_iteration();
  }

  void close() {
    {
      std::lock_guard<std::mutex> lock(m_);
      cancel_ = true;
    }
    if (thread_.joinable()) {
      if (PyGILState_Check()) {
        py::gil_scoped_release release;
        thread_.join();
      } else {
        thread_.join();
      }
    }
  }

 private:
  void produce(const std::vector<int32_t>& ids, const llama::GenerateOptions& g) {
    Status status = Status::ok();
    {
      std::lock_guard<std::mutex> model_lock(model_->mutex());
      model_->runner().reset();
      auto r = model_->runner().generate(ids, g, [&](const std::string& piece) {
        std::lock_guard<std::mutex> lock(m_);
        pieces_.push_back(piece);
        cv_.notify_one();
        return !cancel_;
      });
      if (r.is_ok()) model_->set_last(*r);
      else status = r.status();
    }
    std::lock_guard<std::mutex> lock(m_);
    error_ = status;
    done_ = true;
    cv_.notify_one();
  }

  std::shared_ptr<LanguageModel> model_;
  std::thread thread_;
  std::mutex m_;
  std::condition_variable cv_;
  std::deque<std::string> pieces_;
  bool done_ = false, cancel_ = false;
  Status error_;
};

py::object LanguageModel::respond(std::vector<int32_t> ids, const py::kwargs& kw, bool stream) {
  const llama::GenerateOptions g = parse_generate(kw);
  if (stream) return py::cast(std::make_unique<TextStream>(shared_from_this(), std::move(ids), g));
  return py::str(run(ids, g));
}

const char* kGenerateDoc =
    "Keywords (the defaults of `vrun generate`): max_tokens=256 (-1: until end of text or a full context),\n"
    "temperature=0.8 (0: greedy), top_k=40, top_p=0.95, min_p=0.05, repeat_penalty=1.0, repeat_last_n=64,\n"
    "seed=0 (0: random), stop=None (a string or a list: generation ends before any of them), ignore_eos=False.\n"
    "stream=True returns an iterator of text pieces (never a split UTF-8 character) that concatenate to the\n"
    "text stream=False returns. Each call starts from an empty cache; the model runs with the GIL released.";

}  // namespace

void register_language(py::module_& m) {
  py::class_<TextStream>(m, "TextStream", "Pieces of generated text as they are decoded (LanguageModel.generate(stream=True)).")
      .def("__iter__", [](py::object self) { return self; })
      .def("__next__", &TextStream::next)
      .def("close", &TextStream::close, "Stops the generation");
  py::class_<LanguageModel, std::shared_ptr<LanguageModel>>(m, "LanguageModel",
                                                            "A Llama-family model (Llama, Mistral, Qwen2, SmolLM2): a .gguf, a Hugging Face\n"
                                                            "folder or a .vrp.")
      .def(py::init<const py::object&, const std::string&, int, int64_t, const std::string&, int64_t>(), py::arg("path"),
           py::arg("backend") = "auto", py::arg("threads") = 0, py::arg("context") = 0, py::arg("chat_format") = "auto",
           py::arg("batch_slots") = 0,
           "LanguageModel(path, backend='auto'|'cpu'|'vulkan', threads=0, context=0, chat_format='auto', batch_slots=0)\n\n"
           "Loads the model (GIL released). context: KV-cache rows (0: the model's, bounded by memory). chat_format:\n"
           "auto (from the model), raw, llama2, llama3 or chatml, for chat(). batch_slots: sequences generate_many()\n"
           "decodes together (a checkpoint only; each slot holds `context` positions; 0: one after another).")
      .def("generate_many", [](LanguageModel& self, const std::vector<std::string>& prompts, bool chat, const py::kwargs& kw) {
             std::vector<std::vector<int32_t>> ids;
             const bool special = chat && self.format().kind != tok::ChatFormat::Kind::kRaw;
             for (const auto& p : prompts) {
               if (!chat) ids.push_back(self.encode_prompt(p, false));
               else {
                 py::list messages;
                 messages.append(py::dict(py::arg("role") = "user", py::arg("content") = p));
                 ids.push_back(self.encode_prompt(self.render_chat(messages), special));
               }
             }
             return self.run_many(ids, parse_generate(kw));
           }, py::arg("prompts"), py::kw_only(), py::arg("chat") = false,
           (std::string("generate_many(prompts, *, chat=False, **options) -> list[str]\n\n"
                        "Several prompts with the same options (chat=True: each a user message through the chat\n"
                        "template). With batch_slots they run as one continuous batch, each text at temperature 0\n"
                        "equal to what generate (or chat) gives alone.\n") + kGenerateDoc).c_str())
      .def("generate", [](LanguageModel& self, const std::string& prompt, bool stream, const py::kwargs& kw) {
             return self.respond(self.encode_prompt(prompt, false), kw, stream);
           }, py::arg("prompt"), py::kw_only(), py::arg("stream") = false,
           (std::string("generate(prompt, *, stream=False, **options) -> str | TextStream\n\n"
                        "Continues the text as it is (no chat template; `vrun generate --raw`).\n") + kGenerateDoc).c_str())
      .def("chat", [](LanguageModel& self, const py::list& messages, bool stream, const py::kwargs& kw) {
             return self.respond(self.encode_prompt(self.render_chat(messages), self.format().kind != tok::ChatFormat::Kind::kRaw), kw, stream);
           }, py::arg("messages"), py::kw_only(), py::arg("stream") = false,
           (std::string("chat(messages, *, stream=False, **options) -> str | TextStream\n\n"
                        "The reply to a conversation: messages are {'role': 'system'|'user'|'assistant', 'content': str}\n"
                        "dicts (or (role, content) pairs), rendered with the model's chat template as `vrun generate`\n"
                        "renders -p/--system.\n") + kGenerateDoc).c_str())
      .def("tokenize", [](LanguageModel& self, const std::string& text, bool special, bool add_bos) {
             tok::EncodeOptions eo;
             eo.allow_special = special;
             eo.add_bos = add_bos;
             return self.runner().tokenizer().encode(text, eo);
           }, py::arg("text"), py::arg("special") = false, py::arg("add_bos") = false, "Token ids of text")
      .def("detokenize", [](LanguageModel& self, const std::vector<int32_t>& ids) { return self.runner().tokenizer().decode(ids); },
           py::arg("ids"), "Text of token ids")
      .def_property_readonly("context", [](LanguageModel& self) { return self.runner().context(); }, "KV-cache rows")
      .def_property_readonly("chat_format", [](LanguageModel& self) { return std::string(tok::chat_format_name(self.format().kind)); })
      .def_property_readonly("path", &LanguageModel::path)
      .def_property_readonly("last_stats", &LanguageModel::last_stats,
                             "The last finished generation: prompt and generated tokens, stop reason, token ids, speeds");
}

}  // namespace vrun::python
