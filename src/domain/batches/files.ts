import type { BatchFile } from '../../generated/prisma/client.ts';
import type { Tx } from '../../db/client.ts';
import type { ContentSealer } from '../privacy/ports.ts';

/**
 * A batch file's content at rest (CONTRACT §21, §12): chunks of whole lines (batch_file_chunks), each sealed on its own
 * bound to (file id, seq), read and written a few at a time, so that no step holds a whole file. A file written before
 * chunks existed keeps its content in BatchFile.sealed and reads as one chunk.
 */

/** The plaintext a chunk holds (whole lines; a single longer line is a chunk of its own). */
export const CHUNK_BYTES = 256 * 1024;
/** Chunks read per query. */
const CHUNKS_PER_READ = 4;

const aad = (fileId: string, seq: number) => `${fileId}:${seq}`;

export interface Chunk {
  seq: number;
  /** The index (from 0, among the non-blank lines) of the chunk's first line. */
  firstIndex: number;
  text: string;
}

/** One non-blank line: its index among them (from 0), its line number in the file (from 1), its text. */
export interface JsonlLine {
  index: number;
  line: number;
  text: string;
}

/** The chunks of a UTF-8 JSONL buffer, cut after a newline, each about `max` bytes (the buffer as it is, no copy). */
export function* splitChunks(data: Buffer, max = CHUNK_BYTES): Generator<{ text: string; firstIndex: number }> {
  let start = 0;
  let index = 0;
  while (start < data.length) {
    let end = data.length;
    if (start + max < data.length) {
      const nl = data.lastIndexOf(0x0a, start + max - 1);
      const cut = nl >= start ? nl : data.indexOf(0x0a, start + max);
      if (cut >= 0) end = cut + 1;
    }
    const text = data.toString('utf8', start, end);
    yield { text, firstIndex: index };
    index += countLines(text);
    start = end;
  }
}

/** The non-blank lines of a chunk's text (a trailing newline, CRLF and blank lines are allowed). */
function countLines(text: string): number {
  let n = 0;
  for (const l of text.split('\n')) if (l.trim() !== '') n++;
  return n;
}

/**
 * The non-blank lines of a file's chunks in order. Line numbers count from the first chunk given (exact when reading
 * from the file's start); indexes come from each chunk.
 */
export async function* jsonlOf(chunks: AsyncIterable<Chunk>): AsyncGenerator<JsonlLine> {
  let line = 0;
  for await (const c of chunks) {
    let index = c.firstIndex;
    const parts = c.text.split('\n');
    if (c.text.endsWith('\n')) parts.pop();
    for (const p of parts) {
      line++;
      const text = p.endsWith('\r') ? p.slice(0, -1) : p;
      if (text.trim() !== '') yield { index: index++, line, text };
    }
  }
}

/** A file's chunks in order, from the one holding line `fromIndex` on; nothing when its content is gone. */
export async function* readChunks(db: Tx, sealer: ContentSealer, file: Pick<BatchFile, 'id' | 'sealed'>, fromIndex = 0): AsyncGenerator<Chunk> {
  if (file.sealed) {
    yield { seq: 0, firstIndex: 0, text: sealer.open(file.sealed, file.id) };
    return;
  }
  let after = -1;
  if (fromIndex > 0) {
    const first = await db.batchFileChunk.findFirst({ where: { fileId: file.id, firstIndex: { lte: fromIndex } }, orderBy: [{ firstIndex: 'desc' }, { seq: 'asc' }], select: { seq: true } });
    after = (first?.seq ?? 0) - 1;
  }
  for (;;) {
    const rows = await db.batchFileChunk.findMany({ where: { fileId: file.id, seq: { gt: after } }, orderBy: { seq: 'asc' }, take: CHUNKS_PER_READ });
    for (const r of rows) yield { seq: r.seq, firstIndex: r.firstIndex, text: sealer.open(r.sealed, aad(file.id, r.seq)) };
    if (rows.length < CHUNKS_PER_READ) return;
    after = rows.at(-1)!.seq;
  }
}

/** Whether a file still has content (not purged, not deleted). */
export async function hasContent(db: Tx, file: Pick<BatchFile, 'id' | 'sealed'>): Promise<boolean> {
  return file.sealed !== null || (await db.batchFileChunk.count({ where: { fileId: file.id, seq: 0 } })) > 0;
}

/** Stores an uploaded file's content as chunks (inside the caller's transaction). */
export async function storeChunks(tx: Tx, sealer: ContentSealer, fileId: string, data: Buffer): Promise<void> {
  let rows: { fileId: string; seq: number; firstIndex: number; sealed: string }[] = [];
  let seq = 0;
  for (const c of splitChunks(data)) {
    rows.push({ fileId, seq, firstIndex: c.firstIndex, sealed: sealer.seal(c.text, aad(fileId, seq)) });
    seq++;
    if (rows.length === CHUNKS_PER_READ) {
      await tx.batchFileChunk.createMany({ data: rows });
      rows = [];
    }
  }
  if (rows.length > 0) await tx.batchFileChunk.createMany({ data: rows });
}

/** A batch's lease moved to another worker while this one was writing its files. */
export class LeaseLost extends Error {
  constructor() {
    super('the batch is no longer this worker\'s');
  }
}

/**
 * Writes a batch's result file line by line, a chunk at a time, each write only while `lease.owner` holds the batch
 * (one statement: a worker that lost the batch cannot touch the file the new owner writes; LeaseLost). Writing the
 * same lines again under the same id (a finalizing restarted after a crash) rewrites the same chunks: the file never
 * holds a line twice.
 */
export class ChunkWriter {
  private parts: string[] = [];
  private size = 0;
  private firstIndex = 0;
  private seq = 0;
  /** The file's size in bytes and lines so far. */
  bytes = 0;
  lines = 0;

  constructor(
    private readonly db: Tx,
    private readonly sealer: ContentSealer,
    readonly fileId: string,
    private readonly lease: { batchId: string; owner: string },
  ) {}

  async add(index: number, line: string): Promise<void> {
    if (this.parts.length === 0) this.firstIndex = index;
    const text = `${line}\n`;
    this.parts.push(text);
    const n = Buffer.byteLength(text);
    this.size += n;
    this.bytes += n;
    this.lines++;
    if (this.size >= CHUNK_BYTES) await this.flush();
  }

  private async flush(): Promise<void> {
    if (this.parts.length === 0) return;
    const seq = this.seq++;
    const sealed = this.sealer.seal(this.parts.join(''), aad(this.fileId, seq));
    this.parts = [];
    this.size = 0;
    const written = await this.db.$executeRaw`
      INSERT INTO batch_file_chunks (file_id, seq, first_index, sealed)
      SELECT ${this.fileId}, ${seq}::int, ${this.firstIndex}::int, ${sealed}
      WHERE EXISTS (SELECT 1 FROM batches WHERE id = ${this.lease.batchId} AND lease_owner = ${this.lease.owner})
      ON CONFLICT (file_id, seq) DO UPDATE SET first_index = EXCLUDED.first_index, sealed = EXCLUDED.sealed`;
    if (written !== 1) throw new LeaseLost();
  }

  /** Writes the last chunk and drops any chunk past it (left by an earlier, longer attempt). */
  async end(): Promise<void> {
    await this.flush();
    const held = await this.db.batch.count({ where: { id: this.lease.batchId, leaseOwner: this.lease.owner } });
    if (held !== 1) throw new LeaseLost();
    await this.db.$executeRaw`
      DELETE FROM batch_file_chunks WHERE file_id = ${this.fileId} AND seq >= ${this.seq}::int
        AND EXISTS (SELECT 1 FROM batches WHERE id = ${this.lease.batchId} AND lease_owner = ${this.lease.owner})`;
  }
}

/** Drops files' content: their chunks and any whole sealed content. */
export async function dropContent(db: Tx, fileIds: string[]): Promise<void> {
  if (fileIds.length === 0) return;
  await db.batchFileChunk.deleteMany({ where: { fileId: { in: fileIds } } });
  await db.batchFile.updateMany({ where: { id: { in: fileIds }, sealed: { not: null } }, data: { sealed: null } });
}

/** Files purged per statement. */
const PURGE_PAGE = 500;

/**
 * CONTRACT §12: the content of a file past its retention (its own end, or the project's period shortened since), or of
 * a project with zero retention, is dropped; the row stays and its content answers 404 record_not_retained. Returns
 * how many files were purged.
 */
export async function purgeExpiredFiles(db: Tx, now: Date): Promise<number> {
  let total = 0;
  for (;;) {
    const due = await db.$queryRaw<{ id: string }[]>`
      SELECT f.id FROM batch_files f LEFT JOIN project_privacy p ON p.project_id = f.project_id
      WHERE (f.sealed IS NOT NULL OR EXISTS (SELECT 1 FROM batch_file_chunks c WHERE c.file_id = f.id))
        AND (f.expires_at <= ${now} OR p.retention_mode = 'zero' OR f.created_at + make_interval(days => p.retention_days) <= ${now})
      LIMIT ${PURGE_PAGE}`;
    await dropContent(
      db,
      due.map((r) => r.id),
    );
    total += due.length;
    if (due.length < PURGE_PAGE) return total;
  }
}
