// Parses a template into its syntax tree. Statements outside the supported subset (macro, call,
// filter blocks, raw, include, block set, loop filters, ...) are an Error naming them.
#pragma once

#include <string_view>

#include "tokenizer/jinja_ast.h"

namespace mlaserve::tokenizer::jinja {

Template parse(std::string_view source);

}  // namespace mlaserve::tokenizer::jinja
