// The syntax tree of a parsed template: expressions and statements.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "tokenizer/jinja_value.h"

namespace mlaserve::tokenizer::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Arguments {
  std::vector<ExprPtr> positional;
  std::vector<std::pair<std::string, ExprPtr>> keyword;
};

struct Literal {
  Value value;
};
struct Name {
  std::string name;
};
struct ListExpr {
  std::vector<ExprPtr> items;
};
struct DictExpr {
  std::vector<std::pair<ExprPtr, ExprPtr>> entries;
};
struct Attribute {  // object.name
  ExprPtr object;
  std::string name;
};
struct Subscript {  // object[index]
  ExprPtr object;
  ExprPtr index;
};
struct Slice {  // object[start:stop:step]; absent parts are null
  ExprPtr object;
  ExprPtr start;
  ExprPtr stop;
  ExprPtr step;
};
struct Call {  // a global function (Name callee) or a method (Attribute callee)
  ExprPtr callee;
  Arguments arguments;
};
struct Filter {  // input | name(arguments)
  ExprPtr input;
  std::string name;
  Arguments arguments;
};
struct Test {  // input is [not] name(arguments)
  ExprPtr input;
  std::string name;
  Arguments arguments;
  bool negated;
};
struct Unary {  // "not", "-" or "+"
  std::string op;
  ExprPtr operand;
};
struct Binary {  // and or + - * / // % ** ~
  std::string op;
  ExprPtr left;
  ExprPtr right;
};
struct Compare {  // first op1 x1 op2 x2 ..., chained as in Python; ops include "in", "not in"
  ExprPtr first;
  std::vector<std::pair<std::string, ExprPtr>> rest;
};
struct Conditional {  // then_value if condition else else_value (else_value may be null)
  ExprPtr condition;
  ExprPtr then_value;
  ExprPtr else_value;
};

struct Expr {
  std::variant<Literal, Name, ListExpr, DictExpr, Attribute, Subscript, Slice, Call, Filter, Test,
               Unary, Binary, Compare, Conditional>
      node;
  int line;
};

struct Statement;
using Body = std::vector<Statement>;

struct TextStatement {
  std::string text;
};
struct OutputStatement {
  ExprPtr value;
};
struct IfStatement {
  std::vector<std::pair<ExprPtr, Body>> branches;  // if and elif, in order
  Body otherwise;
};
struct ForStatement {
  std::vector<std::string> targets;  // more than one: unpack each item
  ExprPtr iterable;
  Body body;
  Body otherwise;  // {% else %}: runs when there was nothing to iterate
};
struct SetStatement {
  std::string name;
  std::string attribute;  // set ns.attribute = ...; empty for a plain variable
  ExprPtr value;
};
struct LoopControl {
  bool is_break;  // else continue
};
// {% macro name(a, b=default) %}body{% endmacro %}: a call renders the body with the
// parameters bound, and its value is that text.
struct MacroStatement {
  std::string name;
  std::vector<std::pair<std::string, ExprPtr>> parameters;  // default null: none
  Body body;
};

struct Statement {
  // Built from the alternative itself rather than from a variant, which also keeps GCC 12 from
  // false -Wmaybe-uninitialized reports about the other alternatives.
  template <typename Node>
  Statement(Node statement, int line_number) : node(std::move(statement)), line(line_number) {}

  std::variant<TextStatement, OutputStatement, IfStatement, ForStatement, SetStatement, LoopControl,
               MacroStatement>
      node;
  int line;
};

struct Template {
  Body body;
};

}  // namespace mlaserve::tokenizer::jinja
