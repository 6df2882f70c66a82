#include "tools/parallel_options.h"

#include <fmt/format.h>

namespace mlaserve::tools {

void ParallelFlags::add_to(CLI::App& cmd) {
  cmd.add_option(
         "--tp", layout.tp,
         "Tensor-parallel ranks of one model instance (the MLP/MoE is split over all of them)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd.add_option(
         "--dp", layout.dp,
         "Data-parallel groups: attention groups of tp/dp ranks with --enable-dp-attention, else "
         "independent replicas of tp ranks each (tp*dp ranks)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd.add_flag(
      "--enable-dp-attention", layout.dp_attention,
      "Attention data-parallel over --dp groups inside one --tp instance (SGLang DP attention)");
  cmd.add_flag("--enable-dp-linear", layout.dp_linear,
               "Compute the replicated q_a/kv_a projections (and a DeepSeek-V3.2 indexer's "
               "wk/weights_proj) on a token shard per rank and all-gather (prefill)");
  cmd.add_option("--dp-linear-min-tokens", dp_linear_min_tokens,
                 "dp_linear applies to extend steps with at least this many tokens in the group "
                 "(and at least one "
                 "per rank)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd.add_flag("--enable-ep-moe", layout.ep_moe,
               "Expert parallel: whole experts per rank instead of sliced experts");
  cmd.add_option(
         "--dp-padding", dp_padding,
         "How DP groups' rows reach the MLP: auto (sum_len while any group prefills, else max_len "
         "when 2*total >= max*dp, else sum_len; always sum_len with "
         "--enable-deterministic-inference, whose sums must not change with the step), sum_len "
         "(one all-reduce of a buffer holding every "
         "group's rows), max_len (all-gather padded to the largest group), exact (all-gatherv, no "
         "padding), legacy (pad every group to the global max, MLP runs max*dp rows)")
      ->check(CLI::IsMember({"auto", "sum_len", "max_len", "exact", "legacy"}))
      ->capture_default_str();
#ifdef NDEBUG
  const bool debug_build = false;
#else
  const bool debug_build = true;
#endif
  check_collectives = debug_build;
  cmd.add_flag(
      "--check-collectives,!--no-check-collectives", check_collectives,
      "Before every collective, check that all ranks enter the same one with the same count (on by "
      "default in Debug builds)");
  const parallel::WatchdogOptions defaults;
  cmd.add_option(
         "--collective-timeout", collective_timeout_s,
         fmt::format(
             "Seconds a rank may wait for the others in one collective (or, when idle, for the "
             "next step) before the job is ended as failed: a rank or host that died, froze or "
             "lost its link never makes MPI return an error. The deadline is the larger of this "
             "and {}x the slowest step seen so far; on expiry the waiting rank logs the "
             "collective, layer and step, serve answers pending requests with an error, and every "
             "process exits (within 5 s more)",
             defaults.step_multiple))
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
}

parallel::WatchdogOptions ParallelFlags::watchdog_options() const {
  parallel::WatchdogOptions o;
  o.floor_seconds = collective_timeout_s;
  return o;
}

parallel::StepCommOptions ParallelFlags::comm_options() const {
  parallel::StepCommOptions o;
  o.padding = parallel::parse_padding_policy(dp_padding);
  o.dp_linear_min_tokens = layout.dp_linear ? dp_linear_min_tokens : 0;
  o.check_collectives = check_collectives;
  return o;
}

}  // namespace mlaserve::tools
