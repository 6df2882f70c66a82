#include "grammar/compiled_grammar.h"
#include "grammar/grammar.h"
#include "grammar/json_rules.h"
#include "grammar/json_schema.h"
#include "grammar/regex.h"

namespace mlaserve::grammar {

GrammarBuilder::GrammarBuilder()
    : rules_(std::make_unique<RuleSet>()), json_(std::make_unique<JsonRules>(*rules_)) {}
GrammarBuilder::~GrammarBuilder() = default;
GrammarBuilder::GrammarBuilder(GrammarBuilder&&) noexcept = default;
GrammarBuilder& GrammarBuilder::operator=(GrammarBuilder&&) noexcept = default;

GrammarBuilder::Rule GrammarBuilder::checked(Rule rule) const {
  if (rule < 0 || rule >= rules_->rule_count())
    throw GrammarError("grammar builder: rule " + std::to_string(rule) +
                       " is not from this builder");
  return rule;
}

GrammarBuilder::Rule GrammarBuilder::literal(std::string_view bytes) {
  return rules_->literal(bytes);
}

GrammarBuilder::Rule GrammarBuilder::sequence(std::vector<Rule> parts) {
  for (const Rule part : parts) checked(part);
  return rules_->sequence(std::move(parts));
}

GrammarBuilder::Rule GrammarBuilder::choice(std::vector<Rule> alternatives) {
  for (const Rule alternative : alternatives) checked(alternative);
  return rules_->choice(std::move(alternatives));
}

GrammarBuilder::Rule GrammarBuilder::json_schema(const nlohmann::json& schema) {
  return json_schema(nlohmann::ordered_json(schema));
}

GrammarBuilder::Rule GrammarBuilder::json_schema(const nlohmann::ordered_json& schema) {
  return compile_json_schema(*json_, *rules_, schema);
}

GrammarBuilder::Rule GrammarBuilder::json_object() {
  return json_->object(json_->value());
}

GrammarBuilder::Rule GrammarBuilder::one_or_more(Rule item, Rule separator) {
  return rules_->separated(checked(item), checked(separator), 1, std::nullopt);
}

GrammarPtr GrammarBuilder::build(Rule root) && {
  return make_grammar(*rules_, checked(root));
}

GrammarPtr json_schema_grammar(const nlohmann::json& schema) {
  return json_schema_grammar(nlohmann::ordered_json(schema));
}

GrammarPtr json_schema_grammar(const nlohmann::ordered_json& schema) {
  GrammarBuilder builder;
  const GrammarBuilder::Rule root = builder.json_schema(schema);
  try {
    return std::move(builder).build(root);
  } catch (const GrammarError& e) {
    // Only a $ref cycle makes a schema's grammar recurse without end or without input.
    throw GrammarError(std::string("json_schema: $ref recursion: ") + e.what(), "$ref");
  }
}

GrammarPtr json_object_grammar() {
  GrammarBuilder builder;
  const GrammarBuilder::Rule root = builder.json_object();
  return std::move(builder).build(root);
}

GrammarPtr regex_grammar(std::string_view pattern) {
  RuleSet rules;
  const RuleSet::Rule root = compile_regex(rules, pattern);
  return make_grammar(rules, root);
}

}  // namespace mlaserve::grammar
