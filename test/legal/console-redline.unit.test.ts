import { describe, expect, it } from 'vitest';
import { patchLines } from '../../src/admin/app/template-diff.ts';
import { unifiedDiff } from '../../src/domain/legal/diff.ts';

describe("the Legal screen's redline diff", () => {
  it('shows the gateway\'s unified diff as hunk headers, removed, added and context lines', () => {
    const text = 'Payment: net 60.\nLaw: England.\n';
    const start = text.indexOf('60');
    const diff = unifiedDiff(text, [{ start, end: start + 2, text: '30' }], 'msa.txt');
    expect(patchLines(diff)).toEqual([
      { op: '@', line: '@@ -1,2 +1,2 @@' },
      { op: '-', line: 'Payment: net 60.' },
      { op: '+', line: 'Payment: net 30.' },
      { op: ' ', line: 'Law: England.' },
    ]);
    expect(patchLines('')).toEqual([]);
    expect(patchLines('--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n\\ No newline at end of file\n+b\n')).toEqual([
      { op: '@', line: '@@ -1 +1 @@' },
      { op: '-', line: 'a' },
      { op: ' ', line: '\\ No newline at end of file' },
      { op: '+', line: 'b' },
    ]);
  });
});
