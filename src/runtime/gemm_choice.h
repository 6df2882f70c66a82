// Choosing each GEMM shape class's path for the machine at start-up (`--kernels auto`): the
// CPU's flags say which paths can run, a short timed probe which is faster. The probe is cached
// per machine, so only the first start on a CPU pays for it (~0.3 s).
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "kernels/gemm_probe.h"

namespace mlaserve::runtime {

// What a cached probe holds for: the CPU model, the ISA flags the paths depend on, the kernels'
// thread count and the GEMM library's version.
std::string machine_key();

// $MLASERVE_KERNEL_CACHE, else $XDG_CACHE_HOME/mlaserve/gemm-paths.json, else
// $HOME/.cache/mlaserve/gemm-paths.json; nothing when none of those is set.
std::optional<std::filesystem::path> gemm_cache_file();

// The probe stored for `key` in `file`; nothing when the file is missing or unreadable or has no
// well-formed entry for the key.
std::optional<kernels::GemmProbe> cached_probe(const std::filesystem::path& file,
                                               const std::string& key);

// Adds or replaces key's entry, keeping the others: written to a temporary file that is then
// renamed over `file`, so concurrent starts never leave a torn file. Throws Error on failure.
void store_probe(const std::filesystem::path& file, const std::string& key,
                 const kernels::GemmProbe& probe);

// Called on every rank of a job before the model loads. Unless `--kernels` fixed the paths (or
// the reference or deterministic kernels run, or the CPU has no AVX512_BF16, which leaves only
// the f32 path), the first rank of each host reads the probe cached for this machine or measures
// and caches it, and every rank of the host uses its choice. Logs the choice and the rates.
void choose_gemm_paths();

}  // namespace mlaserve::runtime
