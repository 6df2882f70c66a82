// Golden reference data of a tiny model (tests/data/models/README.md) and the comparison rule:
// logits within a relative L2 bound at every position and greedy step, greedy tokens equal up to
// the first step whose margin is too small to call.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "support/command.h"
#include "support/files.h"

namespace mlaserve::testing {

// ||got - want|| / ||want|| over n values.
inline double relative_l2(const std::vector<float>& got, const float* want, size_t n) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < n; ++i) {
    diff += (static_cast<double>(got[i]) - want[i]) * (static_cast<double>(got[i]) - want[i]);
    norm += static_cast<double>(want[i]) * want[i];
  }
  return std::sqrt(diff / norm);
}

struct Bounds {
  double max_rel_l2 = 1e-4;       // float32 engines land near 1e-6
  double margin_fraction = 1e-3;  // compare greedy tokens while margin >= fraction * max|logits|
};

class GoldenModel {
 public:
  explicit GoldenModel(const std::string& name) : dir_("tests/data/models/" + name) {
    ref_ = read_json(dir_ / "reference.json");
    std::ifstream in(dir_ / "logits.bin", std::ios::binary);
    in.seekg(0, std::ios::end);
    logits_.resize(static_cast<size_t>(in.tellg()) / 4);
    in.seekg(0);
    in.read(reinterpret_cast<char*>(logits_.data()),
            static_cast<std::streamsize>(logits_.size() * 4));
    vocab_ = ref_["vocab_size"].get<size_t>();
  }

  const std::filesystem::path& dir() const { return dir_; }
  const nlohmann::json& prompt(size_t i) const { return ref_["prompts"][i]; }
  size_t prompts() const { return ref_["prompts"].size(); }
  int n_greedy() const { return ref_["n_greedy"].get<int>(); }

  // eval --input for the given prompts (all of them by default).
  nlohmann::json eval_input(std::vector<size_t> which = {}) const {
    if (which.empty())
      for (size_t i = 0; i < prompts(); ++i) which.push_back(i);
    nlohmann::json input = {{"prompts", nlohmann::json::array()}};
    for (size_t i : which) input["prompts"].push_back({{"ids", prompt(i)["ids"]}});
    return input;
  }

  // Checks one prompt of an `eval --all-logits --step-logits` output against reference prompt i.
  void check(const nlohmann::json& got, size_t i, const Bounds& b) const {
    const nlohmann::json& want = prompt(i);
    SCOPED_TRACE("prompt " + std::to_string(i) + " of length " +
                 std::to_string(want["ids"].size()));
    ASSERT_TRUE(got.contains("last_logits") && got.contains("greedy"));
    EXPECT_LT(rel(got["last_logits"], want["last_logits"], 0), b.max_rel_l2);
    for (size_t t = 0; t < want["ids"].size() && got.contains("all_logits"); ++t) {
      EXPECT_LT(rel(got["all_logits"][t], want["all_logits"], t), b.max_rel_l2) << "position " << t;
    }
    const size_t callable = check_greedy(got, i, b.margin_fraction);
    for (size_t s = 0; s < callable && got.contains("greedy_logits"); ++s) {
      EXPECT_LT(rel(got["greedy_logits"][s], want["greedy_step_logits"], s), b.max_rel_l2)
          << "greedy step " << s;
    }
  }

  // Checks the greedy tokens of one prompt of an eval output against reference prompt i, up to
  // the first step whose reference margin is below margin_fraction * max|logits| (too close to
  // call); returns how many steps it compared.
  size_t check_greedy(const nlohmann::json& got, size_t i, double margin_fraction) const {
    const nlohmann::json& want = prompt(i);
    EXPECT_EQ(got["greedy"].size(), want["greedy"].size());
    for (size_t s = 0; s < want["greedy"].size() && s < got["greedy"].size(); ++s) {
      const float* step = at(want["greedy_step_logits"], s);
      double max_abs = 0;
      for (size_t v = 0; v < vocab_; ++v)
        max_abs = std::max(max_abs, std::fabs(static_cast<double>(step[v])));
      if (want["greedy_margins"][s].get<double>() < margin_fraction * max_abs) return s;
      EXPECT_EQ(got["greedy"][s], want["greedy"][s]) << "greedy step " << s;
      if (got["greedy"][s] != want["greedy"][s]) return s;
    }
    return want["greedy"].size();
  }

  double relative_error(const nlohmann::json& got, const nlohmann::json& spec, size_t row) const {
    return relative_l2(got.get<std::vector<float>>(), at(spec, row), vocab_);
  }

 private:
  const float* at(const nlohmann::json& spec, size_t row) const {
    return logits_.data() + spec["offset"].get<size_t>() / 4 + row * vocab_;
  }
  double rel(const nlohmann::json& got, const nlohmann::json& spec, size_t row) const {
    return relative_error(got, spec, row);
  }

  std::filesystem::path dir_;
  nlohmann::json ref_;
  std::vector<float> logits_;
  size_t vocab_ = 0;
};

// Runs `mlaserve eval` on a golden model (its n_greedy tokens by default).
inline nlohmann::json run_eval(const GoldenModel& model, const nlohmann::json& input,
                               const std::string& flags, const TempDir& tmp,
                               int max_new_tokens = -1) {
  return run_eval(model.dir(), input, flags, tmp,
                  max_new_tokens < 0 ? model.n_greedy() : max_new_tokens);
}

}  // namespace mlaserve::testing
