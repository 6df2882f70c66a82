// The control-plane messages survive their byte encoding field for field: every rank plans from
// the decoded copy, so a field the codec drops would silently change what followers run.
#include "runtime/plan.h"

#include <gtest/gtest.h>

namespace mlaserve::runtime {
namespace {

PlannedSequence every_field_set() {
  PlannedSequence s;
  s.id = 42;
  s.n_cached = 17;
  s.new_tokens = {5, 6, 7};
  s.kv_slots = {0, 1, 2, 3};
  s.all_logits = true;
  s.return_logits = true;
  s.sample = false;
  s.sampling = {.temperature = 0.7f, .top_k = 5, .top_p = 0.9f, .min_p = 0.1f, .seed = 9};
  s.top_logprobs = 3;
  s.mtp_tokens = {8, 9};
  s.spec_steps = 2;
  s.spec_verify = true;
  s.allowed_tokens = {0x8000000000000001ull, 0, 0x00ff00ff00ff00ffull};
  return s;
}

TEST(StepPlan, RoundTripsEveryField) {
  StepPlan plan;
  plan.groups.resize(2);
  plan.groups[1].seqs = {every_field_set(), PlannedSequence{}};
  plan.released = {3, 4};
  const StepPlan decoded = StepPlan::decode(plan.encode());
  ASSERT_EQ(decoded.groups.size(), 2u);
  EXPECT_TRUE(decoded.groups[0].seqs.empty());
  ASSERT_EQ(decoded.groups[1].seqs.size(), 2u);
  const PlannedSequence& s = decoded.groups[1].seqs[0];
  const PlannedSequence want = every_field_set();
  EXPECT_EQ(s.id, want.id);
  EXPECT_EQ(s.n_cached, want.n_cached);
  EXPECT_EQ(s.new_tokens, want.new_tokens);
  EXPECT_EQ(s.kv_slots, want.kv_slots);
  EXPECT_EQ(s.all_logits, want.all_logits);
  EXPECT_EQ(s.return_logits, want.return_logits);
  EXPECT_EQ(s.sample, want.sample);
  EXPECT_EQ(s.sampling.temperature, want.sampling.temperature);
  EXPECT_EQ(s.sampling.top_k, want.sampling.top_k);
  EXPECT_EQ(s.sampling.top_p, want.sampling.top_p);
  EXPECT_EQ(s.sampling.min_p, want.sampling.min_p);
  EXPECT_EQ(s.sampling.seed, want.sampling.seed);
  EXPECT_EQ(s.top_logprobs, want.top_logprobs);
  EXPECT_EQ(s.mtp_tokens, want.mtp_tokens);
  EXPECT_EQ(s.spec_steps, want.spec_steps);
  EXPECT_EQ(s.spec_verify, want.spec_verify);
  EXPECT_EQ(s.allowed_tokens, want.allowed_tokens);
  EXPECT_TRUE(decoded.groups[1].seqs[1].allowed_tokens.empty());
  EXPECT_EQ(decoded.released, plan.released);
}

TEST(StepPlan, TruncatedBytesAreAnError) {
  StepPlan plan;
  plan.groups.resize(1);
  plan.groups[0].seqs = {every_field_set()};
  std::vector<uint8_t> bytes = plan.encode();
  bytes.resize(bytes.size() - 9);
  EXPECT_ANY_THROW(StepPlan::decode(bytes));
}

// A speculative step's result carries a logprob per token and its alternatives token after
// token; every field crosses the gather unchanged.
TEST(SequenceResults, EveryFieldSurvivesEncoding) {
  SequenceResult spec;
  spec.id = 7;
  spec.tokens = {11, 12, 13};
  spec.logprobs = {-0.5f, -1.25f, -2.0f};
  spec.top = {{11, -0.5f}, {4, -1.0f}, {12, -1.25f}, {5, -1.5f}, {13, -2.0f}, {6, -2.5f}};
  spec.drafts = {14, 15};
  spec.logits = {0.25f, 0.5f};
  spec.mtp_logits = {0.75f};
  SequenceResult plain;
  plain.id = 8;
  plain.token = 3;
  plain.logprobs = {-0.125f};
  const std::vector<SequenceResult> decoded = decode_results(encode_results({spec, plain}));
  ASSERT_EQ(decoded.size(), 2u);
  EXPECT_EQ(decoded[0].id, 7u);
  EXPECT_EQ(decoded[0].token, -1);
  EXPECT_EQ(decoded[0].tokens, spec.tokens);
  EXPECT_EQ(decoded[0].logprobs, spec.logprobs);
  ASSERT_EQ(decoded[0].top.size(), spec.top.size());
  for (size_t i = 0; i < spec.top.size(); ++i) {
    EXPECT_EQ(decoded[0].top[i].id, spec.top[i].id);
    EXPECT_EQ(decoded[0].top[i].logprob, spec.top[i].logprob);
  }
  EXPECT_EQ(decoded[0].drafts, spec.drafts);
  EXPECT_EQ(decoded[0].logits, spec.logits);
  EXPECT_EQ(decoded[0].mtp_logits, spec.mtp_logits);
  EXPECT_EQ(decoded[1].token, 3);
  EXPECT_EQ(decoded[1].logprobs, plain.logprobs);
  EXPECT_TRUE(decoded[1].top.empty());
}

}  // namespace
}  // namespace mlaserve::runtime
