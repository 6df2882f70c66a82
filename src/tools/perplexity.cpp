// mlaserve perplexity: the mean NLL and perplexity of a token stream under the model (as
// llama.cpp's perplexity tool), on any parallel layout. The stream is cut into consecutive
// windows of context-1 tokens, each fed as [BOS] + window[:-1] with the window as its targets:
// every token is predicted exactly once, and every window starts the way a prompt does (the rule
// of brown-tiny's reference.json validation figures).
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <span>
#include <sstream>

#include "core/error.h"
#include "runtime/launch.h"
#include "runtime/static_planner.h"
#include "runtime/worker.h"
#include "tokenizer/tokenizer.h"
#include "tools/commands.h"
#include "tools/json_input.h"
#include "tools/kl_divergence.h"
#include "tools/model_options.h"
#include "tools/parallel_options.h"
#include "tools/rank_loop.h"

namespace mlaserve::tools {

namespace {

// Windows per DP group and step when --windows-per-step is not given: a few hundred rows per
// GEMM keep the kernels busy while the logits of a step (rows x vocab floats) stay small.
constexpr int64_t kWindowsPerGroup = 4;
// Without a terminal, a progress line at most this often (seconds), so logs stay short.
constexpr double kLogInterval = 5.0;

struct PerplexityOptions {
  ModelOptions model;
  ParallelFlags parallel;
  std::string text_file, ids_file;
  int64_t context = 256;
  int64_t windows_per_step = 0;       // 0: kWindowsPerGroup per DP group
  std::string kl_base_file, kl_file;  // --kl-divergence-base, --kl-divergence
};

// The token stream cut into the scoring windows.
class Windows {
 public:
  Windows(std::vector<int32_t> tokens, int64_t context, int32_t bos)
      : tokens_(std::move(tokens)), length_(context - 1), bos_(bos) {}

  int64_t count() const { return (static_cast<int64_t>(tokens_.size()) + length_ - 1) / length_; }
  // Every token is one window's target once.
  int64_t scored_tokens() const { return static_cast<int64_t>(tokens_.size()); }

  // The tokens window i predicts (the last window may be shorter).
  std::span<const int32_t> targets(int64_t i) const {
    const auto begin = static_cast<size_t>(i * length_);
    return std::span(tokens_).subspan(
        begin, std::min(tokens_.size() - begin, static_cast<size_t>(length_)));
  }

  // Requests for windows first.. (at most n of them): [BOS] + window[:-1], logits at every
  // position.
  std::vector<runtime::StaticRequest> requests(int64_t first, int64_t n) const {
    std::vector<runtime::StaticRequest> out;
    for (int64_t i = first; i < std::min(first + n, count()); ++i) {
      const std::span<const int32_t> window = targets(i);
      runtime::StaticRequest r;
      r.prompt.push_back(bos_);
      r.prompt.insert(r.prompt.end(), window.begin(), window.end() - 1);
      r.all_logits = true;
      r.return_logits = true;
      out.push_back(std::move(r));
    }
    return out;
  }

 private:
  std::vector<int32_t> tokens_;
  int64_t length_;
  int32_t bos_;
};

std::string read_text_file(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) fail("cannot open --text-file {}", path);
  std::stringstream contents;
  contents << file.rdbuf();
  return contents.str();
}

// The text without special tokens: BOS comes with each window instead.
std::vector<int32_t> encode_text_file(const PerplexityOptions& o) {
  const std::filesystem::path tokenizer_json =
      std::filesystem::path(o.model.model_dir) / "tokenizer.json";
  if (!std::filesystem::exists(tokenizer_json)) {
    fail(
        "--text-file needs the model's tokenizer, but {} does not exist (give token ids with "
        "--ids-file instead)",
        tokenizer_json.string());
  }
  const auto tok = tokenizer::Tokenizer::load(o.model.model_dir);
  try {
    return tok.encode(read_text_file(o.text_file), false);
  } catch (const Error& e) {
    fail("{}: {}", o.text_file, e.what());
  }
}

void check_context(int64_t context, const model::ModelInfo& info) {
  if (context < 2) {
    fail(
        "--context {} is too small: a window needs BOS and at least one token to predict (use 2 or "
        "more)",
        context);
  }
  if (context > info.max_position_embeddings) {
    fail("--context {} exceeds the model's max_position_embeddings ({})", context,
         info.max_position_embeddings);
  }
}

void check_tokens(const std::vector<int32_t>& tokens, const std::string& source, int64_t vocab) {
  if (tokens.empty()) fail("{}: no tokens to score", source);
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] >= vocab) {
      fail("{}: token {} is id {}, outside the model's vocabulary (0..{})", source, i, tokens[i],
           vocab - 1);
    }
  }
}

// Reads and checks everything before any rank starts, so that bad input is one clear error.
Windows read_windows(const PerplexityOptions& o, const model::ModelInfo& info) {
  if (o.text_file.empty() == o.ids_file.empty())
    fail("give the tokens to score with --text-file or --ids-file");
  check_context(o.context, info);
  const bool ids = !o.ids_file.empty();
  std::vector<int32_t> tokens =
      ids ? read_token_ids(read_json_file(o.ids_file), o.ids_file) : encode_text_file(o);
  check_tokens(tokens, ids ? o.ids_file : o.text_file, info.vocab_size);
  return Windows(std::move(tokens), o.context, static_cast<int32_t>(info.bos_token_id));
}

// -log softmax(row)[target] in double precision: float sums over a large vocabulary would lose
// the digits the mean is compared on.
double token_nll(std::span<const float> row, int32_t target) {
  const double max = *std::max_element(row.begin(), row.end());
  double sum = 0;
  for (const float x : row) sum += std::exp(x - max);
  return max + std::log(sum) - row[static_cast<size_t>(target)];
}

// Called with each scored token's logits row, in token order (the KL divergence files).
using RowObserver = std::function<void(std::span<const float>)>;

// Sum of the NLLs of one window; `logits` holds one row per target.
double window_nll(const std::vector<float>& logits, std::span<const int32_t> targets, int64_t vocab,
                  const RowObserver& observe) {
  if (logits.size() != targets.size() * static_cast<size_t>(vocab)) {
    fail("internal: {} logits for {} targets of vocabulary {}", logits.size(), targets.size(),
         vocab);
  }
  double sum = 0;
  for (size_t t = 0; t < targets.size(); ++t) {
    const auto row =
        std::span(logits).subspan(t * static_cast<size_t>(vocab), static_cast<size_t>(vocab));
    sum += token_nll(row, targets[t]);
    if (observe) observe(row);
  }
  return sum;
}

// Progress on stderr: a bar redrawn in place on a terminal, else a line every kLogInterval
// seconds (captured stderr gets no carriage-return clutter).
class Progress {
 public:
  explicit Progress(int64_t windows) : windows_(windows), terminal_(isatty(STDERR_FILENO) == 1) {}

  void update(int64_t windows_done, int64_t tokens_done, double mean_nll) {
    const double elapsed = seconds_since(start_);
    if (terminal_) {
      constexpr int64_t kWidth = 30;
      const auto filled = static_cast<size_t>(windows_done * kWidth / windows_);
      std::fprintf(stderr, "\r[%s%s] %ld/%ld windows, %ld tokens, mean_nll %.4f, %.1f s",
                   std::string(filled, '#').c_str(), std::string(kWidth - filled, '.').c_str(),
                   static_cast<long>(windows_done), static_cast<long>(windows_),
                   static_cast<long>(tokens_done), mean_nll, elapsed);
    } else if (seconds_since(last_line_) >= kLogInterval) {
      std::fprintf(stderr, "perplexity: %ld/%ld windows, %ld tokens, mean_nll %.4f, %.1f s\n",
                   static_cast<long>(windows_done), static_cast<long>(windows_),
                   static_cast<long>(tokens_done), mean_nll, elapsed);
      last_line_ = std::chrono::steady_clock::now();
    }
    std::fflush(stderr);
  }

  void finish() const {
    if (terminal_) std::fputc('\n', stderr);
  }

 private:
  static double seconds_since(std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
  }

  int64_t windows_;
  bool terminal_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point last_line_ = start_;
};

// Rank 0: runs the windows a step's worth at a time (dealt over the DP groups by the planner) and
// returns the mean NLL over all targets. One planner per step keeps only that step's logits.
double mean_nll(runtime::Worker& worker, int groups, const Windows& windows, int64_t per_step,
                const RowObserver& observe) {
  const int64_t vocab = worker.model().info().vocab_size;
  Progress progress(windows.count());
  double nll = 0;
  int64_t scored = 0;
  for (int64_t first = 0; first < windows.count(); first += per_step) {
    std::vector<runtime::StaticRequest> batch = windows.requests(first, per_step);
    const auto n = static_cast<int64_t>(batch.size());
    runtime::StaticPlanner planner(groups, worker.kv_capacity_tokens(), std::move(batch), n);
    run_until_done(worker, planner);
    for (int64_t i = 0; i < n; ++i) {
      const std::span<const int32_t> targets = windows.targets(first + i);
      nll += window_nll(planner.outputs()[static_cast<size_t>(i)].prompt_logits, targets, vocab,
                        observe);
      scored += static_cast<int64_t>(targets.size());
    }
    progress.update(first + n, scored, nll / static_cast<double>(scored));
  }
  progress.finish();
  return nll / static_cast<double>(scored);
}

void run_rank(const PerplexityOptions& o, const models::ModelCard& card, const Windows& windows,
              const runtime::MpiSession& mpi) {
  const parallel::Topology topo =
      parallel::compute_topology(o.parallel.layout, mpi.rank(), mpi.size());
  const int groups = topo.instances * topo.groups_per_instance;
  const int64_t per_step = o.windows_per_step > 0 ? o.windows_per_step : kWindowsPerGroup * groups;
  // The first step is the largest: full windows, as many as a step takes.
  const int64_t kv_tokens =
      runtime::StaticPlanner::kv_tokens_needed(windows.requests(0, per_step), groups);

  o.model.check_card(card, topo, false, 0);
  const std::unique_ptr<model::Model> model = o.model.load(card, topo, false);
  runtime::Worker worker(topo, *model, {kv_tokens, o.model.kv_dtype(), o.parallel.comm_options()});
  if (mpi.rank() != 0) {
    follow_rank0(worker);
    return;
  }
  const auto start = std::chrono::steady_clock::now();
  const int64_t vocab = card.info.vocab_size, tokens = windows.scored_tokens();
  std::optional<KlBaseWriter> base;
  std::optional<KlComparison> compare;
  if (!o.kl_base_file.empty()) base.emplace(o.kl_base_file, vocab, tokens, o.context);
  if (!o.kl_file.empty()) compare.emplace(o.kl_file, vocab, tokens, o.context);
  const double nll = mean_nll(worker, groups, windows, per_step, [&](std::span<const float> row) {
    if (base) base->add(row);
    if (compare) compare->add(row);
  });
  shut_down_followers(worker);
  if (base) base->finish();
  spdlog::info(
      "perplexity: {} windows of up to {} tokens, {} per step, layout {}, {} weights, {:.1f} s",
      windows.count(), o.context - 1, per_step, o.parallel.layout.describe(), o.model.dtype,
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  std::printf("mean_nll=%.6f perplexity=%.4f", nll, std::exp(nll));
  if (compare) {
    std::printf(" mean_kld=%.6f top1_agreement=%.4f", compare->mean_kld(),
                compare->top1_agreement());
  }
  std::printf("\n");
  std::fflush(stdout);
}

}  // namespace

void add_perplexity(CLI::App& app) {
  auto opts = std::make_shared<PerplexityOptions>();
  CLI::App* cmd = app.add_subcommand(
      "perplexity",
      "Mean NLL and perplexity of a text or token stream, scored in consecutive windows");
  opts->model.add_to(*cmd);
  opts->parallel.add_to(*cmd);
  auto* text = cmd->add_option(
      "--text-file", opts->text_file,
      "UTF-8 text to score, encoded with the model's tokenizer.json (no special tokens)");
  auto* ids = cmd->add_option("--ids-file", opts->ids_file, "JSON array of token ids to score");
  text->excludes(ids);
  cmd->add_option("--context", opts->context,
                  "Window size N: windows of N-1 tokens, each fed as [BOS] + window[:-1] so that "
                  "every token is "
                  "predicted exactly once")
      ->capture_default_str();
  cmd->add_option(
         "--windows-per-step", opts->windows_per_step,
         fmt::format(
             "Windows run together in one step, dealt over the DP groups (0: {} per DP group)",
             kWindowsPerGroup))
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  auto* kl_base = cmd->add_option(
      "--kl-divergence-base", opts->kl_base_file,
      "Write every scored token's log-probabilities to this file (vocabulary x tokens x 4 "
      "bytes): the base that a later run's --kl-divergence compares with");
  cmd->add_option("--kl-divergence", opts->kl_file,
                  "Compare with a --kl-divergence-base file of the same tokens and --context "
                  "(another weight format, say): prints mean_kld, the mean KL divergence of this "
                  "run's next-token distributions from the base's, and top1_agreement, how often "
                  "both rank the same token first")
      ->excludes(kl_base);
  cmd->callback([opts] {
    const models::ModelCard card = models::read_model_card(opts->model.model_dir);
    const Windows windows = read_windows(*opts, card.info);
    runtime::run_ranks(
        opts->parallel.layout.world_size(), opts->parallel.watchdog_options(),
        [&](const runtime::MpiSession& mpi) { run_rank(*opts, card, windows, mpi); });
  });
}

}  // namespace mlaserve::tools
