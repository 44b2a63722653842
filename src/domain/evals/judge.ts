import { contentText, type ChatMessage } from '../../providers/types.ts';

/**
 * The llm_judge protocol (CONTRACT §14): the prompt the eval runner sends, the verdict it reads, and the mock kind's
 * deterministic answer to it (judgeScript, which the composition root hands the mock).
 */

/** The first line of the judge's system message; the mock provider recognises a judge call by it. */
export const JUDGE_MARKER = '[svc-eval-judge v1]';

export interface JudgeQuestion {
  rubric: string;
  expected: string | null;
  output: string;
}

const SECTION = (name: string) => `<<<${name}>>>`;

/** The judge call's messages: the rubric, the expected answer (if any) and the output, in marked sections. */
export function judgeMessages(q: JudgeQuestion): { role: 'system' | 'user'; content: string }[] {
  return [
    {
      role: 'system',
      content:
        `${JUDGE_MARKER}\nYou are an evaluation judge. Decide whether the OUTPUT satisfies the RUBRIC` +
        ' (and agrees with EXPECTED when one is given). Answer PASS or FAIL as the first word, then one short sentence saying why.',
    },
    {
      role: 'user',
      content: `${SECTION('RUBRIC')}\n${q.rubric}\n${SECTION('EXPECTED')}\n${q.expected ?? ''}\n${SECTION('OUTPUT')}\n${q.output}\n${SECTION('END')}`,
    },
  ];
}

/** The question back out of a judge call's user message (the mock provider), or null when it is not one. */
export function readJudgeQuestion(system: string, user: string): JudgeQuestion | null {
  if (!system.startsWith(JUDGE_MARKER)) return null;
  const m = /^<<<RUBRIC>>>\n([\s\S]*)\n<<<EXPECTED>>>\n([\s\S]*)\n<<<OUTPUT>>>\n([\s\S]*)\n<<<END>>>$/.exec(user);
  if (!m) return null;
  return { rubric: m[1]!, expected: m[2] === '' ? null : m[2]!, output: m[3]! };
}

/**
 * The built-in mock judge: PASS when the output contains the expected text (ignoring case), or, with no expected
 * text, when the output is not blank; FAIL otherwise. Deterministic, so tests can predict every verdict.
 */
export function mockJudgeVerdict(q: JudgeQuestion): string {
  if (q.expected !== null) {
    return q.output.toLowerCase().includes(q.expected.toLowerCase())
      ? 'PASS The output contains the expected answer.'
      : 'FAIL The output does not contain the expected answer.';
  }
  return q.output.trim() !== '' ? 'PASS The output is not empty.' : 'FAIL The output is empty.';
}

/** The verdict of a judge's answer: its first word, PASS or FAIL (any case, punctuation around it allowed). */
export function parseJudgeVerdict(answer: string): { passed: boolean; reason: string } | null {
  const m = /^\W*(PASS|FAIL)\b\W*([\s\S]*)$/i.exec(answer.trim());
  if (!m) return null;
  return { passed: m[1]!.toUpperCase() === 'PASS', reason: m[2]!.trim().slice(0, 1000) };
}

/** A judge call's deterministic verdict, else null. */
export function answerJudgeCall(messages: readonly ChatMessage[]): string | null {
  const first = messages[0];
  const last = messages[messages.length - 1];
  if (!first || !last || first.role !== 'system' || last.role !== 'user') return null;
  const question = readJudgeQuestion(contentText(first.content), contentText(last.content));
  return question ? mockJudgeVerdict(question) : null;
}

/** The mock kind's script (providers/mock.ts MockScript): calls marked as judge calls get answerJudgeCall's verdict. */
export const judgeScript = { marker: JUDGE_MARKER, answer: answerJudgeCall };
