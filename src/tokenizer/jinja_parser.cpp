#include "tokenizer/jinja_parser.h"

#include <charconv>
#include <initializer_list>

#include "tokenizer/jinja_lexer.h"

namespace mlaserve::tokenizer::jinja {
namespace {

template <typename Node>
ExprPtr make(Node node, int line) {
  return std::make_unique<Expr>(Expr{std::move(node), line});
}

template <typename Number>
Value parse_number(const Token& token) {
  Number number{};
  const char* end = token.text.data() + token.text.size();
  const auto [stop, error] = std::from_chars(token.text.data(), end, number);
  if (error != std::errc() || stop != end)
    fail_at(token.line, "number {} is out of range", token.text);
  return number;
}

std::string describe(const Token& token) {
  switch (token.kind) {
    case TokenKind::kText:
      return "template text";
    case TokenKind::kBlockBegin:
      return "'{%'";
    case TokenKind::kBlockEnd:
      return "'%}'";
    case TokenKind::kOutputBegin:
      return "'{{'";
    case TokenKind::kOutputEnd:
      return "'}}'";
    case TokenKind::kString:
      return "string '" + token.text + "'";
    case TokenKind::kEnd:
      return "the end of the template";
    default:
      return "'" + token.text + "'";
  }
}

// How deep expressions and statements may nest (brackets, operator chains, filter chains, if/for
// blocks): parsing, rendering and freeing the tree recurse once per level, so a template of
// thousands of '(' or '+' must be an error, not a stack overflow. Real chat templates nest < 20.
constexpr int kMaxNesting = 200;

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : tokens_(std::move(tokens)) {}

  Template parse_template() {
    Template result;
    std::string terminator;
    result.body = parse_body({}, terminator);
    return result;
  }

 private:
  // Restores the nesting depth when a parse function returns: each function deepens the tree
  // by one for its own recursion and one per link of an operator chain it builds.
  class Nesting {
   public:
    explicit Nesting(Parser& parser) : parser_(parser), saved_(parser.depth_) {}
    ~Nesting() { parser_.depth_ = saved_; }
    Nesting(const Nesting&) = delete;
    Nesting& operator=(const Nesting&) = delete;

   private:
    Parser& parser_;
    int saved_;
  };

  void deepen(int line) {
    if (++depth_ > kMaxNesting)
      fail_at(line, "expressions or blocks nested more than {} levels deep", kMaxNesting);
  }

  // ---- token access ----
  const Token& peek(size_t ahead = 0) const {
    return tokens_[std::min(index_ + ahead, tokens_.size() - 1)];
  }
  const Token& next() { return tokens_[std::min(index_++, tokens_.size() - 1)]; }
  bool at_operator(std::string_view op, size_t ahead = 0) const {
    return peek(ahead).kind == TokenKind::kOperator && peek(ahead).text == op;
  }
  bool at_name(std::string_view word, size_t ahead = 0) const {
    return peek(ahead).kind == TokenKind::kName && peek(ahead).text == word;
  }
  bool skip_operator(std::string_view op) {
    if (!at_operator(op)) return false;
    ++index_;
    return true;
  }
  bool skip_name(std::string_view word) {
    if (!at_name(word)) return false;
    ++index_;
    return true;
  }
  [[noreturn]] void unexpected(std::string_view wanted) const {
    fail_at(peek().line, "expected {}, found {}", wanted, describe(peek()));
  }
  void expect_operator(std::string_view op) {
    if (!skip_operator(op)) unexpected(fmt::format("'{}'", op));
  }
  void expect_kind(TokenKind kind, std::string_view what) {
    if (peek().kind != kind) unexpected(what);
    ++index_;
  }
  std::string expect_identifier() {
    if (peek().kind != TokenKind::kName) unexpected("a name");
    return next().text;
  }

  // ---- statements ----

  // Parses statements until a block tag whose keyword is one of `terminators` (consumed, and
  // stored in `terminator`) or, when `terminators` is empty, the end of the template.
  Body parse_body(std::initializer_list<std::string_view> terminators, std::string& terminator) {
    Body body;
    while (true) {
      const Token& token = peek();
      if (token.kind == TokenKind::kEnd) {
        if (terminators.size() == 0) return body;
        fail_at(token.line, "missing {{% {} %}}", *(terminators.end() - 1));
      }
      if (token.kind == TokenKind::kText) {
        body.emplace_back(TextStatement{next().text}, token.line);
      } else if (token.kind == TokenKind::kOutputBegin) {
        next();
        ExprPtr value = parse_expression();
        expect_kind(TokenKind::kOutputEnd, "'}}'");
        body.emplace_back(OutputStatement{std::move(value)}, token.line);
      } else {
        expect_kind(TokenKind::kBlockBegin, "'{%'");
        const Token& keyword = peek();
        for (std::string_view wanted : terminators) {
          if (keyword.kind == TokenKind::kName && keyword.text == wanted) {
            terminator = next().text;
            return body;
          }
        }
        body.push_back(parse_statement());
      }
    }
  }

  Statement parse_statement() {
    const Token& keyword = peek();
    if (keyword.kind != TokenKind::kName) unexpected("a statement keyword");
    const std::string word = next().text;
    if (word == "if") return parse_if(keyword.line);
    if (word == "for") return parse_for(keyword.line);
    if (word == "set") return parse_set(keyword.line);
    if (word == "macro") return parse_macro(keyword.line);
    if (word == "break" || word == "continue") {
      expect_kind(TokenKind::kBlockEnd, "'%}'");
      return {LoopControl{word == "break"}, keyword.line};
    }
    if (word == "elif" || word == "else" || word.starts_with("end")) {
      fail_at(keyword.line, "'{{% {} %}}' without a matching opening statement", word);
    }
    fail_at(keyword.line, "unsupported statement '{{% {} %}}'", word);
  }

  Statement parse_if(int line) {
    const Nesting nesting(*this);
    deepen(line);
    IfStatement statement;
    std::string terminator = "elif";
    while (terminator == "elif") {
      ExprPtr condition = parse_expression();
      expect_kind(TokenKind::kBlockEnd, "'%}'");
      Body body = parse_body({"elif", "else", "endif"}, terminator);
      statement.branches.emplace_back(std::move(condition), std::move(body));
    }
    if (terminator == "else") {
      expect_kind(TokenKind::kBlockEnd, "'%}'");
      statement.otherwise = parse_body({"endif"}, terminator);
    }
    expect_kind(TokenKind::kBlockEnd, "'%}'");
    return {std::move(statement), line};
  }

  Statement parse_for(int line) {
    const Nesting nesting(*this);
    deepen(line);
    ForStatement statement;
    do {
      statement.targets.push_back(expect_identifier());
    } while (skip_operator(","));
    if (!skip_name("in")) unexpected("'in'");
    statement.iterable = parse_or();
    if (at_name("if")) fail_at(line, "loop filters ('for ... if ...') are not supported");
    if (at_name("recursive")) fail_at(line, "recursive loops are not supported");
    expect_kind(TokenKind::kBlockEnd, "'%}'");
    std::string terminator;
    statement.body = parse_body({"else", "endfor"}, terminator);
    if (terminator == "else") {
      expect_kind(TokenKind::kBlockEnd, "'%}'");
      statement.otherwise = parse_body({"endfor"}, terminator);
    }
    expect_kind(TokenKind::kBlockEnd, "'%}'");
    return {std::move(statement), line};
  }

  Statement parse_macro(int line) {
    const Nesting nesting(*this);
    deepen(line);
    MacroStatement statement;
    statement.name = expect_identifier();
    expect_operator("(");
    while (!skip_operator(")")) {
      std::string parameter = expect_identifier();
      ExprPtr default_value = skip_operator("=") ? parse_expression() : nullptr;
      statement.parameters.emplace_back(std::move(parameter), std::move(default_value));
      if (!at_operator(")")) expect_operator(",");
    }
    expect_kind(TokenKind::kBlockEnd, "'%}'");
    std::string terminator;
    statement.body = parse_body({"endmacro"}, terminator);
    expect_kind(TokenKind::kBlockEnd, "'%}'");
    return {std::move(statement), line};
  }

  Statement parse_set(int line) {
    SetStatement statement;
    statement.name = expect_identifier();
    if (skip_operator(".")) statement.attribute = expect_identifier();
    if (at_operator(",")) fail_at(line, "'set' with several targets is not supported");
    if (!at_operator("="))
      fail_at(line, "block 'set' ({{% set x %}}...{{% endset %}}) is not supported");
    next();
    statement.value = parse_expression();
    expect_kind(TokenKind::kBlockEnd, "'%}'");
    return {std::move(statement), line};
  }

  // ---- expressions, lowest precedence first (as in Jinja2's parser) ----

  ExprPtr parse_expression() {
    const Nesting nesting(*this);
    deepen(peek().line);
    ExprPtr value = parse_or();
    while (at_name("if")) {
      const int line = next().line;
      deepen(line);
      ExprPtr condition = parse_or();
      ExprPtr otherwise = skip_name("else") ? parse_expression() : nullptr;
      value = make(Conditional{std::move(condition), std::move(value), std::move(otherwise)}, line);
    }
    return value;
  }

  ExprPtr parse_or() {
    const Nesting nesting(*this);
    ExprPtr left = parse_and();
    while (at_name("or")) {
      const int line = next().line;
      deepen(line);
      left = make(Binary{"or", std::move(left), parse_and()}, line);
    }
    return left;
  }

  ExprPtr parse_and() {
    const Nesting nesting(*this);
    ExprPtr left = parse_not();
    while (at_name("and")) {
      const int line = next().line;
      deepen(line);
      left = make(Binary{"and", std::move(left), parse_not()}, line);
    }
    return left;
  }

  ExprPtr parse_not() {
    const Nesting nesting(*this);
    if (at_name("not")) {
      const int line = next().line;
      deepen(line);
      return make(Unary{"not", parse_not()}, line);
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    const int line = peek().line;
    ExprPtr first = parse_additive();
    std::vector<std::pair<std::string, ExprPtr>> rest;
    while (true) {
      std::string op;
      if (peek().kind == TokenKind::kOperator &&
          (peek().text == "==" || peek().text == "!=" || peek().text == "<" ||
           peek().text == "<=" || peek().text == ">" || peek().text == ">=")) {
        op = next().text;
      } else if (skip_name("in")) {
        op = "in";
      } else if (at_name("not") && at_name("in", 1)) {
        index_ += 2;
        op = "not in";
      } else {
        break;
      }
      rest.emplace_back(op, parse_additive());
    }
    if (rest.empty()) return first;
    return make(Compare{std::move(first), std::move(rest)}, line);
  }

  // Jinja2 gives ~ higher precedence than + and -, and lower than * and /.
  ExprPtr parse_additive() {
    const Nesting nesting(*this);
    ExprPtr left = parse_concat();
    while (at_operator("+") || at_operator("-")) {
      const Token& op = next();
      deepen(op.line);
      left = make(Binary{op.text, std::move(left), parse_concat()}, op.line);
    }
    return left;
  }

  ExprPtr parse_concat() {
    const Nesting nesting(*this);
    ExprPtr left = parse_multiplicative();
    while (at_operator("~")) {
      const int line = next().line;
      deepen(line);
      left = make(Binary{"~", std::move(left), parse_multiplicative()}, line);
    }
    return left;
  }

  ExprPtr parse_multiplicative() {
    const Nesting nesting(*this);
    ExprPtr left = parse_power();
    while (at_operator("*") || at_operator("/") || at_operator("//") || at_operator("%")) {
      const Token& op = next();
      deepen(op.line);
      left = make(Binary{op.text, std::move(left), parse_power()}, op.line);
    }
    return left;
  }

  ExprPtr parse_power() {
    const Nesting nesting(*this);
    ExprPtr left = parse_unary(true);
    while (at_operator("**")) {
      const int line = next().line;
      deepen(line);
      left = make(Binary{"**", std::move(left), parse_unary(true)}, line);
    }
    return left;
  }

  // A sign applies before filters: -x|abs is abs(-x), as in Jinja2.
  ExprPtr parse_unary(bool with_filters) {
    const Nesting nesting(*this);
    ExprPtr value;
    if (at_operator("-") || at_operator("+")) {
      const Token& op = next();
      deepen(op.line);
      value = make(Unary{op.text, parse_unary(false)}, op.line);
    } else {
      value = parse_primary();
    }
    value = parse_postfix(std::move(value));
    return with_filters ? parse_filters_and_tests(std::move(value)) : std::move(value);
  }

  ExprPtr parse_primary() {
    const Token& token = next();
    switch (token.kind) {
      case TokenKind::kName:
        return parse_name(token);
      case TokenKind::kString: {
        std::string text = token.text;
        // Adjacent string literals concatenate, as in Python.
        while (peek().kind == TokenKind::kString) text += next().text;
        return make(Literal{Value(std::move(text))}, token.line);
      }
      case TokenKind::kInteger:
        return make(Literal{parse_number<int64_t>(token)}, token.line);
      case TokenKind::kFloat:
        return make(Literal{parse_number<double>(token)}, token.line);
      case TokenKind::kOperator:
        if (token.text == "(") return parse_parenthesized(token.line);
        if (token.text == "[") return parse_list(token.line);
        if (token.text == "{") return parse_dict(token.line);
        break;
      default:
        break;
    }
    --index_;
    unexpected("an expression");
  }

  ExprPtr parse_name(const Token& token) {
    if (token.text == "true" || token.text == "True") return make(Literal{Value(true)}, token.line);
    if (token.text == "false" || token.text == "False")
      return make(Literal{Value(false)}, token.line);
    if (token.text == "none" || token.text == "None")
      return make(Literal{Value(nullptr)}, token.line);
    return make(Name{token.text}, token.line);
  }

  // (x) is x; (x, y) is a tuple, which behaves as a list here.
  ExprPtr parse_parenthesized(int line) {
    if (skip_operator(")")) return make(ListExpr{}, line);
    ExprPtr first = parse_expression();
    if (skip_operator(")")) return first;
    ListExpr tuple;
    tuple.items.push_back(std::move(first));
    while (skip_operator(",") && !at_operator(")")) tuple.items.push_back(parse_expression());
    expect_operator(")");
    return make(std::move(tuple), line);
  }

  ExprPtr parse_list(int line) {
    ListExpr list;
    while (!at_operator("]")) {
      list.items.push_back(parse_expression());
      if (!skip_operator(",")) break;
    }
    expect_operator("]");
    return make(std::move(list), line);
  }

  ExprPtr parse_dict(int line) {
    DictExpr dict;
    while (!at_operator("}")) {
      ExprPtr key = parse_expression();
      expect_operator(":");
      dict.entries.emplace_back(std::move(key), parse_expression());
      if (!skip_operator(",")) break;
    }
    expect_operator("}");
    return make(std::move(dict), line);
  }

  ExprPtr parse_postfix(ExprPtr value) {
    const Nesting nesting(*this);
    while (true) {
      const int line = peek().line;
      deepen(line);
      if (skip_operator(".")) {
        const Token& name = next();
        if (name.kind != TokenKind::kName && name.kind != TokenKind::kInteger) {
          --index_;
          unexpected("an attribute name");
        }
        value = make(Attribute{std::move(value), name.text}, line);
      } else if (skip_operator("[")) {
        value = parse_subscript(std::move(value), line);
      } else if (at_operator("(")) {
        value = parse_call(std::move(value));
      } else {
        return value;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr object, int line) {
    ExprPtr start = at_operator(":") ? nullptr : parse_expression();
    if (skip_operator("]")) return make(Subscript{std::move(object), std::move(start)}, line);
    expect_operator(":");
    ExprPtr stop = at_operator(":") || at_operator("]") ? nullptr : parse_expression();
    ExprPtr step;
    if (skip_operator(":") && !at_operator("]")) step = parse_expression();
    expect_operator("]");
    return make(Slice{std::move(object), std::move(start), std::move(stop), std::move(step)}, line);
  }

  ExprPtr parse_call(ExprPtr callee) {
    const int line = peek().line;
    return make(Call{std::move(callee), parse_arguments()}, line);
  }

  Arguments parse_arguments() {
    Arguments arguments;
    expect_operator("(");
    while (!at_operator(")")) {
      if (peek().kind == TokenKind::kName && at_operator("=", 1)) {
        std::string name = next().text;
        next();
        arguments.keyword.emplace_back(std::move(name), parse_expression());
      } else {
        arguments.positional.push_back(parse_expression());
      }
      if (!skip_operator(",")) break;
    }
    expect_operator(")");
    return arguments;
  }

  ExprPtr parse_filters_and_tests(ExprPtr value) {
    const Nesting nesting(*this);
    while (true) {
      const int line = peek().line;
      deepen(line);
      if (skip_operator("|")) {
        std::string name = expect_identifier();
        Arguments arguments = at_operator("(") ? parse_arguments() : Arguments{};
        value = make(Filter{std::move(value), std::move(name), std::move(arguments)}, line);
      } else if (skip_name("is")) {
        const bool negated = skip_name("not");
        std::string name = peek().kind == TokenKind::kName ? next().text : "";
        // "none", "true" and "false" are names of tests here, not literals.
        if (name.empty()) unexpected("a test name");
        Arguments arguments = at_operator("(") ? parse_arguments() : Arguments{};
        value = make(Test{std::move(value), std::move(name), std::move(arguments), negated}, line);
      } else if (at_operator("(")) {
        value = parse_call(std::move(value));
      } else {
        return value;
      }
    }
  }

  std::vector<Token> tokens_;
  size_t index_ = 0;
  int depth_ = 0;  // nesting levels open at this point of the parse (kMaxNesting)
};

}  // namespace

Template parse(std::string_view source) {
  return Parser(lex(source)).parse_template();
}

}  // namespace mlaserve::tokenizer::jinja
