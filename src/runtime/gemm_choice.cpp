#include "runtime/gemm_choice.h"

#include <mpi.h>
#include <unistd.h>

#include <array>
#include <cstdlib>
#include <fstream>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "kernels/cpu_isa.h"
#include "kernels/parallel.h"
#include "runtime/launch.h"
#include "runtime/placement.h"

namespace mlaserve::runtime {
namespace {

namespace fs = std::filesystem;
using kernels::GemmProbe;
using kernels::GemmRates;

// The value of the first "name : value" line of /proc/cpuinfo with this name ("" if none).
std::string cpuinfo_field(const std::string& name) {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(name, 0) != 0) continue;
    const size_t colon = line.find(':');
    if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
  }
  return "";
}

bool has_flag(const std::string& flags, const std::string& flag) {
  return (" " + flags + " ").find(" " + flag + " ") != std::string::npos;
}

nlohmann::json rates_json(const GemmRates& r, int64_t m) {
  return {{"m", m}, {"bf16_gflops", r.bf16_gflops}, {"f32_gflops", r.f32_gflops}};
}

GemmRates rates_from(const nlohmann::json& j) {
  GemmRates r{j.at("bf16_gflops").get<double>(), j.at("f32_gflops").get<double>()};
  if (!(r.bf16_gflops > 0) || !(r.f32_gflops > 0)) throw std::runtime_error("rate not positive");
  return r;
}

nlohmann::json read_cache(const fs::path& file) {
  std::ifstream in(file);
  if (!in) return nlohmann::json::object();
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  return j.is_object() ? j : nlohmann::json::object();
}

std::string describe(const char* rows, kernels::GemmPath path, const GemmRates& r) {
  return fmt::format("{} rows: {} (bf16 {:.0f}, f32 {:.0f} GFLOP/s)", rows,
                     kernels::gemm_path_name(path), r.bf16_gflops, r.f32_gflops);
}

// This host's first rank's probe: from the cache or measured now (and stored).
GemmProbe host_probe(std::string& origin) {
  const std::string key = machine_key();
  const std::optional<fs::path> file = gemm_cache_file();
  if (file) {
    if (const auto cached = cached_probe(*file, key)) {
      origin = "cached in " + file->string();
      return *cached;
    }
  }
  const GemmProbe probe = kernels::probe_gemm_paths();
  origin = "measured now";
  if (!file) return probe;
  try {
    store_probe(*file, key, probe);
    origin += ", cached in " + file->string();
  } catch (const Error& e) {
    spdlog::warn("kernels: could not cache the GEMM probe: {}", e.what());
  }
  return probe;
}

}  // namespace

std::string machine_key() {
  const std::string flags = cpuinfo_field("flags");
  return fmt::format("{} | avx512_bf16={} amx_bf16={} | {} threads | {}",
                     cpuinfo_field("model name"), has_flag(flags, "avx512_bf16"),
                     has_flag(flags, "amx_bf16"), kernels::parallel_threads(),
                     kernels::gemm_library_version());
}

std::optional<fs::path> gemm_cache_file() {
  if (const char* explicit_file = std::getenv("MLASERVE_KERNEL_CACHE"))
    return fs::path(explicit_file);
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg)
    return fs::path(xdg) / "mlaserve" / "gemm-paths.json";
  if (const char* home = std::getenv("HOME"); home && *home)
    return fs::path(home) / ".cache" / "mlaserve" / "gemm-paths.json";
  return std::nullopt;
}

std::optional<GemmProbe> cached_probe(const fs::path& file, const std::string& key) {
  const nlohmann::json cache = read_cache(file);
  if (!cache.contains(key)) return std::nullopt;
  try {
    const nlohmann::json& entry = cache.at(key);
    return GemmProbe{rates_from(entry.at("mid")), rates_from(entry.at("large"))};
  } catch (const std::exception&) {
    return std::nullopt;  // an entry of another format or a damaged one: measure again
  }
}

void store_probe(const fs::path& file, const std::string& key, const GemmProbe& probe) {
  nlohmann::json cache = read_cache(file);
  cache[key] = {{"mid", rates_json(probe.mid, kernels::kProbeMidRows)},
                {"large", rates_json(probe.large, kernels::kProbeLargeRows)}};
  std::error_code ec;
  fs::create_directories(file.parent_path(), ec);
  const fs::path temporary = file.string() + fmt::format(".{}.tmp", getpid());
  {
    std::ofstream out(temporary);
    out << cache.dump(2) << '\n';
    if (!out.flush()) fail("cannot write {}", temporary.string());
  }
  fs::rename(temporary, file, ec);
  if (ec) {
    fs::remove(temporary, ec);
    fail("cannot replace {}: {}", file.string(), ec.message());
  }
}

void choose_gemm_paths() {
  if (kernels::gemm_choice_made() || kernels::reference_kernels_forced() ||
      kernels::deterministic_kernels() || !kernels::cpu_has_avx512_bf16())
    return;
  const HostRanks host;
  std::string origin;
  GemmProbe probe;
  if (host.rank() == 0) probe = host_probe(origin);
  std::array<double, 4> rates{probe.mid.bf16_gflops, probe.mid.f32_gflops, probe.large.bf16_gflops,
                              probe.large.f32_gflops};
  MPI_Bcast(rates.data(), 4, MPI_DOUBLE, 0, host.comm());
  probe = {{rates[0], rates[1]}, {rates[2], rates[3]}};
  const kernels::GemmChoice choice = kernels::faster_paths(probe);
  kernels::use_gemm_choice(choice);
  if (host.rank() != 0) return;
  spdlog::info("kernels on {}: GEMM of {} / {} (probe {})", host_name(),
               describe("under 64", choice.mid, probe.mid),
               describe("64+", choice.large, probe.large), origin);
}

}  // namespace mlaserve::runtime
