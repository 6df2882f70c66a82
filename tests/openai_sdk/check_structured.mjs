// The official OpenAI Node SDK against mlaserve's structured output and tool calls, in OpenAI's
// shapes: response_format json_schema (strict) and json_object, tools with tool_choice named,
// 'required' and 'none', streamed tool calls, and bad schemas rejected with 400.
//   NODE_PATH=$(scripts/openai_sdk.sh --dir)/node_modules node tests/openai_sdk/check_structured.mjs \
//     http://127.0.0.1:30000/v1 brown-tiny
// One line per check; the first failure exits with status 1 (tests/openai_sdk_test.cpp runs it).
import assert from 'node:assert/strict';

import { assertConforms, check, connect, expectError } from './common.mjs';

const { OpenAI, client, model } = connect();

// A nested object with an enum, an array of integers, a boolean and a bounded string; every
// property required, no others allowed.
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
const thingFormat = {
  type: 'json_schema',
  json_schema: { name: 'thing', strict: true, schema: thingSchema },
};
const thingRequest = {
  model,
  messages: [{ role: 'user', content: 'Describe a thing as JSON.' }],
  response_format: thingFormat,
  temperature: 1,
  max_tokens: 200,
};

await check('json_schema: 10 sampled answers parse and match the schema', async () => {
  // Sent at once: the server batches them.
  const responses = await Promise.all(
    Array.from({ length: 10 }, (_, seed) => client.chat.completions.create({ ...thingRequest, seed })),
  );
  responses.forEach((response, seed) => {
    const [choice] = response.choices;
    assert.equal(choice.finish_reason, 'stop', `seed ${seed}: ${JSON.stringify(choice.message.content)}`);
    assertConforms(thingSchema, choice.message.content, `seed ${seed}: content`);
  });
  return JSON.stringify(responses[0].choices[0].message.content);
});

await check('json_schema streamed: the concatenated deltas match the schema', async () => {
  const stream = await client.chat.completions.create({ ...thingRequest, seed: 100, stream: true });
  let content = '';
  for await (const chunk of stream) content += chunk.choices[0]?.delta?.content ?? '';
  assertConforms(thingSchema, content, 'streamed content');
});

await check('beta.chat.completions.parse with a plain json_schema', async () => {
  // openai@4's parse() needs zod only for zod-made formats: with a plain json_schema it sets
  // message.parsed = JSON.parse(content) (and throws on finish_reason 'length').
  if (typeof client.beta?.chat?.completions?.parse !== 'function') {
    return 'skipped: this SDK has no beta.chat.completions.parse';
  }
  const response = await client.beta.chat.completions.parse({ ...thingRequest, seed: 200 });
  const { message } = response.choices[0];
  const parsed = assertConforms(thingSchema, message.content, 'content');
  assert.deepEqual(message.parsed, parsed, 'message.parsed');
});

// Free-form keys, strings and members have no bound, and brown-tiny rarely closes an object: the
// answers that finish ('stop') must be objects, the others (cut by max_tokens) start like one.
// (tests/structured_output_test.cpp checks that a cut answer is the start of valid JSON.)
await check("response_format json_object gives objects", async () => {
  const response = await client.chat.completions.create({
    model,
    messages: [{ role: 'user', content: 'Answer in JSON.' }],
    response_format: { type: 'json_object' },
    temperature: 1,
    seed: 1,
    n: 8,
    max_tokens: 200,
  });
  const finished = response.choices.filter((choice) => choice.finish_reason === 'stop');
  for (const choice of finished) assertConforms({ type: 'object' }, choice.message.content, 'content');
  for (const choice of response.choices) {
    assert.ok(choice.message.content.startsWith('{'), `content does not start an object: ${choice.message.content}`);
    assert.ok(['stop', 'length'].includes(choice.finish_reason), `finish_reason ${choice.finish_reason}`);
  }
  return `${finished.length} of 8 finished within 200 tokens`;
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
const tools = [
  {
    type: 'function',
    function: {
      name: 'get_weather',
      description: 'The current weather in a city.',
      parameters: weatherParameters,
    },
  },
  {
    type: 'function',
    function: { name: 'get_time', description: 'The time in a time zone.', parameters: timeParameters },
  },
];
const parametersOf = Object.fromEntries(tools.map((t) => [t.function.name, t.function.parameters]));
const toolRequest = {
  model,
  messages: [{ role: 'user', content: 'What is the weather in Paris?' }],
  tools,
  temperature: 1,
  seed: 3,
  max_tokens: 100,
};
const weatherChoice = { type: 'function', function: { name: 'get_weather' } };

// Each call has an id, type 'function', one of `names`, and JSON arguments that match the tool's
// parameters.
function assertToolCalls(calls, names) {
  assert.ok(Array.isArray(calls) && calls.length >= 1, `tool_calls ${JSON.stringify(calls)}`);
  for (const call of calls) {
    assert.ok(typeof call.id === 'string' && call.id.length > 0, `id ${call.id}`);
    assert.equal(call.type, 'function');
    assert.ok(names.includes(call.function.name), `function ${call.function.name}, expected ${names}`);
    assertConforms(parametersOf[call.function.name], call.function.arguments, `${call.function.name} arguments`);
  }
}

await check('tool_choice get_weather: finish_reason tool_calls, valid arguments', async () => {
  const response = await client.chat.completions.create({ ...toolRequest, tool_choice: weatherChoice });
  const [choice] = response.choices;
  assert.equal(choice.finish_reason, 'tool_calls');
  assertToolCalls(choice.message.tool_calls, ['get_weather']);
  return choice.message.tool_calls.map((c) => c.function.arguments).join(', ');
});

await check('tool_choice get_weather streamed: the accumulated calls are valid', async () => {
  const stream = await client.chat.completions.create({
    ...toolRequest, seed: 4, tool_choice: weatherChoice, stream: true,
  });
  // As OpenAI's docs accumulate them: deltas carry an index; the first of a call brings its id,
  // type and function name, the later ones pieces of the arguments.
  const calls = [];
  let lastFinish;
  for await (const chunk of stream) {
    const choice = chunk.choices[0];
    if (!choice) continue;
    for (const delta of choice.delta?.tool_calls ?? []) {
      if (!calls[delta.index]) {
        assert.ok(delta.function?.name, `the first delta of call ${delta.index} has no name: ${JSON.stringify(delta)}`);
        calls[delta.index] = { id: delta.id, type: delta.type, function: { name: '', arguments: '' } };
      }
      const call = calls[delta.index];
      call.function.name += delta.function?.name ?? '';
      call.function.arguments += delta.function?.arguments ?? '';
    }
    lastFinish = choice.finish_reason;
  }
  assert.equal(lastFinish, 'tool_calls', "the last chunk's finish_reason");
  assert.ok(!calls.includes(undefined), 'call indexes without gaps');
  assertToolCalls(calls, ['get_weather']);
  return calls.map((c) => c.function.arguments).join(', ');
});

// With parallel calls allowed, brown-tiny keeps adding calls until max_tokens: ask for one.
await check("tool_choice 'required' calls one of the tools", async () => {
  const response = await client.chat.completions.create({
    ...toolRequest, seed: 5, tool_choice: 'required', parallel_tool_calls: false,
  });
  const [choice] = response.choices;
  assert.equal(choice.finish_reason, 'tool_calls');
  assert.equal(choice.message.tool_calls.length, 1, 'parallel_tool_calls false: one call');
  assertToolCalls(choice.message.tool_calls, ['get_weather', 'get_time']);
  return choice.message.tool_calls.map((c) => c.function.name).join(', ');
});

await check("tool_choice 'none' answers with content and no calls", async () => {
  const response = await client.chat.completions.create({
    ...toolRequest, seed: 6, max_tokens: 16, tool_choice: 'none',
  });
  const [choice] = response.choices;
  assert.ok(!choice.message.tool_calls?.length, `tool_calls ${JSON.stringify(choice.message.tool_calls)}`);
  assert.ok(typeof choice.message.content === 'string' && choice.message.content.length > 0,
    `content ${JSON.stringify(choice.message.content)}`);
  assert.notEqual(choice.finish_reason, 'tool_calls');
});

await check('a schema OpenAI rejects throws BadRequestError (400)', async () => {
  // Strict structured output needs an object at the root.
  await expectError(
    client.chat.completions.create({
      ...thingRequest,
      response_format: {
        type: 'json_schema',
        json_schema: { name: 'bad', strict: true, schema: { type: 'string', pattern: '^a' } },
      },
    }),
    OpenAI.BadRequestError, 400, '');
});

await check('tool_choice naming an unknown function throws BadRequestError (400)', async () => {
  await expectError(
    client.chat.completions.create({
      ...toolRequest, tool_choice: { type: 'function', function: { name: 'no_such_tool' } },
    }),
    OpenAI.BadRequestError, 400, 'no_such_tool');
});

console.log('all checks passed');
