#include "sched/group_scheduler.h"

#include <gtest/gtest.h>

#include "sched/load_balancer.h"

namespace mlaserve::sched {
namespace {

std::shared_ptr<ActiveRequest> request(uint64_t id, int prompt_len, int max_new) {
  auto r = std::make_shared<ActiveRequest>();
  r->id = id;
  r->request.prompt.assign(static_cast<size_t>(prompt_len), 7);
  r->request.max_new_tokens = max_new;
  return r;
}

// Simulates the engine applying a sampled token to every sequence that sampled.
void apply_tokens(const engine::GroupPlan& plan, GroupScheduler& s) {
  for (const auto& p : plan.seqs) {
    if (!p.sample) continue;
    for (const auto& r : s.running()) {
      if (r->id == p.id) r->generated.push_back(1);
    }
  }
}

TEST(GroupScheduler, ChunksLongPromptsAndContinuesThemFirst) {
  GroupScheduler s(1000, {.chunk_tokens = 8, .max_running = 4});
  s.enqueue(request(1, 20, 4));
  s.enqueue(request(2, 3, 4));
  auto p1 = s.plan_step();
  ASSERT_EQ(p1.seqs.size(), 1u);  // request 1 takes the whole budget
  EXPECT_EQ(p1.seqs[0].new_tokens.size(), 8u);
  EXPECT_FALSE(p1.seqs[0].sample);
  auto p2 = s.plan_step();
  ASSERT_EQ(p2.seqs.size(), 1u);
  EXPECT_EQ(p2.seqs[0].id, 1u);
  EXPECT_EQ(p2.seqs[0].n_cached, 8);
  auto p3 = s.plan_step();  // last 4 tokens of request 1, then request 2 fits in the rest
  ASSERT_EQ(p3.seqs.size(), 2u);
  EXPECT_EQ(p3.seqs[0].new_tokens.size(), 4u);
  EXPECT_TRUE(p3.seqs[0].sample);
  EXPECT_EQ(p3.seqs[1].id, 2u);
  EXPECT_EQ(p3.seqs[1].new_tokens.size(), 3u);
  EXPECT_EQ(p3.seqs[1].kv_slots.size(), 3u);
  apply_tokens(p3, s);
  auto p4 = s.plan_step();  // nothing waiting: both decode
  ASSERT_EQ(p4.seqs.size(), 2u);
  EXPECT_EQ(p4.seqs[0].n_cached, 20);
  EXPECT_EQ(p4.seqs[0].kv_slots.size(), 21u);
  EXPECT_FALSE(p4.extend());
}

TEST(GroupScheduler, AdmissionRespectsRunningLimitAndKvSpace) {
  GroupScheduler s(30, {.chunk_tokens = 100, .max_running = 2});
  s.enqueue(request(1, 5, 5));
  s.enqueue(request(2, 5, 5));
  s.enqueue(request(3, 5, 5));
  EXPECT_EQ(s.plan_step().seqs.size(), 2u);  // running limit
  EXPECT_EQ(s.kv_used(), 20);
  EXPECT_EQ(s.waiting(), 1u);
  EXPECT_TRUE(s.remove(1));
  EXPECT_EQ(s.kv_used(), 10);
  GroupScheduler small(12, {.chunk_tokens = 100, .max_running = 8});
  small.enqueue(request(4, 5, 5));
  small.enqueue(request(5, 5, 5));  // 10 + 10 > 12: waits for KV
  EXPECT_EQ(small.plan_step().seqs.size(), 1u);
  EXPECT_EQ(small.waiting(), 1u);
  EXPECT_FALSE(small.fits_ever(*request(6, 10, 5)));
}

TEST(GroupScheduler, PrefillHasPriorityOverDecode) {
  GroupScheduler s(100, {.chunk_tokens = 100, .max_running = 8});
  s.enqueue(request(1, 4, 5));
  auto p = s.plan_step();
  apply_tokens(p, s);
  s.enqueue(request(2, 4, 5));
  auto q = s.plan_step();
  ASSERT_EQ(q.seqs.size(), 1u);  // request 1 does not decode while 2 prefills
  EXPECT_EQ(q.seqs[0].id, 2u);
}

TEST(LoadBalancer, RoundRobinAndMinimumTokens) {
  LoadBalancer rr(LoadBalanceMethod::RoundRobin);
  EXPECT_EQ(rr.choose({5, 0, 0}), 0);
  EXPECT_EQ(rr.choose({5, 0, 0}), 1);
  EXPECT_EQ(rr.choose({5, 0, 0}), 2);
  EXPECT_EQ(rr.choose({5, 0, 0}), 0);
  LoadBalancer min(LoadBalanceMethod::MinimumTokens);
  EXPECT_EQ(min.choose({5, 3, 9}), 1);
  EXPECT_EQ(min.choose({2, 2, 9}), 0);
  EXPECT_THROW(parse_load_balance_method("shortest_queue"), std::exception);
}

}  // namespace
}  // namespace mlaserve::sched
