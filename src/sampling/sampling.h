// Turning one row of logits into the next token, with the sampling parameters of the OpenAI
// API. Semantics follow SGLang/vLLM: penalties on the raw logits, then temperature, top-k,
// top-p and min-p on the resulting distribution, then a draw from what is left.
//
// Every step that ranks tokens (top-k, top-p, argmax, top logprobs) puts the more likely
// token first and, among equally likely ones, the lower token id first.
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <span>
#include <unordered_map>
#include <vector>

namespace mlaserve::sampling {

struct SamplingParams {
  float temperature = 1.0f;                     // 0 => greedy
  int top_k = -1;                               // -1 or 0 => all tokens
  float top_p = 1.0f;                           // (0, 1]
  float min_p = 0.0f;                           // [0, 1]
  float presence_penalty = 0.0f;                // [-2, 2]
  float frequency_penalty = 0.0f;               // [-2, 2]
  float repetition_penalty = 1.0f;              // > 0; 1 => off
  std::optional<uint64_t> seed = std::nullopt;  // none => seeded from std::random_device
  // OpenAI's logit_bias: (token id, bias in [-100, 100]) pairs added to those tokens' logits
  // after the penalties (-100 all but bans a token, +100 all but forces it).
  std::vector<std::pair<int32_t, float>> logit_bias = {};

  // Throws mlaserve::Error naming the first out-of-range field and its value.
  void validate() const;
  // Temperature 0 or top_k 1 leave only the most likely token.
  bool greedy() const { return temperature == 0.0f || top_k == 1; }
  // Whether the logits are edited before sampling: by penalties, which read the counts of the
  // tokens generated so far, or by logit_bias.
  bool edits_logits() const {
    return presence_penalty != 0.0f || frequency_penalty != 0.0f || repetition_penalty != 1.0f ||
           !logit_bias.empty();
  }
};

// How often each token has been generated so far in one request (absent => 0).
using TokenCounts = std::unordered_map<int32_t, int32_t>;

// Applies repetition, then frequency and presence penalties to the logits of counted tokens:
// repetition divides a positive logit by the penalty and multiplies a negative one;
// frequency subtracts penalty * count; presence subtracts the penalty once. Then adds each
// logit_bias to its token's logit.
void edit_logits(std::span<float> logits, const TokenCounts& counts, const SamplingParams& params);

// Structured output: sets the logit of every token whose bit in `allowed` is clear (bit id % 64
// of word id / 64; ids past the mask count as clear) to -infinity, so no later step picks it.
void mask_disallowed(std::span<float> logits, std::span<const uint64_t> allowed);

// A token that survived filtering, with its probability.
struct Candidate {
  int32_t id;
  float prob;
};

// Fast path of the filtering: replaces `out` with the tokens that survive temperature, top-k,
// top-p and min-p, with probabilities summing to 1, in no particular order. Tokens whose
// probability underflows to 0 are left out. Reuses out's storage across calls.
void filter(std::span<const float> logits, const SamplingParams& params,
            std::vector<Candidate>& out);

// One per request: owns the random generator and the counts of generated tokens.
class Sampler {
 public:
  // Validates params (throws mlaserve::Error).
  explicit Sampler(const SamplingParams& params);

  // Applies penalties to `logits` in place, filters, draws a token and records it.
  int32_t sample(std::span<float> logits);
  // Counts a token chosen elsewhere (e.g. forced by a grammar) for future penalties.
  void record(int32_t token);

 private:
  // Uniform in [0, 1) from the top 53 bits: unlike std::uniform_real_distribution, the
  // result is the same on every standard library, so a seed reproduces everywhere.
  double uniform01() { return static_cast<double>(rng_() >> 11) * 0x1.0p-53; }
  int32_t draw(std::span<const Candidate> candidates);

  SamplingParams params_;
  std::mt19937_64 rng_;
  TokenCounts counts_;
  std::vector<Candidate> candidates_;  // scratch reused across calls
};

// Speculative sampling against a draft that proposes one token with certainty (a greedy draft:
// q is one-hot). The target p = filter(logits, params) keeps the draft with probability p(draft)
// (min(1, p/q)); otherwise the token is drawn from p without the draft, renormalised (the
// normalised max(0, p - q)). The result is distributed exactly as p, whatever the draft (the
// standard argument of speculative sampling). `accept_u` and `draw_u` are uniforms in [0, 1).
// Returns the token; accepted tells whether it is the draft.
struct SpeculativeChoice {
  int32_t token;
  bool accepted;
};
SpeculativeChoice verify_draft(std::span<const float> logits, const SamplingParams& params,
                               int32_t draft, double accept_u, double draw_u,
                               std::vector<Candidate>& scratch);

// A draw from filter(logits, params) with the uniform u in [0, 1).
int32_t draw_with(std::span<const float> logits, const SamplingParams& params, double u,
                  std::vector<Candidate>& scratch);

// Uniforms that every rank computes alike: a hash of (seed, position, stream) mapped to [0, 1)
// (splitmix64), so ranks that hold the same logits make the same random choices without
// exchanging them.
double counter_uniform(uint64_t seed, int64_t position, uint64_t stream);

// Log-probabilities (log_softmax of the raw logits) for the logprobs fields of the API.
struct TokenLogprob {
  int32_t id;
  float logprob;
};
struct LogprobResult {
  TokenLogprob chosen;
  std::vector<TokenLogprob> top;  // min(top_n, vocab) most likely tokens, most likely first
};
LogprobResult logprobs(std::span<const float> raw_logits, int32_t chosen, int top_n);

// Index of the largest logit; ties go to the lowest id. Throws on empty input or NaN.
int32_t argmax(std::span<const float> logits);

}  // namespace mlaserve::sampling
