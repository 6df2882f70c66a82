#include "sampling/sampling.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "core/error.h"
#include "kernels/ops.h"

namespace mlaserve::sampling {
namespace {

// The `!(in range)` form also rejects NaN, which fails every comparison.
void check_penalty(const char* field, float value) {
  if (!(value >= -2.0f && value <= 2.0f)) fail("{} must be in [-2, 2], got {}", field, value);
}

// argmax() that also refuses rows where every token is masked: nothing can be chosen there.
int32_t checked_argmax(std::span<const float> logits) {
  const int32_t best = argmax(logits);
  if (logits[best] == -std::numeric_limits<float>::infinity()) {
    fail("every one of the {} logits is -inf: no token can be chosen", logits.size());
  }
  return best;
}

// Unnormalised softmax(logits / T) in `out`, scaled so the most likely token weighs exactly 1,
// in token order. Tokens that underflow to 0 can never be drawn, so they are left out right
// away. With top_k, only the top_k heaviest (lower ids first among equal weights) are kept: the
// k-th weight is found over the weights themselves (kernels::kth_largest), so the vocabulary
// never goes through a selection as (id, weight) pairs (std::nth_element on those took ~1 ms of
// a top-k sample at 129k tokens).
void fill_weights(std::span<const float> logits, float temperature, int top_k,
                  std::vector<Candidate>& out) {
  const float max_logit = logits[checked_argmax(logits)];
  thread_local std::vector<float> weights;
  const auto n = std::ssize(logits);
  weights.resize(logits.size());
  kernels::temperature_weights(logits.data(), n, max_logit, temperature, weights.data());
  float bar = 0.0f;        // the k-th weight: heavier ones are kept...
  int64_t equal_kept = 0;  // ...and this many of those equal to it, first in token order
  if (top_k > 0 && top_k < n) {
    const kernels::KthLargest kth = kernels::kth_largest(weights.data(), n, top_k);
    bar = kth.value;
    equal_kept = top_k - kth.greater;
  }
  out.clear();
  for (int64_t i = 0; i < n; ++i) {
    const float w = weights[static_cast<size_t>(i)];
    if (w > bar || (w == bar && w > 0.0f && equal_kept-- > 0))
      out.push_back({static_cast<int32_t>(i), w});
  }
}

// In eight running sums: one waits ~4 cycles per add, 0.15 ms over a 129k vocabulary.
double total_weight(std::span<const Candidate> candidates) {
  constexpr size_t kSums = 8;
  double sums[kSums] = {};
  size_t i = 0;
  for (; i + kSums <= candidates.size(); i += kSums)
    for (size_t j = 0; j < kSums; ++j) sums[j] += candidates[i + j].prob;
  double total = 0.0;
  for (; i < candidates.size(); ++i) total += candidates[i].prob;
  for (double sum : sums) total += sum;
  return total;
}

// Keeps the smallest set of most likely candidates whose weight reaches `target` (at least one),
// in their order: the nucleus's bar found over their weights (kernels::nucleus_bar: partitions
// by mass, 16 weights at a time), then every candidate above it and the first of those equal to
// it, so the more likely come first and the lower id among equals, as for top-k. (A partition
// of the (id, weight) pairs took ~1 ms of a top-p sample at 129k tokens.)
void keep_nucleus(double target, std::vector<Candidate>& candidates) {
  thread_local std::vector<float> weights;
  weights.resize(candidates.size());
  for (size_t i = 0; i < candidates.size(); ++i) weights[i] = candidates[i].prob;
  const kernels::NucleusBar bar = kernels::nucleus_bar(weights.data(), std::ssize(weights), target);
  int64_t equal_left = bar.equal_taken;
  size_t kept = 0;
  for (const Candidate& c : candidates) {
    if (c.prob > bar.weight || (c.prob == bar.weight && equal_left-- > 0)) candidates[kept++] = c;
  }
  candidates.resize(kept);
}

uint64_t random_seed() {
  std::random_device device;
  return (static_cast<uint64_t>(device()) << 32) | device();
}

const SamplingParams& validated(const SamplingParams& params) {
  params.validate();
  return params;
}

}  // namespace

void SamplingParams::validate() const {
  if (!(std::isfinite(temperature) && temperature >= 0.0f)) {
    fail("temperature must be a finite number >= 0, got {}", temperature);
  }
  if (top_k < -1) fail("top_k must be -1 or 0 (all tokens) or a positive count, got {}", top_k);
  if (!(top_p > 0.0f && top_p <= 1.0f)) fail("top_p must be in (0, 1], got {}", top_p);
  if (!(min_p >= 0.0f && min_p <= 1.0f)) fail("min_p must be in [0, 1], got {}", min_p);
  check_penalty("presence_penalty", presence_penalty);
  check_penalty("frequency_penalty", frequency_penalty);
  if (!(std::isfinite(repetition_penalty) && repetition_penalty > 0.0f)) {
    fail("repetition_penalty must be a finite number > 0, got {}", repetition_penalty);
  }
  for (const auto& [token, bias] : logit_bias) {
    if (!(bias >= -100.0f && bias <= 100.0f))
      fail("logit_bias of token {} must be in [-100, 100], got {}", token, bias);
  }
}

void mask_disallowed(std::span<float> logits, std::span<const uint64_t> allowed) {
  for (size_t id = 0; id < logits.size(); ++id) {
    const size_t word = id / 64;
    if (word >= allowed.size() || !((allowed[word] >> (id % 64)) & 1u)) {
      logits[id] = -std::numeric_limits<float>::infinity();
    }
  }
}

void edit_logits(std::span<float> logits, const TokenCounts& counts, const SamplingParams& params) {
  for (const auto& [token, count] : counts) {
    if (token < 0 || static_cast<size_t>(token) >= logits.size()) {
      fail("penalised token {} is outside the vocabulary of {} logits", token, logits.size());
    }
    if (count <= 0) continue;
    float& logit = logits[token];
    // Dividing a negative logit would raise it; multiplying lowers it as intended.
    logit = logit > 0.0f ? logit / params.repetition_penalty : logit * params.repetition_penalty;
    logit -= params.frequency_penalty * static_cast<float>(count) + params.presence_penalty;
  }
  for (const auto& [token, bias] : params.logit_bias) {
    if (token < 0 || static_cast<size_t>(token) >= logits.size()) {
      fail("logit_bias token {} is outside the vocabulary of {} logits", token, logits.size());
    }
    logits[static_cast<size_t>(token)] += bias;
  }
}

void filter(std::span<const float> logits, const SamplingParams& params,
            std::vector<Candidate>& out) {
  if (params.greedy()) {
    out.assign(1, {checked_argmax(logits), 1.0f});
    return;
  }
  fill_weights(logits, params.temperature, params.top_k, out);
  // top-p is measured against the mass top-k left, as if renormalised after top-k.
  const double top_k_mass = total_weight(out);
  const size_t top_k_count = out.size();
  // The most likely token weighs exactly 1, so min_p * max prob is simply min_p in weights.
  // Removing the tail first leaves top-p less to search and cannot change its decision: min-p
  // only cuts tokens ranked below every token it keeps.
  if (params.min_p > 0.0f) {
    std::erase_if(out, [&](const Candidate& c) { return c.prob < params.min_p; });
  }
  if (params.top_p < 1.0f) keep_nucleus(params.top_p * top_k_mass, out);
  const double kept_mass = out.size() == top_k_count ? top_k_mass : total_weight(out);
  for (Candidate& c : out) c.prob = static_cast<float>(c.prob / kept_mass);
}

Sampler::Sampler(const SamplingParams& params)
    : params_(validated(params)), rng_(params.seed ? *params.seed : random_seed()) {}

int32_t Sampler::sample(std::span<float> logits) {
  edit_logits(logits, counts_, params_);
  int32_t token;
  if (params_.greedy()) {
    token = checked_argmax(logits);
  } else {
    filter(logits, params_, candidates_);
    token = draw(candidates_);
  }
  record(token);
  return token;
}

void Sampler::record(int32_t token) {
  if (token < 0) fail("cannot record negative token id {}", token);
  ++counts_[token];
}

int32_t Sampler::draw(std::span<const Candidate> candidates) {
  const double u = uniform01();
  double mass = 0.0;
  for (const Candidate& c : candidates) {
    mass += c.prob;
    if (u < mass) return c.id;
  }
  // Rounding can leave the summed probabilities a hair below 1.
  return candidates.back().id;
}

namespace {

// The token at cumulative mass u of candidates whose probabilities sum to `total`.
int32_t pick(std::span<const Candidate> candidates, double u, double total, int32_t skip) {
  const double target = u * total;
  double mass = 0.0;
  int32_t last = -1;
  for (const Candidate& c : candidates) {
    if (c.id == skip) continue;
    mass += c.prob;
    last = c.id;
    if (target < mass) return c.id;
  }
  return last;  // rounding can leave the sum a hair below the total
}

}  // namespace

int32_t draw_with(std::span<const float> logits, const SamplingParams& params, double u,
                  std::vector<Candidate>& scratch) {
  if (params.greedy()) return checked_argmax(logits);
  filter(logits, params, scratch);
  return pick(scratch, u, 1.0, -1);
}

SpeculativeChoice verify_draft(std::span<const float> logits, const SamplingParams& params,
                               int32_t draft, double accept_u, double draw_u,
                               std::vector<Candidate>& scratch) {
  if (params.greedy()) {
    const int32_t best = checked_argmax(logits);
    return {best, best == draft};
  }
  filter(logits, params, scratch);
  double p_draft = 0.0;
  for (const Candidate& c : scratch)
    if (c.id == draft) p_draft = c.prob;
  if (accept_u < p_draft) return {draft, true};
  return {pick(scratch, draw_u, 1.0 - p_draft, draft), false};
}

double counter_uniform(uint64_t seed, int64_t position, uint64_t stream) {
  uint64_t z = seed ^ (static_cast<uint64_t>(position) * 0x9E3779B97F4A7C15ull) ^
               (stream * 0xD1B54A32D192ED03ull);
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * 0x1.0p-53;
}

LogprobResult logprobs(std::span<const float> raw_logits, int32_t chosen, int top_n) {
  if (chosen < 0 || static_cast<size_t>(chosen) >= raw_logits.size()) {
    fail("chosen token {} is outside the vocabulary of {} logits", chosen, raw_logits.size());
  }
  if (top_n < 0) fail("number of top logprobs must be >= 0, got {}", top_n);
  const float max_logit = raw_logits[checked_argmax(raw_logits)];
  double sum = 0.0;
  for (float logit : raw_logits) sum += std::exp(logit - max_logit);
  const double log_normaliser = max_logit + std::log(sum);
  const auto logprob_of = [&](int32_t id) {
    return TokenLogprob{id, static_cast<float>(raw_logits[id] - log_normaliser)};
  };

  LogprobResult result{logprob_of(chosen), {}};
  const size_t n = std::min(static_cast<size_t>(top_n), raw_logits.size());
  if (n == 0) return result;
  std::vector<int32_t> ids(raw_logits.size());
  std::iota(ids.begin(), ids.end(), 0);
  std::partial_sort(
      ids.begin(), ids.begin() + static_cast<ptrdiff_t>(n), ids.end(), [&](int32_t a, int32_t b) {
        return raw_logits[a] > raw_logits[b] || (raw_logits[a] == raw_logits[b] && a < b);
      });
  result.top.reserve(n);
  for (size_t i = 0; i < n; ++i) result.top.push_back(logprob_of(ids[i]));
  return result;
}

int32_t argmax(std::span<const float> logits) {
  if (logits.empty()) fail("cannot choose a token from an empty row of logits");
  const int64_t best = kernels::first_argmax(logits.data(), std::ssize(logits));
  // A NaN would otherwise lose every comparison and silently never be reported.
  if (std::isnan(logits[static_cast<size_t>(best)])) fail("logit of token {} is NaN", best);
  return static_cast<int32_t>(best);
}

}  // namespace mlaserve::sampling
