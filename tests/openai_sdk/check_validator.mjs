// The JSON Schema validator of common.mjs on known cases, so that check_structured.mjs, which
// needs features the server may not have yet, stays correct. Needs no server and no SDK.
import assert from 'node:assert/strict';

import { schemaErrors } from './common.mjs';

const schema = {
  type: 'object',
  properties: {
    kind: { enum: ['a', 'b'] },
    list: { type: 'array', items: { type: 'integer' }, maxItems: 2 },
    flag: { type: 'boolean' },
    name: { type: 'string', maxLength: 3 },
  },
  required: ['kind', 'list', 'flag', 'name'],
  additionalProperties: false,
};
const good = { kind: 'a', list: [1, -2], flag: false, name: 'é€x' }; // 3 code points

assert.deepEqual(schemaErrors(schema, good), []);
const bad = [
  [{ ...good, kind: 'c' }, '$.kind: "c" is not one of ["a","b"]'],
  [{ ...good, list: [1, 2, 3] }, '$.list: 3 items, at most 2 allowed'],
  [{ ...good, list: [1.5] }, '$.list[0]: expected integer, got number 1.5'],
  [{ ...good, flag: 'true' }, '$.flag: expected boolean, got string "true"'],
  [{ ...good, name: 'four' }, '$.name: 4 characters, at most 3 allowed'],
  [{ ...good, extra: 1 }, "$: unexpected 'extra'"],
  [(({ flag, ...rest }) => rest)(good), "$: missing required 'flag'"],
  [[good], '$: expected object, got array [{"kind":"a","list":[1,-2],"flag":false,"name":"é€x"}]'],
];
for (const [value, error] of bad) assert.deepEqual(schemaErrors(schema, value), [error]);
assert.deepEqual(schemaErrors({ type: 'number' }, 3), [], 'an integer is a number');
console.log(`ok   the schema validator on ${bad.length + 2} cases`);
