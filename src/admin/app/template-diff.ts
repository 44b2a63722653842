/** The Templates screen's diff between two versions (plain functions: no Preact, so tests import them alone). */
export interface Version {
  version: number;
  model: string | null;
  params: Record<string, unknown> | null;
  createdAt: number;
  messages: { role: string; content: string }[];
  variables: { name: string; required: boolean; default: unknown }[];
}

/** A version as lines of text: what the diff compares (messages, then variables, model and params). */
export function versionLines(v: Version): string[] {
  const lines: string[] = [];
  v.messages.forEach((m, i) => {
    lines.push(`[${i}] ${m.role}:`);
    for (const line of m.content.split('\n')) lines.push(`    ${line}`);
  });
  for (const x of v.variables) lines.push(`variable ${x.name}${x.required ? ' (required)' : ''}${x.default !== null && x.default !== undefined ? ` = ${JSON.stringify(x.default)}` : ''}`);
  lines.push(`model: ${v.model ?? '(request)'}`);
  lines.push(`params: ${v.params ? JSON.stringify(v.params) : '{}'}`);
  return lines;
}

/** A line diff by longest common subsequence (versions are small: at most 100 messages). */
export function lineDiff(a: string[], b: string[]): { op: ' ' | '-' | '+'; line: string }[] {
  const n = a.length;
  const m = b.length;
  const lcs: number[][] = Array.from({ length: n + 1 }, () => new Array<number>(m + 1).fill(0));
  for (let i = n - 1; i >= 0; i--) for (let j = m - 1; j >= 0; j--) lcs[i]![j] = a[i] === b[j] ? lcs[i + 1]![j + 1]! + 1 : Math.max(lcs[i + 1]![j]!, lcs[i]![j + 1]!);
  const out: { op: ' ' | '-' | '+'; line: string }[] = [];
  let i = 0;
  let j = 0;
  while (i < n && j < m) {
    if (a[i] === b[j]) {
      out.push({ op: ' ', line: a[i]! });
      i++;
      j++;
    } else if (lcs[i + 1]![j]! >= lcs[i]![j + 1]!) out.push({ op: '-', line: a[i++]! });
    else out.push({ op: '+', line: b[j++]! });
  }
  while (i < n) out.push({ op: '-', line: a[i++]! });
  while (j < m) out.push({ op: '+', line: b[j++]! });
  return out;
}

/** A line of a unified diff as the screens show it: removed, added, context, or a hunk header (`@`). */
export type PatchLine = { op: ' ' | '-' | '+' | '@'; line: string };

/**
 * A unified diff (a Legal redline's `diff`, computed by the gateway) as the same lines the template diff shows: its
 * `---`/`+++` file header left out, `\ No newline at end of file` kept as context.
 */
export function patchLines(diff: string): PatchLine[] {
  const out: PatchLine[] = [];
  for (const raw of diff.split('\n')) {
    if (raw === '' || raw.startsWith('--- ') || raw.startsWith('+++ ')) continue;
    const op = raw[0];
    if (op === '@') out.push({ op: '@', line: raw });
    else if (op === '-' || op === '+' || op === ' ') out.push({ op, line: raw.slice(1) });
    else out.push({ op: ' ', line: raw });
  }
  return out;
}
