#include "tools/kl_divergence.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "core/error.h"

namespace mlaserve::tools {
namespace {

constexpr char kMagic[8] = {'M', 'L', 'S', 'K', 'L', 'D', '1', '\0'};
constexpr int64_t kHeaderBytes = 32;

std::unique_ptr<std::FILE, int (*)(std::FILE*)> open_file(const std::string& path,
                                                          const char* mode) {
  std::FILE* f = std::fopen(path.c_str(), mode);
  if (f == nullptr) fail("cannot open {}: {}", path, std::strerror(errno));
  return {f, &std::fclose};
}

// log softmax(logits) in double precision into out.
void log_softmax(std::span<const float> logits, std::vector<double>& out) {
  const double max = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (const float x : logits) sum += std::exp(x - max);
  const double log_sum = max + std::log(sum);
  out.resize(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) out[i] = logits[i] - log_sum;
}

}  // namespace

KlBaseWriter::KlBaseWriter(const std::string& path, int64_t vocab, int64_t tokens, int64_t context)
    : path_(path), file_(open_file(path, "wb")), vocab_(vocab), tokens_(tokens) {
  const int64_t header[3] = {vocab, tokens, context};
  if (std::fwrite(kMagic, 1, 8, file_.get()) != 8 || std::fwrite(header, 8, 3, file_.get()) != 3) {
    fail("cannot write {}: {}", path, std::strerror(errno));
  }
}

void KlBaseWriter::add(std::span<const float> logits) {
  log_softmax(logits, log_probs_);
  row_.assign(log_probs_.begin(), log_probs_.end());
  if (std::fwrite(row_.data(), 4, row_.size(), file_.get()) != row_.size())
    fail("cannot write {}: {}", path_, std::strerror(errno));
  ++written_;
}

void KlBaseWriter::finish() {
  if (written_ != tokens_)
    fail("internal: {} of {} tokens written to {}", written_, tokens_, path_);
  if (std::fclose(file_.release()) != 0) fail("cannot write {}: {}", path_, std::strerror(errno));
}

KlComparison::KlComparison(const std::string& path, int64_t vocab, int64_t tokens, int64_t context)
    : path_(path), file_(open_file(path, "rb")), vocab_(vocab), tokens_(tokens) {
  char magic[8];
  int64_t header[3];
  if (std::fread(magic, 1, 8, file_.get()) != 8 || std::memcmp(magic, kMagic, 8) != 0 ||
      std::fread(header, 8, 3, file_.get()) != 3) {
    fail("{}: not a --kl-divergence-base file", path);
  }
  if (header[0] != vocab || header[1] != tokens || header[2] != context) {
    fail(
        "{}: holds {} tokens of a {}-token vocabulary scored with --context {}; this run "
        "scores {} of {} with --context {}: use the same text, --context and model family as "
        "the base run",
        path, header[1], header[0], header[2], tokens, vocab, context);
  }
  const auto size = static_cast<int64_t>(std::filesystem::file_size(path));
  if (size != kHeaderBytes + tokens * vocab * 4)
    fail("{}: {} bytes, its header implies {} (truncated?)", path, size,
         kHeaderBytes + tokens * vocab * 4);
  base_.resize(static_cast<size_t>(vocab));
}

void KlComparison::add(std::span<const float> logits) {
  if (std::fread(base_.data(), 4, base_.size(), file_.get()) != base_.size())
    fail("{}: read failed after {} tokens", path_, compared_);
  log_softmax(logits, log_probs_);
  double kld = 0;
  for (size_t i = 0; i < base_.size(); ++i) {
    const double base = base_[i];
    kld += std::exp(base) * (base - log_probs_[i]);
  }
  kld_ += kld;
  same_top1_ += std::max_element(base_.begin(), base_.end()) - base_.begin() ==
                std::max_element(logits.begin(), logits.end()) - logits.begin();
  ++compared_;
}

}  // namespace mlaserve::tools
