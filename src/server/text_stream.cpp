#include "server/text_stream.h"

#include <utility>

#include "tokenizer/utf8.h"

namespace mlaserve::server {

TextStream::TextStream(const tokenizer::Tokenizer& tokenizer, bool skip_special_tokens,
                       std::vector<std::string> stops)
    : decoder_(tokenizer, skip_special_tokens), stops_(std::move(stops)) {}

std::string TextStream::push(int32_t token) {
  if (matched_stop()) return {};
  const std::string decoded = decoder_.push(token);
  decoded_code_points_ += tokenizer::utf8::count_code_points(decoded);
  return stops_.push(decoded);
}

std::string TextStream::finish() {
  if (matched_stop()) return {};
  std::string released = stops_.push(decoder_.flush());
  return released + stops_.finish();
}

}  // namespace mlaserve::server
