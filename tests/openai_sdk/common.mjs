// What check_api.mjs and check_structured.mjs share: loading the official OpenAI SDK, the
// command line, one printed line per check, and a validator for the JSON Schema subset the checks
// use.
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';

// ES modules ignore NODE_PATH, so the SDK (installed outside the source tree by
// scripts/openai_sdk.sh) is loaded through CommonJS require, which honours it.
export function loadOpenAI() {
  try {
    const require = createRequire(import.meta.url);
    const OpenAI = require('openai');
    return { OpenAI, version: require('openai/version').VERSION };
  } catch (error) {
    console.error(
      "cannot load the 'openai' package: run scripts/openai_sdk.sh (scripts/test.sh does) and " +
        'set NODE_PATH to the node_modules folder of `scripts/openai_sdk.sh --dir`\n' +
        `(${error.message.split('\n')[0]})`,
    );
    process.exit(2);
  }
}

// `node SCRIPT BASE_URL MODEL`, or OPENAI_BASE_URL and MLASERVE_MODEL from the environment.
export function connect() {
  const baseURL = process.argv[2] ?? process.env.OPENAI_BASE_URL;
  const model = process.argv[3] ?? process.env.MLASERVE_MODEL;
  if (!baseURL || !model) {
    console.error('usage: node SCRIPT BASE_URL MODEL  (e.g. http://127.0.0.1:30000/v1 brown-tiny)');
    process.exit(2);
  }
  const { OpenAI, version } = loadOpenAI();
  // No retries: a failing request must fail its check at once.
  const client = new OpenAI({ baseURL, apiKey: 'none', maxRetries: 0, timeout: 120_000 });
  console.log(`openai@${version} on node ${process.version}, ${baseURL}, model ${model}`);
  return { OpenAI, client, model };
}

// Runs one check; prints "ok   NAME" (and what the check returns, if anything), or
// "FAIL NAME: why" and exits with status 1: the first failure ends the script.
export async function check(name, fn) {
  let note;
  try {
    note = await fn();
  } catch (error) {
    const why = error instanceof assert.AssertionError ? error.message : error.stack ?? error;
    console.log(`FAIL ${name}: ${why}`);
    process.exit(1);
  }
  console.log(`ok   ${name}${note ? ` (${note})` : ''}`);
}

// Awaits a request that must fail: the SDK error must be an instance of `errorClass` with
// `status`, and its message must contain `message`. Returns the error for further checks.
export async function expectError(request, errorClass, status, message) {
  let error;
  try {
    await request;
  } catch (caught) {
    error = caught;
  }
  assert.ok(error, `the request succeeded; expected ${errorClass.name} (${status})`);
  assert.ok(
    error instanceof errorClass,
    `expected ${errorClass.name}, got ${error.constructor?.name}: ${error.message}`,
  );
  assert.equal(error.status, status, `status of: ${error.message}`);
  assert.ok(error.message.includes(message), `message '${error.message}' lacks '${message}'`);
  return error;
}

// The errors of `value` against `schema` ([] when it conforms), for the subset of JSON Schema the
// checks use: type (object, array, string, integer, number, boolean, null), enum, properties,
// required, additionalProperties: false, items, minItems/maxItems, minLength/maxLength.
export function schemaErrors(schema, value, path = '$') {
  const errors = [];
  const typeOf = (v) =>
    v === null ? 'null' : Array.isArray(v) ? 'array' : Number.isInteger(v) ? 'integer' : typeof v;
  if (schema.type) {
    const actual = typeOf(value);
    const ok = schema.type === actual || (schema.type === 'number' && actual === 'integer');
    if (!ok) return [`${path}: expected ${schema.type}, got ${actual} ${JSON.stringify(value)}`];
  }
  if (schema.enum && !schema.enum.some((e) => e === value)) {
    errors.push(`${path}: ${JSON.stringify(value)} is not one of ${JSON.stringify(schema.enum)}`);
  }
  if (typeOf(value) === 'object') {
    const properties = schema.properties ?? {};
    for (const key of schema.required ?? []) {
      if (!(key in value)) errors.push(`${path}: missing required '${key}'`);
    }
    for (const [key, item] of Object.entries(value)) {
      if (key in properties) errors.push(...schemaErrors(properties[key], item, `${path}.${key}`));
      else if (schema.additionalProperties === false) errors.push(`${path}: unexpected '${key}'`);
    }
  }
  if (Array.isArray(value)) {
    if (schema.maxItems !== undefined && value.length > schema.maxItems) {
      errors.push(`${path}: ${value.length} items, at most ${schema.maxItems} allowed`);
    }
    if (schema.minItems !== undefined && value.length < schema.minItems) {
      errors.push(`${path}: ${value.length} items, at least ${schema.minItems} required`);
    }
    if (schema.items) value.forEach((item, i) => errors.push(...schemaErrors(schema.items, item, `${path}[${i}]`)));
  }
  if (typeof value === 'string') {
    const length = [...value].length; // code points, as JSON Schema counts
    if (schema.maxLength !== undefined && length > schema.maxLength) {
      errors.push(`${path}: ${length} characters, at most ${schema.maxLength} allowed`);
    }
    if (schema.minLength !== undefined && length < schema.minLength) {
      errors.push(`${path}: ${length} characters, at least ${schema.minLength} required`);
    }
  }
  return errors;
}

// Parses `text` as JSON and asserts that it conforms to `schema`; returns the value.
export function assertConforms(schema, text, what) {
  let value;
  try {
    value = JSON.parse(text);
  } catch (error) {
    assert.fail(`${what} is not JSON (${error.message}): ${JSON.stringify(text)}`);
  }
  const errors = schemaErrors(schema, value);
  assert.deepEqual(errors, [], `${what} ${JSON.stringify(text)} does not match the schema`);
  return value;
}
