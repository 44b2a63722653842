import { describe, expect, it } from 'vitest';
import { lineDiff, versionLines } from '../../src/admin/app/template-diff.ts';

describe('the Templates screen diff', () => {
  it('marks removed and added lines between two versions, keeping the common ones', () => {
    const v1 = { version: 1, model: 'mock-1', params: null, createdAt: 0, messages: [{ role: 'user', content: 'Hi {{who}}\nBye' }], variables: [{ name: 'who', required: true, default: null }] };
    const v2 = { ...v1, version: 2, model: null, messages: [{ role: 'user', content: 'Hello {{who}}\nBye' }] };
    expect(lineDiff(versionLines(v1), versionLines(v2))).toEqual([
      { op: ' ', line: '[0] user:' },
      { op: '-', line: '    Hi {{who}}' },
      { op: '+', line: '    Hello {{who}}' },
      { op: ' ', line: '    Bye' },
      { op: ' ', line: 'variable who (required)' },
      { op: '-', line: 'model: mock-1' },
      { op: '+', line: 'model: (request)' },
      { op: ' ', line: 'params: {}' },
    ]);
  });
});
