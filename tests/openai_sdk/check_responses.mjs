// The official OpenAI Node SDK against mlaserve's Responses API (/v1/responses): string and item
// inputs with instructions, max_output_tokens cutting a response ('incomplete'), function tools
// and the function_call_output round trip, stored responses (previous_response_id, retrieve,
// delete), text.format json_schema, the named event stream and the ResponseStream helper, and
// errors as the SDK's error classes. brown-tiny's text is nonsense: the checks are of shapes.
//   NODE_PATH=$(scripts/openai_sdk.sh --dir)/node_modules node tests/openai_sdk/check_responses.mjs \
//     http://127.0.0.1:30000/v1 brown-tiny
// One line per check; the first failure exits with status 1 (tests/openai_sdk_test.cpp runs it).
import assert from 'node:assert/strict';

import { assertConforms, check, connect, expectError } from './common.mjs';

const { OpenAI, client, model } = connect();

// The fields the SDK's Response type declares required (nullable ones may be null).
const requiredFields = [
  'id', 'created_at', 'error', 'incomplete_details', 'instructions', 'metadata', 'model', 'object',
  'output', 'parallel_tool_calls', 'temperature', 'tool_choice', 'tools', 'top_p',
];

// The text of a response's output_text parts, as the SDK's `output_text` (which only create() and
// parse() add: retrieve() and the streams' final responses have none).
const outputText = (response) =>
  response.output
    .filter((item) => item.type === 'message')
    .flatMap((item) => item.content)
    .filter((part) => part.type === 'output_text')
    .map((part) => part.text)
    .join('');

// A response as the API defines it: the required fields, a status with incomplete_details to
// match, output items of known shapes, and usage whose counts add up (output at most `maxOutput`).
function assertResponse(response, maxOutput) {
  for (const field of requiredFields) assert.ok(field in response, `the response has no '${field}'`);
  assert.equal(response.object, 'response');
  assert.ok(typeof response.id === 'string' && response.id.length > 0, `id ${response.id}`);
  assert.ok(Number.isInteger(response.created_at), `created_at ${response.created_at}`);
  assert.equal(response.model, model);
  assert.ok(['completed', 'incomplete'].includes(response.status), `status ${response.status}`);
  assert.equal(response.error, null, 'error');
  if (response.status === 'incomplete') {
    assert.ok(response.incomplete_details?.reason, `incomplete_details ${JSON.stringify(response.incomplete_details)}`);
  } else {
    assert.equal(response.incomplete_details, null, 'incomplete_details of a completed response');
  }
  assert.ok(Array.isArray(response.output) && response.output.length >= 1, `output ${JSON.stringify(response.output)}`);
  for (const item of response.output) {
    if (item.type === 'message') {
      assert.ok(typeof item.id === 'string' && item.id.length > 0, `message id ${item.id}`);
      assert.equal(item.role, 'assistant');
      assert.ok(['completed', 'incomplete'].includes(item.status), `message status ${item.status}`);
      assert.ok(Array.isArray(item.content) && item.content.length >= 1, `content ${JSON.stringify(item.content)}`);
      for (const part of item.content) {
        assert.equal(part.type, 'output_text', `part ${JSON.stringify(part)}`);
        assert.equal(typeof part.text, 'string');
        assert.ok(Array.isArray(part.annotations), `annotations ${JSON.stringify(part.annotations)}`);
      }
    } else if (item.type === 'function_call') {
      assert.ok(typeof item.call_id === 'string' && item.call_id.length > 0, `call_id ${item.call_id}`);
      assert.equal(typeof item.name, 'string');
      assert.equal(typeof item.arguments, 'string');
    } else {
      assert.equal(item.type, 'reasoning', `an output item of type ${item.type}`);
    }
  }
  const { usage } = response;
  assert.ok(usage, 'no usage');
  assert.ok(usage.input_tokens > 0, `input_tokens ${usage.input_tokens}`);
  assert.ok(usage.output_tokens > 0 && usage.output_tokens <= maxOutput,
    `output_tokens ${usage.output_tokens}, at most ${maxOutput} asked`);
  assert.equal(usage.total_tokens, usage.input_tokens + usage.output_tokens, 'total_tokens');
  const cached = usage.input_tokens_details?.cached_tokens;
  assert.ok(cached >= 0 && cached <= usage.input_tokens, `input_tokens_details.cached_tokens ${cached}`);
  const reasoning = usage.output_tokens_details?.reasoning_tokens;
  assert.ok(reasoning >= 0 && reasoning <= usage.output_tokens, `output_tokens_details.reasoning_tokens ${reasoning}`);
}

// The one message item of a response, with its text.
function messageOf(response) {
  const messages = response.output.filter((item) => item.type === 'message');
  assert.equal(messages.length, 1, `message items in ${JSON.stringify(response.output)}`);
  return messages[0];
}

// What a response is beyond its ids and times: output item types and texts, status, counts.
const essence = (response) => ({
  status: response.status,
  incomplete_details: response.incomplete_details,
  output: response.output.map((item) =>
    item.type === 'message'
      ? { type: item.type, status: item.status, text: item.content.map((p) => p.text).join('') }
      : { type: item.type, name: item.name, arguments: item.arguments }),
  input_tokens: response.usage?.input_tokens,
  output_tokens: response.usage?.output_tokens,
});

const plainRequest = { model, input: 'Tell me a story.', max_output_tokens: 16, temperature: 0 };
let plain;
await check('responses.create with a string input', async () => {
  plain = await client.responses.create(plainRequest);
  assertResponse(plain, plainRequest.max_output_tokens);
  const message = messageOf(plain);
  assert.ok(plain.output_text.length > 0, 'empty output_text');
  assert.equal(plain.output_text, outputText(plain));
  assert.equal(message.content.length, 1, 'one output_text part');
  assert.equal(plain.max_output_tokens, plainRequest.max_output_tokens, 'max_output_tokens echoed');
  return `${plain.status}: ${JSON.stringify(plain.output_text)}`;
});

await check('responses.create with message items and instructions', async () => {
  const input = [
    { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Hello.' }] },
    { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'Hello to you.' }] },
    { role: 'user', content: 'Tell me a story.' },
  ];
  const instructions = 'You are a storyteller. Answer in one sentence.';
  const request = { model, input, max_output_tokens: 16, temperature: 0 };
  const without = await client.responses.create(request);
  assertResponse(without, 16);
  const response = await client.responses.create({ ...request, instructions });
  assertResponse(response, 16);
  messageOf(response);
  assert.equal(response.instructions, instructions, 'instructions echoed');
  assert.equal(without.instructions, null, 'instructions when none are given');
  assert.ok(response.usage.input_tokens > without.usage.input_tokens,
    `input_tokens with instructions ${response.usage.input_tokens}, without ${without.usage.input_tokens}`);
  // The earlier turns are part of the prompt.
  assert.ok(without.usage.input_tokens > plain.usage.input_tokens,
    `input_tokens of three items ${without.usage.input_tokens}, of the last alone ${plain.usage.input_tokens}`);
  return JSON.stringify(response.output_text);
});

await check("max_output_tokens 4: status 'incomplete', reason max_output_tokens", async () => {
  const response = await client.responses.create({ ...plainRequest, max_output_tokens: 4 });
  assertResponse(response, 4);
  assert.equal(response.status, 'incomplete');
  assert.deepEqual(response.incomplete_details, { reason: 'max_output_tokens' });
  assert.equal(response.usage.output_tokens, 4);
  assert.equal(messageOf(response).status, 'incomplete', 'the cut message item');
  // Greedy: the first 4 tokens of the 16-token answer.
  assert.ok(plain.output_text.startsWith(response.output_text),
    `${JSON.stringify(response.output_text)} does not start ${JSON.stringify(plain.output_text)}`);
  return JSON.stringify(response.output_text);
});

const weatherParameters = {
  type: 'object',
  properties: { city: { type: 'string', maxLength: 20 }, unit: { enum: ['c', 'f'] } },
  required: ['city', 'unit'],
  additionalProperties: false,
};
const timeParameters = {
  type: 'object',
  properties: { timezone: { type: 'string', enum: ['UTC', 'CET', 'PST'] } },
  required: ['timezone'],
  additionalProperties: false,
};
// The Responses API's flat function tools (not chat's {type, function: {...}}).
const tools = [
  { type: 'function', name: 'get_weather', description: 'The current weather in a city.',
    parameters: weatherParameters, strict: true },
  { type: 'function', name: 'get_time', description: 'The time in a time zone.',
    parameters: timeParameters, strict: true },
];
const toolInput = [{ role: 'user', content: 'What is the weather in Paris?' }];
const toolRequest = {
  model, input: toolInput, tools, tool_choice: { type: 'function', name: 'get_weather' },
  parallel_tool_calls: false, max_output_tokens: 100, temperature: 1, seed: 3,
};

// The function_call items of a response: one, to get_weather, with arguments for its parameters.
function weatherCallOf(response) {
  const calls = response.output.filter((item) => item.type === 'function_call');
  assert.equal(calls.length, 1, `function calls in ${JSON.stringify(response.output)}`);
  const [call] = calls;
  assert.equal(call.name, 'get_weather');
  assertConforms(weatherParameters, call.arguments, 'get_weather arguments');
  return call;
}

let toolResponse;
await check("tool_choice get_weather: a function_call item with valid arguments", async () => {
  toolResponse = await client.responses.create(toolRequest);
  assertResponse(toolResponse, toolRequest.max_output_tokens);
  assert.equal(toolResponse.status, 'completed');
  assert.equal(toolResponse.parallel_tool_calls, false, 'parallel_tool_calls echoed');
  assert.deepEqual(toolResponse.tools.map((t) => t.name), ['get_weather', 'get_time'], 'tools echoed');
  const call = weatherCallOf(toolResponse);
  return `${call.call_id}: ${call.arguments}`;
});

await check('a function_call_output round trip gets a message', async () => {
  const call = weatherCallOf(toolResponse);
  // As OpenAI's function-calling guide does it: the input so far, the response's output items
  // (the call among them, as they came), then the result under the call's call_id.
  const input = [
    ...toolInput,
    ...toolResponse.output,
    { type: 'function_call_output', call_id: call.call_id, output: '{"temperature": 21, "unit": "c"}' },
  ];
  const response = await client.responses.create({
    model, input, tools, tool_choice: 'none', max_output_tokens: 16, temperature: 0,
  });
  assertResponse(response, 16);
  assert.ok(!response.output.some((item) => item.type === 'function_call'), 'tool_choice none: no call');
  assert.ok(messageOf(response).content[0].text.length > 0, 'empty answer');
  assert.ok(response.usage.input_tokens > toolResponse.usage.input_tokens,
    `input_tokens with the call and its output ${response.usage.input_tokens}, before ${toolResponse.usage.input_tokens}`);
  return JSON.stringify(response.output_text);
});

await check('tool_choice get_weather streamed: the argument deltas make the final arguments', async () => {
  const stream = await client.responses.create({ ...toolRequest, seed: 4, stream: true });
  let deltas = '';
  let done;
  let last;
  for await (const event of stream) {
    if (event.type === 'response.function_call_arguments.delta') deltas += event.delta;
    if (event.type === 'response.function_call_arguments.done') done = event.arguments;
    last = event;
  }
  assert.equal(last.type, 'response.completed', 'the last event');
  const call = weatherCallOf(last.response);
  assert.equal(deltas, call.arguments, 'the concatenated function_call_arguments.delta');
  assert.equal(done, call.arguments, 'function_call_arguments.done');
  return call.arguments;
});

await check('previous_response_id continues a stored response; retrieve, delete, then 404', async () => {
  const first = await client.responses.create({ ...plainRequest });
  assertResponse(first, plainRequest.max_output_tokens);
  assert.notEqual(first.store, false, 'store defaults to true');
  const followUp = { model, input: 'Go on.', max_output_tokens: 8, temperature: 0 };
  const alone = await client.responses.create({ ...followUp, store: false });
  const next = await client.responses.create({ ...followUp, previous_response_id: first.id });
  assertResponse(next, followUp.max_output_tokens);
  assert.equal(next.previous_response_id, first.id, 'previous_response_id echoed');
  assert.notEqual(next.id, first.id);
  // The first turn (its input and its answer) comes before the new input.
  assert.ok(next.usage.input_tokens >= alone.usage.input_tokens + first.usage.output_tokens,
    `input_tokens ${next.usage.input_tokens} with the previous response, ${alone.usage.input_tokens} alone, ` +
      `previous output ${first.usage.output_tokens} tokens`);
  assert.ok(next.usage.input_tokens > first.usage.input_tokens,
    `input_tokens ${next.usage.input_tokens}, the previous response's ${first.usage.input_tokens}`);

  const retrieved = await client.responses.retrieve(first.id);
  assert.equal(retrieved.id, first.id);
  assert.equal(retrieved.object, 'response');
  assert.deepEqual(retrieved.output, first.output, 'the retrieved output');
  assert.deepEqual(retrieved.usage, first.usage, 'the retrieved usage');
  assert.equal(retrieved.status, first.status);

  await client.responses.del(first.id);
  await expectError(client.responses.retrieve(first.id), OpenAI.NotFoundError, 404, '');
  // Deleting it again: it is gone.
  await expectError(client.responses.del(first.id), OpenAI.NotFoundError, 404, '');
  // What was stored under `next` stays.
  const kept = await client.responses.retrieve(next.id);
  assert.deepEqual(kept.output, next.output, 'the follow-up, still stored');
  await client.responses.del(next.id);
  return `input_tokens ${alone.usage.input_tokens} alone, ${next.usage.input_tokens} after ${first.id}`;
});

await check('store: false is not retrievable; previous_response_id of it fails', async () => {
  const response = await client.responses.create({ ...plainRequest, store: false });
  assertResponse(response, plainRequest.max_output_tokens);
  if ('store' in response) assert.equal(response.store, false, 'store echoed');
  await expectError(client.responses.retrieve(response.id), OpenAI.NotFoundError, 404, '');
  // OpenAI answers 400 ("Previous response with id ... not found.", param previous_response_id);
  // a 404 is as clear.
  let error;
  try {
    await client.responses.create({ ...plainRequest, previous_response_id: response.id });
  } catch (caught) {
    error = caught;
  }
  assert.ok(error instanceof OpenAI.APIError, `expected an APIError, got ${error}`);
  assert.ok([400, 404].includes(error.status), `status ${error.status}: ${error.message}`);
  return `${error.status}: ${error.message}`;
});

// A nested object with an enum, an array of integers, a boolean and a bounded string.
const thingSchema = {
  type: 'object',
  properties: {
    kind: { type: 'string', enum: ['animal', 'plant', 'stone'] },
    details: {
      type: 'object',
      properties: {
        sizes: { type: 'array', items: { type: 'integer' }, maxItems: 4 },
        alive: { type: 'boolean' },
        name: { type: 'string', maxLength: 12 },
      },
      required: ['sizes', 'alive', 'name'],
      additionalProperties: false,
    },
  },
  required: ['kind', 'details'],
  additionalProperties: false,
};
const thingRequest = {
  model,
  input: 'Describe a thing as JSON.',
  text: { format: { type: 'json_schema', name: 'thing', schema: thingSchema, strict: true } },
  max_output_tokens: 200,
  temperature: 1,
};

await check('text.format json_schema: 4 sampled outputs parse and match the schema', async () => {
  const responses = await Promise.all(
    [0, 1, 2, 3].map((seed) => client.responses.create({ ...thingRequest, seed, store: false })),
  );
  responses.forEach((response, seed) => {
    assertResponse(response, thingRequest.max_output_tokens);
    assert.equal(response.status, 'completed', `seed ${seed}: ${JSON.stringify(response.output_text)}`);
    assertConforms(thingSchema, response.output_text, `seed ${seed}: output_text`);
    assert.equal(response.text?.format?.type, 'json_schema', 'text.format echoed');
  });
  return JSON.stringify(responses[0].output_text);
});

await check('responses.parse with a plain json_schema sets output_parsed', async () => {
  if (typeof client.responses.parse !== 'function') return 'skipped: this SDK has no responses.parse';
  const response = await client.responses.parse({ ...thingRequest, seed: 10, store: false });
  const parsed = assertConforms(thingSchema, response.output_text, 'output_text');
  assert.deepEqual(response.output_parsed, parsed, 'output_parsed');
});

// Checks the named events of one streamed response and returns the final response: created
// first, sequence numbers rising, every text delta inside an added item and content part, the
// done events repeating what the deltas made, and the terminal event last.
function assertEventSequence(events) {
  const types = events.map((e) => e.type);
  assert.equal(types[0], 'response.created', `the first events: ${types.slice(0, 3)}`);
  const last = events.at(-1);
  assert.ok(['response.completed', 'response.incomplete'].includes(last.type), `the last event: ${last.type}`);
  assert.equal(types.filter((t) => t === last.type).length, 1, `one ${last.type}`);
  events.forEach((event, i) => {
    assert.ok(Number.isInteger(event.sequence_number), `sequence_number of ${event.type}`);
    if (i > 0) {
      assert.ok(event.sequence_number > events[i - 1].sequence_number,
        `sequence_number ${event.sequence_number} after ${events[i - 1].sequence_number}`);
    }
  });
  assert.equal(events[0].response.status, 'in_progress', 'the created response is in progress');
  const added = new Map(); // output_index -> item id
  const texts = new Map(); // `${output_index}/${content_index}` -> the text so far
  for (const event of events) {
    const key = `${event.output_index}/${event.content_index}`;
    switch (event.type) {
      case 'response.output_item.added':
        assert.ok(!added.has(event.output_index), `output_index ${event.output_index} added twice`);
        added.set(event.output_index, event.item.id);
        break;
      case 'response.content_part.added':
        assert.ok(added.has(event.output_index), `a content part of output ${event.output_index} before its item`);
        assert.equal(event.part.type, 'output_text');
        texts.set(key, '');
        break;
      case 'response.output_text.delta':
        assert.ok(texts.has(key), `a text delta at ${key} before its content part`);
        assert.equal(event.item_id, added.get(event.output_index), 'item_id of a delta');
        texts.set(key, texts.get(key) + event.delta);
        break;
      case 'response.output_text.done':
        assert.equal(event.text, texts.get(key), `output_text.done at ${key}`);
        break;
      case 'response.content_part.done':
        assert.equal(event.part.text, texts.get(key), `content_part.done at ${key}`);
        break;
      case 'response.output_item.done':
        assert.equal(event.item.id, added.get(event.output_index), `output_item.done of ${event.output_index}`);
        break;
      default:
    }
  }
  const final = last.response;
  assert.equal(final.status, last.type.slice('response.'.length), 'the terminal event and its status');
  assert.equal(final.output.length, added.size, 'output items: one output_item.added each');
  const deltas = events.filter((e) => e.type === 'response.output_text.delta');
  assert.ok(deltas.length >= 1, 'no response.output_text.delta');
  assert.equal(deltas.map((e) => e.delta).join(''), outputText(final), 'the concatenated deltas');
  return final;
}

await check('responses.create stream: the event sequence, deltas equal to the final text', async () => {
  const stream = await client.responses.create({ ...plainRequest, stream: true });
  const events = [];
  for await (const event of stream) events.push(event);
  const final = assertEventSequence(events);
  assertResponse(final, plainRequest.max_output_tokens);
  assert.deepEqual(essence(final), essence(plain), 'the streamed response, as the non-streamed one');
  return `${events.length} events: ${[...new Set(events.map((e) => e.type.slice(9)))].join(', ')}`;
});

// The SDK's ResponseStream takes its final response from response.completed only (after
// response.incomplete, finalResponse() is the snapshot built from response.created: status
// in_progress). A json_schema format whose every value is bounded completes under greedy decoding.
await check('responses.stream(): the events, and finalResponse() as the non-streamed response', async () => {
  const request = { ...thingRequest, temperature: 0, store: false };
  const expected = await client.responses.create(request);
  assertResponse(expected, request.max_output_tokens);
  assert.equal(expected.status, 'completed', `the greedy json_schema response: ${JSON.stringify(expected.output_text)}`);
  const stream = client.responses.stream(request);
  let text = '';
  stream.on('response.output_text.delta', (event) => {
    text += event.delta;
    assert.equal(event.snapshot, text, 'the snapshot of a delta');
  });
  const events = [];
  for await (const event of stream) events.push(event);
  assertEventSequence(events);
  const final = await stream.finalResponse();
  assertResponse(final, request.max_output_tokens);
  assert.equal(text, outputText(final), 'the delta events');
  assertConforms(thingSchema, text, 'the streamed text');
  assert.deepEqual(essence(final), essence(expected), 'finalResponse(), as the non-streamed one');
  assert.deepEqual(Object.keys(final).filter((k) => k !== 'output_parsed').sort(),
    Object.keys(expected).filter((k) => k !== 'output_text').sort(), 'the fields of the final response');
  return `${events.length} events`;
});

await check("max_output_tokens: 'x' throws BadRequestError (400)", async () => {
  const error = await expectError(
    client.responses.create({ ...plainRequest, max_output_tokens: 'x' }),
    OpenAI.BadRequestError, 400, 'max_output_tokens');
  assert.equal(error.type, 'invalid_request_error');
  assert.equal(error.param, 'max_output_tokens');
});

await check('a streamed request with a bad field fails before streaming (400)', async () => {
  await expectError(
    client.responses.create({ ...plainRequest, temperature: -1, stream: true }),
    OpenAI.BadRequestError, 400, 'temperature');
});

await check('an unknown model throws NotFoundError (404)', async () => {
  const error = await expectError(
    client.responses.create({ ...plainRequest, model: 'no-such-model' }),
    OpenAI.NotFoundError, 404, 'no-such-model');
  assert.equal(error.code, 'model_not_found');
});

await check('retrieving an unknown response throws NotFoundError (404)', async () => {
  await expectError(client.responses.retrieve('resp_no_such_response'), OpenAI.NotFoundError, 404, '');
});

console.log('all checks passed');
