// vrun serve's request parsing, response shapes and metrics text, against the OpenAI API
// reference (field names, defaults, error object) and the Prometheus text format.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "apps/serve/metrics.h"
#include "apps/serve/request_parser.h"
#include "apps/serve/responses.h"

namespace vrun::serve {
namespace {

using json = nlohmann::json;

TEST(ServeProtocol, ChatRequestFields) {
  auto r = parse_chat_request(R"({"model": "m", "messages": [{"role": "developer", "content": "s"},
      {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}],
      "temperature": 0, "top_p": 0.5, "max_completion_tokens": 7, "stop": "x", "seed": -3, "n": 1,
      "stream": true, "stream_options": {"include_usage": true}, "unknown_field": {"deep": [1]}})");
  ASSERT_TRUE(r.ok()) << r.error.message;
  const ChatRequest& c = *r.value;
  EXPECT_EQ(c.gen.model, "m");
  ASSERT_EQ(c.messages.size(), 2u);
  EXPECT_EQ(c.messages[0].role, "system");  // developer is the newer name of system
  EXPECT_EQ(c.messages[1].content, "ab");
  EXPECT_EQ(c.gen.temperature, 0.0);
  EXPECT_EQ(c.gen.top_p, 0.5);
  EXPECT_EQ(c.gen.max_tokens.value_or(0), 7);
  EXPECT_EQ(c.gen.stop, std::vector<std::string>{"x"});
  EXPECT_EQ(c.gen.seed.value_or(0), -3);
  EXPECT_TRUE(c.gen.stream && c.gen.include_usage);
}

TEST(ServeProtocol, DefaultsAsTheApiDefinesThem) {
  auto chat = parse_chat_request(R"({"model": "m", "messages": [{"role": "user", "content": "x"}]})");
  ASSERT_TRUE(chat.ok());
  EXPECT_EQ(chat.value->gen.temperature, 1.0);
  EXPECT_EQ(chat.value->gen.top_p, 1.0);
  EXPECT_FALSE(chat.value->gen.max_tokens.has_value());
  auto completion = parse_completion_request(R"({"model": "m", "prompt": "x"})");
  ASSERT_TRUE(completion.ok());
  EXPECT_EQ(completion.value->gen.max_tokens.value_or(0), 16);
  auto plain =
      parse_chat_request(R"({"model": "m", "messages": [{"role": "user", "content": "x"}], "tools": [],
      "logprobs": false, "response_format": {"type": "text"}, "presence_penalty": 0})");
  EXPECT_TRUE(plain.ok()) << plain.error.message;
}

TEST(ServeProtocol, ErrorsNameTheField) {
  struct Case {
    const char* body;
    const char* param;
  } cases[] = {
      {R"({"messages": [{"role": "user", "content": "x"}]})", "model"},
      {R"({"model": "m", "messages": []})", "messages"},
      {R"({"model": "m", "messages": [{"role": "user", "content": "x"}], "temperature": 2.5})",
       "temperature"},
      {R"({"model": "m", "messages": [{"role": "user", "content": "x"}], "top_p": "1"})", "top_p"},
      {R"({"model": "m", "messages": [{"role": "user", "content": "x"}], "max_tokens": 1.5})", "max_tokens"},
      {R"({"model": "m", "messages": [{"role": "user", "content": "x"}], "stop": ["a", "b", "c", "d", "e"]})",
       "stop"},
      {R"({"model": "m", "messages": [{"role": "user", "content": "x"}], "stream": 1})", "stream"},
      {R"({"model": "m", "messages": [{"role": "user", "content": "x"}], "stream_options": 3})",
       "stream_options"},
      {R"({"model": "m", "messages": [{"role": "tool", "content": "x"}]})", "messages[0].role"},
      {R"({"model": "m", "messages": [{"role": "user", "content": "x"}], "logprobs": true})", "logprobs"},
      {R"({"model": "m", "messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function"}]})",
       "tools"},
      {R"({"model": "m", "messages": [{"role": "user", "content": "x"}], "response_format": {"type": "json_object"}})",
       "response_format"},
  };
  for (const auto& c : cases) {
    auto r = parse_chat_request(c.body);
    ASSERT_FALSE(r.ok()) << c.body;
    EXPECT_EQ(r.error.status, 400);
    EXPECT_EQ(r.error.param, c.param) << c.body;
    EXPECT_FALSE(r.error.message.empty());
  }
}

TEST(ServeProtocol, AudioFormFields) {
  std::vector<FormPart> parts = {{"model", "", "", "w"},
                                 {"file", "a.wav", "audio/wav", "RIFF"},
                                 {"response_format", "", "", "srt"},
                                 {"timestamp_granularities[]", "", "", "word"},
                                 {"temperature", "", "", "0.4"},
                                 {"language", "", "", "de"}};
  auto r = parse_audio_request(parts, AudioTask::kTranscribe);
  ASSERT_TRUE(r.ok()) << r.error.message;
  EXPECT_EQ(r.value->filename, "a.wav");
  EXPECT_EQ(r.value->file.size(), 4u);
  EXPECT_TRUE(r.value->word_timestamps);
  EXPECT_EQ(r.value->temperature, 0.4);
  EXPECT_EQ(r.value->language, "de");
  auto translated = parse_audio_request(parts, AudioTask::kTranslate);
  EXPECT_FALSE(translated.ok());  // translations take no language
  EXPECT_EQ(translated.error.param, "language");
}

TEST(ServeProtocol, ContentTypeAndBearer) {
  auto b = multipart_boundary("multipart/form-data; charset=utf-8; boundary=\"--x y\"");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(*b.value, "--x y");
  EXPECT_FALSE(multipart_boundary("application/json").ok());
  EXPECT_FALSE(multipart_boundary("multipart/form-data").ok());
  EXPECT_TRUE(bearer_matches("Bearer k3y", "k3y"));
  EXPECT_FALSE(bearer_matches("Bearer k3", "k3y"));
  EXPECT_FALSE(bearer_matches("Bearer k3yy", "k3y"));
  EXPECT_FALSE(bearer_matches("k3y", "k3y"));
}

TEST(ServeProtocol, ErrorObjectShape) {
  ApiError e;
  e.status = 404;
  e.message = "no such model";
  e.param = "model";
  e.code = "model_not_found";
  const json j = json::parse(error_body(e));
  EXPECT_EQ(
      j,
      json::parse(R"({"error": {"message": "no such model", "type": "invalid_request_error", "param": "model",
                                         "code": "model_not_found"}})"));
  const json k = json::parse(error_body(bad_request("bad")));
  EXPECT_TRUE(k["error"]["param"].is_null() && k["error"]["code"].is_null());
}

TEST(ServeProtocol, ChatShapes) {
  const CompletionId id{"chatcmpl-1", 5, "m"};
  const json whole = json::parse(chat_completion_body(id, "hi", "stop", Usage{3, 2}));
  EXPECT_EQ(whole["object"], "chat.completion");
  EXPECT_EQ(whole["choices"][0]["message"]["content"], "hi");
  EXPECT_EQ(whole["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(whole["usage"]["total_tokens"], 5);
  const json chunk = json::parse(chat_chunk_body(id, std::string("x"), false, std::nullopt));
  EXPECT_EQ(chunk["object"], "chat.completion.chunk");
  EXPECT_EQ(chunk["choices"][0]["delta"], json::parse(R"({"content": "x"})"));
  EXPECT_TRUE(chunk["choices"][0]["finish_reason"].is_null());
  const json usage = json::parse(usage_chunk_body(id, true, Usage{3, 2}));
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(finish_reason("context"), "length");
  EXPECT_EQ(finish_reason("eos"), "stop");
}

TEST(ServeProtocol, TranscriptionFormats) {
  transcript::Transcript t;
  transcript::Segment s;
  s.start = 0;
  s.end = 1.5;
  s.text = " Hello there.";
  s.words = {{0, 0.5, " Hello", 0.9}, {0.5, 1.5, " there.", 0.8}};
  t.segments = {s};
  t.stats.audio_s = 2;
  AudioRequest req;
  req.response_format = "srt";
  EXPECT_EQ(transcription_body(req, t).value->body, "1\n00:00:00,000 --> 00:00:01,500\nHello there.\n\n");
  req.response_format = "text";
  EXPECT_EQ(transcription_body(req, t).value->body, "Hello there.\n");
  req.response_format = "verbose_json";
  req.word_timestamps = true;
  const json v = json::parse(transcription_body(req, t).value->body);
  EXPECT_EQ(v["duration"], 2.0);
  EXPECT_EQ(v["words"][1],
            json::parse(R"({"word": " there.", "start": 0.5, "end": 1.5, "probability": 0.8})"));
}

// Prometheus histograms: cumulative buckets ending in +Inf equal to _count.
TEST(ServeProtocol, MetricsText) {
  Metrics m;
  m.request_done("/v1/models", 200, 0.003);
  m.request_done("/v1/models", 200, 0.2);
  m.request_done("/v1/models", 404, 0.001);
  m.tokens("m", 10, 4);
  const std::string text = m.render();
  EXPECT_NE(text.find("vrun_requests_total{endpoint=\"/v1/models\",status=\"200\"} 2\n"), std::string::npos);
  EXPECT_NE(text.find("vrun_requests_total{endpoint=\"/v1/models\",status=\"404\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("vrun_request_duration_seconds_bucket{endpoint=\"/v1/models\",le=\"0.005\"} 2\n"),
            std::string::npos);
  EXPECT_NE(text.find("vrun_request_duration_seconds_bucket{endpoint=\"/v1/models\",le=\"+Inf\"} 3\n"),
            std::string::npos);
  EXPECT_NE(text.find("vrun_request_duration_seconds_count{endpoint=\"/v1/models\"} 3\n"), std::string::npos);
  EXPECT_NE(text.find("vrun_completion_tokens_total{model=\"m\"} 4\n"), std::string::npos);
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);)
    EXPECT_TRUE(line.rfind("# HELP ", 0) == 0 || line.rfind("# TYPE ", 0) == 0 || line.rfind("vrun_", 0) == 0)
        << line;
}

}  // namespace
}  // namespace vrun::serve
