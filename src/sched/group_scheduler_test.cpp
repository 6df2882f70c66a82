#include "sched/group_scheduler.h"

#include <gtest/gtest.h>

#include "sched/load_balancer.h"

namespace mlaserve::sched {
namespace {

std::shared_ptr<ActiveRequest> request(uint64_t id, int prompt_len, int max_new,
                                       int32_t token = 7) {
  auto r = std::make_shared<ActiveRequest>();
  r->id = id;
  r->request.prompt.assign(static_cast<size_t>(prompt_len), token);
  r->request.max_new_tokens = max_new;
  return r;
}

std::shared_ptr<ActiveRequest> request_for(uint64_t id, std::vector<int32_t> prompt, int max_new) {
  auto r = request(id, 0, max_new);
  r->request.prompt = std::move(prompt);
  return r;
}

// Simulates the engine: every sequence that samples gets the next token 100, 101, ...
void apply_tokens(const runtime::GroupPlan& plan, GroupScheduler& s) {
  for (const auto& p : plan.seqs) {
    if (!p.sample) continue;
    for (const auto& r : s.running()) {
      if (r->id == p.id) r->generated.push_back(100 + static_cast<int32_t>(r->generated.size()));
    }
  }
}

runtime::GroupPlan step(GroupScheduler& s) {
  runtime::GroupPlan plan = s.plan_step();
  apply_tokens(plan, s);
  return plan;
}

// A prompt of 9 in chunks of 8 ends with a chunk of one token over a cached prefix, shaped like a
// decode: the scheduler counts it as prompt tokens, and the decode after it as a decode.
TEST(GroupScheduler, CountsAOneTokenLastChunkAsPromptTokens) {
  GroupScheduler s(1000, {.chunk_tokens = 8, .max_running = 4});
  s.enqueue(request(1, 9, 4));
  step(s);
  EXPECT_EQ(s.planned_decode_tokens(), 0);
  const runtime::GroupPlan last_chunk = step(s);
  ASSERT_EQ(last_chunk.seqs.size(), 1u);
  EXPECT_TRUE(last_chunk.seqs[0].is_decode());  // by its shape
  EXPECT_EQ(s.planned_decode_tokens(), 0);
  step(s);
  EXPECT_EQ(s.planned_decode_tokens(), 1);
}

TEST(GroupScheduler, ChunksLongPromptsAndContinuesThemFirst) {
  GroupScheduler s(1000, {.chunk_tokens = 8, .max_running = 4});
  s.enqueue(request(1, 20, 4));
  s.enqueue(request(2, 3, 4, 9));
  auto p1 = s.plan_step();
  ASSERT_EQ(p1.seqs.size(), 1u);  // request 1 takes the whole budget
  EXPECT_EQ(p1.seqs[0].new_tokens.size(), 8u);
  EXPECT_FALSE(p1.seqs[0].sample);
  auto p2 = s.plan_step();
  ASSERT_EQ(p2.seqs.size(), 1u);
  EXPECT_EQ(p2.seqs[0].id, 1u);
  EXPECT_EQ(p2.seqs[0].n_cached, 8);
  auto p3 = step(s);  // last 4 tokens of request 1, then request 2 fits in the rest
  ASSERT_EQ(p3.seqs.size(), 2u);
  EXPECT_EQ(p3.seqs[0].new_tokens.size(), 4u);
  EXPECT_TRUE(p3.seqs[0].sample);
  EXPECT_EQ(p3.seqs[1].id, 2u);
  EXPECT_EQ(p3.seqs[1].new_tokens.size(), 3u);
  EXPECT_EQ(p3.seqs[1].kv_slots.size(), 3u);
  auto p4 = s.plan_step();  // nothing waiting: both decode, each with a new slot
  ASSERT_EQ(p4.seqs.size(), 2u);
  EXPECT_EQ(p4.seqs[0].n_cached, 20);
  EXPECT_EQ(p4.seqs[0].new_tokens, std::vector<int32_t>{100});
  EXPECT_EQ(p4.seqs[0].kv_slots.size(), 21u);
  EXPECT_FALSE(p4.extend());
  EXPECT_EQ(s.kv_used(), 25);
}

TEST(GroupScheduler, AdmissionKeepsRoomForTheExpectedGeneration) {
  // 70% of each generation budget is reserved at first: 5 + 7 for the first request, and the
  // second would need 5 + 7 + 7 while 20 - 5 slots are left.
  GroupScheduler s(20, {.chunk_tokens = 100, .max_running = 8, .radix_cache = false});
  s.enqueue(request(1, 5, 10));
  s.enqueue(request(2, 5, 10));
  EXPECT_EQ(s.plan_step().seqs.size(), 1u);
  EXPECT_EQ(s.kv_used(), 5);  // generation slots are taken one decode step at a time
  EXPECT_EQ(s.waiting(), 1u);
  EXPECT_FALSE(s.fits_ever(*request(3, 15, 6)));
  EXPECT_TRUE(s.fits_ever(*request(3, 15, 5)));
}

TEST(GroupScheduler, AdmissionRespectsTheRunningLimitAndThePrefillBudget) {
  GroupScheduler s(
      1000, {.chunk_tokens = 100, .max_prefill_tokens = 8, .max_running = 2, .mixed_steps = false});
  s.enqueue(request(1, 20, 5, 1));  // over max_prefill_tokens, but the first of a step always runs
  s.enqueue(request(2, 5, 5, 2));
  s.enqueue(request(3, 5, 5, 3));
  s.enqueue(request(4, 5, 5, 4));
  auto p1 = s.plan_step();
  ASSERT_EQ(p1.seqs.size(), 1u);
  EXPECT_EQ(p1.seqs[0].new_tokens.size(), 20u);
  apply_tokens(p1, s);
  auto p2 = step(s);  // 5 fits in 8, a second 5 would not; and only 2 may run
  ASSERT_EQ(p2.seqs.size(), 1u);
  EXPECT_EQ(p2.seqs[0].id, 2u);
  EXPECT_EQ(s.plan_step().seqs.size(), 2u);  // the running limit: both decode, nothing admitted
  EXPECT_EQ(s.waiting(), 2u);
  EXPECT_TRUE(s.remove(1));
  EXPECT_EQ(s.plan_step().seqs.front().id, 3u);
}

// --enable-priority-scheduling: waiting requests are admitted highest priority first, arrival
// order among equals (max_running 1, so every request waits until the one before it ends). Without
// it, arrival order.
TEST(GroupScheduler, PriorityOrdersTheWaitingRequests) {
  for (bool priority : {true, false}) {
    SCOPED_TRACE(priority ? "priority" : "fcfs");
    GroupScheduler s(1000, {.chunk_tokens = 100,
                            .max_prefill_tokens = 100,
                            .max_running = 1,
                            .mixed_steps = false,
                            .priority = priority});
    const int32_t priorities[] = {0, 0, 5, -1, 5};
    for (uint64_t id = 1; id <= 5; ++id) {
      auto r = request(id, 4, 1, static_cast<int32_t>(id));
      r->request.priority = priorities[id - 1];
      s.enqueue(r);
    }
    std::vector<uint64_t> order;
    for (int i = 0; i < 5; ++i) {
      const runtime::GroupPlan plan = step(s);  // max_running 1: one request at a time
      ASSERT_EQ(plan.seqs.size(), 1u);
      order.push_back(plan.seqs[0].id);
      EXPECT_TRUE(s.remove(plan.seqs[0].id));
    }
    // All five wait when the first step plans: the order is by priority alone.
    EXPECT_EQ(order, priority ? (std::vector<uint64_t>{3, 5, 1, 2, 4})
                              : (std::vector<uint64_t>{1, 2, 3, 4, 5}));
  }
}

// A high-priority request that finds the group full takes the place of the lowest-priority
// running request in its first step; the retracted one resumes, with the tokens it had, once
// the high-priority one is done. Without priorities nothing is preempted.
TEST(GroupScheduler, HigherPriorityPreemptsALowerRunningRequest) {
  for (bool priority : {true, false}) {
    SCOPED_TRACE(priority ? "priority" : "fcfs");
    GroupScheduler s(1000, {.chunk_tokens = 100, .max_running = 2, .priority = priority});
    auto low = request(1, 4, 50, 1);
    auto middle = request(2, 4, 50, 2);
    middle->request.priority = 1;
    s.enqueue(low);
    s.enqueue(middle);
    for (int i = 0; i < 3; ++i) step(s);
    ASSERT_EQ(low->n_generated(), 3);
    auto high = request(3, 4, 50, 3);
    high->request.priority = 9;
    s.enqueue(high);
    const runtime::GroupPlan plan = step(s);
    std::vector<uint64_t> planned;
    for (const auto& p : plan.seqs) planned.push_back(p.id);
    if (!priority) {
      EXPECT_EQ(planned, (std::vector<uint64_t>{1, 2}));  // high waits for a free place
      EXPECT_EQ(s.preemptions(), 0);
      continue;
    }
    // Low made room; high prefills at once, in a step of its own (it outranks every running one).
    EXPECT_EQ(planned, (std::vector<uint64_t>{3}));
    EXPECT_EQ(s.preemptions(), 1);
    ASSERT_EQ(low->n_generated(), 3);         // kept
    const runtime::GroupPlan next = step(s);  // then everyone decodes again
    ASSERT_EQ(next.seqs.size(), 2u);
    EXPECT_TRUE(s.remove(3));
    const runtime::GroupPlan resumed = step(s);
    ASSERT_EQ(resumed.seqs.size(), 2u);
    EXPECT_EQ(resumed.seqs[1].id, 1u);
    // Its prompt and the 3 tokens it had generated: the prefill resumes its sequence.
    EXPECT_EQ(resumed.seqs[1].n_cached + static_cast<int64_t>(resumed.seqs[1].new_tokens.size()),
              7);
    EXPECT_EQ(resumed.seqs[1].new_tokens.back(), 102);
  }
}

TEST(GroupScheduler, WithoutMixedStepsPrefillHasPriorityOverDecode) {
  GroupScheduler s(100, {.chunk_tokens = 100, .max_running = 8, .mixed_steps = false});
  s.enqueue(request(1, 4, 5));
  step(s);
  s.enqueue(request(2, 4, 5, 9));
  auto q = s.plan_step();
  ASSERT_EQ(q.seqs.size(), 1u);  // request 1 does not decode while 2 prefills
  EXPECT_EQ(q.seqs[0].id, 2u);
}

TEST(GroupScheduler, MixedStepsDecodeBesideThePrefillOfANewPrompt) {
  GroupScheduler s(100, {.chunk_tokens = 100, .max_running = 8});
  s.enqueue(request(1, 4, 5));
  step(s);
  s.enqueue(request(2, 4, 5, 9));
  auto q = step(s);
  ASSERT_EQ(q.seqs.size(), 2u);  // request 1 decodes first, then request 2 prefills
  EXPECT_EQ(q.seqs[0].id, 1u);
  EXPECT_EQ(q.seqs[0].new_tokens, std::vector<int32_t>{100});
  EXPECT_EQ(q.seqs[1].id, 2u);
  EXPECT_EQ(q.seqs[1].new_tokens.size(), 4u);
  EXPECT_EQ(s.plan_step().seqs.size(), 2u);  // both decode
}

TEST(GroupScheduler, MixedStepsSplitALongPromptByTheStepsBudgetWhileOthersDecode) {
  GroupScheduler s(1000, {.chunk_tokens = 64, .max_running = 8});
  s.enqueue(request(1, 4, 50));
  step(s);
  s.enqueue(request(2, 100, 5, 9));
  int64_t prefilled = 0;
  for (int i = 0; i < 4; ++i) {
    auto plan = s.plan_step(/*prefill_budget=*/30);
    ASSERT_EQ(plan.seqs.size(), 2u);
    EXPECT_EQ(plan.seqs[0].id, 1u);  // the decode never waits for the prompt
    EXPECT_EQ(plan.seqs[1].id, 2u);
    EXPECT_EQ(plan.seqs[1].n_cached, prefilled);
    EXPECT_EQ(static_cast<int64_t>(plan.seqs[1].new_tokens.size()), i < 3 ? 30 : 10);
    EXPECT_EQ(plan.seqs[1].sample, i == 3);
    prefilled += static_cast<int64_t>(plan.seqs[1].new_tokens.size());
    apply_tokens(plan, s);
  }
  // The chunk size caps the budget: 64 of a third request's 100 tokens beside two decodes.
  s.enqueue(request(3, 100, 5, 3));
  auto plan = s.plan_step(/*prefill_budget=*/1000);
  ASSERT_EQ(plan.seqs.size(), 3u);
  EXPECT_EQ(plan.seqs[2].new_tokens.size(), 64u);
}

// Mixed steps under KV pressure: two requests admitted together on the 70% estimate outgrow 18
// slots; of two with as many generated tokens the one with the longer prompt is retracted, and
// both finish with every token they asked for.
TEST(GroupScheduler, MixedStepsRetractAndFinishEveryRequest) {
  GroupScheduler s(18, {.chunk_tokens = 100, .max_running = 8});
  s.enqueue(request_for(1, {1, 2, 3}, 10));
  s.enqueue(request_for(2, {4}, 10));
  const std::vector<int32_t> all_tokens = {100, 101, 102, 103, 104, 105, 106, 107, 108, 109};
  int finished = 0;
  for (int i = 0; i < 60 && !(s.running().empty() && s.waiting() == 0); ++i) {
    const int64_t retractions = s.retractions();
    step(s);
    if (retractions == 0 && s.retractions() > 0) {
      ASSERT_EQ(s.running().size(), 1u);
      EXPECT_EQ(s.running()[0]->id, 2u);  // request 1 has the longer prompt
    }
    for (const auto& r : std::vector(s.running())) {
      if (r->n_generated() < r->request.max_new_tokens) continue;
      EXPECT_EQ(r->generated, all_tokens) << "request " << r->id;
      ASSERT_TRUE(s.remove(r->id));
      finished += 1;
    }
  }
  EXPECT_GT(s.retractions(), 0);
  EXPECT_EQ(finished, 2);
  EXPECT_TRUE(s.running().empty());
  EXPECT_EQ(s.waiting(), 0u);
}

// Two requests admitted on the 70% estimate outgrow 18 slots; the one with fewer generated tokens
// is retracted (not the one with the longer prompt), comes back first with its generated tokens
// as part of its prefill, and samples after them.
void check_retraction(bool radix_cache) {
  GroupScheduler s(
      18,
      {.chunk_tokens = 100, .max_running = 8, .radix_cache = radix_cache, .mixed_steps = false});
  s.enqueue(request_for(1, {1, 2, 3}, 10));
  step(s);  // prefill: 3 slots, 7 more reserved
  step(s);  // request 1 decodes once, so it is ahead
  s.enqueue(request_for(2, {4}, 10));
  step(s);  // 1 + 7 + 6 (request 1's reservation) <= 14 left
  ASSERT_EQ(s.running().size(), 2u);
  int decode_steps = 0;
  while (s.retractions() == 0) {
    auto plan = step(s);
    ASSERT_LE(++decode_steps, 20);
    if (s.retractions() > 0) {
      ASSERT_EQ(plan.seqs.size(), 1u);
      EXPECT_EQ(plan.seqs[0].id, 1u);
    }
  }
  ASSERT_EQ(s.running().size(), 1u);
  EXPECT_EQ(s.running()[0]->id, 1u);
  EXPECT_EQ(s.waiting(), 1u);
  const std::vector<int32_t> generated_2 = {100, 101, 102, 103, 104, 105, 106};
  EXPECT_TRUE(s.remove(1));
  auto again = s.plan_step();
  ASSERT_EQ(again.seqs.size(), 1u);
  const runtime::PlannedSequence& p = again.seqs[0];
  EXPECT_EQ(p.id, 2u);
  std::vector<int32_t> fill = {4};
  fill.insert(fill.end(), generated_2.begin(), generated_2.end());
  EXPECT_EQ(p.n_cached + static_cast<int64_t>(p.new_tokens.size()), 8);
  EXPECT_TRUE(std::equal(p.new_tokens.begin(), p.new_tokens.end(),
                         fill.end() - static_cast<ptrdiff_t>(p.new_tokens.size())));
  EXPECT_TRUE(p.sample);
  if (radix_cache) {
    EXPECT_GT(p.n_cached, 0);  // its own latents came back from the cache
  } else {
    EXPECT_EQ(p.n_cached, 0);
  }
}

TEST(GroupScheduler, RetractsTheRequestWithFewestGeneratedTokens) {
  check_retraction(false);
}
TEST(GroupScheduler, RetractedRequestsReuseTheirCachedLatents) {
  check_retraction(true);
}

TEST(GroupScheduler, FinishedPromptsAreReusedByTheNextRequestWithTheSamePrefix) {
  GroupScheduler s(100, {.chunk_tokens = 100, .max_running = 8});
  s.enqueue(request_for(1, {1, 2, 3, 4, 5}, 3));
  auto first = step(s);
  step(s);  // a decode: token 100 gets a slot
  ASSERT_TRUE(s.remove(1));
  EXPECT_EQ(s.cached_tokens(), 6);
  EXPECT_EQ(s.kv_used(), 0);  // cached but unused: free for anyone who needs it
  s.enqueue(request_for(2, {1, 2, 3, 9}, 3));
  auto second = s.plan_step();
  const runtime::PlannedSequence& p = second.seqs.at(0);
  EXPECT_EQ(p.n_cached, 3);
  EXPECT_EQ(p.new_tokens, std::vector<int32_t>{9});
  EXPECT_EQ(
      std::vector<int32_t>(p.kv_slots.begin(), p.kv_slots.begin() + 3),
      std::vector<int32_t>(first.seqs[0].kv_slots.begin(), first.seqs[0].kv_slots.begin() + 3));
  EXPECT_EQ(s.running()[0]->cached_tokens, 3);
  EXPECT_FALSE(s.flush_cache());  // request 2 is running
  ASSERT_TRUE(s.remove(2));
  EXPECT_TRUE(s.flush_cache());
  EXPECT_EQ(s.cached_tokens(), 0);
  s.enqueue(request_for(3, {1, 2, 3, 9}, 3));
  EXPECT_EQ(s.plan_step().seqs.at(0).n_cached, 0);
}

TEST(GroupScheduler, AWholePromptIsNeverMatchedSoTheLastTokenComputesLogits) {
  GroupScheduler s(100, {.chunk_tokens = 100, .max_running = 8});
  s.enqueue(request_for(1, {1, 2, 3}, 3));
  step(s);
  s.remove(1);
  s.enqueue(request_for(2, {1, 2, 3}, 3));
  const auto plan = s.plan_step();
  EXPECT_EQ(plan.seqs.at(0).n_cached, 2);
  EXPECT_EQ(plan.seqs.at(0).new_tokens, std::vector<int32_t>{3});
}

TEST(GroupScheduler, UnusedCachedPrefixesAreEvictedWhenSlotsRunOut) {
  GroupScheduler s(10, {.chunk_tokens = 100, .max_running = 8});
  s.enqueue(request(1, 6, 1, 1));
  step(s);
  s.remove(1);
  EXPECT_EQ(s.cached_tokens(), 6);
  s.enqueue(request(2, 8, 1, 2));  // needs 8 + 1 of 10 slots: the cached prefix must go
  ASSERT_EQ(s.plan_step().seqs.size(), 1u);
  EXPECT_EQ(s.cached_tokens(), 0);
  EXPECT_EQ(s.kv_used(), 8);
}

TEST(GroupScheduler, DisabledRadixCacheReusesNothing) {
  GroupScheduler s(100, {.chunk_tokens = 100, .max_running = 8, .radix_cache = false});
  s.enqueue(request_for(1, {1, 2, 3, 4}, 3));
  step(s);
  s.remove(1);
  EXPECT_EQ(s.cached_tokens(), 0);
  EXPECT_EQ(s.kv_used(), 0);
  s.enqueue(request_for(2, {1, 2, 3, 4}, 3));
  EXPECT_EQ(s.plan_step().seqs.at(0).n_cached, 0);
}

TEST(GroupScheduler, LongestPrefixMatchPolicyAdmitsCachedPrefixesFirst) {
  for (SchedulePolicy policy : {SchedulePolicy::Fcfs, SchedulePolicy::LongestPrefixMatch}) {
    GroupScheduler s(100, {.chunk_tokens = 100, .max_running = 1, .policy = policy});
    s.enqueue(request_for(1, {5, 6, 7, 8}, 2));
    step(s);
    s.remove(1);
    s.enqueue(request_for(2, {1, 2}, 2));
    s.enqueue(request_for(3, {5, 6, 7, 9}, 2));
    const uint64_t first = s.plan_step().seqs.at(0).id;
    EXPECT_EQ(first, policy == SchedulePolicy::Fcfs ? 2u : 3u);
  }
  EXPECT_THROW(parse_schedule_policy("random"), std::exception);
}

TEST(LoadBalancer, RoundRobinAndMinimumTokens) {
  const std::vector<LoadBalancer::GroupLoad> load = {{5, 0}, {0, 9}, {0, 0}};
  LoadBalancer rr(LoadBalanceMethod::RoundRobin);
  EXPECT_EQ(rr.choose(load, 10), 0);
  EXPECT_EQ(rr.choose(load, 10), 1);
  EXPECT_EQ(rr.choose(load, 10), 2);
  EXPECT_EQ(rr.choose(load, 10), 0);
  LoadBalancer min(LoadBalanceMethod::MinimumTokens);
  EXPECT_EQ(min.choose({{5, 0}, {3, 0}, {9, 0}}, 10), 1);
  EXPECT_EQ(min.choose({{2, 0}, {2, 0}, {9, 9}}, 10), 0);
  EXPECT_FALSE(min.needs_cached_prefix());
  EXPECT_THROW(parse_load_balance_method("shortest_queue"), std::exception);
}

// The group holding at least half of the prompt wins even when busier; below half, the fewest
// outstanding tokens; equal prefixes go to the less loaded group.
TEST(LoadBalancer, CacheAwarePrefersTheGroupHoldingThePrefix) {
  LoadBalancer cache_aware(parse_load_balance_method("cache_aware"));
  EXPECT_TRUE(cache_aware.needs_cached_prefix());
  EXPECT_EQ(cache_aware.choose({{1, 0}, {50, 6}, {9, 2}}, 12), 1);
  EXPECT_EQ(cache_aware.choose({{1, 0}, {50, 5}, {9, 2}}, 12), 0);
  EXPECT_EQ(cache_aware.choose({{40, 8}, {30, 8}, {50, 0}}, 10), 1);
  EXPECT_EQ(cache_aware.choose({{4, 0}, {3, 0}}, 10), 1);
}

// Through the scheduler: a finished prompt's group is where the next request with it goes.
TEST(LoadBalancer, CachedPrefixLengthComesFromTheGroupsRadixCache) {
  GroupScheduler s(100, {.chunk_tokens = 100, .max_running = 8});
  s.enqueue(request_for(1, {1, 2, 3, 4, 5}, 2));
  step(s);
  s.remove(1);
  EXPECT_EQ(s.cached_prefix_length(*request_for(2, {1, 2, 3, 9}, 2)), 3);
  EXPECT_EQ(s.cached_prefix_length(*request_for(3, {1, 2, 3, 4, 5, 6}, 2)), 5);
  EXPECT_EQ(s.cached_prefix_length(*request_for(4, {7}, 2)), 0);
}

std::vector<int32_t> iota_tokens(int32_t first, int32_t last) {
  std::vector<int32_t> tokens;
  for (int32_t t = first; t <= last; ++t) tokens.push_back(t);
  return tokens;
}

// The first n of slots.
std::vector<int32_t> leading(const std::vector<int32_t>& slots, size_t n) {
  return {slots.begin(), slots.begin() + static_cast<std::ptrdiff_t>(n)};
}

// A group keeping up to max_snapshots prefix snapshots, of prefixes of 2 tokens or more.
GroupLimits snapshot_limits(int64_t max_snapshots) {
  return {.chunk_tokens = 100,
          .max_running = 8,
          .max_snapshots = max_snapshots,
          .min_snapshot_tokens = 2};
}

// With snapshots (DeepSeek-V4), a cached prefix is reused only up to a snapshot of it: a prompt's
// end and a released request's state are snapshots, and a prompt that shares less than that
// stops its prefill at the shared part once, so that the next one continues from there.
TEST(GroupScheduler, SnapshotsBoundWhatAPrefixReuses) {
  GroupScheduler s(1000, snapshot_limits(8));
  s.enqueue(request_for(1, iota_tokens(1, 10), 3));
  const runtime::GroupPlan first = step(s);
  ASSERT_EQ(first.seqs.size(), 1u);
  const std::vector<int32_t> slots = first.seqs[0].kv_slots;
  EXPECT_EQ(first.seqs[0].snapshot_key, slots[9]);  // the prompt's end
  const runtime::GroupPlan decode = step(s);
  s.remove(1);  // its state after the decode becomes a snapshot
  const std::vector<runtime::SnapshotOp> ops = s.take_snapshot_ops();
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0].id, 1u);
  EXPECT_EQ(ops[0].n_tokens, 11);
  EXPECT_EQ(ops[0].key, decode.seqs[0].kv_slots[10]);
  EXPECT_EQ(ops[0].kind, runtime::SnapshotOp::Keep);

  // 6 tokens shared, no snapshot there: the prefill stops after them for one.
  std::vector<int32_t> branch = iota_tokens(1, 6);
  branch.insert(branch.end(), {50, 51});
  s.enqueue(request_for(2, branch, 2));
  const runtime::GroupPlan to_branch = step(s);
  ASSERT_EQ(to_branch.seqs.size(), 1u);
  EXPECT_EQ(to_branch.seqs[0].n_cached, 0);
  EXPECT_EQ(to_branch.seqs[0].new_tokens.size(), 6u);
  EXPECT_FALSE(to_branch.seqs[0].sample);
  EXPECT_EQ(to_branch.seqs[0].snapshot_key, slots[5]);  // under the cache's slot
  const runtime::GroupPlan rest = step(s);
  ASSERT_EQ(rest.seqs.size(), 1u);
  EXPECT_EQ(rest.seqs[0].n_cached, 6);
  EXPECT_EQ(rest.seqs[0].new_tokens.size(), 2u);

  // The next request sharing them continues from that snapshot; one repeating request 1's
  // prompt and more, from request 1's state.
  std::vector<int32_t> third = iota_tokens(1, 6);
  third.push_back(60);
  s.enqueue(request_for(3, third, 2));
  std::vector<int32_t> fourth = iota_tokens(1, 10);
  fourth.push_back(70);
  s.enqueue(request_for(4, fourth, 2));
  const runtime::GroupPlan reuse = step(s);
  ASSERT_EQ(reuse.seqs.size(), 3u);  // request 2 decodes beside them
  EXPECT_EQ(reuse.seqs[1].id, 3u);
  EXPECT_EQ(reuse.seqs[1].n_cached, 6);
  EXPECT_EQ(leading(reuse.seqs[1].kv_slots, 6), leading(slots, 6));
  EXPECT_EQ(reuse.seqs[2].id, 4u);
  EXPECT_EQ(reuse.seqs[2].n_cached, 10);
}

// A released request whose state is not kept (the cache already held all its tokens) has it
// forgotten on the group's ranks, so a retracted request's state does not linger there.
TEST(GroupScheduler, AReleasedStateNotKeptIsForgotten) {
  GroupScheduler s(1000, snapshot_limits(4));
  s.enqueue(request_for(1, iota_tokens(1, 10), 3));
  step(s);      // the prompt enters the cache with its snapshot
  s.remove(1);  // nothing computed past it
  const std::vector<runtime::SnapshotOp> ops = s.take_snapshot_ops();
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0].kind, runtime::SnapshotOp::Forget);
  EXPECT_EQ(ops[0].id, 1u);
}

// A burst sharing a prefix nobody has computed: the first request stops its prefill where it
// shares the most with a waiting one and publishes that prefix with a snapshot; the other waits
// for the step that makes it, then continues from it.
TEST(GroupScheduler, ABurstSharingANewPrefixComputesItOnce) {
  GroupScheduler s(1000, snapshot_limits(8));
  std::vector<int32_t> a = iota_tokens(1, 8), b = iota_tokens(1, 8);
  a.insert(a.end(), {50, 51});
  b.push_back(60);
  s.enqueue(request_for(1, a, 2));
  s.enqueue(request_for(2, b, 2));
  const runtime::GroupPlan first = step(s);
  ASSERT_EQ(first.seqs.size(), 1u);  // request 2 waits for the snapshot
  EXPECT_EQ(first.seqs[0].new_tokens.size(), 8u);
  EXPECT_EQ(first.seqs[0].snapshot_key, first.seqs[0].kv_slots[7]);
  const runtime::GroupPlan second = step(s);
  ASSERT_EQ(second.seqs.size(), 2u);
  EXPECT_EQ(second.seqs[0].id, 1u);
  EXPECT_EQ(second.seqs[0].n_cached, 8);
  EXPECT_EQ(second.seqs[1].id, 2u);
  EXPECT_EQ(second.seqs[1].n_cached, 8);
  EXPECT_EQ(second.seqs[1].kv_slots[7], first.seqs[0].kv_slots[7]);
}

// Without snapshots (rows per slot), a prompt enters the radix cache once its chunks have run,
// and a request arriving together with one computing a longer prefix it shares waits a step for
// it instead of computing it too.
TEST(GroupScheduler, ABurstReusesThePrefixARunningRequestComputed) {
  GroupScheduler s(1000, {.chunk_tokens = 200, .max_running = 8});
  std::vector<int32_t> a = iota_tokens(1, 100), b = iota_tokens(1, 100);
  a.push_back(500);
  b.push_back(600);
  s.enqueue(request_for(1, a, 4));
  s.enqueue(request_for(2, b, 4));
  const runtime::GroupPlan first = step(s);
  ASSERT_EQ(first.seqs.size(), 1u);  // request 2 waits
  const runtime::GroupPlan second = step(s);
  ASSERT_EQ(second.seqs.size(), 2u);  // request 1 decodes beside it
  EXPECT_EQ(second.seqs[1].id, 2u);
  EXPECT_EQ(second.seqs[1].n_cached, 100);
  EXPECT_EQ(leading(second.seqs[1].kv_slots, 100), leading(first.seqs[0].kv_slots, 100));
  EXPECT_EQ(s.cached_tokens(), 101);  // request 1's prompt, locked while it runs
}

// A snapshot goes when its slot leaves the radix cache (evicted for a new request's slots), and
// one that the plan being built restores is never pushed out by a new one.
TEST(GroupScheduler, SnapshotsGoWithTheirSlotsAndStayWhileRestored) {
  GroupScheduler s(16, snapshot_limits(1));
  s.enqueue(request_for(1, iota_tokens(1, 10), 3));
  const runtime::GroupPlan first = step(s);
  ASSERT_EQ(first.seqs.size(), 1u);
  const int32_t key = first.seqs[0].kv_slots[9];
  s.remove(1);
  s.take_snapshot_ops();
  std::vector<int32_t> longer = iota_tokens(1, 10);
  longer.push_back(70);
  s.enqueue(request_for(2, longer, 1));
  const runtime::GroupPlan restored = step(s);
  ASSERT_EQ(restored.seqs.size(), 1u);
  EXPECT_EQ(restored.seqs[0].n_cached, 10);
  EXPECT_EQ(restored.seqs[0].snapshot_key, -1);  // the only snapshot is in use
  EXPECT_TRUE(s.take_snapshot_ops().empty());
  s.remove(2);
  s.take_snapshot_ops();
  s.enqueue(request_for(3, iota_tokens(40, 49), 1));  // 10 new slots: the cached ones go
  step(s);
  const std::vector<runtime::SnapshotOp> ops = s.take_snapshot_ops();
  ASSERT_FALSE(ops.empty());
  EXPECT_EQ(ops[0].key, key);
  EXPECT_EQ(ops[0].kind, runtime::SnapshotOp::Drop);
}

}  // namespace
}  // namespace mlaserve::sched
