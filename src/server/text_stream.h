// Generated tokens to client text: incremental detokenization (never half a UTF-8 character)
// followed by stop-string matching (never text that a stop string will cut).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "server/stop_strings.h"
#include "tokenizer/tokenizer.h"

namespace mlaserve::server {

class TextStream {
 public:
  TextStream(const tokenizer::Tokenizer& tokenizer, bool skip_special_tokens,
             std::vector<std::string> stops);

  // Decodes one more token; returns the text that can be released now.
  std::string push(int32_t token);
  // The generation ended: releases what was held back (an unfinished character as U+FFFD).
  std::string finish();

  // The stop string that ended the text, if one did; later pushes release nothing.
  const std::optional<std::string>& matched_stop() const { return stops_.matched(); }
  // Code points decoded so far, before stop-string trimming (for logprob text offsets).
  size_t decoded_code_points() const { return decoded_code_points_; }

 private:
  tokenizer::IncrementalDecoder decoder_;
  StopStringMatcher stops_;
  size_t decoded_code_points_ = 0;
};

}  // namespace mlaserve::server
