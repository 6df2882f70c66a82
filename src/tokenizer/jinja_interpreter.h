// Executes a parsed template.
#pragma once

#include <string>

#include "tokenizer/jinja_ast.h"

namespace mlaserve::tokenizer::jinja {

// Renders `tmpl` with `globals` as its top-level variables.
std::string render(const Template& tmpl, const Dict& globals);

}  // namespace mlaserve::tokenizer::jinja
