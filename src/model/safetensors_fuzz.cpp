// libFuzzer harness (fuzz/README.md): arbitrary checkpoint files through Checkpoint::open. The
// first byte picks which file the rest is: model.safetensors itself (header length, JSON header,
// data), or model.safetensors.index.json beside two valid shards, and whether the checkpoint is
// opened under a name prefix ("p.", as Kimi-K2.5's "language_model."). Every tensor the
// checkpoint then offers is read end to end, so a tensor whose bytes lie outside the mapping
// would fault.
// A malformed file must be an mlaserve::Error; any other exception is reported as a crash.
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/error.h"
#include "model/safetensors.h"

namespace {

namespace fs = std::filesystem;
using namespace mlaserve::model;

// A directory of this process's own, with the two shards an index may name; removed when the
// process exits normally.
struct WorkDir {
  WorkDir() {
    std::string pattern = (fs::temp_directory_path() / "safetensors_fuzz.XXXXXX").string();
    if (!mkdtemp(pattern.data())) std::abort();
    path = pattern;
    const auto bytes = [](size_t n) { return std::vector<uint8_t>(n, 0x3c); };
    write_safetensors(path / "shard-1.safetensors", {{"a", StorageType::F32, {2, 3}, bytes(24)},
                                                     {"b", StorageType::BF16, {4}, bytes(8)}});
    write_safetensors(path / "shard-2.safetensors", {{"c", StorageType::F8_E4M3, {5}, bytes(5)},
                                                     {"d", StorageType::I32, {2, 2}, bytes(16)},
                                                     {"e", StorageType::I64, {2}, bytes(16)}});
  }
  ~WorkDir() { fs::remove_all(path); }
  fs::path path;
};

const fs::path& work_dir() {
  static const WorkDir dir;
  return dir.path;
}

void write_file(const fs::path& path, const uint8_t* data, size_t size) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
}

// Sums every byte of every tensor, so that reading them is not optimised away.
unsigned read_all(const Checkpoint& checkpoint, const char* const* names, size_t count) {
  unsigned sum = 0;
  for (size_t i = 0; i < count; ++i) {
    if (!checkpoint.contains(names[i])) continue;
    const TensorInfo& t = checkpoint.get(names[i]);
    for (size_t b = 0; b < t.nbytes; ++b) sum += t.data[b];
  }
  return sum;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const fs::path& dir = work_dir();
  const bool index = data[0] % 2 == 1;
  fs::remove(dir / "model.safetensors");
  fs::remove(dir / "model.safetensors.index.json");
  write_file(dir / (index ? "model.safetensors.index.json" : "model.safetensors"), data + 1,
             size - 1);
  try {
    const Checkpoint checkpoint = Checkpoint::open(dir, data[0] & 2 ? "p." : "");
    static const char* const kNames[] = {"a", "b", "c", "d", "e", "weight", "x", "w.weight_packed"};
    volatile unsigned sum = read_all(checkpoint, kNames, std::size(kNames));
    (void)sum;
    if (!checkpoint.contains("missing")) {
      try {
        (void)checkpoint.get("missing");
        std::abort();  // get() must refuse a name the checkpoint does not contain
      } catch (const mlaserve::Error&) {
      }
    }
  } catch (const mlaserve::Error&) {
  }
  return 0;
}
