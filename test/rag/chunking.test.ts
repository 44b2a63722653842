import { describe, expect, it } from 'vitest';
import { CHUNK_CHARS, CHUNK_OVERLAP, chunkText } from '../../src/domain/rag/chunking.ts';
import { fuse, topK, buildMatrix, encodeVector } from '../../src/domain/rag/vectors.ts';

describe('chunking', () => {
  it('keeps a short text whole, folding blanks', () => {
    expect(chunkText('  Hello   world.\r\n\r\n\r\n\r\nBye.  ')).toEqual(['Hello world.\n\nBye.']);
    expect(chunkText(' \n ')).toEqual([]);
  });

  it('cuts long text into chunks of at most CHUNK_CHARS that overlap, at sentence ends, losing no word', () => {
    const sentences = Array.from({ length: 200 }, (_, i) => `Sentence number ${i} says something about topic ${i % 7}.`);
    const text = sentences.join(' ');
    const chunks = chunkText(text);
    expect(chunks.length).toBeGreaterThan(text.length / CHUNK_CHARS);
    for (const c of chunks) expect(c.length).toBeLessThanOrEqual(CHUNK_CHARS);
    // Every chunk but the last ends at a sentence end; each starts inside the previous one's last CHUNK_OVERLAP characters.
    for (const c of chunks.slice(0, -1)) expect(c.endsWith('.')).toBe(true);
    for (let i = 1; i < chunks.length; i++) expect(chunks[i - 1]!.slice(-CHUNK_OVERLAP)).toContain(chunks[i]!.slice(0, 20));
    for (const s of sentences) expect(chunks.some((c) => c.includes(s))).toBe(true);
  });

  it('cuts a text without spaces hard, still overlapping', () => {
    const chunks = chunkText('x'.repeat(2500));
    expect(chunks.map((c) => c.length)).toEqual([1000, 1000, 900]);
  });
});

describe('vectors', () => {
  it('scores by cosine, best first, within the documents asked for', () => {
    const m = buildMatrix(1, [
      { id: 'a', documentId: 'd1', embedding: encodeVector([1, 0]) },
      { id: 'b', documentId: 'd2', embedding: encodeVector([1, 1]) },
      { id: 'c', documentId: 'd2', embedding: encodeVector([0, 1]) },
    ]);
    expect(topK(m, [2, 0], 2, null).map((s) => [s.chunkId, +s.score.toFixed(4)])).toEqual([['a', 1], ['b', 0.7071]]);
    expect(topK(m, [2, 0], 5, new Set(['d2'])).map((s) => s.chunkId)).toEqual(['b', 'c']);
    expect(topK(m, [1, 2, 3], 5, null)).toEqual([]);
  });

  it('fuses ranked lists by reciprocal rank', () => {
    const s = (chunkId: string) => ({ chunkId, documentId: 'd', score: 0 });
    const fused = fuse([[s('a'), s('b')], [s('b'), s('c')]], 3);
    expect(fused.map((f) => [f.chunkId, +f.score.toFixed(6)])).toEqual([
      ['b', +(1 / 62 + 1 / 61).toFixed(6)],
      ['a', +(1 / 61).toFixed(6)],
      ['c', +(1 / 62).toFixed(6)],
    ]);
  });
});
