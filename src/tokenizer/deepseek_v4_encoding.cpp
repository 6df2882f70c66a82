#include "tokenizer/deepseek_v4_encoding.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "core/error.h"

namespace mlaserve::tokenizer::dsv4 {

namespace {

using deepseek_encoding::dsml_calls;
using deepseek_encoding::get;
using deepseek_encoding::Json;
using deepseek_encoding::kAssistant;
using deepseek_encoding::kThinkBegin;
using deepseek_encoding::kThinkEnd;
using deepseek_encoding::kUserBegin;
using deepseek_encoding::last_user_index;
using deepseek_encoding::py_str;
using deepseek_encoding::response_format_section;
using deepseek_encoding::role_of;
using deepseek_encoding::str_or_empty;
using deepseek_encoding::tool_schemas;
using deepseek_encoding::truthy;

constexpr std::string_view kToolsBegin =
    "## Tools\n"
    "\n"
    "You have access to a set of tools to help answer the user's question. You can invoke tools "
    "by writing a \"<｜DSML｜tool_calls>\" block like the following:\n"
    "\n"
    "<｜DSML｜tool_calls>\n"
    "<｜DSML｜invoke name=\"$TOOL_NAME\">\n"
    "<｜DSML｜parameter name=\"$PARAMETER_NAME\" "
    "string=\"true|false\">$PARAMETER_VALUE</｜DSML｜parameter>\n"
    "...\n"
    "</｜DSML｜invoke>\n"
    "<｜DSML｜invoke name=\"$TOOL_NAME2\">\n"
    "...\n"
    "</｜DSML｜invoke>\n"
    "</｜DSML｜tool_calls>\n"
    "\n"
    "String parameters should be specified as is and set `string=\"true\"`. For all other types "
    "(numbers, booleans, arrays, objects), pass the value in JSON format and set "
    "`string=\"false\"`.\n"
    "\n"
    "If thinking_mode is enabled (triggered by <think>), you MUST output your complete reasoning "
    "inside <think>...</think> BEFORE any tool calls or final response.\n"
    "\n"
    "Otherwise, output directly after </think> with tool calls or final response.\n"
    "\n"
    "### Available Tool Schemas\n"
    "\n";
constexpr std::string_view kToolsEnd =
    "\n\nYou MUST strictly follow the above defined tool name and parameter schemas to invoke "
    "tool calls.\n";
constexpr std::string_view kReasoningEffortMax =
    "Reasoning Effort: Absolute maximum with no shortcuts permitted.\n"
    "You MUST be very thorough in your thinking and comprehensively decompose the problem to "
    "resolve the root cause, rigorously stress-testing your logic against all potential paths, "
    "edge cases, and adversarial scenarios.\n"
    "Explicitly write out your entire deliberation process, documenting every intermediate step, "
    "considered alternative, and rejected hypothesis to ensure absolutely no assumption is left "
    "unchecked.\n\n";
constexpr std::string_view kLatestReminder = "<｜latest_reminder｜>";
constexpr std::string_view kToolResultBegin = "<tool_result>";
constexpr std::string_view kToolResultEnd = "</tool_result>";

// DeepSeek's quick-instruction tasks: a message's "task" ends it with the task's token.
struct Task {
  std::string_view name;
  std::string_view token;
};
constexpr Task kTasks[] = {
    {"action", "<｜action｜>"}, {"query", "<｜query｜>"}, {"authority", "<｜authority｜>"},
    {"domain", "<｜domain｜>"}, {"title", "<｜title｜>"}, {"read_url", "<｜read_url｜>"},
};

// The render-wide settings of one encode_messages call.
struct Render {
  bool thinking = false;
  bool drop_thinking = true;  // in effect (the option, unless some message has tools)
  ReasoningEffort effort = ReasoningEffort::Unset;
};

// message.get(key, fallback).
Json value_or(const Json& message, std::string_view key, Json fallback) {
  const Json* value = get(message, key);
  return value ? *value : std::move(fallback);
}

// msg.get("task") is not None.
bool has_task(const Json& message) {
  const Json* task = get(message, "task");
  return task && !task->is_null();
}

const Task& task_of(const Json& task) {
  for (const Task& known : kTasks) {
    if (task.is_string() && task.get_ref<const std::string&>() == known.name) return known;
  }
  fail("invalid task {}", task.dump());
}

// --- merge_tool_messages: tool results and consecutive user turns into one user turn ---

// A user turn merge_tool_messages made (all user turns are, once merged), which later tool
// results and user turns join.
bool is_merged_user(const Json& message) {
  return role_of(message) == "user" && message.contains("content_blocks");
}

void add_tool_result(Json& merged, const Json& message) {
  Json block = {{"type", "tool_result"},
                {"tool_use_id", value_or(message, "tool_call_id", "")},
                {"content", value_or(message, "content", "")}};
  if (!merged.empty() && is_merged_user(merged.back())) {
    merged.back()["content_blocks"].push_back(std::move(block));
    return;
  }
  Json user = {{"role", "user"}, {"content_blocks", Json::array()}};
  user["content_blocks"].push_back(std::move(block));
  merged.push_back(std::move(user));
}

// A user turn joins the user turn before it unless that one carries a task; its own task,
// wo_eos and mask are kept only when it starts a turn.
void add_user(Json& merged, const Json& message) {
  const Json content = value_or(message, "content", "");
  Json block = {{"type", "text"}, {"text", content}};
  if (!merged.empty() && is_merged_user(merged.back()) && !has_task(merged.back())) {
    merged.back()["content_blocks"].push_back(std::move(block));
    return;
  }
  Json user = {{"role", "user"}, {"content", content}, {"content_blocks", Json::array()}};
  user["content_blocks"].push_back(std::move(block));
  for (const char* key : {"task", "wo_eos", "mask"}) {
    if (const Json* value = get(message, key)) user[key] = *value;
  }
  merged.push_back(std::move(user));
}

Json merge_tool_messages(const Json& messages) {
  Json merged = Json::array();
  for (const Json& message : messages) {
    const std::string role = role_of(message);
    if (role == "tool") {
      add_tool_result(merged, message);
    } else if (role == "user") {
      add_user(merged, message);
    } else {
      merged.push_back(message);
    }
  }
  return merged;
}

// --- sort_tool_results_by_call_order ---

// Each call id of an assistant turn and the call's place (a later duplicate id wins).
using CallOrder = std::vector<std::pair<Json, size_t>>;

CallOrder call_order(const Json& calls) {
  if (!calls.is_array()) fail("'tool_calls' must be a list");
  CallOrder order;
  for (size_t i = 0; i < calls.size(); ++i) {
    const Json* id = get(calls[i], "id");
    const Json* function = get(calls[i], "function");
    const Json call_id = truthy(id) ? *id : function ? value_or(*function, "id", "") : Json("");
    if (!truthy(&call_id)) continue;
    const auto same = [&](const auto& entry) { return entry.first == call_id; };
    const auto known = std::find_if(order.begin(), order.end(), same);
    if (known != order.end()) {
      known->second = i;
    } else {
      order.emplace_back(call_id, i);
    }
  }
  return order;
}

// The place of the call a result answers; 0 for an id no call has.
size_t place_of(const Json& block, const CallOrder& order) {
  const Json id = value_or(block, "tool_use_id", "");
  for (const auto& [call_id, place] : order) {
    if (call_id == id) return place;
  }
  return 0;
}

// A turn's tool results in the order of the calls they answer (stable), in the places the
// results held among its blocks.
void sort_tool_results(Json& blocks, const CallOrder& order) {
  std::vector<Json> results;
  for (const Json& block : blocks) {
    if (value_or(block, "type", Json()) == "tool_result") results.push_back(block);
  }
  if (results.size() < 2 || order.empty()) return;
  std::stable_sort(results.begin(), results.end(), [&](const Json& a, const Json& b) {
    return place_of(a, order) < place_of(b, order);
  });
  size_t next = 0;
  for (Json& block : blocks) {
    if (value_or(block, "type", Json()) == "tool_result") block = std::move(results[next++]);
  }
}

// The order is that of the latest assistant turn with calls before each user turn.
void sort_tool_results_by_call_order(Json& messages) {
  CallOrder order;
  for (Json& message : messages) {
    const std::string role = role_of(message);
    const Json* calls = get(message, "tool_calls");
    if (role == "assistant" && truthy(calls)) {
      order = call_order(*calls);
    } else if (role == "user" && truthy(get(message, "content_blocks"))) {
      sort_tool_results(message["content_blocks"], order);
    }
  }
}

// --- _drop_thinking_messages ---

// Before the last user turn: assistant turns lose their reasoning, developer messages (and roles
// the encoder does not know) go; user, system, tool and latest_reminder messages stay.
Json drop_thinking_messages(const Json& messages) {
  const ptrdiff_t last_user = last_user_index(messages);
  Json kept = Json::array();
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string role = role_of(messages[i]);
    if (role == "user" || role == "system" || role == "tool" || role == "latest_reminder" ||
        role == "direct_search_results" || static_cast<ptrdiff_t>(i) >= last_user) {
      kept.push_back(messages[i]);
    } else if (role == "assistant") {
      Json assistant = messages[i];
      assistant.erase("reasoning_content");
      kept.push_back(std::move(assistant));
    }
  }
  return kept;
}

// --- render_message ---

std::string render_tools(const Json& tools) {
  return std::string(kToolsBegin) + tool_schemas(tools) + std::string(kToolsEnd);
}

// What a system or developer message's tools and response_format add after its text.
std::string tools_and_response_format(const Json& message) {
  std::string out;
  const Json* tools = get(message, "tools");
  const Json* response_format = get(message, "response_format");
  if (truthy(tools)) out += "\n\n" + render_tools(*tools);
  if (truthy(response_format)) out += "\n\n" + response_format_section(*response_format);
  return out;
}

std::string render_developer(const Json& message) {
  const Json* content = get(message, "content");
  if (!truthy(content)) fail("a developer message needs content");
  if (!content->is_string()) fail("a developer message's content must be text");
  return std::string(kUserBegin) + content->get<std::string>() + tools_and_response_format(message);
}

// A text part is joined as it is: it must be text.
std::string text_part(const Json& text, std::string_view what) {
  if (!text.is_string()) fail("{} must be text", what);
  return text.get<std::string>();
}

// A tool result's content: text, or a list of parts whose text parts are kept (others named as
// unsupported), separated by blank lines.
std::string tool_result_text(const Json& content) {
  if (!content.is_array()) return py_str(&content, "a tool message's content");
  std::string out;
  for (size_t i = 0; i < content.size(); ++i) {
    const Json& part = content[i];
    if (!part.is_object()) fail("a tool message's content parts must be objects");
    if (i > 0) out += "\n\n";
    const Json type = value_or(part, "type", Json());
    out += type == "text" ? text_part(value_or(part, "text", ""), "a tool message's text part")
                          : fmt::format("[Unsupported {}]", py_str(&type, "a part's type"));
  }
  return out;
}

std::string render_block(const Json& block) {
  const Json type = value_or(block, "type", Json());
  if (type == "text") return text_part(value_or(block, "text", ""), "a user message's content");
  if (type == "tool_result") {
    return fmt::format("{}{}{}", kToolResultBegin, tool_result_text(value_or(block, "content", "")),
                       kToolResultEnd);
  }
  return fmt::format("[Unsupported {}]", py_str(&type, "a block's type"));
}

std::string render_user(const Json& message) {
  std::string out(kUserBegin);
  const Json* blocks = get(message, "content_blocks");
  if (!truthy(blocks)) return out + str_or_empty(get(message, "content"), "a user's content");
  for (size_t i = 0; i < blocks->size(); ++i) {
    if (i > 0) out += "\n\n";
    out += render_block((*blocks)[i]);
  }
  return out;
}

// V4 reads a call's arguments as JSON text, and text that is not JSON as the one argument
// "arguments". (Python would also take an arguments object for that one argument; an object is
// taken as the arguments themselves here, as V3.2's port does, since that is what a client
// sending one means.)
Json read_arguments(const Json* raw, size_t index) {
  if (raw == nullptr) fail("tool_calls[{}].function has no arguments", index);
  if (!raw->is_string()) return *raw;
  try {
    return Json::parse(raw->get<std::string>());
  } catch (const Json::exception&) {
    return Json{{"arguments", *raw}};
  }
}

// An assistant turn: its reasoning closed by "</think>" (thinking mode, unless it answers a task,
// and only after the last user turn when old reasoning is dropped), its text, its calls and the
// end of sentence (unless wo_eos).
std::string render_assistant(size_t index, const Json& messages, const Render& render) {
  const Json& message = messages[index];
  const Json* calls = get(message, "tool_calls");
  const std::string tool_calls =
      truthy(calls) ? dsml_calls(*calls, kCallsBegin, kCallsEnd, read_arguments) : "";
  const bool answers_task = index > 0 && has_task(messages[index - 1]);
  const bool recent = static_cast<ptrdiff_t>(index) > last_user_index(messages);
  std::string out;
  if (render.thinking && !answers_task && (!render.drop_thinking || recent)) {
    out += str_or_empty(get(message, "reasoning_content"), "reasoning_content");
    out += kThinkEnd;
  }
  out += str_or_empty(get(message, "content"), "an assistant message's content") + tool_calls;
  if (!truthy(get(message, "wo_eos"))) out += kEos;
  return out;
}

std::string render_body(size_t index, const Json& messages, const Render& render) {
  const Json& message = messages[index];
  const std::string role = role_of(message);
  if (role == "system") {
    return str_or_empty(get(message, "content"), "a system message's content") +
           tools_and_response_format(message);
  }
  if (role == "developer") return render_developer(message);
  if (role == "user") return render_user(message);
  if (role == "latest_reminder") {
    return std::string(kLatestReminder) +
           py_str(get(message, "content"), "a latest_reminder message's content");
  }
  if (role == "assistant") return render_assistant(index, messages, render);
  fail("unknown role '{}'", role);
}

// What ends a message that the assistant (or a latest_reminder) follows, or that is the last: a
// task's token (an action task opens the assistant turn first), or after a user or developer
// message the assistant's turn, with "<think>" when it is to think.
std::string transition(size_t index, const Json& messages, const Render& render) {
  if (index + 1 < messages.size()) {
    const std::string next = role_of(messages[index + 1]);
    if (next != "assistant" && next != "latest_reminder") return "";
  }
  const Json& message = messages[index];
  if (has_task(message)) {
    const Task& task = task_of(*get(message, "task"));
    if (task.name != "action") return std::string(task.token);
    return fmt::format("{}{}{}", kAssistant, render.thinking ? kThinkBegin : kThinkEnd, task.token);
  }
  const std::string role = role_of(message);
  if (role != "user" && role != "developer") return "";
  const bool last = static_cast<ptrdiff_t>(index) >= last_user_index(messages);
  const bool think = render.thinking && (!render.drop_thinking || last);
  return fmt::format("{}{}", kAssistant, think ? kThinkBegin : kThinkEnd);
}

std::string render_message(size_t index, const Json& messages, const Render& render) {
  std::string prompt;
  if (index == 0 && render.thinking && render.effort == ReasoningEffort::Max) {
    prompt += kReasoningEffortMax;
  }
  prompt += render_body(index, messages, render);
  return prompt + transition(index, messages, render);
}

// --- encode_messages ---

Json slice(const Json& messages, size_t begin, size_t end) {
  Json out = Json::array();
  for (size_t i = begin; i < end; ++i) out.push_back(messages[i]);
  return out;
}

bool any_tools(const Json& messages) {
  return std::any_of(messages.begin(), messages.end(),
                     [](const Json& message) { return truthy(get(message, "tools")); });
}

std::string encode(const Json& messages, const EncodeOptions& options) {
  if (!messages.is_array()) fail("messages must be a list");
  if (options.context > messages.size()) {
    fail("context of {} messages, but only {} given", options.context, messages.size());
  }
  for (size_t i = 0; i < messages.size(); ++i) {
    if (!messages[i].is_object()) fail("message {} is not an object", i);
  }
  // The context and the new messages merge apart; the calls' order carries over from one to
  // the other, as the encoder's sort over both does.
  const Json context = merge_tool_messages(slice(messages, 0, options.context));
  Json full = context;
  for (Json& message : merge_tool_messages(slice(messages, options.context, messages.size()))) {
    full.push_back(std::move(message));
  }
  sort_tool_results_by_call_order(full);

  Render render;
  render.thinking = options.thinking_mode == ThinkingMode::Thinking;
  // Tool use keeps every turn's reasoning.
  render.drop_thinking = options.drop_thinking && !any_tools(full);
  render.effort = options.reasoning_effort;
  size_t first = context.size();
  if (render.thinking && render.drop_thinking) {
    full = drop_thinking_messages(full);
    // As the encoder counts it: what the context keeps when dropped on its own.
    first = drop_thinking_messages(context).size();
  }
  std::string prompt = options.add_bos && options.context == 0 ? std::string(kBos) : "";
  for (size_t i = first; i < full.size(); ++i) prompt += render_message(i, full, render);
  return prompt;
}

}  // namespace

std::string encode_messages(const nlohmann::ordered_json& messages, const EncodeOptions& options) {
  // Every error, the shared helpers' included, names the format it comes from.
  try {
    return encode(messages, options);
  } catch (const Error& error) {
    fail("DeepSeek-V4 chat: {}", error.what());
  }
}

// V4's encoder knows "high" and "max" (only "max" adds a prompt). OpenAI's clients send
// "minimal", "low" and "medium" too: V4 has no lighter effort than its default, so they are it.
ReasoningEffort reasoning_effort_of(const nlohmann::ordered_json& kwargs) {
  const Json* effort = get(kwargs, "reasoning_effort");
  if (effort == nullptr || effort->is_null()) return ReasoningEffort::Unset;
  if (*effort == "max") return ReasoningEffort::Max;
  if (*effort == "high") return ReasoningEffort::High;
  if (*effort == "minimal" || *effort == "low" || *effort == "medium")
    return ReasoningEffort::Unset;
  fail("DeepSeek-V4 chat: reasoning_effort must be minimal, low, medium, high or max, got {}",
       effort->dump());
}

}  // namespace mlaserve::tokenizer::dsv4
