import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import { invalid } from '../../errors/svc-error.ts';
import { PatternBudgetExceeded, SafeRegExp, UnsafePattern, ajvRegExp, withPatternBudget } from '../../kernel/safe-regex.ts';
import type { EvalAssert } from './schema.ts';
import { MAX_REGEX_LENGTH } from './schema.ts';

/**
 * The assertions of CONTRACT §14, except llm_judge, which needs a model call (the runner makes it and reads the
 * verdict, evals/judge.ts). Each returns passed and a reason a person can read in the results.
 */
export interface Verdict {
  passed: boolean;
  reason: string;
}

/**
 * The regex guard. JavaScript's RegExp backtracks, so a pattern such as (a|a)*b or (a+)+$ can take exponential time on
 * a crafted output. Patterns run on RE2 instead (kernel/safe-regex.ts: linear time; backreferences and lookaround are
 * refused at create time), the pattern is at most MAX_REGEX_LENGTH characters, and only the first MAX_REGEX_INPUT
 * characters of the output are tested. json_schema assertions' `pattern`s run on RE2 as well.
 */
export const MAX_REGEX_INPUT = 20_000;

const ajv = new Ajv2020({ allErrors: false, strict: false, code: { regExp: ajvRegExp } });

/** The assertion's schema compiled, or why it cannot be (a pattern RE2 cannot run, or not a schema). */
function compileSchema(schema: Record<string, unknown>): ValidateFunction | string {
  try {
    return ajv.compile(schema);
  } catch (err) {
    if (err instanceof UnsafePattern) return `a pattern in assert.schema cannot be used: ${err.message}`;
    return `assert.schema is not a valid JSON Schema: ${(err as Error).message}`;
  }
}

/** The regex compiled for RE2, or why it cannot be. */
function compileRegex(pattern: string): SafeRegExp | string {
  try {
    return new SafeRegExp(pattern);
  } catch (err) {
    if (!(err instanceof UnsafePattern)) throw err;
    return err.kind === 'syntax' ? `The pattern is ${err.message}` : `The pattern cannot be run in linear time (RE2): ${err.message}.`;
  }
}

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
      const re = compileRegex(a.value);
      if (typeof re === 'string') throw invalid(`${at}.value`, re);
      return;
    }
    case 'json_schema': {
      if (a.schema === undefined) throw invalid(`${at}.schema`, 'A json_schema assertion needs assert.schema.');
      const validate = compileSchema(a.schema);
      if (typeof validate === 'string') throw invalid(`${at}.schema`, validate);
      return;
    }
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
      // A run stored before patterns ran on RE2 may hold one it cannot run: that case fails, saying why.
      const re = compileRegex(a.value!);
      if (typeof re === 'string') return { passed: false, reason: re };
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
      const validate = compileSchema(a.schema!);
      if (typeof validate === 'string') return { passed: false, reason: `${validate}.` };
      let valid: boolean;
      try {
        valid = withPatternBudget(() => validate(parsed) as boolean);
      } catch (err) {
        if (!(err instanceof PatternBudgetExceeded)) throw err;
        return { passed: false, reason: 'The output is too long to be tested against the schema\'s patterns.' };
      }
      if (valid) return { passed: true, reason: 'The output is JSON that satisfies the schema.' };
      const e = validate.errors?.[0];
      return { passed: false, reason: `The output does not satisfy the schema: ${e ? `${e.instancePath || '/'} ${e.message ?? ''}`.trim() : 'invalid'}.` };
    }
    case 'llm_judge':
      throw new Error('llm_judge is judged by a model call');
  }
}
