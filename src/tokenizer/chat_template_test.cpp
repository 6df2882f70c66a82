// The Jinja subset of chat templates, construct by construct, and the errors for what is outside
// it. Expected outputs are what Jinja2 gives with HF's settings (trim_blocks, lstrip_blocks).
#include <gtest/gtest.h>

#include "core/error.h"
#include "tokenizer/chat_template.h"

namespace mlaserve::tokenizer {
namespace {

std::string render(std::string_view source,
                   const nlohmann::json& variables = nlohmann::json::object()) {
  return ChatTemplate(source).render(variables);
}

// The Error message of rendering, or "" if it renders.
std::string render_error(std::string_view source,
                         const nlohmann::json& variables = nlohmann::json::object()) {
  try {
    render(source, variables);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

const nlohmann::json kMessages = nlohmann::json::parse(R"({"messages": [
  {"role": "system", "content": "Be brief."},
  {"role": "user", "content": "Hi"},
  {"role": "assistant", "content": null, "tool_calls": [{"type": "function"}]}]})");

TEST(ChatTemplate, TextAndOutput) {
  EXPECT_EQ(render("plain text"), "plain text");
  EXPECT_EQ(render("{{ name }}!", {{"name", "Ada"}}), "Ada!");
  EXPECT_EQ(render("[{{ missing }}]"), "[]");
  EXPECT_EQ(render("{{ none }} {{ true }} {{ 3 }} {{ 2.5 }} {{ 4.0 }}"), "None True 3 2.5 4.0");
  EXPECT_EQ(render("{{ [1, 'a', none] }} {{ {'k': 1} }}"), "[1, 'a', None] {'k': 1}");
}

TEST(ChatTemplate, StringLiteralsAndEscapes) {
  EXPECT_EQ(render(R"({{ 'it\'s' ~ "\t\"q\"" ~ '\n' ~ '\u00e9\x41' }})"), "it's\t\"q\"\néA");
  EXPECT_EQ(render("{{ 'a' 'b' }}"), "ab");
  EXPECT_EQ(render("{{ '<｜User｜>' + 'x' }}"), "<｜User｜>x");
}

TEST(ChatTemplate, ConcatenationAndArithmetic) {
  EXPECT_EQ(render("{{ 'a' + 'b' ~ 1 ~ none }}"), "ab1None");
  EXPECT_EQ(
      render("{{ 1 + 2 * 3 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ 7 / 2 }} {{ 2 ** 3 }}"),
      "7 3 -4 1 3.5 8");
  EXPECT_EQ(render("{{ 'ab' * 2 }} {{ [1] + [2] }} {{ -(3) }}"), "abab [1, 2] -3");
}

TEST(ChatTemplate, ComparisonsAndLogic) {
  EXPECT_EQ(render("{{ 1 == 1.0 }} {{ 'a' != 'b' }} {{ 1 < 2 < 3 }} {{ 3 >= 4 }}"),
            "True True True False");
  EXPECT_EQ(render("{{ not true }} {{ true and 'x' }} {{ false or 'y' }} {{ none or 0 }}"),
            "False x y 0");
  EXPECT_EQ(render("{{ 'b' in 'abc' }} {{ 2 in [1, 2] }} {{ 'k' in {'k': 1} }} {{ 3 not in [3] }}"),
            "True True True False");
  EXPECT_EQ(render("{{ 'yes' if 1 > 0 else 'no' }}|{{ 'shown' if false }}|"), "yes||");
}

TEST(ChatTemplate, Tests) {
  EXPECT_EQ(render("{{ x is defined }} {{ y is defined }} {{ y is undefined }}", {{"x", 1}}),
            "True False True");
  EXPECT_EQ(render("{{ x is none }} {{ x is not none }}", {{"x", nullptr}}), "True False");
  EXPECT_EQ(
      render("{{ 's' is string }} {{ 1 is number }} {{ [] is sequence }} {{ {} is mapping }}"),
      "True True True True");
  EXPECT_EQ(render("{{ not x is defined }}"), "True");
}

TEST(ChatTemplate, AttributesSubscriptsAndSlices) {
  const nlohmann::json vars = {{"m", {{"role", "user"}, {"list", {10, 20, 30}}}}};
  EXPECT_EQ(render("{{ m.role }} {{ m['role'] }} {{ m.list[1] }} {{ m.list[-1] }}", vars),
            "user user 20 30");
  EXPECT_EQ(render("[{{ m.nothing }}] [{{ m.list[7] }}]", vars), "[] []");
  EXPECT_EQ(render("{{ m.list[1:] }} {{ m.list[::-1] }} {{ 'héllo'[1:3] }}", vars),
            "[20, 30] [30, 20, 10] él");
}

TEST(ChatTemplate, IfElifElse) {
  const char* source = "{% if n == 1 %}one{% elif n == 2 %}two{% else %}many{% endif %}";
  EXPECT_EQ(render(source, {{"n", 1}}), "one");
  EXPECT_EQ(render(source, {{"n", 2}}), "two");
  EXPECT_EQ(render(source, {{"n", 5}}), "many");
}

TEST(ChatTemplate, ForLoopVariables) {
  EXPECT_EQ(render("{% for x in xs %}{{ loop.index }}{{ x }}{% if loop.first %}F{% endif %}"
                   "{% if loop.last %}L{% endif %},{% endfor %}",
                   {{"xs", {"a", "b", "c"}}}),
            "1aF,2b,3cL,");
  EXPECT_EQ(
      render("{% for x in xs %}{{ loop.index0 }}/{{ loop.length }} {% endfor %}", {{"xs", {1, 2}}}),
      "0/2 1/2 ");
  EXPECT_EQ(render("{% for x in [] %}x{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(render("{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}", {{"d", {{"a", 1}}}}),
            "a=1;");
  EXPECT_EQ(render("{% for x in [1, 2, 3, 4] %}{% if x == 2 %}{% continue %}{% endif %}"
                   "{% if x == 4 %}{% break %}{% endif %}{{ x }}{% endfor %}"),
            "13");
}

TEST(ChatTemplate, SetScopesAndNamespace) {
  EXPECT_EQ(
      render("{% set x = 'a' %}{% for i in [1] %}{% set x = 'b' %}{{ x }}{% endfor %}{{ x }}"),
      "ba");
  EXPECT_EQ(
      render("{% set ns = namespace(n=0, s='') %}{% for i in [1, 2, 3] %}"
             "{% set ns.n = ns.n + i %}{% set ns.s = ns.s ~ i %}{% endfor %}{{ ns.n }} {{ ns.s }}"),
      "6 123");
  EXPECT_NE(render_error("{% set s = 'x' %}{% set s.a = 1 %}").find("namespace"),
            std::string::npos);
}

TEST(ChatTemplate, WhitespaceControl) {
  EXPECT_EQ(render("a  {%- if true -%}  b  {%- endif -%}  c"), "abc");
  EXPECT_EQ(render("a {{- 'b' -}} c"), "abc");
  // trim_blocks drops the newline after a block tag; lstrip_blocks the indent before one.
  EXPECT_EQ(render("{% if true %}\n  x\n  {% endif %}\ny"), "  x\ny");
  EXPECT_EQ(render("  {%+ if true %}x{% endif %}"), "  x");
  EXPECT_EQ(render("{# a comment #}\nkept {# another -#}   text"), "kept text");
  EXPECT_EQ(render("{{ 'x' }}\n"), "x");  // one trailing newline of the template is dropped
  EXPECT_EQ(render("{{ 'x' }}\n\n"), "x\n");
  EXPECT_EQ(render("x\n  {% if true %}\n    y\n  {% endif %}\nz"), "x\n    y\nz");
  EXPECT_EQ(render("{% for m in ms %}\n{{ m }}\n{% endfor %}\n", {{"ms", {1, 2}}}), "1\n2\n");
  EXPECT_EQ(render("  {# c #}\nq"), "q");
}

TEST(ChatTemplate, FiltersAndMethods) {
  EXPECT_EQ(
      render("{{ xs | length }} {{ 'héllo' | length }} {{ '  t  ' | trim }}|", {{"xs", {1, 2}}}),
      "2 5 t|");
  EXPECT_EQ(render("{{ missing | default('d') }} {{ xs | join(', ') }} {{ 'Ab' | upper }}",
                   {{"xs", {1, 2}}}),
            "d 1, 2 AB");
  EXPECT_EQ(render("{{ {'a': [1, 'x'], 'b': none} | tojson }}"), R"({"a": [1, "x"], "b": null})");
  EXPECT_EQ(render("{{ xs | first }}{{ xs | last }}", {{"xs", {1, 2}}}), "12");
  EXPECT_EQ(render("{{ 'abc'.startswith('ab') }} {{ 'abc'.endswith(('x', 'c')) }}"), "True True");
  EXPECT_EQ(render("{{ ' a b '.strip() }}|{{ 'xxaxx'.strip('x') }}|{{ 'a,b'.split(',') }}"),
            "a b|a|['a', 'b']");
  EXPECT_EQ(render("{{ ' a  b '.split() }} {{ 'aaa'.replace('a', 'b', 2) }}"), "['a', 'b'] bba");
  EXPECT_EQ(
      render("{{ d.get('k') }} {{ d.get('z', 0) }} {{ d.keys() | list }}", {{"d", {{"k", "v"}}}}),
      "v 0 ['k']");
}

TEST(ChatTemplate, GlobalFunctions) {
  EXPECT_EQ(render("{% for i in range(3) %}{{ i }}{% endfor %}"), "012");
  const std::string error = render_error("{{ raise_exception('Roles must alternate') }}");
  EXPECT_NE(error.find("Roles must alternate"), std::string::npos) << error;
}

// Expected values are Python jinja2 3.1.6's renderings of the same sources.
TEST(ChatTemplate, Macros) {
  EXPECT_EQ(render("{% macro m(a, b='B', c=none) %}[{{ a }}{{ b }}{{ c }}]{% endmacro %}"
                   "{{ m(1) }}{{ m(1, 2) }}{{ m(1, c=3) }}"),
            "[1BNone][12None][1B3]");
  // The body sees the template's top-level variables, not the caller's loop variables.
  EXPECT_EQ(render("{% set top = 'T' %}{% macro m() %}{{ top }}{{ local is defined }}"
                   "{% endmacro %}{% for local in [1] %}{{ m() }}{% endfor %}"),
            "TFalse");
  EXPECT_EQ(render("{% macro m() %}{% for i in [1, 2] %}{{ i }}{% break %}{% endfor %}"
                   "{% endmacro %}{{ m() }}{{ m() | length }}"),
            "11");
  EXPECT_NE(render_error("{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}")
                .find("macro 'm' takes not more than 1 argument(s)"),
            std::string::npos);
  EXPECT_NE(render_error("{% macro m() %}{{ m() }}{% endmacro %}{{ m() }}").find("nest deeper"),
            std::string::npos);
}

// dict.get with a key too long for the small-string buffer (it once read a destroyed argument).
TEST(ChatTemplate, DictGetWithALongKey) {
  EXPECT_EQ(render("{{ {'reasoning_content_is_long': 'R'}.get('reasoning_content_is_long', '') }}"),
            "R");
}

TEST(ChatTemplate, DeepSeekStyleToolCallQuirk) {
  // The shape of the V3 template's tool-call branch: content is none, iterate the tool calls.
  EXPECT_EQ(
      render("{% for m in messages %}{% if m['role'] == 'assistant' and m['content'] is none %}"
             "{% for t in m['tool_calls'] %}<{{ t['type'] }}>{% endfor %}{% endif %}{% endfor %}",
             kMessages),
      "<function>");
}

TEST(ChatTemplate, UnsupportedConstructsAreNamed) {
  EXPECT_NE(render_error("{% call f() %}{% endcall %}").find("unsupported statement '{% call %}'"),
            std::string::npos);
  EXPECT_NE(render_error("{% raw %}x{% endraw %}").find("'{% raw %}'"), std::string::npos);
  EXPECT_NE(render_error("{{ x | wordwrap }}").find("unsupported filter 'wordwrap'"),
            std::string::npos);
  EXPECT_NE(render_error("{{ x is divisibleby(3) }}").find("unsupported test 'divisibleby'"),
            std::string::npos);
  EXPECT_NE(render_error("{{ 'x'.zfill(3) }}").find("unsupported string method 'zfill'"),
            std::string::npos);
  EXPECT_NE(render_error("{{ strftime_now('%Y') }}").find("unsupported function 'strftime_now'"),
            std::string::npos);
  EXPECT_NE(render_error("{% for x in xs if x %}{% endfor %}").find("loop filters"),
            std::string::npos);
  EXPECT_NE(render_error("{% set x %}y{% endset %}").find("block 'set'"), std::string::npos);
  EXPECT_NE(render_error("{{ '%s' % 1 }}").find("string formatting"), std::string::npos);
}

TEST(ChatTemplate, SyntaxErrorsNameTheLine) {
  EXPECT_NE(render_error("line one\n{% if x %}never closed").find("line 2"), std::string::npos);
  EXPECT_NE(render_error("{% if x %}").find("missing {% endif %}"), std::string::npos);
  EXPECT_NE(render_error("{% endfor %}").find("without a matching opening"), std::string::npos);
  EXPECT_NE(render_error("{{ 1 + }}").find("expected an expression"), std::string::npos);
  EXPECT_NE(render_error("{{ 'open").find("never closed"), std::string::npos);
  EXPECT_NE(render_error("{{ x").find("never closed"), std::string::npos);
  EXPECT_NE(render_error("{{ a ; b }}").find("unexpected character ';'"), std::string::npos);
  EXPECT_NE(render_error("{% break %}").find("outside a loop"), std::string::npos);
  EXPECT_NE(render_error("{{ 99999999999999999999 }}").find("out of range"), std::string::npos);
}

TEST(ChatTemplate, UndefinedMisuseIsAnError) {
  EXPECT_NE(render_error("{{ missing.attr }}").find("'missing' is undefined"), std::string::npos);
  EXPECT_NE(render_error("{{ 'a' + missing }}").find("'missing' is undefined"), std::string::npos);
  EXPECT_NE(render_error("{{ 'a' + 1 }}").find("unsupported operand types for +: str and int"),
            std::string::npos);
  EXPECT_EQ(render("{% for x in missing %}x{% endfor %}{{ missing | length }}"), "0");
}

// Found by fuzzing (chat_template_fuzz, bench/RESULTS.md "Issue 15: fuzzing"): hostile templates
// end in an Error naming the limit, not in undefined behaviour, a stack overflow, a hang or an
// allocation without bound. Each case's ordinary neighbour still renders as Python does.
TEST(ChatTemplate, IntegerOverflowIsAnError) {
  EXPECT_NE(render_error("{{ 9223372036854775807 + 1 }}").find("integer overflow"),
            std::string::npos);
  EXPECT_NE(render_error("{{ -9223372036854775807 - 2 }}").find("integer overflow"),
            std::string::npos);
  EXPECT_NE(render_error("{{ 4611686018427387904 * 2 }}").find("integer overflow"),
            std::string::npos);
  EXPECT_NE(render_error("{{ -(-9223372036854775807 - 1) }}").find("integer overflow"),
            std::string::npos);
  EXPECT_NE(render_error("{{ (-9223372036854775807 - 1) // -1 }}").find("integer overflow"),
            std::string::npos);
  EXPECT_NE(render_error("{{ 10 ** 19 }}").find("integer overflow"), std::string::npos);
  EXPECT_EQ(render("{{ (-9223372036854775807 - 1) % -1 }} {{ 9223372036854775806 + 1 }}"),
            "0 9223372036854775807");
  EXPECT_EQ(render("{{ range(9223372036854775800, 9223372036854775807, 5) | list }}"),
            "[9223372036854775800, 9223372036854775805]");
}

TEST(ChatTemplate, DeepNestingIsAnError) {
  const auto nested = [](const std::string& open, const std::string& close, int depth) {
    std::string text;
    for (int i = 0; i < depth; ++i) text += open;
    text += "1";
    for (int i = 0; i < depth; ++i) text += close;
    return text;
  };
  EXPECT_NE(render_error("{{ " + nested("(", ")", 20000) + " }}").find("nested more than"),
            std::string::npos);
  EXPECT_NE(render_error("{{ " + nested("-", "", 20000) + " }}").find("nested more than"),
            std::string::npos);
  EXPECT_NE(render_error("{{ " + nested("", " + 1", 20000) + " }}").find("nested more than"),
            std::string::npos);
  EXPECT_NE(render_error(nested("{% if true %}", "{% endif %}", 20000)).find("nested more than"),
            std::string::npos);
  EXPECT_EQ(render("{{ " + nested("(", ")", 10) + " }}"), "1");
  EXPECT_EQ(render("{{ " + nested("", " + 1", 30) + " }}"), "31");
}

TEST(ChatTemplate, RunawayRenderingIsAnError) {
  EXPECT_NE(render_error("{{ 'x' * 2000000000 }}").find("exceeds the limit"), std::string::npos);
  EXPECT_NE(render_error("{{ [1, 2] * 2000000000 }}").find("exceeds the limit"), std::string::npos);
  EXPECT_EQ(render("[{{ '' * 9223372036854775807 }}]"), "[]");
  EXPECT_NE(render_error("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}"
                         "{% endfor %}")
                .find("steps to render"),
            std::string::npos);
  EXPECT_NE(render_error("{% set ns = namespace(s='xxxxxxxx') %}{% for i in range(40) %}"
                         "{% set ns.s = ns.s ~ ns.s %}{% endfor %}")
                .find("exceeds the limit"),
            std::string::npos);
  EXPECT_EQ(render("{{ 'ab' * 3 }}"), "ababab");
}

}  // namespace
}  // namespace mlaserve::tokenizer
