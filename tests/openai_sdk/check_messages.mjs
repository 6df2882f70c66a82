// The official Anthropic Node SDK against mlaserve's Anthropic Messages API (/v1/messages):
// text answers with a system prompt (a string or blocks), stop_reason max_tokens and
// stop_sequence, the event stream through messages.stream(), a forced tool_use -> tool_result ->
// answer loop, thinking blocks in the history, count_tokens against create's usage, and errors as
// the SDK's error classes. brown-tiny's text is nonsense: the checks are of shapes.
//   NODE_PATH=$(scripts/openai_sdk.sh --dir)/node_modules node tests/openai_sdk/check_messages.mjs \
//     http://127.0.0.1:30000/v1 brown-tiny
// (the OpenAI base URL, as for the other scripts: the Anthropic SDK adds /v1 itself, so it gets the
// server's root). One line per check; the first failure exits with status 1
// (tests/openai_sdk_test.cpp runs it).
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';

import { check, expectError, schemaErrors } from './common.mjs';

// Through CommonJS require, which honours NODE_PATH (as common.mjs loads the OpenAI SDK).
function loadAnthropic() {
  try {
    const require = createRequire(import.meta.url);
    const Anthropic = require('@anthropic-ai/sdk');
    return { Anthropic, version: require('@anthropic-ai/sdk/version').VERSION };
  } catch (error) {
    console.error(
      "cannot load the '@anthropic-ai/sdk' package: run scripts/openai_sdk.sh (scripts/test.sh does) " +
        'and set NODE_PATH to the node_modules folder of `scripts/openai_sdk.sh --dir`\n' +
        `(${error.message.split('\n')[0]})`,
    );
    process.exit(2);
  }
}

const openaiBaseURL = process.argv[2] ?? process.env.OPENAI_BASE_URL;
const model = process.argv[3] ?? process.env.MLASERVE_MODEL;
if (!openaiBaseURL || !model) {
  console.error('usage: node SCRIPT BASE_URL MODEL  (e.g. http://127.0.0.1:30000/v1 brown-tiny)');
  process.exit(2);
}
const baseURL = openaiBaseURL.replace(/\/+$/, '').replace(/\/v1$/, '');
const { Anthropic, version } = loadAnthropic();
// No retries: a failing request must fail its check at once. Any key: the server takes x-api-key.
const client = new Anthropic({ baseURL, apiKey: 'none', maxRetries: 0, timeout: 120_000 });
console.log(`@anthropic-ai/sdk@${version} on node ${process.version}, ${baseURL}, model ${model}`);

const stopReasons = ['end_turn', 'max_tokens', 'stop_sequence', 'tool_use'];

// A message as the API defines it: text and tool_use blocks, a stop_reason, stop_sequence set only
// for 'stop_sequence', usage with output at most `maxTokens`.
function assertMessage(message, maxTokens) {
  assert.equal(message.type, 'message');
  assert.ok(typeof message.id === 'string' && message.id.length > 0, `id ${message.id}`);
  assert.equal(message.role, 'assistant');
  assert.equal(message.model, model);
  assert.ok(Array.isArray(message.content), `content ${JSON.stringify(message.content)}`);
  for (const block of message.content) {
    if (block.type === 'text') {
      assert.equal(typeof block.text, 'string');
    } else if (block.type === 'tool_use') {
      assert.ok(typeof block.id === 'string' && block.id.length > 0, `tool_use id ${block.id}`);
      assert.equal(typeof block.name, 'string');
      assert.ok(block.input !== null && typeof block.input === 'object' && !Array.isArray(block.input),
        `tool_use input ${JSON.stringify(block.input)}`);
    } else {
      assert.equal(block.type, 'thinking', `a content block of type ${block.type}`);
    }
  }
  assert.ok(stopReasons.includes(message.stop_reason), `stop_reason ${message.stop_reason}`);
  if (message.stop_reason === 'stop_sequence') {
    assert.equal(typeof message.stop_sequence, 'string', 'stop_sequence');
  } else {
    assert.equal(message.stop_sequence, null, `stop_sequence with stop_reason ${message.stop_reason}`);
  }
  const { usage } = message;
  assert.ok(usage, 'no usage');
  assert.ok(usage.input_tokens > 0, `input_tokens ${usage.input_tokens}`);
  assert.ok(usage.output_tokens > 0 && usage.output_tokens <= maxTokens,
    `output_tokens ${usage.output_tokens}, at most ${maxTokens} asked`);
  for (const field of ['cache_read_input_tokens', 'cache_creation_input_tokens']) {
    const value = usage[field];
    assert.ok(value === undefined || value === null || (Number.isInteger(value) && value >= 0), `${field} ${value}`);
  }
}

// The text of a message's text blocks.
const textOf = (message) =>
  message.content.filter((b) => b.type === 'text').map((b) => b.text).join('');

// Every prompt token, cached or not (Anthropic's input_tokens leaves out the cached ones).
const promptTokens = (usage) =>
  usage.input_tokens + (usage.cache_read_input_tokens ?? 0) + (usage.cache_creation_input_tokens ?? 0);

// What a message is beyond its id: block types and contents, stop, token counts.
const essence = (message) => ({
  content: message.content.map((b) =>
    b.type === 'text' ? { type: b.type, text: b.text } : { type: b.type, name: b.name, input: b.input }),
  stop_reason: message.stop_reason,
  stop_sequence: message.stop_sequence,
  input_tokens: promptTokens(message.usage),
  output_tokens: message.usage.output_tokens,
});

const system = 'You are a storyteller.';
const messages = [{ role: 'user', content: 'Tell me a story.' }];
const textRequest = { model, system, messages, max_tokens: 16, temperature: 0 };
let text;
await check('messages.create: a text answer', async () => {
  text = await client.messages.create(textRequest);
  assertMessage(text, textRequest.max_tokens);
  assert.deepEqual(text.content.map((b) => b.type), ['text'], 'content blocks');
  assert.ok(textOf(text).length > 0, 'empty text');
  assert.notEqual(text.stop_reason, 'tool_use');
  return `${text.stop_reason}: ${JSON.stringify(textOf(text))}`;
});

await check('a system prompt of text blocks (with cache_control) counts as the string', async () => {
  const response = await client.messages.create({
    ...textRequest,
    system: [{ type: 'text', text: system, cache_control: { type: 'ephemeral' } }],
  });
  assertMessage(response, textRequest.max_tokens);
  assert.deepEqual(essence(response), essence(text));
  const without = await client.messages.create({ ...textRequest, system: undefined });
  assertMessage(without, textRequest.max_tokens);
  assert.ok(promptTokens(without.usage) < promptTokens(text.usage),
    `prompt tokens without the system prompt ${promptTokens(without.usage)}, with ${promptTokens(text.usage)}`);
});

await check("max_tokens 3: stop_reason 'max_tokens'", async () => {
  const response = await client.messages.create({ ...textRequest, max_tokens: 3 });
  assertMessage(response, 3);
  assert.equal(response.stop_reason, 'max_tokens');
  assert.equal(response.usage.output_tokens, 3);
  // Greedy: the start of the 16-token answer.
  assert.ok(textOf(text).startsWith(textOf(response)),
    `${JSON.stringify(textOf(response))} does not start ${JSON.stringify(textOf(text))}`);
  return JSON.stringify(textOf(response));
});

await check("stop_sequences: stop_reason 'stop_sequence', the text before it", async () => {
  // A stop sequence from the middle of the greedy answer: the same request stops before its first
  // occurrence, and names it.
  const full = textOf(text);
  assert.ok(full.length >= 8, `text too short to cut: ${JSON.stringify(full)}`);
  const middle = Math.floor(full.length / 2);
  const stop = full.slice(middle, middle + 3);
  const response = await client.messages.create({ ...textRequest, stop_sequences: ['never seen', stop] });
  assertMessage(response, textRequest.max_tokens);
  assert.equal(response.stop_reason, 'stop_sequence');
  assert.equal(response.stop_sequence, stop);
  assert.equal(textOf(response), full.slice(0, full.indexOf(stop)));
  return `stop ${JSON.stringify(stop)}`;
});

// The events of one stream as Anthropic sends them: message_start first (an empty message),
// content_block_start / _delta / _stop per block by index, one message_delta with the stop, and
// message_stop last. `raw`: the events as sent (MessageStream builds its message in the object
// that message_start brought, so its events show that message's later state).
function assertEvents(events, raw) {
  const types = events.map((e) => e.type);
  assert.equal(types[0], 'message_start', `the first events: ${types.slice(0, 3)}`);
  assert.equal(types.at(-1), 'message_stop', `the last events: ${types.slice(-3)}`);
  if (raw) {
    assert.deepEqual(events[0].message.content, [], 'the content of message_start');
    assert.equal(events[0].message.stop_reason, null, 'the stop_reason of message_start');
  }
  assert.ok(events[0].message.usage.input_tokens > 0, 'input_tokens in message_start');
  const deltas = events.filter((e) => e.type === 'message_delta');
  assert.equal(deltas.length, 1, 'one message_delta');
  assert.equal(types.at(-2), 'message_delta', 'message_delta just before message_stop');
  let open = null; // the index of the block being streamed
  let next = 0;
  for (const event of events.slice(1, -2)) {
    if (event.type === 'content_block_start') {
      assert.equal(open, null, `block ${event.index} starts inside block ${open}`);
      assert.equal(event.index, next, 'blocks in index order');
      open = event.index;
    } else if (event.type === 'content_block_delta') {
      assert.equal(event.index, open, `a delta of block ${event.index} while ${open} is open`);
    } else if (event.type === 'content_block_stop') {
      assert.equal(event.index, open, `a stop of block ${event.index} while ${open} is open`);
      open = null;
      next += 1;
    } else {
      assert.equal(event.type, 'ping', `an event ${event.type} among the blocks`);
    }
  }
  assert.equal(open, null, 'a block left open');
  return deltas[0];
}

await check('messages.create stream: true: the events, text deltas as the non-streamed text', async () => {
  const stream = await client.messages.create({ ...textRequest, stream: true });
  const events = [];
  for await (const event of stream) events.push(event);
  const delta = assertEvents(events, true);
  assert.equal(delta.delta.stop_reason, text.stop_reason, 'the stop_reason of message_delta');
  assert.equal(delta.usage.output_tokens, text.usage.output_tokens, 'the output_tokens of message_delta');
  const streamed = events
    .filter((e) => e.type === 'content_block_delta' && e.delta.type === 'text_delta')
    .map((e) => e.delta.text)
    .join('');
  assert.equal(streamed, textOf(text), 'the text deltas, as the non-streamed text');
});

await check('messages.stream: the events, and finalMessage() as the non-streamed answer', async () => {
  const stream = client.messages.stream(textRequest);
  let streamed = '';
  stream.on('text', (delta) => {
    streamed += delta;
  });
  const events = [];
  for await (const event of stream) events.push(event);
  const delta = assertEvents(events, false);
  const final = await stream.finalMessage();
  assertMessage(final, textRequest.max_tokens);
  assert.equal(delta.delta.stop_reason, final.stop_reason);
  assert.equal(streamed, textOf(final), 'the text events');
  assert.deepEqual(essence(final), essence(text), 'finalMessage(), as the non-streamed answer');
  return `${events.length} events`;
});

const weatherSchema = {
  type: 'object',
  properties: { city: { type: 'string', maxLength: 20 }, unit: { enum: ['c', 'f'] } },
  required: ['city', 'unit'],
  additionalProperties: false,
};
const tools = [
  { name: 'get_weather', description: 'The current weather in a city.', input_schema: weatherSchema },
  {
    name: 'get_time',
    description: 'The time in a time zone.',
    input_schema: {
      type: 'object',
      properties: { timezone: { type: 'string', enum: ['UTC', 'CET', 'PST'] } },
      required: ['timezone'],
    },
  },
];
const toolMessages = [{ role: 'user', content: 'What is the weather in Paris?' }];
const toolRequest = {
  model, messages: toolMessages, tools, tool_choice: { type: 'tool', name: 'get_weather' },
  max_tokens: 100, temperature: 1,
};

// The tool_use blocks of a message: at least one, all get_weather with inputs for its schema.
function weatherUsesOf(message) {
  const uses = message.content.filter((b) => b.type === 'tool_use');
  assert.ok(uses.length >= 1, `no tool_use in ${JSON.stringify(message.content)}`);
  for (const use of uses) {
    assert.equal(use.name, 'get_weather');
    assert.deepEqual(schemaErrors(weatherSchema, use.input), [],
      `input ${JSON.stringify(use.input)} does not match the schema`);
  }
  assert.equal(message.stop_reason, 'tool_use');
  return uses;
}

let toolUse;
await check("tool_choice tool get_weather: a tool_use block, stop_reason 'tool_use'", async () => {
  toolUse = await client.messages.create(toolRequest);
  assertMessage(toolUse, toolRequest.max_tokens);
  const uses = weatherUsesOf(toolUse);
  return uses.map((u) => `${u.id}: ${JSON.stringify(u.input)}`).join(', ');
});

await check('tool_result back: an answer in text', async () => {
  const uses = weatherUsesOf(toolUse);
  const history = [
    ...toolMessages,
    { role: 'assistant', content: toolUse.content },
    {
      role: 'user',
      content: uses.map((use) => ({
        type: 'tool_result', tool_use_id: use.id, content: '21 degrees, sunny',
      })),
    },
  ];
  const answer = await client.messages.create({
    model, messages: history, tools, tool_choice: { type: 'none' }, max_tokens: 16, temperature: 0,
  });
  assertMessage(answer, 16);
  assert.ok(!answer.content.some((b) => b.type === 'tool_use'), 'tool_choice none: no tool_use');
  assert.ok(textOf(answer).length > 0, 'empty answer');
  assert.ok(promptTokens(answer.usage) > promptTokens(toolUse.usage), 'the history counts');
  // A tool_result with content blocks, as some clients send it, and tool_choice auto.
  history[2].content = uses.map((use) => ({
    type: 'tool_result', tool_use_id: use.id, content: [{ type: 'text', text: '21 degrees, sunny' }],
  }));
  const again = await client.messages.create({ model, messages: history, tools, max_tokens: 16, temperature: 0 });
  assertMessage(again, 16);
  return JSON.stringify(textOf(answer));
});

await check('tool_use streamed: finalMessage() has the input from the input_json deltas', async () => {
  const stream = client.messages.stream({ ...toolRequest, temperature: 0 });
  let json = '';
  stream.on('inputJson', (delta) => {
    json += delta;
  });
  const final = await stream.finalMessage();
  assertMessage(final, toolRequest.max_tokens);
  const uses = weatherUsesOf(final);
  if (uses.length === 1) assert.deepEqual(JSON.parse(json), uses[0].input, 'the input_json_delta events');
  const plain = await client.messages.create({ ...toolRequest, temperature: 0 });
  assert.deepEqual(essence(final), essence(plain), 'finalMessage(), as the non-streamed answer');
  return JSON.stringify(uses[0].input);
});

await check('thinking blocks in the history are accepted', async () => {
  const history = [
    { role: 'user', content: 'Hello.' },
    {
      role: 'assistant',
      content: [
        { type: 'thinking', thinking: 'The user greets me.', signature: 'c2lnbmF0dXJl' },
        { type: 'text', text: 'Hello to you.' },
      ],
    },
    { role: 'user', content: 'Tell me a story.' },
  ];
  const response = await client.messages.create({ model, messages: history, max_tokens: 8, temperature: 0 });
  assertMessage(response, 8);
});

await check('messages.countTokens equals the prompt tokens of create', async () => {
  const counted = await client.messages.countTokens({ model, system, messages });
  assert.ok(counted.input_tokens > 0, `input_tokens ${counted.input_tokens}`);
  assert.equal(counted.input_tokens, promptTokens(text.usage), `create's usage ${JSON.stringify(text.usage)}`);
  // With tools and a tool_choice (they are part of the prompt).
  const { max_tokens: _, temperature: __, ...toolCount } = toolRequest;
  const withTools = await client.messages.countTokens(toolCount);
  assert.equal(withTools.input_tokens, promptTokens(toolUse.usage), `create's usage ${JSON.stringify(toolUse.usage)}`);
  return `${counted.input_tokens}, with tools ${withTools.input_tokens}`;
});

await check('max_tokens missing throws BadRequestError (400), invalid_request_error', async () => {
  const { max_tokens: _, ...request } = textRequest;
  const error = await expectError(client.messages.create(request), Anthropic.BadRequestError, 400, 'max_tokens');
  assert.equal(error.error?.type, 'error', `the body ${JSON.stringify(error.error)}`);
  assert.equal(error.error?.error?.type, 'invalid_request_error', `the body ${JSON.stringify(error.error)}`);
  assert.equal(error.type, 'invalid_request_error');
  return error.error.error.message;
});

await check('a streamed request with a bad field fails before streaming (400)', async () => {
  const error = await expectError(
    client.messages.create({ ...textRequest, temperature: -1, stream: true }),
    Anthropic.BadRequestError, 400, 'temperature');
  assert.equal(error.type, 'invalid_request_error');
});

await check('tool_choice naming an unknown tool throws BadRequestError (400)', async () => {
  await expectError(
    client.messages.create({ ...toolRequest, tool_choice: { type: 'tool', name: 'no_such_tool' } }),
    Anthropic.BadRequestError, 400, 'no_such_tool');
});

await check('an unknown model throws NotFoundError (404), not_found_error', async () => {
  const error = await expectError(
    client.messages.create({ ...textRequest, model: 'no-such-model' }),
    Anthropic.NotFoundError, 404, 'no-such-model');
  assert.equal(error.error?.error?.type, 'not_found_error', `the body ${JSON.stringify(error.error)}`);
});

console.log('all checks passed');
