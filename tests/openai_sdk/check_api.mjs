// The official OpenAI Node SDK against mlaserve's OpenAI API: models, completions and chat
// completions (plain and streamed, n, seeds, logprobs, stop strings) and the errors the SDK maps
// to its error classes.
//   NODE_PATH=$(scripts/openai_sdk.sh --dir)/node_modules node tests/openai_sdk/check_api.mjs \
//     http://127.0.0.1:30000/v1 brown-tiny
// One line per check; the first failure exits with status 1 (tests/openai_sdk_test.cpp runs it).
import assert from 'node:assert/strict';

import { check, connect, expectError } from './common.mjs';

const { OpenAI, client, model } = connect();
const prompt = 'The jury said that';
const messages = [{ role: 'user', content: 'Tell me a story.' }];

function assertUsage(usage, maxCompletion) {
  assert.ok(usage, 'no usage');
  assert.ok(usage.prompt_tokens > 0, `prompt_tokens ${usage.prompt_tokens}`);
  assert.ok(usage.completion_tokens > 0 && usage.completion_tokens <= maxCompletion,
    `completion_tokens ${usage.completion_tokens}, at most ${maxCompletion} asked`);
  assert.equal(usage.total_tokens, usage.prompt_tokens + usage.completion_tokens, 'total_tokens');
  const cached = usage.prompt_tokens_details?.cached_tokens;
  assert.ok(cached >= 0 && cached <= usage.prompt_tokens, `cached_tokens ${cached}`);
}

// The token counts of a usage; cached_tokens left out, since a repeated prompt finds its prefix
// in the radix cache.
const counts = ({ prompt_tokens, completion_tokens, total_tokens }) =>
  ({ prompt_tokens, completion_tokens, total_tokens });

let contextLength;
await check('models.list() has the served model', async () => {
  const page = await client.models.list();
  const served = page.data.find((m) => m.id === model);
  assert.ok(served, `'${model}' not among ${JSON.stringify(page.data.map((m) => m.id))}`);
  assert.equal(served.object, 'model');
  contextLength = served.max_model_len; // our extension, as vLLM and SGLang report it
  assert.ok(Number.isInteger(contextLength), `max_model_len ${contextLength}`);
});

// Greedy (temperature 0) outputs of the same request must be the same streamed or not.
const completionRequest = { model, prompt, max_tokens: 12, temperature: 0 };
let completion;
await check('completions.create', async () => {
  completion = await client.completions.create(completionRequest);
  assert.equal(completion.object, 'text_completion');
  assert.equal(completion.choices.length, 1);
  const [choice] = completion.choices;
  assert.equal(choice.index, 0);
  assert.ok(typeof choice.text === 'string' && choice.text.length > 0, `text ${choice.text}`);
  assert.ok(['length', 'stop'].includes(choice.finish_reason), `finish_reason ${choice.finish_reason}`);
  assertUsage(completion.usage, completionRequest.max_tokens);
  return JSON.stringify(choice.text);
});

await check('completions.create streamed equals the non-streamed text', async () => {
  const stream = await client.completions.create({
    ...completionRequest, stream: true, stream_options: { include_usage: true },
  });
  let text = '';
  let finish = null;
  let usage = null;
  for await (const chunk of stream) {
    for (const choice of chunk.choices) {
      text += choice.text;
      finish = choice.finish_reason ?? finish;
    }
    if (chunk.usage) usage = chunk.usage;
  }
  assert.equal(text, completion.choices[0].text);
  assert.equal(finish, completion.choices[0].finish_reason);
  assertUsage(usage, completionRequest.max_tokens);
  assert.deepEqual(counts(usage), counts(completion.usage), 'the final usage chunk');
});

const chatRequest = { model, messages, max_tokens: 16, temperature: 0 };
let chat;
await check('chat.completions.create', async () => {
  chat = await client.chat.completions.create(chatRequest);
  assert.equal(chat.object, 'chat.completion');
  assert.equal(chat.choices.length, 1);
  const [choice] = chat.choices;
  assert.equal(choice.message.role, 'assistant');
  assert.ok(typeof choice.message.content === 'string' && choice.message.content.length > 0,
    `content ${choice.message.content}`);
  assert.ok(['length', 'stop'].includes(choice.finish_reason), `finish_reason ${choice.finish_reason}`);
  assertUsage(chat.usage, chatRequest.max_tokens);
  return JSON.stringify(choice.message.content);
});

await check('chat.completions.create streamed equals the non-streamed content, then usage', async () => {
  const stream = await client.chat.completions.create({
    ...chatRequest, stream: true, stream_options: { include_usage: true },
  });
  const chunks = [];
  for await (const chunk of stream) chunks.push(chunk);
  assert.ok(chunks.length >= 3, `${chunks.length} chunks`);
  assert.equal(chunks[0].choices[0].delta.role, 'assistant', 'the first delta carries the role');
  // include_usage: every chunk has usage null but the last, which has no choices.
  const last = chunks.pop();
  assert.deepEqual(last.choices, [], 'the usage chunk has no choices');
  assertUsage(last.usage, chatRequest.max_tokens);
  assert.deepEqual(counts(last.usage), counts(chat.usage), 'the usage chunk');
  for (const chunk of chunks) {
    assert.equal(chunk.object, 'chat.completion.chunk');
    assert.equal(chunk.usage, null, 'usage before the last chunk');
  }
  const content = chunks.map((c) => c.choices[0]?.delta?.content ?? '').join('');
  assert.equal(content, chat.choices[0].message.content);
  const finishes = chunks.map((c) => c.choices[0]?.finish_reason).filter((f) => f);
  assert.deepEqual(finishes, [chat.choices[0].finish_reason], 'one finish_reason, as non-streamed');
});

await check('chat n: 2 with a seed gives two choices, the same again', async () => {
  const request = { model, messages, max_tokens: 8, temperature: 1, seed: 7, n: 2 };
  const first = await client.chat.completions.create(request);
  assert.deepEqual(first.choices.map((c) => c.index), [0, 1]);
  for (const choice of first.choices) assert.equal(typeof choice.message.content, 'string');
  assert.ok(first.usage.completion_tokens <= 2 * request.max_tokens, 'completion_tokens of both');
  const again = await client.chat.completions.create(request);
  assert.deepEqual(again.choices.map((c) => c.message.content),
    first.choices.map((c) => c.message.content), 'the same seed, the same samples');
  return JSON.stringify(first.choices.map((c) => c.message.content));
});

await check('chat logprobs with top_logprobs: 3', async () => {
  const response = await client.chat.completions.create({
    ...chatRequest, max_tokens: 6, logprobs: true, top_logprobs: 3,
  });
  const [choice] = response.choices;
  const content = choice.logprobs?.content;
  assert.ok(Array.isArray(content), `logprobs ${JSON.stringify(choice.logprobs)}`);
  assert.equal(content.length, response.usage.completion_tokens, 'one entry per token');
  assert.equal(content.map((t) => t.token).join(''), choice.message.content, 'tokens spell the content');
  for (const entry of content) {
    assert.equal(typeof entry.token, 'string');
    assert.ok(entry.logprob <= 0, `logprob ${entry.logprob}`);
    assert.ok(Array.isArray(entry.bytes) && entry.bytes.every((b) => Number.isInteger(b)), 'bytes');
    assert.equal(entry.top_logprobs.length, 3, 'top_logprobs');
    const top = entry.top_logprobs.map((t) => t.logprob);
    assert.deepEqual(top, [...top].sort((a, b) => b - a), 'top_logprobs most likely first');
    // Greedy: the chosen token is the most likely one.
    assert.ok(Math.abs(entry.logprob - top[0]) < 1e-4, `chosen ${entry.logprob}, best ${top[0]}`);
  }
});

await check('chat stop strings end the content before the stop', async () => {
  // A stop string taken from the middle of the greedy content: the same request with it stops at
  // its first occurrence.
  const full = chat.choices[0].message.content;
  assert.ok(full.length >= 8, `content too short to cut: ${JSON.stringify(full)}`);
  const middle = Math.floor(full.length / 2);
  const stop = full.slice(middle, middle + 3);
  const response = await client.chat.completions.create({ ...chatRequest, stop: [stop, 'never seen'] });
  const [choice] = response.choices;
  assert.equal(choice.message.content, full.slice(0, full.indexOf(stop)));
  assert.equal(choice.finish_reason, 'stop');
  return `stop ${JSON.stringify(stop)}`;
});

await check('temperature -1 throws BadRequestError (400) with our message', async () => {
  const error = await expectError(
    client.chat.completions.create({ ...chatRequest, temperature: -1 }),
    OpenAI.BadRequestError, 400, 'temperature must be a finite number >= 0');
  assert.equal(error.type, 'invalid_request_error');
  assert.equal(error.param, 'temperature');
});

await check('a request over the context throws BadRequestError (400)', async () => {
  const error = await expectError(
    client.completions.create({ model, prompt, max_tokens: contextLength + 1 }),
    OpenAI.BadRequestError, 400, `maximum context length is ${contextLength} tokens`);
  assert.equal(error.code, 'context_length_exceeded');
});

await check('an unknown model throws NotFoundError (404)', async () => {
  const error = await expectError(
    client.chat.completions.create({ ...chatRequest, model: 'no-such-model' }),
    OpenAI.NotFoundError, 404, "The model 'no-such-model' does not exist");
  assert.equal(error.code, 'model_not_found');
  assert.equal(error.param, 'model');
});

console.log('all checks passed');
