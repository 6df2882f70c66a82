// libFuzzer harness (fuzz/README.md): the chat output parser (reasoning, content and tool calls in
// DeepSeek-V3's, V3.1's and V3.2's DSML syntax). The first byte picks the syntax (its value mod 4:
// none, V3, V3.1, DSML) and whether the text begins with reasoning (bit 2); the second byte picks
// where the text is cut in two; the rest is the model's text. The text parsed whole, cut in two
// and pushed byte by byte must give the same message (a stream adds up to the whole answer); a
// difference aborts, as does any exception, a sanitizer report or a hang.
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/chat_output.h"
#include "server/tool_calls.h"

namespace {

using mlaserve::server::ChatMessage;
using mlaserve::server::ChatOutputParser;
using mlaserve::server::ToolSyntax;

ChatMessage parse(const std::vector<std::string_view>& pieces, bool reasoning,
                  std::optional<ToolSyntax> syntax) {
  ChatOutputParser parser(reasoning, syntax);
  ChatMessage message;
  for (const std::string_view piece : pieces) message.add(parser.push(piece));
  message.add(parser.finish());
  return message;
}

void check_same(const ChatMessage& a, const ChatMessage& b) {
  if (a.reasoning != b.reasoning || a.content != b.content ||
      a.tool_calls.size() != b.tool_calls.size())
    std::abort();
  for (size_t i = 0; i < a.tool_calls.size(); ++i) {
    if (a.tool_calls[i].name != b.tool_calls[i].name ||
        a.tool_calls[i].arguments != b.tool_calls[i].arguments)
      std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  constexpr std::optional<ToolSyntax> kSyntaxes[] = {std::nullopt, ToolSyntax::DeepseekV3,
                                                     ToolSyntax::DeepseekV31, ToolSyntax::Dsml};
  // Bit 3 picks Kimi's syntax, bit 4 DeepSeek-V4's DSML (added later: the older seeds keep their
  // meaning).
  const std::optional<ToolSyntax> syntax = (data[0] & 8) != 0    ? ToolSyntax::Kimi
                                           : (data[0] & 16) != 0 ? ToolSyntax::DsmlV4
                                                                 : kSyntaxes[data[0] % 4];
  const bool reasoning = (data[0] & 4) != 0;
  const std::string_view text(reinterpret_cast<const char*>(data + 2), size - 2);
  const size_t cut = text.empty() ? 0 : data[1] % (text.size() + 1);
  const ChatMessage whole = parse({text}, reasoning, syntax);
  check_same(whole, parse({text.substr(0, cut), text.substr(cut)}, reasoning, syntax));
  std::vector<std::string_view> bytes;
  for (size_t i = 0; i < text.size(); ++i) bytes.push_back(text.substr(i, 1));
  check_same(whole, parse(bytes, reasoning, syntax));
  return 0;
}
