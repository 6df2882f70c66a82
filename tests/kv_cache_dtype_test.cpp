// --kv-cache-dtype end to end: the KV cache stored as bf16 (the default under --dtype bfloat16)
// keeps the golden models within the bf16 bound of the golden tests; float32 weights keep an
// exact float32 cache by default; on the trained demo model bf16 and fp8_e4m3 rows decode near
// the float32 cache; the server reports the dtype and holds twice the tokens in bf16; an unknown
// value is a clear error.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "support/golden.h"
#include "support/server_process.h"

namespace mlaserve::testing {
namespace {

using nlohmann::json;

json eval_golden(const GoldenModel& golden, const std::string& flags) {
  TempDir tmp;
  return run_eval(golden, golden.eval_input(), "--step-logits " + flags, tmp);
}

// Median of the step logits' relative L2 error over every prompt's greedy steps up to the
// first step that picked another token than the reference (later steps see another context):
// the decode steps are the ones that read the cache (eval prefills each prompt in one step, from
// the unrounded latents). Checks the greedy tokens of the steps whose reference margin exceeds
// 2 % of the largest logit, as GoldenFastBf16 does.
double median_step_error(const GoldenModel& golden, const json& out) {
  std::vector<double> errors;
  size_t compared_steps = 0;
  for (size_t i = 0; i < golden.prompts(); ++i) {
    const json& got = out["prompts"][i];
    compared_steps += golden.check_greedy(got, i, 0.02);
    const auto& want = golden.prompt(i)["greedy"];
    for (size_t s = 0; s < got["greedy_logits"].size() && got["greedy"][s] == want[s]; ++s) {
      errors.push_back(golden.relative_error(got["greedy_logits"][s],
                                             golden.prompt(i)["greedy_step_logits"], s));
    }
  }
  EXPECT_GT(compared_steps, golden.prompts()) << "almost no greedy step was clear enough";
  EXPECT_FALSE(errors.empty());
  std::sort(errors.begin(), errors.end());
  return errors.empty() ? INFINITY : errors[errors.size() / 2];
}

// The default cache under bf16 weights is bf16 and meets the bound of GoldenFastBf16
// (golden_test.cpp): median error 5e-2, clear greedy steps equal. (fp8_e4m3 does not: on
// tiny-v3 it flips greedy tokens whose margin is above 2 %, so it is not held to this bound.)
TEST(KvCacheDtype, Bf16CacheOnBf16WeightsMeetsTheBf16Bound) {
  for (const char* name : {"tiny-v2", "tiny-v3", "tiny-v3-fp8"}) {
    SCOPED_TRACE(name);
    const GoldenModel golden(name);
    const json out = eval_golden(golden, "--dtype bfloat16");
    ASSERT_TRUE(out.contains("prompts") && out.contains("ranks"));
    EXPECT_EQ(out["ranks"][0]["kv_cache_dtype"], "bfloat16");
    EXPECT_LT(median_step_error(golden, out), 5e-2);
  }
}

// The trained demo model decoding its four reference prompts for 32 tokens (float32 weights),
// each cache dtype against the float32 cache: the decode steps' logits up to the first token
// that differs, as relative L2 errors, and how many tokens agree before that.
struct CacheAgainstFloat32 {
  double median_error = 0;
  size_t equal_tokens = 0;
};

CacheAgainstFloat32 decode_against_float32_cache(const std::string& kv_dtype) {
  const json prompts = read_json("models/brown-tiny/reference.json")["prompts"];
  json input = {{"prompts", json::array()}};
  for (const json& p : prompts) input["prompts"].push_back({{"ids", p["ids"]}});
  TempDir tmp;
  const std::string flags = "--dtype float32 --step-logits --kv-cache-dtype ";
  const json exact = run_eval("models/brown-tiny", input, flags + "float32", tmp, 32);
  const json got = run_eval("models/brown-tiny", input, flags + kv_dtype, tmp, 32);
  CacheAgainstFloat32 result;
  std::vector<double> errors;
  for (size_t i = 0; i < prompts.size(); ++i) {
    const json& a = exact["prompts"][i];
    const json& b = got["prompts"][i];
    for (size_t s = 0; s < 32 && (s == 0 || a["greedy"][s - 1] == b["greedy"][s - 1]); ++s) {
      const auto want = a["greedy_logits"][s].get<std::vector<double>>();
      const auto have = b["greedy_logits"][s].get<std::vector<double>>();
      double diff = 0, norm = 0;
      for (size_t v = 0; v < want.size(); ++v) {
        diff += (have[v] - want[v]) * (have[v] - want[v]);
        norm += want[v] * want[v];
      }
      errors.push_back(std::sqrt(diff / norm));
      result.equal_tokens += a["greedy"][s] == b["greedy"][s];
    }
  }
  std::sort(errors.begin(), errors.end());
  result.median_error = errors.empty() ? INFINITY : errors[errors.size() / 2];
  return result;
}

// On a trained model: bf16 rows keep the decode within 2e-3 of the float32 cache (4.1e-4
// measured) and every reference continuation; fp8 rows with a scale per row within 2e-2
// (5.7e-3 measured, p90 1.1e-2), with at least 100 of the 128 tokens the same (113 measured: one
// continuation flips at token 17, where its margin is 4 % of the largest logit).
TEST(KvCacheDtype, TrainedModelDecodesNearTheFloat32Cache) {
  const CacheAgainstFloat32 bf16 = decode_against_float32_cache("bfloat16");
  EXPECT_LT(bf16.median_error, 2e-3);
  EXPECT_GT(bf16.median_error, 1e-6) << "no bf16 rounding seen: did the flag reach the cache?";
  EXPECT_EQ(bf16.equal_tokens, 128u);
  const CacheAgainstFloat32 fp8 = decode_against_float32_cache("fp8_e4m3");
  EXPECT_LT(fp8.median_error, 2e-2);
  EXPECT_GT(fp8.median_error, bf16.median_error) << "fp8 rows should err more than bf16 rows";
  EXPECT_GE(fp8.equal_tokens, 100u);
  std::printf(
      "KV cache vs float32: bf16 median %.2e, %zu/128 tokens; fp8_e4m3 median %.2e, "
      "%zu/128 tokens\n",
      bf16.median_error, bf16.equal_tokens, fp8.median_error, fp8.equal_tokens);
}

// --dtype float32 picks a float32 cache: the same output as asking for it, at the float32 bound;
// a bf16 cache under float32 weights changes the decode steps (the flag reaches the pool) but
// stays within the bf16 bound.
TEST(KvCacheDtype, Float32WeightsKeepAnExactFloat32Cache) {
  const GoldenModel golden("tiny-v3");
  const json by_default = eval_golden(golden, "--all-logits --dtype float32");
  const json explicit_f32 =
      eval_golden(golden, "--all-logits --dtype float32 --kv-cache-dtype float32");
  ASSERT_TRUE(by_default.contains("prompts") && by_default.contains("ranks"));
  EXPECT_EQ(by_default["ranks"][0]["kv_cache_dtype"], "float32");
  EXPECT_EQ(by_default["prompts"], explicit_f32["prompts"]);
  for (size_t i = 0; i < golden.prompts(); ++i) golden.check(explicit_f32["prompts"][i], i, {});

  const json bf16_kv =
      eval_golden(golden, "--all-logits --dtype float32 --kv-cache-dtype bfloat16");
  ASSERT_TRUE(bf16_kv.contains("prompts"));
  EXPECT_EQ(bf16_kv["prompts"][0]["all_logits"], explicit_f32["prompts"][0]["all_logits"])
      << "the prefill reads no cache";
  EXPECT_NE(bf16_kv["prompts"][0]["greedy_logits"], explicit_f32["prompts"][0]["greedy_logits"]);
  EXPECT_LT(median_step_error(golden, bf16_kv), 5e-2);
}

TEST(KvCacheDtype, UnknownValueIsAClearError) {
  TempDir tmp;
  write_json(tmp / "in.json", {{"prompts", {{{"ids", {1, 2, 3}}}}}});
  const std::vector<std::string> message = {"--kv-cache-dtype", "fp16",    "auto",
                                            "bfloat16",         "float32", "fp8_e4m3"};
  expect_fails_fast(mlaserve_bin() + " eval --model tests/data/models/tiny-v3 --input " +
                        (tmp / "in.json").string() + " --output " + (tmp / "out.json").string() +
                        " --kv-cache-dtype fp16",
                    20, message);
  expect_fails_fast(mlaserve_bin() + " serve --port 0 --kv-cache-dtype fp16", 20, message);
}

// /get_server_info names the cache's dtype, and the same --kv-cache-memory holds twice the
// tokens in bf16 (up to the last partial token).
TEST(KvCacheDtype, ServerReportsTheDtypeAndBf16HoldsTwiceTheTokens) {
  const auto engine_of = [](const std::string& flags) {
    ServerProcess server(flags);
    EXPECT_GT(server.port(), 0) << server.log();
    return server.port() > 0 ? server.call("/get_server_info")["engine"] : json::object();
  };
  const json f32 = engine_of("");  // --dtype float32: a float32 cache by default
  const json bf16 = engine_of("--kv-cache-dtype bfloat16");
  ASSERT_TRUE(f32.contains("layout") && bf16.contains("layout"));
  EXPECT_EQ(f32["layout"]["kv_cache_dtype"], "float32");
  EXPECT_EQ(bf16["layout"]["kv_cache_dtype"], "bfloat16");
  EXPECT_EQ(2 * bf16["layout"]["kv_bytes_per_token"].get<int64_t>(),
            f32["layout"]["kv_bytes_per_token"].get<int64_t>());
  const int64_t f32_tokens = f32["max_total_num_tokens"].get<int64_t>();
  const int64_t bf16_tokens = bf16["max_total_num_tokens"].get<int64_t>();
  EXPECT_GE(bf16_tokens, 2 * f32_tokens);
  EXPECT_LE(bf16_tokens, 2 * f32_tokens + 1);
  EXPECT_EQ(f32["layout"]["kv_index_bytes_per_token"], 0);  // brown-tiny has no indexer
}

// DeepSeek-V3.2: each token's index key (4 layers x 32 values of brown-tiny-dsa) sits in the
// cache beside its latent row, reported apart and counted in the bytes per token.
TEST(KvCacheDtype, SparseAttentionIndexKeysAreCountedPerToken) {
  ServerProcess dense(""), sparse("--model models/brown-tiny-dsa");
  ASSERT_GT(dense.port(), 0);
  ASSERT_GT(sparse.port(), 0);
  const json d = dense.call("/get_server_info")["engine"]["layout"];
  const json s = sparse.call("/get_server_info")["engine"]["layout"];
  EXPECT_EQ(s["kv_index_bytes_per_token"], 4 * 32 * 4);
  EXPECT_EQ(s["kv_bytes_per_token"].get<int64_t>(),
            d["kv_bytes_per_token"].get<int64_t>() + 4 * 32 * 4);
}

}  // namespace
}  // namespace mlaserve::testing
