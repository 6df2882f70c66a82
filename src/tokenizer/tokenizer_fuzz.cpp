// libFuzzer harness (fuzz/README.md): DeepSeek-V3's tokenizer on arbitrary bytes and ids.
// The first byte picks what the rest is: text to encode, or little-endian int32 ids to decode
// at once and through the streaming decoder. Besides not crashing, it checks the documented
// properties: valid UTF-8 decodes back to itself, and the streaming decoder's pushes plus its
// flush equal one decode of the same ids. Errors (invalid UTF-8, unknown ids) are
// mlaserve::Error; any other exception escapes and is reported as a crash.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "tokenizer/tokenizer.h"

namespace {

using mlaserve::tokenizer::IncrementalDecoder;
using mlaserve::tokenizer::Tokenizer;

const Tokenizer& tokenizer() {
  static const Tokenizer loaded =
      Tokenizer::load(MLASERVE_SOURCE_DIR "/tests/data/tokenizer/deepseek-v3");
  return loaded;
}

void require(bool holds) {
  if (!holds) std::abort();
}

void fuzz_encode(std::string_view text) {
  std::vector<int32_t> ids;
  try {
    ids = tokenizer().encode(text, /*add_special_tokens=*/false);
  } catch (const mlaserve::Error&) {
    return;  // not valid UTF-8
  }
  require(tokenizer().decode(ids, /*skip_special_tokens=*/false) == text);
  (void)tokenizer().encode(text, /*add_special_tokens=*/true);
}

std::vector<int32_t> read_ids(const uint8_t* data, size_t size) {
  std::vector<int32_t> ids(size / sizeof(int32_t));
  if (!ids.empty()) std::memcpy(ids.data(), data, ids.size() * sizeof(int32_t));
  return ids;
}

void fuzz_decode(const std::vector<int32_t>& ids, bool skip_special) {
  std::string whole;
  try {
    whole = tokenizer().decode(ids, skip_special);
  } catch (const mlaserve::Error&) {
    return;  // an id outside the vocabulary
  }
  IncrementalDecoder stream(tokenizer(), skip_special);
  std::string streamed;
  for (const int32_t id : ids) streamed += stream.push(id);
  streamed += stream.flush();
  require(streamed == whole);
}

}  // namespace

// The tokenizer loads once, before the first input: its ~1 s (more under ASan) would otherwise
// count against that input's -timeout.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  (void)tokenizer();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t mode = data[0] % 3;
  ++data, --size;
  if (mode == 0) {
    fuzz_encode({reinterpret_cast<const char*>(data), size});
  } else {
    // Ids mostly inside the vocabulary, so that decoding gets past the id check: the raw value
    // modulo a little more than the vocabulary size (mode 1), or as given (mode 2).
    std::vector<int32_t> ids = read_ids(data, size);
    if (mode == 1) {
      const auto bound = static_cast<uint32_t>(tokenizer().vocab_size() + 8);
      for (int32_t& id : ids) id = static_cast<int32_t>(static_cast<uint32_t>(id) % bound);
    }
    fuzz_decode(ids, /*skip_special=*/false);
    fuzz_decode(ids, /*skip_special=*/true);
  }
  return 0;
}
