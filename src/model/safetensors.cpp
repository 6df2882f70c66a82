#include "model/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace mlaserve::model {

using nlohmann::json;

const char* storage_type_name(StorageType t) {
  switch (t) {
    case StorageType::F32:
      return "F32";
    case StorageType::BF16:
      return "BF16";
    case StorageType::F8_E4M3:
      return "F8_E4M3";
    case StorageType::F8_E8M0:
      return "F8_E8M0";
    case StorageType::I8:
      return "I8";
    case StorageType::I32:
      return "I32";
    case StorageType::I64:
      return "I64";
  }
  return "?";
}

size_t storage_type_size(StorageType t) {
  switch (t) {
    case StorageType::F32:
    case StorageType::I32:
      return 4;
    case StorageType::BF16:
      return 2;
    case StorageType::F8_E4M3:
    case StorageType::F8_E8M0:
    case StorageType::I8:
      return 1;
    case StorageType::I64:
      return 8;
  }
  return 1;
}

void release_pages(const TensorInfo& t) {
  static const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const auto begin = (reinterpret_cast<uintptr_t>(t.data) + page - 1) / page * page;
  const auto end = (reinterpret_cast<uintptr_t>(t.data) + t.nbytes) / page * page;
  // Advice only: a failure leaves the pages mapped, which costs memory, not correctness.
  if (begin < end) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

class MappedFile {
 public:
  explicit MappedFile(const std::filesystem::path& path) : path_(path.string()) {
    fd_ = ::open(path_.c_str(), O_RDONLY);
    if (fd_ < 0) fail("cannot open {}: {}", path_, std::strerror(errno));
    struct stat st {};
    if (fstat(fd_, &st) != 0) fail("cannot stat {}: {}", path_, std::strerror(errno));
    size_ = static_cast<size_t>(st.st_size);
    if (size_ == 0) fail("{}: file is empty", path_);
    void* p = mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd_, 0);
    if (p == MAP_FAILED) fail("cannot mmap {}: {}", path_, std::strerror(errno));
    data_ = static_cast<const uint8_t*>(p);
  }
  ~MappedFile() {
    if (data_) munmap(const_cast<uint8_t*>(data_), size_);
    if (fd_ >= 0) ::close(fd_);
  }
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  std::string path_;
  int fd_ = -1;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

namespace {

StorageType parse_storage_type(const std::string& s, const std::string& file,
                               const std::string& tensor) {
  if (s == "F32") return StorageType::F32;
  if (s == "BF16") return StorageType::BF16;
  if (s == "F8_E4M3") return StorageType::F8_E4M3;
  if (s == "F8_E8M0") return StorageType::F8_E8M0;
  if (s == "I8") return StorageType::I8;
  if (s == "I32") return StorageType::I32;
  if (s == "I64") return StorageType::I64;
  fail("{}: tensor '{}' has dtype {} (supported: F32, BF16, F8_E4M3, F8_E8M0, I8, I32, I64)", file,
       tensor, s);
}

TensorInfo parse_entry(const std::string& name, const json& e, const uint8_t* data,
                       size_t data_size, const std::string& file) {
  if (!e.is_object() || !e.contains("dtype") || !e.contains("shape") ||
      !e.contains("data_offsets") || !e["dtype"].is_string() || !e["shape"].is_array() ||
      !e["data_offsets"].is_array() || e["data_offsets"].size() != 2) {
    fail("{}: bad header entry for tensor '{}': {}", file, name, e.dump());
  }
  TensorInfo t;
  t.name = name;
  t.file = file;
  t.type = parse_storage_type(e["dtype"].get<std::string>(), file, name);
  // The element count must not wrap: shape [2^62, 4] would otherwise need "0" bytes and pass.
  size_t count = 1;
  for (const auto& d : e["shape"]) {
    if (!d.is_number_unsigned() || d.get<uint64_t>() > uint64_t{INT64_MAX} ||
        __builtin_mul_overflow(count, d.get<size_t>(), &count) ||
        count > SIZE_MAX / storage_type_size(t.type)) {
      fail("{}: tensor '{}' has a bad shape {}", file, name, e["shape"].dump());
    }
    t.shape.push_back(d.get<int64_t>());
  }
  const auto& off = e["data_offsets"];
  if (!off[0].is_number_unsigned() || !off[1].is_number_unsigned()) {
    fail("{}: tensor '{}' has bad data_offsets {}", file, name, off.dump());
  }
  const size_t begin = off[0].get<size_t>(), end = off[1].get<size_t>();
  if (begin > end || end > data_size) {
    fail("{}: tensor '{}' bytes [{}, {}) lie outside the file's {} data bytes (truncated file?)",
         file, name, begin, end, data_size);
  }
  t.nbytes = end - begin;
  if (t.nbytes != count * storage_type_size(t.type)) {
    fail("{}: tensor '{}' has {} bytes but shape {} of {} needs {}", file, name, t.nbytes,
         e["shape"].dump(), storage_type_name(t.type), count * storage_type_size(t.type));
  }
  t.data = data + begin;
  return t;
}

}  // namespace

SafetensorsFile::SafetensorsFile(const std::filesystem::path& path)
    : map_(std::make_unique<MappedFile>(path)) {
  const std::string file = path.string();
  if (map_->size() < 8)
    fail("{}: too short for a safetensors header ({} bytes)", file, map_->size());
  uint64_t header_len = 0;
  std::memcpy(&header_len, map_->data(), 8);  // little-endian on every supported host
  if (header_len > map_->size() - 8 || header_len > (100u << 20)) {
    fail("{}: header length {} exceeds the file size {} (truncated or not a safetensors file)",
         file, header_len, map_->size());
  }
  json header;
  try {
    header = json::parse(map_->data() + 8, map_->data() + 8 + header_len);
  } catch (const json::exception& e) {
    fail("{}: header is not valid JSON: {}", file, e.what());
  }
  if (!header.is_object()) fail("{}: header is not a JSON object", file);
  const uint8_t* data = map_->data() + 8 + header_len;
  const size_t data_size = map_->size() - 8 - header_len;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") continue;
    tensors_.emplace(name, parse_entry(name, entry, data, data_size, file));
  }
}

SafetensorsFile::~SafetensorsFile() = default;

Checkpoint Checkpoint::open(const std::filesystem::path& model_dir, const std::string& prefix) {
  Checkpoint ckpt;
  ckpt.dir_ = model_dir;
  ckpt.prefix_ = prefix;
  // A tensor's name as the loader asks for it; false for one outside the prefix.
  const auto unprefixed = [&](std::string& name) {
    if (!name.starts_with(prefix)) return false;
    name.erase(0, prefix.size());
    return true;
  };
  const auto single = model_dir / "model.safetensors";
  const auto index_path = model_dir / "model.safetensors.index.json";
  std::vector<std::string> file_names;
  if (std::filesystem::exists(index_path)) {
    std::ifstream in(index_path);
    json index;
    try {
      index = json::parse(in);
    } catch (const json::exception& e) {
      fail("{}: invalid JSON: {}", index_path.string(), e.what());
    }
    if (!index.contains("weight_map") || !index["weight_map"].is_object()) {
      fail("{}: missing 'weight_map' object", index_path.string());
    }
    for (const auto& [name, file] : index["weight_map"].items()) {
      if (!file.is_string())
        fail("{}: weight_map entry '{}' is not a file name", index_path.string(), name);
      const auto f = file.get<std::string>();
      std::string own = name;
      if (!unprefixed(own)) continue;
      ckpt.weight_map_.emplace(own, f);
      if (std::find(file_names.begin(), file_names.end(), f) == file_names.end())
        file_names.push_back(f);
    }
  } else if (std::filesystem::exists(single)) {
    file_names.push_back("model.safetensors");
  } else {
    fail("{}: no model.safetensors or model.safetensors.index.json", model_dir.string());
  }
  for (const auto& f : file_names) {
    auto file = std::make_shared<SafetensorsFile>(model_dir / f);
    for (const auto& [stored, info] : file->tensors()) {
      std::string name = stored;
      if (!unprefixed(name)) continue;
      if (const auto [at, added] = ckpt.index_.emplace(name, &info); !added) {
        fail("{}: tensor '{}' appears in both {} and {}", model_dir.string(), name,
             at->second->file, info.file);
      }
    }
    ckpt.files_.push_back(std::move(file));
  }
  return ckpt;
}

const TensorInfo& Checkpoint::get(const std::string& own_name) const {
  auto it = index_.find(own_name);
  if (it != index_.end()) return *it->second;
  const std::string name = prefix_ + own_name;  // as the checkpoint would name it
  if (weight_map_.empty())
    fail("{}: missing tensor '{}'", (dir_ / "model.safetensors").string(), name);
  const auto shard = weight_map_.find(own_name);
  if (shard == weight_map_.end()) {
    fail("{}: missing tensor '{}' (not in its weight_map)",
         (dir_ / "model.safetensors.index.json").string(), name);
  }
  fail("{}: missing tensor '{}' (model.safetensors.index.json places it in this file)",
       (dir_ / shard->second).string(), name);
}

void write_safetensors(const std::filesystem::path& path,
                       const std::vector<TensorToWrite>& tensors) {
  json header = json::object();
  size_t offset = 0;
  for (const auto& t : tensors) {
    header[t.name] = {{"dtype", storage_type_name(t.type)},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + t.bytes.size()}}};
    offset += t.bytes.size();
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // align the data to 8 bytes, as HF does
  std::ofstream out(path, std::ios::binary);
  if (!out) fail("cannot write {}", path.string());
  const uint64_t len = text.size();
  out.write(reinterpret_cast<const char*>(&len), 8);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  for (const auto& t : tensors)
    out.write(reinterpret_cast<const char*>(t.bytes.data()),
              static_cast<std::streamsize>(t.bytes.size()));
  if (!out) fail("error writing {}", path.string());
}

}  // namespace mlaserve::model
