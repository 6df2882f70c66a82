#include "cache/radix_cache.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

namespace mlaserve::cache {
namespace {

using Ids = std::vector<int32_t>;

TEST(RadixCache, MatchesTheLongestCachedPrefixAcrossSplitEdges) {
  RadixCache cache;
  EXPECT_EQ(cache.insert(Ids{1, 2, 3, 4}, Ids{10, 11, 12, 13}), 0);
  EXPECT_EQ(cache.insert(Ids{1, 2, 5}, Ids{20, 21, 22}),
            2);  // 20, 21 are duplicates for the caller
  EXPECT_EQ(cache.cached_tokens(), 5);
  EXPECT_EQ(cache.match_prefix(Ids{1, 2, 3, 9}).slots, (Ids{10, 11, 12}));
  EXPECT_EQ(cache.match_prefix(Ids{1, 2, 5, 6}).slots, (Ids{10, 11, 22}));
  EXPECT_EQ(cache.match_prefix(Ids{1}).slots, (Ids{10}));
  EXPECT_TRUE(cache.match_prefix(Ids{7, 1}).slots.empty());
  EXPECT_EQ(cache.cached_tokens(), 5);  // splitting moves tokens between nodes, never copies
}

// Each salt has a tree of its own: a prefix cached under one salt is invisible under another
// (and without one), and shared within it.
TEST(RadixCache, SaltsIsolateTheirPrefixes) {
  RadixCache cache;
  EXPECT_EQ(cache.insert(Ids{1, 2, 3}, Ids{10, 11, 12}, "tenant-a"), 0);
  EXPECT_TRUE(cache.match_prefix(Ids{1, 2, 3}).slots.empty());
  EXPECT_EQ(cache.match_prefix(Ids{1, 2, 3}).last, nullptr);
  EXPECT_TRUE(cache.match_prefix(Ids{1, 2, 3}, "tenant-b").slots.empty());
  EXPECT_EQ(cache.match_prefix(Ids{1, 2, 9}, "tenant-a").slots, (Ids{10, 11}));
  EXPECT_EQ(cache.insert(Ids{1, 2, 3}, Ids{20, 21, 22}), 0);  // unsalted: its own copy
  EXPECT_EQ(cache.insert(Ids{1, 2, 3}, Ids{30, 31, 32}, "tenant-a"), 3);
  EXPECT_EQ(cache.cached_tokens(), 6);
  // Locks and eviction work across the trees; an emptied salt's tree goes away.
  RadixCache::Match a = cache.match_prefix(Ids{1, 2, 3}, "tenant-a");
  cache.lock(a.last);
  Ids freed = cache.evict(100);
  EXPECT_EQ(freed, (Ids{20, 21, 22}));
  cache.unlock(a.last);
  freed = cache.evict(100);
  std::sort(freed.begin(), freed.end());
  EXPECT_EQ(freed, (Ids{10, 11, 12}));
  EXPECT_EQ(cache.cached_tokens(), 0);
  EXPECT_TRUE(cache.match_prefix(Ids{1, 2, 3}, "tenant-a").slots.empty());
  EXPECT_EQ(cache.insert(Ids{1, 2, 3}, Ids{40, 41, 42}, "tenant-a"), 0);
  EXPECT_EQ(cache.reset(), (Ids{40, 41, 42}));
}

TEST(RadixCache, LockedPathsAreNeverEvicted) {
  RadixCache cache;
  cache.insert(Ids{1, 2, 3}, Ids{10, 11, 12});
  cache.insert(Ids{4, 5}, Ids{20, 21});
  RadixCache::Match m = cache.match_prefix(Ids{1, 2, 9});
  cache.lock(m.last);
  EXPECT_EQ(cache.protected_tokens(), 2);
  EXPECT_EQ(cache.evictable_tokens(), 3);
  Ids freed = cache.evict(100);
  std::sort(freed.begin(), freed.end());
  EXPECT_EQ(freed, (Ids{12, 20, 21}));  // the unlocked tail of {1,2,3} and all of {4,5}
  EXPECT_EQ(cache.match_prefix(Ids{1, 2, 3}).slots, (Ids{10, 11}));
  cache.unlock(m.last);
  EXPECT_EQ(cache.protected_tokens(), 0);
  EXPECT_EQ(cache.evict(1), (Ids{10, 11}));
  EXPECT_EQ(cache.cached_tokens(), 0);
}

TEST(RadixCache, UnbalancedUnlockIsAnError) {
  RadixCache cache;
  cache.insert(Ids{1, 2}, Ids{10, 11});
  RadixCache::Node* node = cache.match_prefix(Ids{1, 2}).last;
  cache.lock(node);
  cache.unlock(node);
  EXPECT_THROW(cache.unlock(node), std::exception);
}

TEST(RadixCache, EvictsLeastRecentlyUsedLeavesFirst) {
  RadixCache cache;
  cache.insert(Ids{1, 1}, Ids{10, 11});
  cache.insert(Ids{2, 2}, Ids{20, 21});
  cache.insert(Ids{3, 3}, Ids{30, 31});
  cache.match_prefix(Ids{1, 1});  // now 2 is the oldest, then 3
  EXPECT_EQ(cache.evict(1), (Ids{20, 21}));
  EXPECT_EQ(cache.evict(2), (Ids{30, 31}));
  EXPECT_EQ(cache.cached_tokens(), 2);
}

TEST(RadixCache, ParentsBecomeEvictableOnceTheirChildrenAreGone) {
  RadixCache cache;
  cache.insert(Ids{1, 2, 3}, Ids{10, 11, 12});
  cache.insert(Ids{1, 2, 4}, Ids{10, 11, 13});
  Ids freed = cache.evict(4);
  std::sort(freed.begin(), freed.end());
  EXPECT_EQ(freed, (Ids{10, 11, 12, 13}));
  EXPECT_EQ(cache.cached_tokens(), 0);
}

TEST(RadixCache, ResetReturnsEverySlotAndRefusesWhileLocked) {
  RadixCache cache;
  cache.insert(Ids{1, 2, 3}, Ids{10, 11, 12});
  cache.insert(Ids{1, 5}, Ids{10, 15});
  RadixCache::Match m = cache.match_prefix(Ids{1, 5});
  cache.lock(m.last);
  EXPECT_THROW(cache.reset(), std::exception);
  cache.unlock(m.last);
  Ids freed = cache.reset();
  std::sort(freed.begin(), freed.end());
  EXPECT_EQ(freed, (Ids{10, 11, 12, 15}));
  EXPECT_TRUE(cache.match_prefix(Ids{1}).slots.empty());
}

// Random inserts and matches against a plain list of cached sequences: a match is the longest
// common prefix with any inserted sequence, and each token's slot is the first one inserted.
TEST(RadixCache, AgreesWithABruteForcePrefixSearch) {
  std::mt19937 rng(7);
  RadixCache cache;
  std::vector<std::pair<Ids, Ids>> inserted;
  int32_t next_slot = 0;
  for (int round = 0; round < 300; ++round) {
    Ids tokens(1 + rng() % 12);
    for (int32_t& t : tokens) t = static_cast<int32_t>(rng() % 3);
    Ids expected_slots;
    for (const auto& [seq, slots] : inserted) {
      size_t k = 0;
      while (k < seq.size() && k < tokens.size() && seq[k] == tokens[k]) ++k;
      if (k > expected_slots.size())
        expected_slots.assign(slots.begin(), slots.begin() + static_cast<ptrdiff_t>(k));
    }
    if (round % 2 == 0) {
      EXPECT_EQ(cache.match_prefix(tokens).slots, expected_slots) << "round " << round;
      continue;
    }
    Ids slots = expected_slots;
    while (slots.size() < tokens.size()) slots.push_back(next_slot++);
    EXPECT_EQ(cache.insert(tokens, slots), static_cast<int64_t>(expected_slots.size()));
    inserted.emplace_back(tokens, slots);
  }
  EXPECT_EQ(cache.cached_tokens(), next_slot);
}

}  // namespace
}  // namespace mlaserve::cache
