// libFuzzer harness (fuzz/README.md): the Jinja-subset chat-template interpreter and the built-in
// chat formats. The first byte picks the mode (its value mod 4): 0 or 2, an arbitrary template,
// then a NUL byte, then the variables as JSON (an object, or anything else as "messages"); 1,
// DeepSeek-V3's own template with the rest as the message JSON; 3, the rest as a chat
// ({"messages", "tools", "kwargs"}, or a list of messages) through DeepSeek-V3.1's template and
// DeepSeek-V3.2's and V4's built-in encoders, chat_template_kwargs included. A template or message
// the interpreter refuses is an mlaserve::Error; any other exception escapes and is reported as a
// crash, as are hangs (libFuzzer's -timeout) and runaway memory.
#include <cstdint>
#include <string_view>

#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>

#include "core/error.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace {

using mlaserve::tokenizer::ChatTemplate;
using mlaserve::tokenizer::Tokenizer;

const Tokenizer& deepseek_v3() {
  static const Tokenizer loaded =
      Tokenizer::load(MLASERVE_SOURCE_DIR "/tests/data/tokenizer/deepseek-v3");
  return loaded;
}

// DeepSeek-V3's vocabulary with V3.1's template, and with V3.2's encoder.
const Tokenizer& deepseek_v31() {
  static const Tokenizer loaded = [] {
    std::ifstream file(MLASERVE_SOURCE_DIR "/tests/data/chat-v31/chat_template.jinja");
    std::ostringstream text;
    text << file.rdbuf();
    return deepseek_v3().with_chat_template(text.str());
  }();
  return loaded;
}

const Tokenizer& deepseek_v32() {
  static const Tokenizer loaded = deepseek_v3().with_chat_template("deepseek-v32");
  return loaded;
}

const Tokenizer& deepseek_v4() {
  static const Tokenizer loaded = deepseek_v3().with_chat_template("deepseek-v4");
  return loaded;
}

// A chat for render_chat: {"messages", "tools", "kwargs"} or a list of messages.
void render_chat_formats(std::string_view input) {
  const nlohmann::ordered_json parsed =
      nlohmann::ordered_json::parse(input, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) return;
  mlaserve::tokenizer::ChatInput chat;
  if (parsed.is_object()) {
    chat.messages = parsed.value("messages", nlohmann::ordered_json::array());
    chat.tools = parsed.value("tools", nlohmann::ordered_json());
    chat.kwargs = parsed.value("kwargs", nlohmann::ordered_json::object());
  } else {
    chat.messages = parsed;
  }
  for (const Tokenizer* tokenizer : {&deepseek_v31(), &deepseek_v32(), &deepseek_v4()}) {
    try {
      (void)tokenizer->render_chat(chat);
    } catch (const mlaserve::Error&) {
    }
  }
}

// The JSON in `text`, or a short conversation when it is not JSON.
nlohmann::json messages_or_default(std::string_view text) {
  nlohmann::json parsed = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!parsed.is_discarded()) return parsed;
  return nlohmann::json::parse(R"([{"role":"system","content":"Be brief."},
                                   {"role":"user","content":"Hi"},
                                   {"role":"assistant","content":"Hello"}])");
}

void render_arbitrary_template(std::string_view input) {
  const size_t split = input.find('\0');
  const std::string_view source = input.substr(0, split);
  const std::string_view rest = split == input.npos ? std::string_view() : input.substr(split + 1);
  nlohmann::json variables = messages_or_default(rest);
  if (!variables.is_object()) {
    variables = {{"messages", std::move(variables)},
                 {"add_generation_prompt", true},
                 {"bos_token", "<s>"},
                 {"eos_token", "</s>"}};
  }
  try {
    const ChatTemplate chat_template(source);
    (void)chat_template.render(variables);
  } catch (const mlaserve::Error&) {
  }
}

void render_deepseek_v3(std::string_view input) {
  try {
    (void)deepseek_v3().apply_chat_template(messages_or_default(input), true);
  } catch (const mlaserve::Error&) {
  }
}

}  // namespace

// The tokenizer loads once, before the first input: its ~1 s (more under ASan) would otherwise
// count against that input's -timeout.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  (void)deepseek_v3();
  (void)deepseek_v31();
  (void)deepseek_v32();
  (void)deepseek_v4();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
  if (data[0] % 2 == 0)
    render_arbitrary_template(rest);
  else if (data[0] % 4 == 1)
    render_deepseek_v3(rest);
  else
    render_chat_formats(rest);
  return 0;
}
