#include "tokenizer/chat_template.h"

#include "core/error.h"
#include "tokenizer/jinja_interpreter.h"
#include "tokenizer/jinja_parser.h"

namespace mlaserve::tokenizer {

ChatTemplate::ChatTemplate(std::string_view source)
    : template_(std::make_shared<const jinja::Template>(jinja::parse(source))) {}

namespace {

template <typename Json>
std::string render_with(const jinja::Template& compiled, const Json& variables) {
  if (!variables.is_object()) fail("chat template variables must be a JSON object");
  jinja::Dict globals;
  for (const auto& [name, value] : variables.items()) {
    globals.emplace_back(name, jinja::Value::from_json(value));
  }
  return jinja::render(compiled, globals);
}

}  // namespace

std::string ChatTemplate::render(const nlohmann::json& variables) const {
  return render_with(*template_, variables);
}

std::string ChatTemplate::render(const nlohmann::ordered_json& variables) const {
  return render_with(*template_, variables);
}

}  // namespace mlaserve::tokenizer
