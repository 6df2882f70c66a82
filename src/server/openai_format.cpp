#include "server/openai_format.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>
#include <random>

#include "server/token_text.h"

namespace mlaserve::server {

std::string new_request_id(std::string_view prefix) {
  static std::mutex mutex;
  static std::mt19937_64 random{std::random_device{}()};
  std::lock_guard lock(mutex);
  return fmt::format("{}{:016x}{:016x}", prefix, random(), random());
}

int64_t unix_time_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

nlohmann::json usage_json(const GenerationBatch& batch) {
  std::map<size_t, int64_t> prompt_tokens;  // per prompt index
  std::map<size_t, int64_t> cached_tokens;
  int64_t completion_tokens = 0;
  for (const ChoiceState& choice : batch.choices()) {
    prompt_tokens[choice.prompt_index()] = choice.prompt_tokens();
    int64_t& cached = cached_tokens[choice.prompt_index()];
    cached = std::max(cached, choice.cached_tokens());
    completion_tokens += choice.completion_tokens();
  }
  int64_t prompt_total = 0;
  int64_t cached_total = 0;
  for (const auto& [index, tokens] : prompt_tokens) prompt_total += tokens;
  for (const auto& [index, tokens] : cached_tokens) cached_total += tokens;
  return {{"prompt_tokens", prompt_total},
          {"completion_tokens", completion_tokens},
          {"total_tokens", prompt_total + completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", cached_total}}}};
}

nlohmann::json finish_reason_json(const Finish* finish) {
  if (!finish) return nullptr;
  return finish_kind_name(finish->kind);
}

nlohmann::json completion_logprobs_json(const tokenizer::Tokenizer& tokenizer,
                                        std::span<const GeneratedToken> tokens,
                                        bool with_alternatives) {
  nlohmann::json strings = nlohmann::json::array();
  nlohmann::json logprobs = nlohmann::json::array();
  nlohmann::json alternatives = nlohmann::json::array();
  nlohmann::json offsets = nlohmann::json::array();
  for (const GeneratedToken& token : tokens) {
    strings.push_back(token_display_text(tokenizer, token.id));
    logprobs.push_back(token.logprob);
    offsets.push_back(token.text_offset);
    nlohmann::json top = nlohmann::json::object();
    for (const sampling::TokenLogprob& alternative : token.top) {
      top[token_display_text(tokenizer, alternative.id)] = alternative.logprob;
    }
    alternatives.push_back(std::move(top));
  }
  return {{"tokens", strings},
          {"token_logprobs", logprobs},
          {"top_logprobs", with_alternatives ? alternatives : nlohmann::json(nullptr)},
          {"text_offset", offsets}};
}

nlohmann::json chat_logprobs_json(const tokenizer::Tokenizer& tokenizer,
                                  std::span<const GeneratedToken> tokens) {
  nlohmann::json content = nlohmann::json::array();
  for (const GeneratedToken& token : tokens) {
    nlohmann::json top = nlohmann::json::array();
    for (const sampling::TokenLogprob& alternative : token.top) {
      top.push_back({{"token", token_display_text(tokenizer, alternative.id)},
                     {"logprob", alternative.logprob},
                     {"bytes", token_bytes(tokenizer, alternative.id)}});
    }
    content.push_back({{"token", token_display_text(tokenizer, token.id)},
                       {"logprob", token.logprob},
                       {"bytes", token_bytes(tokenizer, token.id)},
                       {"top_logprobs", std::move(top)}});
  }
  return {{"content", std::move(content)}};
}

}  // namespace mlaserve::server
