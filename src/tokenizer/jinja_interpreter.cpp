#include "tokenizer/jinja_interpreter.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "tokenizer/jinja_builtins.h"
#include "tokenizer/jinja_strings.h"

namespace mlaserve::tokenizer::jinja {
namespace {

// What one rendering may produce and do. A chat prompt is at most a context of text (~1 MB);
// the limits stop a template (or messages) that would loop or grow without end with an error
// instead of a hang or an allocation failure.
constexpr size_t kMaxRenderedBytes = 32 << 20;  // the output, and any one string built
constexpr size_t kMaxListItems = 1 << 20;       // any one list built
constexpr int64_t kMaxSteps = 1'000'000;        // expressions evaluated and loop iterations
constexpr int kMaxMacroDepth = 64;              // a macro calling itself must stop

// Python's ints do not overflow; int64 ones would (undefined behaviour), so they are refused.
[[noreturn]] void fail_overflow(std::string_view op, int64_t a, int64_t b, int line) {
  fail_at(line, "integer overflow: {} {} {} does not fit in 64 bits", a, op, b);
}

void check_string_size(size_t bytes, int line) {
  if (bytes > kMaxRenderedBytes)
    fail_at(line, "a string of {} bytes exceeds the limit of {}", bytes, kMaxRenderedBytes);
}

void check_list_size(size_t items, int line) {
  if (items > kMaxListItems)
    fail_at(line, "a list of {} items exceeds the limit of {}", items, kMaxListItems);
}

int64_t floor_div(int64_t a, int64_t b) {
  const int64_t quotient = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? quotient - 1 : quotient;
}

int64_t python_mod(int64_t a, int64_t b) {
  return a - floor_div(a, b) * b;
}

Value repeat(const Value& sequence, int64_t times, int line) {
  const size_t unit =
      sequence.is_string() ? sequence.as_string().size() : sequence.as_list().size();
  if (unit == 0 || times <= 0) return sequence.is_string() ? Value(std::string()) : Value(List());
  const size_t limit = sequence.is_string() ? kMaxRenderedBytes : kMaxListItems;
  if (unit > limit / static_cast<size_t>(times)) {  // unit * times > limit, not overflowing
    fail_at(line, "repeating a {} of length {} {} times exceeds the limit of {}",
            sequence.type_name(), unit, times, limit);
  }
  if (sequence.is_string()) {
    std::string out;
    for (int64_t i = 0; i < times; ++i) out += sequence.as_string();
    return out;
  }
  List out;
  for (int64_t i = 0; i < times; ++i)
    out.insert(out.end(), sequence.as_list().begin(), sequence.as_list().end());
  return out;
}

[[noreturn]] void fail_operands(std::string_view op, const Value& a, const Value& b, int line) {
  fail_at(line, "unsupported operand types for {}: {} and {}", op, a.type_name(), b.type_name());
}

Value numeric(std::string_view op, const Value& a, const Value& b, int line) {
  if (!a.is_number() || !b.is_number()) fail_operands(op, a, b, line);
  const bool both_int = a.is_int() && b.is_int();
  if ((op == "/" || op == "//" || op == "%") && b.as_double() == 0.0)
    fail_at(line, "division by zero");
  if (op == "/") return a.as_double() / b.as_double();
  if (both_int) {
    const int64_t x = a.as_int();
    const int64_t y = b.as_int();
    int64_t result = 0;
    if (op == "+" && __builtin_add_overflow(x, y, &result)) fail_overflow(op, x, y, line);
    if (op == "-" && __builtin_sub_overflow(x, y, &result)) fail_overflow(op, x, y, line);
    if (op == "*" && __builtin_mul_overflow(x, y, &result)) fail_overflow(op, x, y, line);
    if (op == "+" || op == "-" || op == "*") return result;
    if (x == std::numeric_limits<int64_t>::min() && y == -1) {
      if (op == "%") return int64_t{0};
      if (op == "//") fail_overflow(op, x, y, line);
    }
    if (op == "//") return floor_div(x, y);
    if (op == "%") return python_mod(x, y);
    if (op == "**" && y >= 0) {
      const double power = std::pow(static_cast<double>(x), static_cast<double>(y));
      if (!(std::abs(power) < 0x1p63)) fail_overflow(op, x, y, line);
      return static_cast<int64_t>(std::llround(power));
    }
  }
  const double x = a.as_double();
  const double y = b.as_double();
  if (op == "+") return x + y;
  if (op == "-") return x - y;
  if (op == "*") return x * y;
  if (op == "//") return std::floor(x / y);
  if (op == "%") return x - std::floor(x / y) * y;
  return std::pow(x, y);
}

Value arithmetic(std::string_view op, const Value& a, const Value& b, int line) {
  if (a.is_undefined()) fail_undefined(a, line);
  if (b.is_undefined()) fail_undefined(b, line);
  if (op == "+" && a.is_string() && b.is_string()) {
    check_string_size(a.as_string().size() + b.as_string().size(), line);
    return a.as_string() + b.as_string();
  }
  if (op == "+" && a.is_list() && b.is_list()) {
    check_list_size(a.as_list().size() + b.as_list().size(), line);
    List joined = a.as_list();
    joined.insert(joined.end(), b.as_list().begin(), b.as_list().end());
    return joined;
  }
  if (op == "*" && (a.is_string() || a.is_list()) && b.is_int()) return repeat(a, b.as_int(), line);
  if (op == "*" && a.is_int() && (b.is_string() || b.is_list())) return repeat(b, a.as_int(), line);
  if (op == "%" && a.is_string()) fail_at(line, "string formatting with % is not supported");
  return numeric(op, a, b, line);
}

bool contains(const Value& container, const Value& item, int line) {
  if (container.is_undefined()) return false;
  if (container.is_string()) {
    if (!item.is_string())
      fail_at(line, "'in <string>' needs a string on the left, got {}", item.type_name());
    return container.as_string().find(item.as_string()) != std::string::npos;
  }
  if (container.is_list()) {
    for (const Value& element : container.as_list()) {
      if (element == item) return true;
    }
    return false;
  }
  if (container.is_dict())
    return item.is_string() && find_entry(container.as_dict(), item.as_string());
  fail_at(line, "'in' needs a string, list or dict on the right, got {}", container.type_name());
}

bool compare(std::string_view op, const Value& a, const Value& b, int line) {
  if (op == "==") return a == b;
  if (op == "!=") return !(a == b);
  if (op == "<") return less_than(a, b, line);
  if (op == "<=") return a == b || less_than(a, b, line);
  if (op == ">") return less_than(b, a, line);
  if (op == ">=") return a == b || less_than(b, a, line);
  if (op == "in") return contains(b, a, line);
  return !contains(b, a, line);  // "not in"
}

// Python's slice index rules (PySlice_AdjustIndices) for a sequence of `length` items.
std::vector<size_t> slice_indices(int64_t length, const Value& start, const Value& stop,
                                  const Value& step_value, int line) {
  auto as_index = [&](const Value& v) {
    if (!v.is_int()) fail_at(line, "slice indices must be integers, got {}", v.type_name());
    return v.as_int();
  };
  const int64_t step = step_value.is_none() ? 1 : as_index(step_value);
  if (step == 0) fail_at(line, "slice step cannot be zero");
  const int64_t low = step > 0 ? 0 : -1;
  const int64_t high = step > 0 ? length : length - 1;
  auto adjust = [&](const Value& v, int64_t fallback) {
    if (v.is_none()) return fallback;
    int64_t index = as_index(v);
    if (index < 0) index += length;
    return std::clamp(index, low, high);
  };
  const int64_t first = adjust(start, step > 0 ? 0 : length - 1);
  const int64_t end = adjust(stop, step > 0 ? length : -1);
  std::vector<size_t> indices;
  for (int64_t i = first; step > 0 ? i < end : i > end; i += step)
    indices.push_back(static_cast<size_t>(i));
  return indices;
}

class Renderer {
 public:
  explicit Renderer(const Dict& globals) : globals_(globals) { scopes_.emplace_back(); }

  std::string run(const Body& body) {
    std::string out;
    execute(body, out);
    return out;
  }

 private:
  enum class Flow { kNormal, kBreak, kContinue };

  Flow execute(const Body& body, std::string& out) {
    for (const Statement& statement : body) {
      const Flow flow = std::visit(
          [&](const auto& node) { return execute(node, statement.line, out); }, statement.node);
      if (flow != Flow::kNormal) return flow;
    }
    return Flow::kNormal;
  }

  Flow execute(const TextStatement& text, int line, std::string& out) {
    check_string_size(out.size() + text.text.size(), line);
    out += text.text;
    return Flow::kNormal;
  }

  Flow execute(const OutputStatement& output, int line, std::string& out) {
    const std::string text = evaluate(*output.value).str();
    check_string_size(out.size() + text.size(), line);
    out += text;
    return Flow::kNormal;
  }

  Flow execute(const IfStatement& statement, int, std::string& out) {
    for (const auto& [condition, body] : statement.branches) {
      if (evaluate(*condition).truthy()) return execute(body, out);
    }
    return execute(statement.otherwise, out);
  }

  Flow execute(const ForStatement& statement, int line, std::string& out) {
    const List items = iterate(evaluate(*statement.iterable), line);
    if (items.empty()) return execute(statement.otherwise, out);
    // Variables set inside the loop stay inside it, as in Jinja.
    scopes_.emplace_back();
    ++loop_depth_;
    for (size_t i = 0; i < items.size(); ++i) {
      charge(1, line);
      assign("loop", loop_variable(items, i));
      bind_targets(statement.targets, items[i], line);
      if (execute(statement.body, out) == Flow::kBreak) break;
    }
    --loop_depth_;
    scopes_.pop_back();
    return Flow::kNormal;
  }

  Flow execute(const SetStatement& statement, int line, std::string&) {
    Value value = evaluate(*statement.value);
    if (statement.attribute.empty()) {
      assign(statement.name, std::move(value));
      return Flow::kNormal;
    }
    const Value target = lookup(statement.name);
    if (!target.is_namespace()) {
      fail_at(line, "cannot set '{}.{}': only namespace() objects have settable attributes",
              statement.name, statement.attribute);
    }
    Dict& attributes = target.as_namespace().attributes;
    for (auto& [key, existing] : attributes) {
      if (key == statement.attribute) {
        existing = std::move(value);
        return Flow::kNormal;
      }
    }
    attributes.emplace_back(statement.attribute, std::move(value));
    return Flow::kNormal;
  }

  Flow execute(const LoopControl& control, int line, std::string&) {
    if (loop_depth_ == 0)
      fail_at(line, "'{}' outside a loop", control.is_break ? "break" : "continue");
    return control.is_break ? Flow::kBreak : Flow::kContinue;
  }

  // Defining a macro makes it callable by name from then on (it is kept by the template).
  Flow execute(const MacroStatement& macro, int, std::string&) {
    for (auto& [name, defined] : macros_) {
      if (name == macro.name) {
        defined = &macro;
        return Flow::kNormal;
      }
    }
    macros_.emplace_back(macro.name, &macro);
    return Flow::kNormal;
  }

  const MacroStatement* find_macro(const std::string& name) const {
    for (const auto& [defined_name, macro] : macros_) {
      if (defined_name == name) return macro;
    }
    return nullptr;
  }

  // A macro's body sees its parameters, the template's top-level variables and the globals,
  // not the caller's local variables (Jinja2's scoping); a missing argument takes the default,
  // else is undefined.
  Value call_macro(const MacroStatement& macro, const CallArgs& args, int line) {
    if (args.positional.size() > macro.parameters.size()) {
      fail_at(line, "macro '{}' takes not more than {} argument(s)", macro.name,
              macro.parameters.size());
    }
    if (++macro_depth_ > kMaxMacroDepth)
      fail_at(line, "macros nest deeper than {} calls", kMaxMacroDepth);
    Dict bound;
    for (size_t i = 0; i < macro.parameters.size(); ++i) {
      const auto& [name, default_value] = macro.parameters[i];
      if (i < args.positional.size()) {
        bound.emplace_back(name, args.positional[i]);
      } else if (const Value* keyword = find_entry(args.keyword, name)) {
        bound.emplace_back(name, *keyword);
      } else {
        bound.emplace_back(name, default_value ? evaluate(*default_value) : Value(Undefined{name}));
      }
    }
    for (const auto& [name, value] : args.keyword) {
      if (!find_entry(bound, name))
        fail_at(line, "macro '{}' has no parameter '{}'", macro.name, name);
    }
    std::vector<Dict> caller_scopes = std::exchange(scopes_, {scopes_.front(), std::move(bound)});
    const int caller_loop_depth = std::exchange(loop_depth_, 0);
    std::string out;
    execute(macro.body, out);
    scopes_ = std::move(caller_scopes);
    loop_depth_ = caller_loop_depth;
    --macro_depth_;
    return out;
  }

  static Value loop_variable(const List& items, size_t i) {
    const auto index = static_cast<int64_t>(i);
    const auto length = static_cast<int64_t>(items.size());
    Dict loop = {{"index", index + 1},
                 {"index0", index},
                 {"revindex", length - index},
                 {"revindex0", length - index - 1},
                 {"first", i == 0},
                 {"last", i + 1 == items.size()},
                 {"length", length}};
    if (i > 0) loop.emplace_back("previtem", items[i - 1]);
    if (i + 1 < items.size()) loop.emplace_back("nextitem", items[i + 1]);
    return loop;
  }

  void bind_targets(const std::vector<std::string>& targets, const Value& item, int line) {
    if (targets.size() == 1) {
      assign(targets[0], item);
      return;
    }
    if (!item.is_list() || item.as_list().size() != targets.size()) {
      fail_at(line, "cannot unpack {} into {} loop variables", item.repr(), targets.size());
    }
    for (size_t i = 0; i < targets.size(); ++i) assign(targets[i], item.as_list()[i]);
  }

  void assign(const std::string& name, Value value) {
    Dict& scope = scopes_.back();
    for (auto& [key, existing] : scope) {
      if (key == name) {
        existing = std::move(value);
        return;
      }
    }
    scope.emplace_back(name, std::move(value));
  }

  Value lookup(const std::string& name) const {
    for (auto scope = scopes_.rbegin(); scope != scopes_.rend(); ++scope) {
      if (const Value* found = find_entry(*scope, name)) return *found;
    }
    const Value* global = find_entry(globals_, name);
    return global != nullptr ? *global : Value(Undefined{name});
  }

  // ---- expressions ----

  // Counts `units` of work against kMaxSteps.
  void charge(int64_t units, int line) {
    steps_ += units;
    if (steps_ > kMaxSteps)
      fail_at(line, "the template takes more than {} steps to render", kMaxSteps);
  }

  Value evaluate(const Expr& expr) {
    charge(1, expr.line);
    return std::visit([&](const auto& node) { return eval(node, expr.line); }, expr.node);
  }

  Value eval(const Literal& literal, int) { return literal.value; }
  Value eval(const Name& name, int) { return lookup(name.name); }

  Value eval(const ListExpr& list, int) {
    List items;
    for (const ExprPtr& item : list.items) items.push_back(evaluate(*item));
    return items;
  }

  Value eval(const DictExpr& dict, int line) {
    Dict entries;
    for (const auto& [key_expr, value_expr] : dict.entries) {
      const Value key = evaluate(*key_expr);
      if (!key.is_string()) fail_at(line, "dict keys must be strings, got {}", key.type_name());
      entries.emplace_back(key.as_string(), evaluate(*value_expr));
    }
    return entries;
  }

  Value eval(const Attribute& attribute, int line) {
    const Value object = evaluate(*attribute.object);
    if (object.is_undefined()) fail_undefined(object, line);
    return object.attribute(attribute.name);
  }

  Value eval(const Subscript& subscript, int line) {
    const Value object = evaluate(*subscript.object);
    const Value index = evaluate(*subscript.index);
    if (object.is_undefined()) fail_undefined(object, line);
    if (index.is_string()) return object.attribute(index.as_string());
    if (index.is_int() && (object.is_list() || object.is_string())) {
      // A string is split into its characters first, at a cost of its length.
      if (object.is_string()) charge(static_cast<int64_t>(object.as_string().size()), line);
      const List characters = object.is_string() ? iterate(object, line) : List();
      const List& items = object.is_list() ? object.as_list() : characters;
      int64_t position = index.as_int();
      if (position < 0) position += static_cast<int64_t>(items.size());
      if (position >= 0 && position < static_cast<int64_t>(items.size())) return items[position];
    }
    return Undefined{fmt::format("{}[{}]", object.type_name(), index.repr())};
  }

  Value eval(const Slice& slice, int line) {
    const Value object = evaluate(*slice.object);
    if (object.is_undefined()) fail_undefined(object, line);
    if (!object.is_list() && !object.is_string())
      fail_at(line, "cannot slice a {}", object.type_name());
    auto part = [&](const ExprPtr& expr) { return expr ? evaluate(*expr) : Value(nullptr); };
    const List items = object.is_list() ? object.as_list() : iterate(object, line);
    charge(static_cast<int64_t>(items.size()), line);
    List picked;
    for (const size_t i : slice_indices(static_cast<int64_t>(items.size()), part(slice.start),
                                        part(slice.stop), part(slice.step), line)) {
      picked.push_back(items[i]);
    }
    if (object.is_list()) return picked;
    std::string text;
    for (const Value& character : picked) text += character.as_string();
    return text;
  }

  CallArgs evaluate_arguments(const Arguments& arguments) {
    CallArgs args;
    for (const ExprPtr& expr : arguments.positional) args.positional.push_back(evaluate(*expr));
    for (const auto& [name, expr] : arguments.keyword)
      args.keyword.emplace_back(name, evaluate(*expr));
    return args;
  }

  Value eval(const Call& call, int line) {
    if (const auto* name = std::get_if<Name>(&call.callee->node)) {
      if (const MacroStatement* macro = find_macro(name->name)) {
        return call_macro(*macro, evaluate_arguments(call.arguments), line);
      }
      return call_function(name->name, evaluate_arguments(call.arguments), line);
    }
    if (const auto* method = std::get_if<Attribute>(&call.callee->node)) {
      const Value object = evaluate(*method->object);
      return call_method(object, method->name, evaluate_arguments(call.arguments), line);
    }
    fail_at(line, "only global functions and methods can be called");
  }

  Value eval(const Filter& filter, int line) {
    const Value input = evaluate(*filter.input);
    return apply_filter(filter.name, input, evaluate_arguments(filter.arguments), line);
  }

  Value eval(const Test& test, int line) {
    const Value input = evaluate(*test.input);
    return apply_test(test.name, input, evaluate_arguments(test.arguments), line) != test.negated;
  }

  Value eval(const Unary& unary, int line) {
    const Value operand = evaluate(*unary.operand);
    if (unary.op == "not") return !operand.truthy();
    if (operand.is_undefined()) fail_undefined(operand, line);
    if (!operand.is_number())
      fail_at(line, "bad operand type for unary {}: {}", unary.op, operand.type_name());
    if (unary.op == "+") return operand;
    if (operand.is_int() && operand.as_int() == std::numeric_limits<int64_t>::min())
      fail_overflow("*", operand.as_int(), -1, line);
    return operand.is_int() ? Value(-operand.as_int()) : Value(-operand.as_double());
  }

  Value eval(const Binary& binary, int line) {
    Value left = evaluate(*binary.left);
    // and/or short-circuit and return an operand, as in Python.
    if (binary.op == "and") return left.truthy() ? evaluate(*binary.right) : left;
    if (binary.op == "or") return left.truthy() ? left : evaluate(*binary.right);
    const Value right = evaluate(*binary.right);
    if (binary.op == "~") {
      std::string joined = left.str() + right.str();
      check_string_size(joined.size(), line);
      return joined;
    }
    return arithmetic(binary.op, left, right, line);
  }

  Value eval(const Compare& comparison, int line) {
    Value left = evaluate(*comparison.first);
    for (const auto& [op, right_expr] : comparison.rest) {
      Value right = evaluate(*right_expr);
      if (!compare(op, left, right, line)) return false;
      left = std::move(right);
    }
    return true;
  }

  Value eval(const Conditional& conditional, int) {
    if (evaluate(*conditional.condition).truthy()) return evaluate(*conditional.then_value);
    return conditional.else_value ? evaluate(*conditional.else_value) : Value(Undefined{});
  }

  const Dict& globals_;
  std::vector<Dict> scopes_;  // innermost last
  int loop_depth_ = 0;
  int64_t steps_ = 0;                                                  // charge()
  std::vector<std::pair<std::string, const MacroStatement*>> macros_;  // defined so far
  int macro_depth_ = 0;
};

}  // namespace

std::string render(const Template& tmpl, const Dict& globals) {
  return Renderer(globals).run(tmpl.body);
}

}  // namespace mlaserve::tokenizer::jinja
