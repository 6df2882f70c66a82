// Chat templates: an interpreter for the subset of Jinja2 that HF chat templates such as
// DeepSeek-V2/V3's use, with the environment HF renders them in (trim_blocks, lstrip_blocks).
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace mlaserve::tokenizer {

namespace jinja {
struct Template;
}

class ChatTemplate {
 public:
  // Parses `source`. A syntax error or a construct outside the supported subset is an
  // mlaserve::Error naming it and its line.
  explicit ChatTemplate(std::string_view source);

  // Renders with the top-level variables in `variables` (a JSON object).
  std::string render(const nlohmann::json& variables) const;
  // The same with objects in the order written (tojson prints them so, as Python does).
  std::string render(const nlohmann::ordered_json& variables) const;

 private:
  std::shared_ptr<const jinja::Template> template_;
};

}  // namespace mlaserve::tokenizer
