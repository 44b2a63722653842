import { createHash } from 'node:crypto';
import type { Batch } from '../../generated/prisma/client.ts';
import type { Db, Tx } from '../../db/client.ts';
import { releaseLease } from '../../db/leases.ts';
import { enqueueEvent } from '../events/outbox.ts';
import { ChunkWriter, LeaseLost } from './files.ts';
import type { BatchPorts } from './ports.ts';
import type { BatchStatus } from './schema.ts';
import { completedEventData } from './service.ts';

/** Line rows read per query while the files are written. */
const PAGE = 500;

const ALPHABET = '0123456789abcdefghjkmnpqrstvwxyz';

/**
 * A batch's output or error file id: the batch's time part, then a hash of (batch, kind). The same on every attempt,
 * so that a finalizing restarted after a crash rewrites the chunks it had written rather than adding a file.
 */
export function resultFileId(batchId: string, kind: 'output' | 'error'): string {
  const hash = createHash('sha256').update(`${batchId}:${kind}`).digest();
  return `file-${batchId.slice(6, 16)}${[...hash.subarray(0, 16)].map((b) => ALPHABET[b & 31]).join('')}`;
}

/**
 * Writes the output and error files from the lines' results, a page of lines at a time (keyset by index), each file a
 * chunk at a time: memory stays flat whatever the batch's size. Under zero retention nothing is written, and chunks
 * an earlier attempt wrote are dropped.
 */
async function writeResultFiles(db: Db, ports: BatchPorts, batchId: string, owner: string, keep: boolean): Promise<{ out: ChunkWriter; err: ChunkWriter }> {
  const lease = { batchId, owner };
  const out = new ChunkWriter(db, ports.sealer, resultFileId(batchId, 'output'), lease);
  const err = new ChunkWriter(db, ports.sealer, resultFileId(batchId, 'error'), lease);
  let after = -1;
  while (keep) {
    const page = await db.batchLine.findMany({
      where: { batchId, index: { gt: after } },
      orderBy: { index: 'asc' },
      take: PAGE,
      select: { id: true, index: true, status: true, result: true },
    });
    for (const l of page) {
      if (l.result) await (l.status === 'succeeded' ? out : err).add(l.index, ports.sealer.open(l.result, l.id));
    }
    if (page.length < PAGE) break;
    after = page.at(-1)!.index;
  }
  await out.end();
  await err.end();
  return { out, err };
}

export type EndStatus = Extract<BatchStatus, 'completed' | 'expired' | 'cancelled' | 'failed'>;

/**
 * The worker's end of a batch it holds: the output and error files (sealed chunks; none under zero retention), then,
 * in one transaction and only while it still holds the lease, the files' rows, the final status and batch.completed.
 * A batch asked to end `completed` that is being cancelled meanwhile ends `cancelled` (every line ran, its files
 * written). Returns the status it ended with, or null: the lease was lost.
 */
export async function finishBatch(db: Db, ports: BatchPorts, batch: Batch, owner: string, now: Date, status: EndStatus): Promise<EndStatus | null> {
  const retention = await ports.retentionOf(batch.projectId);
  const keep = retention.mode !== 'zero';
  let files: { out: ChunkWriter; err: ChunkWriter };
  try {
    files = await writeResultFiles(db, ports, batch.id, owner, keep);
  } catch (e) {
    if (e instanceof LeaseLost) return null;
    throw e;
  }
  const { out, err } = files;
  return db.$transaction(
    async (tx: Tx) => {
      const counts = await tx.batchLine.groupBy({ by: ['status'], where: { batchId: batch.id }, _count: { _all: true }, _sum: { costMicros: true } });
      const n = (s: string) => counts.find((c) => c.status === s)?._count._all ?? 0;
      const cost = counts.reduce((a, c) => a + (c._sum.costMicros ?? 0n), 0n);
      const stamps = { completed: { completedAt: now }, expired: { expiredAt: now }, cancelled: { cancelledAt: now }, failed: { failedAt: now } };
      const end = (s: EndStatus, from: string[]) =>
        releaseLease(tx, 'batches', { id: batch.id, owner }, {
          where: { status: { in: from } },
          data: { status: s, completed: n('succeeded'), failed: n('failed'), costMicros: cost, finalizingAt: batch.finalizingAt ?? now, ...stamps[s] },
        });
      let ended: EndStatus | null = null;
      if (status === 'completed') {
        // Completed only from finalizing; a cancel that came meanwhile wins: the batch ends cancelled instead.
        if (await end('completed', ['in_progress', 'finalizing'])) ended = 'completed';
        else if (await end('cancelled', ['cancelling'])) ended = 'cancelled';
      } else if (await end(status, ['in_progress', 'finalizing', 'cancelling', 'validating'])) ended = status;
      if (!ended) return null;
      const file = async (w: ChunkWriter, kind: 'output' | 'error') => {
        if (!keep || w.lines === 0) return null;
        await tx.batchFile.create({
          data: {
            id: w.fileId,
            projectId: batch.projectId,
            keyId: null,
            purpose: 'batch_output',
            filename: `${batch.id}_${kind}.jsonl`,
            bytes: w.bytes,
            sealed: null,
            createdAt: now,
            expiresAt: new Date(now.getTime() + retention.days * 86_400_000),
          },
        });
        return w.fileId;
      };
      const outputFileId = await file(out, 'output');
      const errorFileId = await file(err, 'error');
      // The files hold the results now (or, under zero retention, nothing does).
      await tx.batchLine.updateMany({ where: { batchId: batch.id }, data: { result: null } });
      const row = await tx.batch.update({ where: { id: batch.id }, data: { outputFileId, errorFileId } });
      await enqueueEvent(tx, now, batch.projectId, 'batch.completed', completedEventData(row));
      return ended;
    },
    { timeout: 60_000 },
  );
}
