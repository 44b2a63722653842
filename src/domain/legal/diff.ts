/**
 * A redline as a unified diff (the format of `diff -u` and `git diff`, which `patch` and `git apply` read), computed
 * by the gateway from the edits it applied to the contract text, never by the model.
 *
 * The changed passages are known (each applied edit's span), so only the lines they touch are compared; those are
 * diffed line by line by longest common subsequence, and the rest of the contract is context. The work is linear in
 * the contract's size plus quadratic only in the lines of one changed region.
 */

/** One replacement in the old text: [start, end) becomes `text`. Spans do not overlap. */
export interface Replacement {
  start: number;
  end: number;
  text: string;
}

export type DiffOp = { op: ' ' | '-' | '+'; line: string };

/** Lines of context around each change, as diff -u. */
export const CONTEXT_LINES = 3;
/** Above this many line pairs, a changed region is shown as all removed then all added (no LCS table). */
const MAX_LCS_CELLS = 4_000_000;
/** Marks a last line without a newline, so that "x" and "x\n" compare different; printed as git's "\ No newline". */
const NO_EOL = '\u0000no-eol';

/** The text with the replacements applied (in order of position). */
export function applyReplacements(text: string, replacements: Replacement[]): string {
  const sorted = [...replacements].sort((a, b) => a.start - b.start);
  let out = '';
  let at = 0;
  for (const r of sorted) {
    out += text.slice(at, r.start) + r.text;
    at = r.end;
  }
  return out + text.slice(at);
}

/** Lines without their newline; the last marked NO_EOL when the text does not end with one. */
function splitLines(text: string): string[] {
  if (text === '') return [];
  const lines = text.split('\n');
  if (lines[lines.length - 1] === '') lines.pop();
  else lines[lines.length - 1] += NO_EOL;
  return lines;
}

/** A line diff by longest common subsequence, common head and tail trimmed first. */
export function lineDiff(a: string[], b: string[]): DiffOp[] {
  let head = 0;
  while (head < a.length && head < b.length && a[head] === b[head]) head++;
  let tail = 0;
  while (tail < a.length - head && tail < b.length - head && a[a.length - 1 - tail] === b[b.length - 1 - tail]) tail++;
  const out: DiffOp[] = a.slice(0, head).map((line) => ({ op: ' ', line }));
  const x = a.slice(head, a.length - tail);
  const y = b.slice(head, b.length - tail);
  const n = x.length;
  const m = y.length;
  if (n * m > MAX_LCS_CELLS) {
    out.push(...x.map((line) => ({ op: '-' as const, line })), ...y.map((line) => ({ op: '+' as const, line })));
  } else {
    // lcs[i * (m + 1) + j]: the longest common subsequence of x[i..] and y[j..].
    const lcs = new Uint32Array((n + 1) * (m + 1));
    for (let i = n - 1; i >= 0; i--) {
      for (let j = m - 1; j >= 0; j--) {
        lcs[i * (m + 1) + j] = x[i] === y[j] ? lcs[(i + 1) * (m + 1) + j + 1]! + 1 : Math.max(lcs[(i + 1) * (m + 1) + j]!, lcs[i * (m + 1) + j + 1]!);
      }
    }
    let i = 0;
    let j = 0;
    while (i < n && j < m) {
      if (x[i] === y[j]) {
        out.push({ op: ' ', line: x[i++]! });
        j++;
      } else if (lcs[(i + 1) * (m + 1) + j]! >= lcs[i * (m + 1) + j + 1]!) out.push({ op: '-', line: x[i++]! });
      else out.push({ op: '+', line: y[j++]! });
    }
    while (i < n) out.push({ op: '-', line: x[i++]! });
    while (j < m) out.push({ op: '+', line: y[j++]! });
  }
  out.push(...a.slice(a.length - tail).map((line) => ({ op: ' ' as const, line })));
  return out;
}

interface Region {
  /** First and last old line (0-based, inclusive) the region's replacements touch. */
  first: number;
  last: number;
  ops: DiffOp[];
}

/** The start offset of each line of `text`. */
function lineStarts(text: string): number[] {
  const starts = [0];
  for (let i = text.indexOf('\n'); i !== -1 && i + 1 < text.length; i = text.indexOf('\n', i + 1)) starts.push(i + 1);
  return starts;
}

/** The line holding offset `at` (binary search over the line starts). */
function lineOf(starts: number[], at: number): number {
  let lo = 0;
  let hi = starts.length - 1;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (starts[mid]! <= at) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

/** A file name safe for the diff's header lines (no spaces, slashes or control characters). */
export function diffFileName(name: string, fallback: string): string {
  const safe = name.replace(/[^A-Za-z0-9._-]+/g, '_').replace(/^[._]+/, '').slice(0, 100);
  return safe || fallback;
}

/**
 * The unified diff between `text` and `text` with the replacements applied, with CONTEXT_LINES of context, headed
 * `--- a/<file>` / `+++ b/<file>`; empty when nothing changes.
 */
export function unifiedDiff(text: string, replacements: Replacement[], file: string): string {
  const starts = lineStarts(text);
  const oldLines = splitLines(text);
  const sorted = [...replacements].sort((a, b) => a.start - b.start);
  // The old lines each replacement touches; a replacement that takes a line's newline joins the next line to it.
  const touched = sorted.map((r) => {
    const first = lineOf(starts, r.start);
    let last = lineOf(starts, Math.max(r.start, r.end - 1));
    if (r.end > r.start && text[r.end - 1] === '\n' && last + 1 < oldLines.length) last++;
    return { r, first, last };
  });
  const regions: Region[] = [];
  let group: typeof touched = [];
  let open = -1; // the group's last touched line
  const flush = () => {
    if (group.length === 0) return;
    const first = group[0]!.first;
    const last = open;
    const from = starts[first]!;
    const to = last + 1 < starts.length ? starts[last + 1]! : text.length;
    const segment = text.slice(from, to);
    const changed = applyReplacements(segment, group.map((g) => ({ start: g.r.start - from, end: g.r.end - from, text: g.r.text })));
    // A region ending before the end of the text ends with its newline, so its lines compare as whole lines.
    const ops = lineDiff(splitLines(segment), splitLines(changed));
    // Lines the LCS kept are context: the region starts and ends at its first and last changed line.
    let head = 0;
    while (head < ops.length && ops[head]!.op === ' ') head++;
    let tail = 0;
    while (tail < ops.length - head && ops[ops.length - 1 - tail]!.op === ' ') tail++;
    if (head < ops.length) regions.push({ first: first + head, last: last - tail, ops: ops.slice(head, ops.length - tail) });
    group = [];
  };
  for (const t of touched) {
    // Replacements on the same or adjacent lines are one region (one block of removed, then added, lines).
    if (group.length > 0 && t.first > open + 1) flush();
    group.push(t);
    open = Math.max(group.length === 1 ? -1 : open, t.last);
  }
  flush();
  if (regions.length === 0) return '';
  const live = regions;

  const out: string[] = [`--- a/${file}`, `+++ b/${file}`];
  const show = (o: DiffOp) => {
    if (o.line.endsWith(NO_EOL)) {
      out.push(`${o.op}${o.line.slice(0, -NO_EOL.length)}`, '\\ No newline at end of file');
    } else out.push(`${o.op}${o.line}`);
  };
  let delta = 0; // new line numbers minus old ones, from the hunks before
  for (let k = 0; k < live.length; ) {
    // A hunk: regions whose context would touch or overlap, with CONTEXT_LINES around.
    let end = k;
    while (end + 1 < live.length && live[end + 1]!.first - live[end]!.last - 1 <= 2 * CONTEXT_LINES) end++;
    const from = Math.max(0, live[k]!.first - CONTEXT_LINES);
    const to = Math.min(oldLines.length - 1, live[end]!.last + CONTEXT_LINES);
    const ops: DiffOp[] = [];
    for (let i = from; i < live[k]!.first; i++) ops.push({ op: ' ', line: oldLines[i]! });
    for (let r = k; r <= end; r++) {
      ops.push(...live[r]!.ops);
      const until = r < end ? live[r + 1]!.first : to + 1;
      for (let i = live[r]!.last + 1; i < until; i++) ops.push({ op: ' ', line: oldLines[i]! });
    }
    const oldCount = ops.filter((o) => o.op !== '+').length;
    const newCount = ops.filter((o) => o.op !== '-').length;
    // diff -u numbers an empty side by the line before it.
    const oldStart = oldCount === 0 ? from : from + 1;
    const newStart = newCount === 0 ? from + delta : from + 1 + delta;
    out.push(`@@ -${oldStart},${oldCount} +${newStart},${newCount} @@`);
    ops.forEach(show);
    delta += newCount - oldCount;
    k = end + 1;
  }
  return `${out.join('\n')}\n`;
}
