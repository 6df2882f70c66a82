// SSE framing and each backend's chunk format: what text and how many tokens a chunk carries.
#include "bench_serving/backend.h"

#include <gtest/gtest.h>

#include "bench_serving/sse.h"
#include "core/error.h"

namespace mlaserve::bench_serving {
namespace {

using nlohmann::json;

TEST(Sse, PayloadsSurviveArbitrarySplits) {
  const std::string stream =
      "data: {\"a\":1}\n\n: a comment\nevent: x\r\ndata:{\"b\":2}\r\n\r\ndata: [DONE]\n\n";
  for (size_t cut = 0; cut <= stream.size(); ++cut) {
    SseParser parser;
    std::vector<std::string> payloads = parser.feed(std::string_view(stream).substr(0, cut));
    for (std::string& p : parser.feed(std::string_view(stream).substr(cut))) {
      payloads.push_back(std::move(p));
    }
    EXPECT_EQ(payloads, (std::vector<std::string>{"{\"a\":1}", "{\"b\":2}", "[DONE]"}))
        << "cut at " << cut;
    EXPECT_TRUE(parser.finish().empty());
  }
}

TEST(Sse, ALastLineWithoutNewlineComesOutAtFinish) {
  SseParser parser;
  EXPECT_TRUE(parser.feed("data: [DONE]").empty());
  EXPECT_EQ(parser.finish(), std::vector<std::string>{"[DONE]"});
}

TEST(Backend, NativeChunksCarryCumulativeTextAndCounts) {
  ChunkParser parser(Backend::Sglang);
  ChunkDelta d = parser.parse(json::parse(R"({"text":"Hel","meta_info":{"completion_tokens":1}})"));
  EXPECT_EQ(d.text, "Hel");
  EXPECT_EQ(d.new_tokens, 1);
  d = parser.parse(json::parse(R"({"text":"Hello wor","meta_info":{"completion_tokens":3}})"));
  EXPECT_EQ(d.text, "lo wor");
  EXPECT_EQ(d.new_tokens, 2);
  EXPECT_EQ(d.completion_tokens, 3);
  // The final chunk often repeats the text with finish_reason: no new tokens.
  d = parser.parse(json::parse(R"({"text":"Hello wor","meta_info":{"completion_tokens":3}})"));
  EXPECT_EQ(d.text, "");
  EXPECT_EQ(d.new_tokens, 0);
}

TEST(Backend, NativeChunksCarryTheSpeculativeVerifySteps) {
  ChunkParser parser(Backend::Mlaserve);
  const ChunkDelta d = parser.parse(nlohmann::json::parse(
      R"({"text": "ab", "meta_info": {"completion_tokens": 5, "spec_verify_ct": 3}})"));
  ASSERT_TRUE(d.spec_verify_ct.has_value());
  EXPECT_EQ(*d.spec_verify_ct, 3);
  EXPECT_FALSE(parser.parse(nlohmann::json::parse(R"({"text": "abc"})")).spec_verify_ct);
}

TEST(Backend, NativeChunkWithATokenButNoTextYetStillCountsIt) {
  // A token that ends inside a UTF-8 character adds no text until the next one.
  ChunkParser parser(Backend::Mlaserve);
  const ChunkDelta d =
      parser.parse(json::parse(R"({"text":"","meta_info":{"completion_tokens":1}})"));
  EXPECT_EQ(d.new_tokens, 1);
}

TEST(Backend, CompletionChunksCountOneTokenEachAndTheUsageChunkGivesTheTotal) {
  ChunkParser parser(Backend::OpenAi);
  ChunkDelta d =
      parser.parse(json::parse(R"({"choices":[{"index":0,"text":" the"}],"usage":null})"));
  EXPECT_EQ(d.text, " the");
  EXPECT_EQ(d.new_tokens, 1);
  EXPECT_FALSE(d.completion_tokens.has_value());
  d = parser.parse(
      json::parse(R"({"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":5}})"));
  EXPECT_EQ(d.new_tokens, 0);
  EXPECT_EQ(d.completion_tokens, 5);
}

TEST(Backend, CompletionChunksWithRunningUsageCountItsRise) {
  ChunkParser parser(Backend::OpenAi);
  ChunkDelta d =
      parser.parse(json::parse(R"({"choices":[{"text":"ab"}],"usage":{"completion_tokens":2}})"));
  EXPECT_EQ(d.new_tokens, 2);
  d = parser.parse(json::parse(R"({"choices":[{"text":"c"}],"usage":{"completion_tokens":5}})"));
  EXPECT_EQ(d.new_tokens, 3);
}

// Chunks as llama.cpp's llama-server (commit 34af94cd) streamed them, shortened: no "usage" key
// until the closing chunk, which in completions also has an empty text and a finish_reason.
TEST(Backend, LlamaServerCompletionChunks) {
  ChunkParser parser(Backend::OpenAi);
  ChunkDelta d = parser.parse(json::parse(
      R"({"choices":[{"text":"<pad_20373>","index":0,"logprobs":null,"finish_reason":null}],
          "created":1796272329,"model":"/tmp/bench-500m-bf16.gguf","object":"text_completion"})"));
  EXPECT_EQ(d.text, "<pad_20373>");
  EXPECT_EQ(d.new_tokens, 1);
  d = parser.parse(json::parse(
      R"({"choices":[{"text":" impress","index":0,"logprobs":null,"finish_reason":null}]})"));
  EXPECT_EQ(d.new_tokens, 1);
  d = parser.parse(json::parse(
      R"({"choices":[{"text":"","index":0,"logprobs":null,"finish_reason":"length"}],
          "usage":{"completion_tokens":2,"prompt_tokens":7,"total_tokens":9,
                   "prompt_tokens_details":{"cached_tokens":0}},
          "timings":{"prompt_n":7,"predicted_n":2}})"));
  EXPECT_EQ(d.new_tokens, 0);
  EXPECT_EQ(d.completion_tokens, 2);
}

TEST(Backend, LlamaServerChatChunks) {
  ChunkParser parser(Backend::OpenAiChat);
  ChunkDelta d = parser.parse(json::parse(
      R"({"choices":[{"finish_reason":null,"index":0,"delta":{"role":"assistant","content":null}}],
          "object":"chat.completion.chunk"})"));
  EXPECT_EQ(d.new_tokens, 0);
  d = parser.parse(json::parse(
      R"({"choices":[{"finish_reason":null,"index":0,"delta":{"content":"<pad_4933>"}}]})"));
  EXPECT_EQ(d.text, "<pad_4933>");
  EXPECT_EQ(d.new_tokens, 1);
  d = parser.parse(json::parse(R"({"choices":[{"finish_reason":"length","index":0,"delta":{}}]})"));
  EXPECT_EQ(d.new_tokens, 0);
  d = parser.parse(
      json::parse(R"({"choices":[],"usage":{"completion_tokens":4,"prompt_tokens":9}})"));
  EXPECT_EQ(d.new_tokens, 0);
  EXPECT_EQ(d.completion_tokens, 4);
}

// llama-server streams no text for output that is not valid UTF-8 (three lone 0xC3 bytes here),
// yet its closing chunk reports the tokens: they count as arriving with it.
TEST(Backend, AUsageChunkAfterNoTextCarriesTheTokens) {
  ChunkParser parser(Backend::OpenAi);
  const ChunkDelta d = parser.parse(json::parse(
      R"({"choices":[{"text":"","index":0,"logprobs":null,"finish_reason":"length"}],
          "usage":{"completion_tokens":3,"prompt_tokens":7,"total_tokens":10}})"));
  EXPECT_EQ(d.new_tokens, 3);
  EXPECT_EQ(d.completion_tokens, 3);
  // A running usage of 0 before any text (as continuous usage stats send) carries nothing.
  ChunkParser chat(Backend::OpenAiChat);
  EXPECT_EQ(chat.parse(json::parse(R"({"choices":[{"delta":{"role":"assistant"}}],
                                       "usage":{"completion_tokens":0}})"))
                .new_tokens,
            0);
}

TEST(Backend, ChatChunksCarryDeltaContent) {
  ChunkParser parser(Backend::OpenAiChat);
  ChunkDelta d =
      parser.parse(json::parse(R"({"choices":[{"delta":{"role":"assistant","content":""}}]})"));
  EXPECT_EQ(d.new_tokens, 0);
  d = parser.parse(json::parse(R"({"choices":[{"delta":{"content":"Hi"},"finish_reason":null}]})"));
  EXPECT_EQ(d.text, "Hi");
  EXPECT_EQ(d.new_tokens, 1);
  d = parser.parse(json::parse(R"({"choices":[{"delta":{"reasoning_content":"Hm"}}]})"));
  EXPECT_EQ(d.text, "Hm");
}

TEST(Backend, ErrorChunksAreReported) {
  ChunkParser parser(Backend::OpenAi);
  EXPECT_EQ(parser.parse(json::parse(R"({"error":{"message":"boom","code":500}})")).error, "boom");
  EXPECT_EQ(parser.parse(json::parse(R"({"error":"bad"})")).error, "bad");
  EXPECT_FALSE(parser.parse(json::parse("[1]")).error.empty());
}

TEST(Backend, WholeResponses) {
  ChunkDelta d = parse_response(
      Backend::Sglang, json::parse(R"({"text":"abc","meta_info":{"completion_tokens":3}})"));
  EXPECT_EQ(d.text, "abc");
  EXPECT_EQ(d.completion_tokens, 3);
  d = parse_response(Backend::OpenAiChat,
                     json::parse(R"({"choices":[{"message":{"role":"assistant","content":"yo"}}],
                                     "usage":{"completion_tokens":2}})"));
  EXPECT_EQ(d.text, "yo");
  EXPECT_EQ(d.completion_tokens, 2);
}

// The native API's finish reason, output ids and verify steps, in chunks and whole responses,
// and OpenAI's finish_reason.
TEST(Backend, FinishReasonsAndOutputIds) {
  ChunkParser parser(Backend::Mlaserve);
  ChunkDelta d = parser.parse(json::parse(
      R"({"text":"a","output_ids":[5],"meta_info":{"completion_tokens":1,"finish_reason":null}})"));
  EXPECT_EQ(d.finish_reason, "");
  EXPECT_EQ(d.output_ids, std::vector<int32_t>{5});
  d = parser.parse(json::parse(R"({"text":"ab","output_ids":[5,9],"meta_info":
      {"completion_tokens":2,"finish_reason":{"type":"abort","message":"aborted"}}})"));
  EXPECT_EQ(d.finish_reason, "abort");
  EXPECT_EQ(d.output_ids, (std::vector<int32_t>{5, 9}));
  EXPECT_FALSE(parser.parse(json::parse(R"({"text":"ab","output_ids":[5,"x"]})")).output_ids);
  d = parse_response(Backend::Sglang, json::parse(R"({"text":"abc","output_ids":[1,2,3],
      "meta_info":{"completion_tokens":3,"spec_verify_ct":2,"finish_reason":{"type":"length"}}})"));
  EXPECT_EQ(d.finish_reason, "length");
  EXPECT_EQ(d.output_ids, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(d.spec_verify_ct, 2);
  ChunkParser openai(Backend::OpenAi);
  EXPECT_EQ(openai.parse(json::parse(R"({"choices":[{"text":"x","finish_reason":"length"}]})"))
                .finish_reason,
            "length");
  EXPECT_EQ(
      parse_response(Backend::OpenAiChat, json::parse(R"({"choices":[{"message":{"content":"x"},
                                                       "finish_reason":"stop"}]})"))
          .finish_reason,
      "stop");
}

TEST(Backend, RequestBodies) {
  const RequestSpec spec{"hi", 7, true, true, "m", nullptr, ""};
  const json native = request_body(Backend::Mlaserve, spec);
  EXPECT_EQ(native["text"], "hi");
  EXPECT_EQ(native["sampling_params"]["max_new_tokens"], 7);
  EXPECT_EQ(native["sampling_params"]["temperature"], 0.0);
  EXPECT_EQ(native["sampling_params"]["ignore_eos"], true);
  EXPECT_EQ(native["stream"], true);
  EXPECT_FALSE(native.contains("rid"));  // the server names it
  RequestSpec named = spec;
  named.rid = "r-1";
  EXPECT_EQ(request_body(Backend::Sglang, named)["rid"], "r-1");
  const json completion = request_body(Backend::OpenAi, spec);
  EXPECT_EQ(completion["prompt"], "hi");
  EXPECT_EQ(completion["model"], "m");
  EXPECT_EQ(completion["max_tokens"], 7);
  EXPECT_EQ(completion["stream_options"]["include_usage"], true);
  const json chat = request_body(Backend::OpenAiChat, {"hi", 7, false, false, "m", nullptr, ""});
  EXPECT_EQ(chat["messages"][0]["content"], "hi");
  EXPECT_EQ(chat["ignore_eos"], false);
  EXPECT_FALSE(chat.contains("stream_options"));
}

TEST(Backend, ExtraBodyIsMergedIntoTheRequest) {
  const json format = {{"type", "json_object"}};
  const json chat = request_body(Backend::OpenAiChat,
                                 {"hi", 7, true, true, "m", {{"response_format", format}}, ""});
  EXPECT_EQ(chat["response_format"], format);
  EXPECT_EQ(chat["max_tokens"], 7);
  // Nested objects merge: a native request keeps its own sampling params beside the extra one.
  const json native = request_body(
      Backend::Mlaserve, {"hi", 7, true, true, "m", {{"sampling_params", {{"regex", "a+"}}}}, ""});
  EXPECT_EQ(native["sampling_params"]["regex"], "a+");
  EXPECT_EQ(native["sampling_params"]["max_new_tokens"], 7);
}

TEST(Backend, NamesAndPaths) {
  EXPECT_EQ(parse_backend("openai-chat"), Backend::OpenAiChat);
  EXPECT_EQ(api_path(Backend::Sglang), "/generate");
  EXPECT_EQ(api_path(Backend::OpenAi), "/v1/completions");
  EXPECT_EQ(backend_name(Backend::Mlaserve), "mlaserve");
  EXPECT_THROW(parse_backend("vllm"), Error);
}

}  // namespace
}  // namespace mlaserve::bench_serving
