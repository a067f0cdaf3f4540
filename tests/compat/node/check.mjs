// The compat scripts' one assertion: deep equality, counted, so a script can
// say how many checks passed.
import { isDeepStrictEqual, inspect } from 'node:util';

export const counter = { checks: 0 };

export function expectEqual(actual, expected, what) {
  counter.checks += 1;
  if (!isDeepStrictEqual(actual, expected)) {
    throw new Error(`${what}: expected ${inspect(expected, { depth: 6 })}, got ${inspect(actual, { depth: 6 })}`);
  }
}
