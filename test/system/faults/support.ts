import { expect } from 'vitest';
import type { Seeded } from '../../helpers/app.ts';
import { pollUntil, type Answer, type GatewayProcess } from '../../helpers/gateway-process.ts';
import { infer, outcomeLabel, specErrorProblem, tally } from '../replicas/support.ts';

/**
 * The routing timeout the fault tests give the gateway, and how long past it an answer may take before it counts as a
 * hang (a 2-core machine running the load generator, the gateway and the servers at once).
 */
export const ROUTING_TIMEOUT_MS = 2_000;
export const HANG_AFTER_MS = ROUTING_TIMEOUT_MS + 1_500;
/** How long a command on the shared Redis client may go unanswered (SVC_REDIS_COMMAND_TIMEOUT_MS, its default). */
export const REDIS_COMMAND_TIMEOUT_MS = 500;
export const FAULT_ENV = { SVC_ROUTING_TIMEOUT_MS: String(ROUTING_TIMEOUT_MS), SVC_REDIS_COMMAND_TIMEOUT_MS: String(REDIS_COMMAND_TIMEOUT_MS) };

export interface TimedAnswer extends Answer {
  /** performance.now() when the request was sent. */
  sentAt: number;
}

export interface Load {
  answers: TimedAnswer[];
  /** Stops sending and waits for the requests in flight. */
  stop(): Promise<TimedAnswer[]>;
}

/**
 * A bounded loop of concurrent inference requests (each `concurrency` worker sends one after the other) against
 * whatever `target()` returns at the time, until stop() or `maxMs`. A worker whose request found no server waits a
 * little before the next, so that an outage does not turn into a busy loop.
 */
export function startLoad(target: () => GatewayProcess, s: Seeded, opts: { concurrency?: number; maxMs?: number } = {}): Load {
  const answers: TimedAnswer[] = [];
  let stopped = false;
  const until = performance.now() + (opts.maxMs ?? 45_000);
  let n = 0;
  const worker = async () => {
    while (!stopped && performance.now() < until) {
      const sentAt = performance.now();
      const a = await infer(target(), s, `load ${n++}`, { timeoutMs: HANG_AFTER_MS });
      answers.push({ ...a, sentAt });
      if (a.status === 'network') await new Promise((r) => setTimeout(r, 25));
    }
  };
  const workers = Array.from({ length: opts.concurrency ?? 8 }, worker);
  return {
    answers,
    stop: async () => {
      stopped = true;
      await Promise.all(workers);
      return answers;
    },
  };
}

/** Real time passes while the load runs (the fault's duration is the point; no clock to inject into a child process). */
export const during = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Every answer is a success or the spec's error object with one of `allowed` codes (no stack, no hang, no 500 without
 * the error object); `network` answers (a refused or cut connection) only where `allowNetwork` says.
 */
export function expectOnlySpecAnswers(
  answers: TimedAnswer[],
  allowed: string[],
  allowNetwork: (a: TimedAnswer) => boolean = () => false,
  coldStart: (a: TimedAnswer) => boolean = () => false,
): void {
  const problems = new Map<string, number>();
  for (const a of answers) {
    if (a.status === 200) continue;
    let problem: string | null;
    if (a.status === 'network') problem = allowNetwork(a) ? null : `network error: ${a.error}`;
    else if (a.status === 'hang') problem = `no answer within ${HANG_AFTER_MS} ms (routing timeout ${ROUTING_TIMEOUT_MS} ms)`;
    else problem = specErrorProblem(a) ?? (allowed.includes(a.body.error.code) ? null : `unexpected ${outcomeLabel(a)}`);
    if (problem) problems.set(problem, (problems.get(problem) ?? 0) + 1);
  }
  expect(Object.fromEntries(problems), `answers: ${JSON.stringify(tally(answers))}`).toEqual({});
  // Never past the routing timeout, whatever is down (the spec's 408 routing_timeout is the latest answer there is).
  // `coldStart` answers (sent to a process in its first second) are exempt: the bound is on waiting for a provider or
  // a service, not on a just-started process's own compile and connect time on a loaded CI machine.
  const slowest = Math.max(0, ...answers.filter((a) => typeof a.status === 'number' && !coldStart(a)).map((a) => a.ms));
  expect(slowest, 'slowest answer (ms)').toBeLessThan(ROUTING_TIMEOUT_MS);
}

/** GET /readyz's status; 'hang' when it does not answer within 2 s (a readiness probe must answer, 503 included). */
export async function readyz(g: GatewayProcess): Promise<number | string> {
  return (await g.call('GET', '/readyz', { key: null, timeoutMs: 2_000 })).status;
}

/** Polls /readyz until it gives `status`; returns how long that took. */
export async function waitReady(g: GatewayProcess, status: 200 | 503, timeoutMs: number): Promise<number> {
  const started = performance.now();
  await pollUntil(
    `/readyz ${status}`,
    async () => {
      const got = await readyz(g);
      if (got !== status) throw new Error(`/readyz answered ${got}`);
      return true;
    },
    timeoutMs,
    100,
  );
  return Math.round(performance.now() - started);
}

/** Answers to requests sent in [from, to) (performance.now() times). */
export const sentBetween = (answers: TimedAnswer[], from: number, to = Infinity) => answers.filter((a) => a.sentAt >= from && a.sentAt < to);
