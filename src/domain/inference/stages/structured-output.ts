import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import { LRUCache } from 'lru-cache';
import { invalid } from '../../../errors/svc-error.ts';
import { PatternBudgetExceeded, UnsafePattern, ajvRegExp, withPatternBudget } from '../../../kernel/safe-regex.ts';
import type { ChatMessage, ChatOptions } from '../../../providers/types.ts';

/**
 * CONTRACT §11 structured output: with `response_format` json_schema or json_object the gateway checks the answer
 * itself (JSON Schema 2020-12, ajv) and, when it fails, asks again up to 2 more times with the invalid answer and the
 * validation errors appended as messages. Still invalid: 422 structured_output_failed naming the first error.
 */

/** The first answer and at most 2 re-asks. */
export const MAX_ATTEMPTS = 3;

/** null: the answer is valid; else the validation errors, the first one first. */
export type OutputCheck = (content: string) => string[] | null;

// Formats are not asserted (2020-12 makes them annotations by default); unknown keywords are allowed, as providers do.
// `pattern` and `patternProperties` run on RE2 (kernel/safe-regex.ts): linear time, so a caller's `^(a+)+$` cannot
// stall the process on a long answer; a pattern RE2 cannot run (backreference, lookaround) is refused at request time.
const ajv = new Ajv2020({ strict: false, allErrors: true, validateFormats: false, code: { regExp: ajvRegExp } });
/** Compiled schemas by their JSON text: a client sends the same schema on every request. */
const compiled = new LRUCache<string, ValidateFunction>({ max: 1_000 });

/**
 * Clients (zod-to-json-schema, the Vercel AI SDK) declare draft-07 in `$schema`: the schema is read as 2020-12 all
 * the same (CONTRACT §11), so a top-level `$schema` naming another draft is set aside rather than refused.
 */
function as2020(schema: unknown): object {
  const s = schema as Record<string, unknown>;
  if (typeof s.$schema !== 'string' || s.$schema.includes('2020-12')) return s;
  const { $schema: _ignored, ...rest } = s;
  return rest;
}

function compile(schema: unknown): ValidateFunction {
  const key = JSON.stringify(schema);
  let fn = compiled.get(key);
  if (!fn) {
    try {
      fn = ajv.compile(as2020(schema));
    } catch (err) {
      if (err instanceof UnsafePattern) {
        throw invalid('response_format.json_schema.schema', `response_format.json_schema.schema has a pattern that cannot be used: ${err.message}.`);
      }
      throw invalid('response_format.json_schema.schema', `response_format.json_schema.schema is not a valid JSON Schema: ${(err as Error).message}`);
    }
    compiled.set(key, fn);
  }
  return fn;
}

function parse(content: string): { ok: true; value: unknown } | { ok: false; error: string } {
  try {
    return { ok: true, value: JSON.parse(content) };
  } catch (err) {
    return { ok: false, error: `the answer is not valid JSON (${(err as Error).message})` };
  }
}

/** The check the request asks for, compiled before any provider is called (a bad schema is 400); null: none asked. */
export function outputCheck(options: ChatOptions | undefined): OutputCheck | null {
  const format = options?.response_format;
  if (!format || format.type === 'text') return null;
  if (format.type === 'json_object') {
    return (content) => {
      const r = parse(content);
      if (!r.ok) return [r.error];
      return typeof r.value === 'object' && r.value !== null && !Array.isArray(r.value) ? null : ['the answer is JSON but not a JSON object'];
    };
  }
  const schema = format.json_schema.schema;
  const validate = schema ? compile(schema) : null;
  return (content) => {
    const r = parse(content);
    if (!r.ok) return [r.error];
    if (!validate) return null;
    try {
      if (withPatternBudget(() => validate(r.value))) return null;
    } catch (err) {
      if (!(err instanceof PatternBudgetExceeded)) throw err;
      return ['the answer is too long to be tested against the schema\'s patterns'];
    }
    return (validate.errors ?? []).map((e) => `${e.instancePath || '/'} ${e.message ?? 'is invalid'}`);
  };
}

/** What is appended for a re-ask: the invalid answer, then what is wrong with it. */
export function reaskMessages(content: string, errors: string[]): ChatMessage[] {
  return [
    { role: 'assistant', content },
    {
      role: 'user',
      content: `That answer does not match the required JSON format: ${errors.slice(0, 10).join('; ')}. Answer again with only JSON that matches it.`,
    },
  ];
}

export const failureMessage = (attempts: number, errors: string[]) =>
  `The answer did not match the response format after ${attempts} attempt${attempts === 1 ? '' : 's'}: ${errors[0] ?? 'invalid'}.`;

export interface Tally {
  promptTokens: number;
  completionTokens: number;
  costMicros: bigint;
}

export const NO_TALLY: Tally = { promptTokens: 0, completionTokens: 0, costMicros: 0n };

export interface Asked {
  content: string;
  /** An answer that calls tools is not the final answer: it is not checked. */
  toolCalls?: unknown[];
  usage: { promptTokens: number; completionTokens: number };
  costMicros: bigint;
}

export interface AskOutcome<A extends Asked> {
  /** The last answer (the valid one, or the last invalid one). */
  answer: A;
  attempts: number;
  /** The tokens and cost of the attempts before the last: charged and recorded with it. */
  prior: Tally;
  /** The last answer's validation errors; null when valid. */
  errors: string[] | null;
  /** A re-ask that failed (provider error): the earlier attempts are still charged, then this is the request's error. */
  error?: unknown;
}

/** Checks the first answer and re-asks while it is invalid, up to MAX_ATTEMPTS answers in all. */
export async function askUntilValid<A extends Asked>(
  check: OutputCheck,
  messages: ChatMessage[],
  first: A,
  ask: (messages: ChatMessage[]) => Promise<A>,
): Promise<AskOutcome<A>> {
  let answer = first;
  let attempts = 1;
  let prior = NO_TALLY;
  let convo = messages;
  for (;;) {
    const errors = answer.toolCalls?.length ? null : check(answer.content);
    if (!errors || attempts === MAX_ATTEMPTS) return { answer, attempts, prior, errors };
    const next = {
      promptTokens: prior.promptTokens + answer.usage.promptTokens,
      completionTokens: prior.completionTokens + answer.usage.completionTokens,
      costMicros: prior.costMicros + answer.costMicros,
    };
    convo = [...convo, ...reaskMessages(answer.content, errors)];
    try {
      answer = await ask(convo);
    } catch (error) {
      return { answer, attempts, prior, errors, error };
    }
    prior = next;
    attempts++;
  }
}
