/**
 * Vectors without pgvector (neither the embedded PGlite nor a stock Debian PostgreSQL 15 has it): each chunk's
 * embedding is stored as float32 little-endian bytes (bytea), normalized to unit length so that the dot product is
 * the cosine similarity. A query scores in process against a per-project matrix kept in memory (one Float32Array,
 * row-major), loaded once and reloaded when the project's RAG version (rag_settings.version, bumped on every index
 * change, on any replica) moves. README "RAG" gives the sizes this stays fast for.
 */

export function normalize(v: ArrayLike<number>): Float32Array {
  const out = new Float32Array(v.length);
  let norm = 0;
  for (let i = 0; i < v.length; i++) norm += v[i]! * v[i]!;
  const scale = norm > 0 ? 1 / Math.sqrt(norm) : 0;
  for (let i = 0; i < v.length; i++) out[i] = v[i]! * scale;
  return out;
}

export function encodeVector(v: ArrayLike<number>): Uint8Array {
  const f = normalize(v);
  return new Uint8Array(f.buffer, f.byteOffset, f.byteLength);
}

/** A project's embeddings as one matrix. */
export interface VectorMatrix {
  version: number;
  dims: number;
  chunkIds: string[];
  documentIds: string[];
  rows: Float32Array;
}

export interface StoredVector {
  id: string;
  documentId: string;
  embedding: Uint8Array;
}

/** Rows of another width than the first (a model changed while re-embedding) are left out until re-embedded. */
export function buildMatrix(version: number, stored: StoredVector[]): VectorMatrix {
  const dims = stored.length ? stored[0]!.embedding.byteLength / 4 : 0;
  const kept = stored.filter((s) => s.embedding.byteLength === dims * 4);
  const rows = new Float32Array(kept.length * dims);
  kept.forEach((s, i) => {
    const copy = new Uint8Array(s.embedding); // aligned copy
    rows.set(new Float32Array(copy.buffer, 0, dims), i * dims);
  });
  return { version, dims, chunkIds: kept.map((s) => s.id), documentIds: kept.map((s) => s.documentId), rows };
}

export interface Scored {
  chunkId: string;
  documentId: string;
  score: number;
}

/** The `k` rows most similar to `query` (cosine), best first, among `documents` when given. */
export function topK(m: VectorMatrix, query: ArrayLike<number>, k: number, documents: ReadonlySet<string> | null): Scored[] {
  if (m.dims === 0 || query.length !== m.dims) return [];
  const q = normalize(query);
  const best: Scored[] = [];
  const { rows, dims } = m;
  for (let r = 0, off = 0; r < m.chunkIds.length; r++, off += dims) {
    if (documents && !documents.has(m.documentIds[r]!)) continue;
    // Four running sums: independent additions the CPU can overlap (about twice as fast as one sum).
    let d0 = 0, d1 = 0, d2 = 0, d3 = 0;
    let i = 0;
    for (; i + 3 < dims; i += 4) {
      d0 += rows[off + i]! * q[i]!;
      d1 += rows[off + i + 1]! * q[i + 1]!;
      d2 += rows[off + i + 2]! * q[i + 2]!;
      d3 += rows[off + i + 3]! * q[i + 3]!;
    }
    for (; i < dims; i++) d0 += rows[off + i]! * q[i]!;
    const dot = d0 + d1 + d2 + d3;
    if (best.length === k && dot <= best[k - 1]!.score) continue;
    let at = best.length;
    while (at > 0 && best[at - 1]!.score < dot) at--;
    best.splice(at, 0, { chunkId: m.chunkIds[r]!, documentId: m.documentIds[r]!, score: dot });
    if (best.length > k) best.pop();
  }
  return best;
}

/**
 * The in-process matrices, by project, at most `maxBytes` in all (least recently used dropped first). A project
 * bigger than that alone is scored from a fresh load each time (slower, still correct).
 */
export class VectorCache {
  private readonly entries = new Map<string, VectorMatrix>();
  private bytes = 0;
  constructor(private readonly maxBytes = 256 * 1024 * 1024) {}

  async get(projectId: string, version: number, load: () => Promise<StoredVector[]>): Promise<VectorMatrix> {
    const found = this.entries.get(projectId);
    if (found && found.version === version) {
      this.entries.delete(projectId);
      this.entries.set(projectId, found);
      return found;
    }
    if (found) this.drop(projectId);
    const m = buildMatrix(version, await load());
    if (m.rows.byteLength <= this.maxBytes) {
      this.entries.set(projectId, m);
      this.bytes += m.rows.byteLength;
      for (const [id] of this.entries) {
        if (this.bytes <= this.maxBytes) break;
        this.drop(id);
      }
    }
    return m;
  }

  private drop(projectId: string): void {
    const m = this.entries.get(projectId);
    if (!m) return;
    this.entries.delete(projectId);
    this.bytes -= m.rows.byteLength;
  }
}

/** Reciprocal rank fusion (Cormack et al. 2009): score = Σ 1 / (60 + rank) over the lists a chunk appears in. */
export const RRF_K = 60;

export function fuse(lists: Scored[][], k: number): Scored[] {
  const scores = new Map<string, Scored>();
  for (const list of lists) {
    list.forEach((s, rank) => {
      const found = scores.get(s.chunkId);
      const add = 1 / (RRF_K + rank + 1);
      if (found) found.score += add;
      else scores.set(s.chunkId, { chunkId: s.chunkId, documentId: s.documentId, score: add });
    });
  }
  return [...scores.values()].sort((a, b) => b.score - a.score || (a.chunkId < b.chunkId ? -1 : 1)).slice(0, k);
}
