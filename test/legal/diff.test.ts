import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { applyReplacements, diffFileName, lineDiff, unifiedDiff, type Replacement } from '../../src/domain/legal/diff.ts';

/** Applies the diff with git apply (as a user of the redline would) to a file holding `text`; returns the result. */
function gitApply(text: string, diff: string, file = 'contract.txt'): string {
  const dir = mkdtempSync(join(tmpdir(), 'redline-'));
  try {
    writeFileSync(join(dir, file), text);
    writeFileSync(join(dir, 'redline.diff'), diff);
    execFileSync('git', ['apply', '--whitespace=nowarn', 'redline.diff'], { cwd: dir, stdio: 'pipe' });
    return readFileSync(join(dir, file), 'utf8');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The same with GNU patch (strip the a/ b/ prefixes). */
function gnuPatch(text: string, diff: string, file = 'contract.txt'): string {
  const dir = mkdtempSync(join(tmpdir(), 'redline-'));
  try {
    writeFileSync(join(dir, file), text);
    execFileSync('patch', ['-p1', '--quiet', '--no-backup-if-mismatch'], { cwd: dir, input: diff, stdio: ['pipe', 'pipe', 'pipe'] });
    return readFileSync(join(dir, file), 'utf8');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const at = (text: string, passage: string, replacement: string): Replacement => {
  const start = text.indexOf(passage);
  if (start === -1) throw new Error(`not in text: ${passage}`);
  return { start, end: start + passage.length, text: replacement };
};

/**
 * A strict applier of unified diffs (for many random cases; git apply checks a few): every hunk's start, counts and
 * context lines must match the old text exactly.
 */
function strictApply(text: string, diff: string): string {
  const old = text === '' ? [] : text.split(/(?<=\n)/);
  const lines = diff.split('\n');
  expect(lines.slice(0, 2)).toEqual(['--- a/f', '+++ b/f']);
  const out: string[] = [];
  let at = 0;
  let i = 2;
  while (i < lines.length && lines[i] !== '') {
    const m = /^@@ -(\d+),(\d+) \+(\d+),(\d+) @@$/.exec(lines[i++]!)!;
    expect(m).not.toBeNull();
    const [oldStart, oldCount, newStart, newCount] = m.slice(1).map(Number) as [number, number, number, number];
    const from = oldCount === 0 ? oldStart : oldStart - 1;
    expect(from).toBeGreaterThanOrEqual(at);
    out.push(...old.slice(at, from));
    expect(newCount === 0 ? newStart : newStart - 1).toBe(out.length);
    at = from;
    let seenOld = 0;
    let seenNew = 0;
    while (i < lines.length && /^[ +\\-]/.test(lines[i]!)) {
      const line = lines[i++]!;
      const eol = lines[i]?.startsWith('\\') ? '' : '\n';
      if (line.startsWith('\\')) continue;
      const body = line.slice(1) + eol;
      if (eol === '') {
        // "No newline at end of file" only for a last line: of the old text, or the new one (nothing new after it).
        if (line[0] !== '+') expect(at + 1).toBe(old.length);
        else expect(lines.slice(i + 1).some((l) => l.startsWith(' ') || l.startsWith('+'))).toBe(false);
      }
      if (line[0] !== '+') {
        expect(old[at]).toBe(body);
        at++;
        seenOld++;
      }
      if (line[0] !== '-') {
        out.push(body);
        seenNew++;
      }
    }
    expect([seenOld, seenNew]).toEqual([oldCount, newCount]);
  }
  return out.join('') + old.slice(at).join('');
}

/** A small deterministic random source (mulberry32). */
function random(seed: number) {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const numbered = (n: number) => Array.from({ length: n }, (_, i) => `Clause ${i + 1}. The parties agree to term ${i + 1}.`).join('\n') + '\n';

describe('the redline diff', () => {
  it('is a unified diff that git apply and patch turn into the edited text', () => {
    const text = numbered(40);
    const edits = [at(text, 'term 2.', 'term two.'), at(text, 'term 3.', 'term three.'), at(text, 'Clause 30. The parties', 'Clause 30. Neither party')];
    const diff = unifiedDiff(text, edits, 'contract.txt');
    const expected = applyReplacements(text, edits);
    expect(diff.startsWith('--- a/contract.txt\n+++ b/contract.txt\n@@ -1,6 +1,6 @@\n Clause 1.')).toBe(true);
    // Two hunks: lines 2-3 (with 3 lines of context) and line 30.
    expect(diff.match(/^@@ .* @@$/gm)).toEqual(['@@ -1,6 +1,6 @@', '@@ -27,7 +27,7 @@']);
    expect(diff).toContain('-Clause 2. The parties agree to term 2.\n-Clause 3. The parties agree to term 3.\n+Clause 2. The parties agree to term two.\n+Clause 3. The parties agree to term three.\n');
    expect(gitApply(text, diff)).toBe(expected);
    expect(gnuPatch(text, diff)).toBe(expected);
  });

  it('merges changes whose context meets into one hunk, and numbers the new side after earlier line count changes', () => {
    const text = numbered(30);
    const edits = [
      at(text, 'Clause 5. The parties agree to term 5.\n', 'Clause 5. The parties agree to term 5.\nClause 5a. Added.\nClause 5b. Added.\n'),
      at(text, 'term 11.', 'term eleven.'),
      at(text, 'Clause 25. The parties agree to term 25.\n', ''),
    ];
    const diff = unifiedDiff(text, edits, 'c.txt');
    // Lines inserted after 5 and a change of 11 are 5 lines apart (<= 6): one hunk; the removal of 25 its own, two
    // lines further down on the new side.
    expect(diff.match(/^@@ .* @@$/gm)).toEqual(['@@ -3,12 +3,14 @@', '@@ -22,7 +24,6 @@']);
    expect(diff).toContain('+Clause 5a. Added.\n+Clause 5b. Added.\n');
    expect(gitApply(text, diff, 'c.txt')).toBe(applyReplacements(text, edits));
    expect(gnuPatch(text, diff, 'c.txt')).toBe(applyReplacements(text, edits));
  });

  it('handles a text without a final newline, an edit that joins lines, and several edits on one line', () => {
    const text = 'Title\n\nThe Supplier shall deliver\nwithin 30 days.\nPayment: net 90.';
    const edits = [at(text, 'deliver\nwithin 30 days', 'deliver within 10 days'), at(text, 'net', 'strictly net'), at(text, '90', '30')];
    const diff = unifiedDiff(text, edits, 'c.txt');
    const expected = applyReplacements(text, edits);
    expect(expected).toBe('Title\n\nThe Supplier shall deliver within 10 days.\nPayment: strictly net 30.');
    // The three changed lines are one block: removed, then added.
    expect(diff).toBe(
      '--- a/c.txt\n+++ b/c.txt\n@@ -1,5 +1,4 @@\n Title\n \n-The Supplier shall deliver\n-within 30 days.\n-Payment: net 90.\n' +
        '\\ No newline at end of file\n+The Supplier shall deliver within 10 days.\n+Payment: strictly net 30.\n\\ No newline at end of file\n',
    );
    expect(gitApply(text, diff, 'c.txt')).toBe(expected);
    expect(gnuPatch(text, diff, 'c.txt')).toBe(expected);
  });

  it('adds or removes the final newline as a change of the last line', () => {
    const text = 'a\nb\nc';
    const edits = [at(text, 'c', 'c\n')];
    const diff = unifiedDiff(text, edits, 'x.txt');
    expect(diff).toBe('--- a/x.txt\n+++ b/x.txt\n@@ -1,3 +1,3 @@\n a\n b\n-c\n\\ No newline at end of file\n+c\n');
    expect(gitApply(text, diff, 'x.txt')).toBe('a\nb\nc\n');
  });

  it('is empty when nothing changes', () => {
    expect(unifiedDiff('same\n', [], 'x')).toBe('');
    expect(unifiedDiff('same\n', [{ start: 0, end: 4, text: 'same' }], 'x')).toBe('');
  });

  it('diffs a region line by line (LCS), keeping its unchanged lines as context', () => {
    expect(lineDiff(['a', 'b', 'c', 'd'], ['a', 'x', 'c', 'd', 'e'])).toEqual([
      { op: ' ', line: 'a' },
      { op: '-', line: 'b' },
      { op: '+', line: 'x' },
      { op: ' ', line: 'c' },
      { op: ' ', line: 'd' },
      { op: '+', line: 'e' },
    ]);
    expect(lineDiff([], ['n'])).toEqual([{ op: '+', line: 'n' }]);
    expect(lineDiff(['o'], [])).toEqual([{ op: '-', line: 'o' }]);
    const text = 'keep 1\nold 2\nkeep 3\nold 4\nkeep 5\n';
    const edit = at(text, 'old 2\nkeep 3\nold 4', 'new 2\nkeep 3\nnew 4');
    expect(unifiedDiff(text, [edit], 'x')).toBe('--- a/x\n+++ b/x\n@@ -1,5 +1,5 @@\n keep 1\n-old 2\n+new 2\n keep 3\n-old 4\n+new 4\n keep 5\n');
  });

  it('stays fast on a long contract with edits far apart (only the touched lines are compared)', () => {
    const text = numbered(50_000);
    const edits = [at(text, 'term 10.', 'term ten.'), at(text, 'term 49990.', 'term last.')];
    const started = performance.now();
    const diff = unifiedDiff(text, edits, 'big.txt');
    const ms = performance.now() - started;
    expect(diff.match(/^@@ .* @@$/gm)).toHaveLength(2);
    expect(ms).toBeLessThan(3000);
  });

  it('turns random texts and random non-overlapping edits into diffs that apply back exactly', () => {
    const rnd = random(21);
    const pick = <T,>(xs: T[]) => xs[Math.floor(rnd() * xs.length)]!;
    const words = ['shall', 'party', 'days', '30', 'net', '\n', '\n', ' ', ' ', 'Clause', '.', 'term', '\n\n'];
    let hunks = 0;
    for (let c = 0; c < 400; c++) {
      const text = Array.from({ length: Math.floor(rnd() * 200) + 1 }, () => pick(words)).join(rnd() < 0.5 ? ' ' : '');
      const edits: Replacement[] = [];
      let pos = 0;
      const gap = rnd() < 0.5 ? 15 : 120;
      while (pos < text.length && edits.length < 8) {
        const start = pos + Math.floor(rnd() * gap);
        if (start >= text.length) break;
        const end = Math.min(text.length, start + 1 + Math.floor(rnd() * 12));
        edits.push({ start, end, text: Array.from({ length: Math.floor(rnd() * 4) }, () => pick(words)).join(' ') });
        pos = end;
      }
      const diff = unifiedDiff(text, edits, 'f');
      const expected = applyReplacements(text, edits);
      if (expected === text) {
        expect(diff).toBe('');
        continue;
      }
      expect(strictApply(text, diff), JSON.stringify({ text, edits, diff })).toBe(expected);
      hunks += diff.match(/^@@ /gm)!.length - 1;
      if (c % 20 === 0) expect(gitApply(text, diff, 'f')).toBe(expected);
    }
    // Many cases with more than one hunk (so that the new side's numbering is checked).
    expect(hunks).toBeGreaterThan(100);
  });

  it('names the file safely in the header', () => {
    expect(diffFileName('Master Services Agreement (v2).pdf', 'ctr_1')).toBe('Master_Services_Agreement_v2_.pdf');
    expect(diffFileName('../../etc/passwd', 'ctr_1')).toBe('etc_passwd');
    expect(diffFileName('***', 'ctr_1')).toBe('ctr_1');
  });
});
