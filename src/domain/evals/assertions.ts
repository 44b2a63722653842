import { Ajv2020 } from 'ajv/dist/2020.js';
import safeRegex from 'safe-regex2';
import { invalid } from '../../errors/svc-error.ts';
import type { EvalAssert } from './schema.ts';
import { MAX_REGEX_LENGTH } from './schema.ts';

/**
 * The assertions of CONTRACT §14, except llm_judge, which needs a model call (the runner makes it and reads the
 * verdict, kernel/eval-judge.ts). Each returns passed and a reason a person can read in the results.
 */
export interface Verdict {
  passed: boolean;
  reason: string;
}

/**
 * The regex guard. JavaScript's RegExp backtracks, so a pattern such as (a+)+$ can take exponential time on a
 * crafted output. Three limits together: the pattern is at most MAX_REGEX_LENGTH characters; it must pass
 * safe-regex2's star-height check (no quantifier nested inside another quantified group) at create time; and only the
 * first MAX_REGEX_INPUT characters of the output are tested.
 */
export const MAX_REGEX_INPUT = 20_000;

const ajv = new Ajv2020({ allErrors: false, strict: false });

/** Checks what the schema cannot say about one case's assertion; `at` is the param path (`cases[3].assert`). */
export function checkAssert(a: EvalAssert, expected: string | undefined, at: string): void {
  switch (a.type) {
    case 'exact':
    case 'contains':
      if (a.value === undefined && expected === undefined) throw invalid(`${at}.value`, `A ${a.type} assertion needs assert.value or the case's expected.`);
      return;
    case 'regex': {
      if (a.value === undefined || a.value === '') throw invalid(`${at}.value`, 'A regex assertion needs the pattern in assert.value.');
      if (a.value.length > MAX_REGEX_LENGTH) throw invalid(`${at}.value`, `A regex pattern may be at most ${MAX_REGEX_LENGTH} characters.`);
      try {
        new RegExp(a.value);
      } catch (err) {
        throw invalid(`${at}.value`, `The pattern is not a valid regular expression: ${(err as Error).message}`);
      }
      if (!safeRegex(a.value)) {
        throw invalid(`${at}.value`, 'The pattern nests quantifiers (catastrophic backtracking, e.g. (a+)+): write it without a quantified group inside a quantified group.');
      }
      return;
    }
    case 'json_schema':
      if (a.schema === undefined) throw invalid(`${at}.schema`, 'A json_schema assertion needs assert.schema.');
      try {
        ajv.compile(a.schema);
      } catch (err) {
        throw invalid(`${at}.schema`, `assert.schema is not a valid JSON Schema: ${(err as Error).message}`);
      }
      return;
    case 'llm_judge':
      if (a.judge_model === undefined) throw invalid(`${at}.judge_model`, 'An llm_judge assertion needs assert.judge_model.');
      if (a.rubric === undefined || a.rubric.trim() === '') throw invalid(`${at}.rubric`, 'An llm_judge assertion needs assert.rubric.');
      return;
  }
}

const clip = (s: string, n = 80) => (s.length > n ? `${s.slice(0, n)}…` : s);

/** exact, contains, regex and json_schema on an output. */
export function judgeLocally(a: EvalAssert, expected: string | null, output: string): Verdict {
  switch (a.type) {
    case 'exact': {
      const want = a.value ?? expected ?? '';
      return output === want
        ? { passed: true, reason: 'The output equals the expected text.' }
        : { passed: false, reason: `The output is not exactly "${clip(want)}".` };
    }
    case 'contains': {
      const want = a.value ?? expected ?? '';
      return output.includes(want)
        ? { passed: true, reason: `The output contains "${clip(want)}".` }
        : { passed: false, reason: `The output does not contain "${clip(want)}".` };
    }
    case 'regex': {
      const re = new RegExp(a.value!);
      return re.test(output.slice(0, MAX_REGEX_INPUT))
        ? { passed: true, reason: `The output matches /${clip(a.value!)}/.` }
        : { passed: false, reason: `The output does not match /${clip(a.value!)}/.` };
    }
    case 'json_schema': {
      let parsed: unknown;
      try {
        parsed = JSON.parse(output);
      } catch {
        return { passed: false, reason: 'The output is not JSON.' };
      }
      const validate = ajv.compile(a.schema!);
      if (validate(parsed)) return { passed: true, reason: 'The output is JSON that satisfies the schema.' };
      const e = validate.errors?.[0];
      return { passed: false, reason: `The output does not satisfy the schema: ${e ? `${e.instancePath || '/'} ${e.message ?? ''}`.trim() : 'invalid'}.` };
    }
    case 'llm_judge':
      throw new Error('llm_judge is judged by a model call');
  }
}
