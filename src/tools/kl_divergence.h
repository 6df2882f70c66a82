// How far a model's next-token distributions are from a base run's, as llama.cpp users compare
// quantizations (`perplexity --kl-divergence-base` / `--kl-divergence`): a base run (bf16, say)
// stores the log-probabilities of every token it scores; a run of another weight format over the
// same tokens reads them back and reports the mean KL(base || this) and how often both put the
// same token first.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace mlaserve::tools {

// The file: 8 bytes "MLSKLD1\0", int64 vocabulary, tokens and context (the window), then per
// token its vocabulary
// log-probabilities as float32 (native byte order: the file stays on the machine that made it).
class KlBaseWriter {
 public:
  KlBaseWriter(const std::string& path, int64_t vocab, int64_t tokens, int64_t context);
  void add(std::span<const float> logits);  // one scored token's logits
  void finish();                            // checks the count, flushes and closes

 private:
  std::string path_;
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file_;
  int64_t vocab_, tokens_, written_ = 0;
  std::vector<double> log_probs_;  // one token's, kept across calls
  std::vector<float> row_;
};

class KlComparison {
 public:
  // Reads the header and checks it against this run: the same vocabulary, token count and
  // context (the same text, windows and tokenizer), and a file of exactly that size.
  KlComparison(const std::string& path, int64_t vocab, int64_t tokens, int64_t context);
  void add(std::span<const float> logits);
  double mean_kld() const { return kld_ / static_cast<double>(compared_); }
  double top1_agreement() const {
    return static_cast<double>(same_top1_) / static_cast<double>(compared_);
  }

 private:
  std::string path_;
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file_;
  int64_t vocab_, tokens_, compared_ = 0, same_top1_ = 0;
  double kld_ = 0;
  std::vector<float> base_;
  std::vector<double> log_probs_;
};

}  // namespace mlaserve::tools
