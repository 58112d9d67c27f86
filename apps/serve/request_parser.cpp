#include "apps/serve/request_parser.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <nlohmann/json.hpp>

namespace vrun::serve {

ApiError bad_request(std::string message, std::string param, std::string code) {
  ApiError e;
  e.status = 400;
  e.message = std::move(message);
  e.param = std::move(param);
  e.code = std::move(code);
  return e;
}

namespace {

using json = nlohmann::json;

// Reads fields of one JSON object, keeping the first error.
class FieldReader {
 public:
  explicit FieldReader(const json& j) : j_(j) {}
  bool ok() const { return !error_.has_value(); }
  const ApiError& error() const { return *error_; }
  void fail(std::string message, const std::string& param) {
    if (!error_) error_ = bad_request(std::move(message), param);
  }
  const json* find(const char* key) const {
    auto it = j_.find(key);
    return it == j_.end() || it->is_null() ? nullptr : &*it;
  }
  void string(const char* key, std::string& out, bool required = false) {
    const json* v = find(key);
    if (!v) {
      if (required) fail(std::string("'") + key + "' is required", key);
      return;
    }
    if (!v->is_string()) return fail(std::string("'") + key + "' must be a string", key);
    out = v->get<std::string>();
  }
  void number(const char* key, double& out, double lo, double hi) {
    const json* v = find(key);
    if (!v) return;
    if (!v->is_number()) return fail(std::string("'") + key + "' must be a number", key);
    const double d = v->get<double>();
    if (!(d >= lo && d <= hi))
      return fail(std::string("'") + key + "' must be between " + fmt(lo) + " and " + fmt(hi), key);
    out = d;
  }
  void integer(const char* key, std::optional<int64_t>& out, int64_t lo, int64_t hi) {
    const json* v = find(key);
    if (!v) return;
    if (!v->is_number_integer()) return fail(std::string("'") + key + "' must be an integer", key);
    const int64_t k = v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)
                          ? INT64_MAX
                          : v->get<int64_t>();
    if (k < lo || k > hi)
      return fail(
          std::string("'") + key + "' must be between " + std::to_string(lo) + " and " + std::to_string(hi),
          key);
    out = k;
  }
  void boolean(const char* key, bool& out) {
    const json* v = find(key);
    if (!v) return;
    if (!v->is_boolean()) return fail(std::string("'") + key + "' must be a boolean", key);
    out = v->get<bool>();
  }

 private:
  static std::string fmt(double d) {
    std::string s = std::to_string(d);
    while (s.size() > 1 && s.back() == '0') s.pop_back();
    if (!s.empty() && s.back() == '.') s.pop_back();
    return s;
  }
  const json& j_;
  std::optional<ApiError> error_;
};

std::optional<json> parse_object(std::string_view body, ApiError& error) {
  json j = json::parse(body.begin(), body.end(), nullptr, false);
  if (j.is_discarded()) {
    error = bad_request("the request body is not valid JSON");
    return std::nullopt;
  }
  if (!j.is_object()) {
    error = bad_request("the request body must be a JSON object");
    return std::nullopt;
  }
  return j;
}

void read_generation(FieldReader& r, GenerationFields& g) {
  r.string("model", g.model, true);
  r.number("temperature", g.temperature, 0.0, 2.0);
  r.number("top_p", g.top_p, 0.0, 1.0);
  // max_completion_tokens is the newer name of the chat field.
  r.integer("max_tokens", g.max_tokens, 1, INT32_MAX);
  if (!g.max_tokens) r.integer("max_completion_tokens", g.max_tokens, 1, INT32_MAX);
  r.integer("seed", g.seed, INT64_MIN, INT64_MAX);
  std::optional<int64_t> n;
  r.integer("n", n, 1, 128);
  if (n && *n != 1) r.fail("only n = 1 is supported", "n");
  r.boolean("stream", g.stream);
  r.boolean("cache_prompt", g.cache_prompt);
  if (const json* so = r.find("stream_options")) {
    if (!so->is_object()) return r.fail("'stream_options' must be an object", "stream_options");
    auto it = so->find("include_usage");
    if (it != so->end() && !it->is_null()) {
      if (!it->is_boolean())
        return r.fail("'stream_options.include_usage' must be a boolean", "stream_options");
      g.include_usage = it->get<bool>();
    }
  }
  if (const json* stop = r.find("stop")) {
    if (stop->is_string()) {
      g.stop.push_back(stop->get<std::string>());
    } else if (stop->is_array() && stop->size() <= 4) {
      for (const auto& s : *stop) {
        if (!s.is_string()) return r.fail("'stop' must be a string or an array of up to 4 strings", "stop");
        g.stop.push_back(s.get<std::string>());
      }
    } else {
      return r.fail("'stop' must be a string or an array of up to 4 strings", "stop");
    }
    for (const auto& s : g.stop)
      if (s.empty()) return r.fail("'stop' strings must not be empty", "stop");
  }
}

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// `key=value; key="quoted value"` parameters after the first ';' of a header value.
std::string header_param(std::string_view value, std::string_view key) {
  size_t pos = value.find(';');
  while (pos != std::string_view::npos && pos < value.size()) {
    std::string_view rest = value.substr(pos + 1);
    const size_t eq = rest.find('=');
    if (eq == std::string_view::npos) return "";
    const std::string name = lower(trim(rest.substr(0, eq)));
    rest = trim(rest.substr(eq + 1));
    std::string v;
    size_t used = 0;
    if (!rest.empty() && rest.front() == '"') {
      size_t k = 1;
      for (; k < rest.size() && rest[k] != '"'; ++k) {
        if (rest[k] == '\\' && k + 1 < rest.size()) ++k;
        v.push_back(rest[k]);
      }
      used = std::min(rest.size(), k + 1);
    } else {
      used = std::min(rest.find(';'), rest.size());
      v = std::string(trim(rest.substr(0, used)));
    }
    if (name == key) return v;
    const size_t next = rest.find(';', used);
    if (next == std::string_view::npos) return "";
    pos = static_cast<size_t>(rest.data() + next - value.data());
  }
  return "";
}

// A message's content: a string, or an array of {"type": "text", "text": ...} parts.
bool read_content(const json& c, std::string& out) {
  if (c.is_string()) {
    out = c.get<std::string>();
    return true;
  }
  if (!c.is_array()) return false;
  for (const auto& part : c) {
    if (!part.is_object()) return false;
    auto type = part.find("type");
    auto text = part.find("text");
    if (type == part.end() || *type != "text" || text == part.end() || !text->is_string()) return false;
    out += text->get<std::string>();
  }
  return true;
}

// A JSON request body: an object, its fields read into a Req by read(r, req); the first field
// error that r recorded, if any, is the answer.
template <typename Req>
Parsed<Req> parse_json_request(std::string_view body, void (*read)(FieldReader&, Req&)) {
  ApiError error;
  auto j = parse_object(body, error);
  if (!j) return Parsed<Req>::fail(error);
  FieldReader r(*j);
  Req req;
  read(r, req);
  if (!r.ok()) return Parsed<Req>::fail(r.error());
  return {std::move(req), {}};
}

void read_chat_request(FieldReader& r, ChatRequest& req) {
  read_generation(r, req.gen);
  const json* msgs = r.find("messages");
  if (!msgs)
    r.fail("'messages' is required", "messages");
  else if (!msgs->is_array() || msgs->empty())
    r.fail("'messages' must be a non-empty array", "messages");
  else {
    for (size_t k = 0; k < msgs->size() && r.ok(); ++k) {
      const json& m = (*msgs)[k];
      const std::string param = "messages[" + std::to_string(k) + "]";
      if (!m.is_object()) {
        r.fail(param + " must be an object", param);
        break;
      }
      ChatMessage cm;
      auto role = m.find("role");
      if (role == m.end() || !role->is_string()) {
        r.fail(param + ".role must be a string", param + ".role");
        break;
      }
      cm.role = role->get<std::string>();
      if (cm.role == "developer") cm.role = "system";
      if (cm.role != "system" && cm.role != "user" && cm.role != "assistant") {
        r.fail(param + ".role must be system, developer, user or assistant", param + ".role");
        break;
      }
      auto content = m.find("content");
      if (content == m.end() || !read_content(*content, cm.content)) {
        r.fail(param + ".content must be a string or an array of text parts", param + ".content");
        break;
      }
      req.messages.push_back(std::move(cm));
    }
  }
  // What the runners cannot do is refused, not silently ignored.
  bool logprobs = false;
  r.boolean("logprobs", logprobs);
  if (logprobs) r.fail("'logprobs' is not supported", "logprobs");
  if (const json* tools = r.find("tools"); tools && !(tools->is_array() && tools->empty()))
    r.fail("'tools' (function calling) is not supported", "tools");
  if (const json* rf = r.find("response_format")) {
    auto type = rf->is_object() ? rf->find("type") : rf->end();
    if (!rf->is_object() || type == rf->end() || *type != "text")
      r.fail("only response_format {\"type\": \"text\"} is supported", "response_format");
  }
}

void read_completion_request(FieldReader& r, CompletionRequest& req) {
  req.gen.max_tokens = 16;  // the completions endpoint's default
  read_generation(r, req.gen);
  const json* p = r.find("prompt");
  if (!p)
    r.fail("'prompt' is required", "prompt");
  else if (p->is_string())
    req.prompt = p->get<std::string>();
  else if (p->is_array() && p->size() == 1 && (*p)[0].is_string())
    req.prompt = (*p)[0].get<std::string>();
  else
    r.fail("'prompt' must be a string (or an array of one string)", "prompt");
  bool echo = false;
  r.boolean("echo", echo);
  if (echo) r.fail("'echo' is not supported", "echo");
  std::optional<int64_t> logprobs;
  r.integer("logprobs", logprobs, 0, 5);
  if (logprobs.value_or(0) > 0) r.fail("'logprobs' is not supported", "logprobs");
  if (r.ok() && req.prompt.empty()) r.fail("'prompt' must not be empty", "prompt");
}

}  // namespace

Parsed<ChatRequest> parse_chat_request(std::string_view body) {
  return parse_json_request(body, read_chat_request);
}

Parsed<CompletionRequest> parse_completion_request(std::string_view body) {
  return parse_json_request(body, read_completion_request);
}

Parsed<AudioRequest> parse_audio_request(std::vector<FormPart> parts, AudioTask task) {
  using Out = Parsed<AudioRequest>;
  AudioRequest req;
  req.task = task;
  bool have_file = false, have_model = false;
  std::vector<std::string> granularities;
  for (auto& p : parts) {
    if (p.name == "file") {
      if (have_file) return Out::fail(bad_request("more than one 'file' part", "file"));
      have_file = true;
      req.file.assign(p.data.begin(), p.data.end());
      req.filename = p.filename.empty() ? "upload" : p.filename;
    } else if (p.name == "model") {
      have_model = true;
      req.model = p.data;
    } else if (p.name == "language") {
      if (task == AudioTask::kTranslate)
        return Out::fail(bad_request("translations take no 'language'", "language"));
      req.language = p.data;
      if (req.language.size() > 16)
        return Out::fail(bad_request("'language' must be a language code such as en", "language"));
    } else if (p.name == "prompt") {
      req.prompt = p.data;
    } else if (p.name == "temperature") {
      char* end = nullptr;
      const std::string s = p.data;
      const double t = s.empty() ? NAN : std::strtod(s.c_str(), &end);
      if (!(t >= 0.0 && t <= 1.0) || (end && *end != '\0'))
        return Out::fail(bad_request("'temperature' must be a number between 0 and 1", "temperature"));
      req.temperature = t;
    } else if (p.name == "response_format") {
      req.response_format = p.data;
      const auto& f = req.response_format;
      if (f != "json" && f != "text" && f != "srt" && f != "vtt" && f != "verbose_json")
        return Out::fail(
            bad_request("'response_format' must be json, text, srt, vtt or verbose_json", "response_format"));
    } else if (p.name == "vad_filter") {
      if (p.data == "true" || p.data == "True" || p.data == "1") req.vad_filter = true;
      else if (p.data == "false" || p.data == "False" || p.data == "0") req.vad_filter = false;
      else return Out::fail(bad_request("'vad_filter' must be true or false", "vad_filter"));
    } else if (p.name == "timestamp_granularities[]" || p.name == "timestamp_granularities") {
      if (p.data != "word" && p.data != "segment")
        return Out::fail(bad_request("'timestamp_granularities[]' entries must be word or segment",
                                     "timestamp_granularities"));
      granularities.push_back(p.data);
    }
  }
  if (!have_file) return Out::fail(bad_request("'file' is required", "file"));
  if (req.file.empty()) return Out::fail(bad_request("'file' is empty", "file"));
  if (!have_model || req.model.empty()) return Out::fail(bad_request("'model' is required", "model"));
  for (const auto& g : granularities) req.word_timestamps = req.word_timestamps || g == "word";
  return {std::move(req), {}};
}

Parsed<std::string> multipart_boundary(std::string_view content_type) {
  const std::string type = lower(trim(content_type.substr(0, content_type.find(';'))));
  if (type != "multipart/form-data")
    return Parsed<std::string>::fail(bad_request("expected Content-Type multipart/form-data, got '" +
                                                 std::string(type.substr(0, 80)) + "'"));
  std::string boundary = header_param(content_type, "boundary");
  if (boundary.empty() || boundary.size() > 200)
    return Parsed<std::string>::fail(bad_request("multipart/form-data without a usable boundary parameter"));
  return {boundary, {}};
}

bool bearer_matches(std::string_view authorization, std::string_view key) {
  constexpr std::string_view kBearer = "Bearer ";
  if (authorization.size() < kBearer.size() || authorization.substr(0, kBearer.size()) != kBearer)
    return false;
  const std::string_view given = authorization.substr(kBearer.size());
  // Constant time in the key's length: the comparison does not stop at the first difference.
  unsigned diff = given.size() == key.size() ? 0u : 1u;
  for (size_t k = 0; k < key.size(); ++k)
    diff |= static_cast<unsigned>(key[k] ^ (k < given.size() ? given[k] : 0));
  return diff == 0;
}

}  // namespace vrun::serve
