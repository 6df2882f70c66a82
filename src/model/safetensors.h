// Read-only access to HF safetensors checkpoints through mmap: one file, or shards listed in
// model.safetensors.index.json. Pages are touched only when a tensor's bytes are read, so a
// rank that loads only its shards reads only those bytes.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace mlaserve::model {

// I32 and I64 hold compressed-tensors' packed int4 codes (8 per int32) and their weight_shape;
// DeepSeek-V4 stores its experts' FP4 e2m1 codes two per I8 byte, with F8_E8M0 (power-of-two)
// scales, and its token-to-expert hash table as I64.
enum class StorageType { F32, BF16, F8_E4M3, F8_E8M0, I8, I32, I64 };

const char* storage_type_name(StorageType t);
size_t storage_type_size(StorageType t);

struct TensorInfo {
  std::string name;
  StorageType type;
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;  // into the mmapped file
  size_t nbytes = 0;
  std::string file;  // for error messages
};

// Drops the pages wholly inside tensor t from this process's mapping (MADV_DONTNEED). The
// loader calls it once it has copied what it needs, so that the mapped checkpoint does not add
// to the resident set on top of the copies (peak RSS during load ~ the weights it keeps).
// Reading t again faults its pages back in from the page cache.
void release_pages(const TensorInfo& t);

class MappedFile;

class SafetensorsFile {
 public:
  explicit SafetensorsFile(const std::filesystem::path& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::map<std::string, TensorInfo>& tensors() const { return tensors_; }

 private:
  std::unique_ptr<MappedFile> map_;
  std::map<std::string, TensorInfo> tensors_;
};

// All tensors of a model directory, whichever file holds them.
class Checkpoint {
 public:
  // prefix: read only the tensors named prefix + a name, found by that name (Kimi-K2.5's
  // language model under "language_model."); the others (a vision tower) are not indexed.
  static Checkpoint open(const std::filesystem::path& model_dir, const std::string& prefix = "");

  bool contains(const std::string& name) const { return index_.count(name) != 0; }
  // The tensor; a missing name is an error naming the tensor and the file that should hold it
  // (model.safetensors, or the shard that model.safetensors.index.json names).
  const TensorInfo& get(const std::string& name) const;
  const std::filesystem::path& dir() const { return dir_; }
  // t's name as get() finds it (the stored name less the prefix): for the names derived from it.
  std::string own_name(const TensorInfo& t) const { return t.name.substr(prefix_.size()); }

 private:
  std::filesystem::path dir_;
  std::string prefix_;
  std::vector<std::shared_ptr<SafetensorsFile>> files_;
  std::map<std::string, const TensorInfo*> index_;
  std::map<std::string, std::string> weight_map_;  // tensor -> shard file, sharded checkpoints
};

// Writes tensors (name, type, shape, raw little-endian bytes) as one safetensors file.
struct TensorToWrite {
  std::string name;
  StorageType type;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};
void write_safetensors(const std::filesystem::path& path,
                       const std::vector<TensorToWrite>& tensors);

}  // namespace mlaserve::model
