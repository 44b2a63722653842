/**
 * What Prisma's schema engine cannot express about the partitioned tables (prisma/migrations/*_partitions), and so
 * writes into every `npm run db:migrate:create` diff: schema.prisma keeps `@id` on id (Prisma addresses rows by it)
 * while the database's primary keys also hold the partition key, and it keeps the relations event → deliveries →
 * attempts, whose foreign keys the partitioned tables do without. scripts/db-migrate.ts strips these statements from
 * a new migration (and creates none when nothing else is left).
 */
import { PARTITIONED_TABLES } from './tables.ts';

const FOREIGN_KEYS_DROPPED = ['webhook_deliveries_event_id_fkey', 'webhook_attempts_delivery_id_fkey'];

/** Whether one clause of `ALTER TABLE "<table>" …` is residue. */
function isResidue(table: string, clause: string): boolean {
  if (!PARTITIONED_TABLES.some((t) => t.name === table)) return false;
  const c = clause.trim().replace(/;$/, '');
  if (c === `DROP CONSTRAINT "${table}_pkey"`) return true;
  if (c.startsWith(`ADD CONSTRAINT "${table}_pkey" PRIMARY KEY (`)) return true;
  return FOREIGN_KEYS_DROPPED.some((fk) => c.startsWith(`ADD CONSTRAINT "${fk}" FOREIGN KEY (`));
}

/**
 * The migration SQL without the partitioned tables' residue (as the engine formats it: blocks separated by a blank
 * line, each `-- Comment` lines then one statement, an ALTER TABLE's clauses separated by ",\n"); null when nothing
 * else is left. `removed` lists the clauses taken out.
 */
export function stripPartitionResidue(sql: string): { sql: string | null; removed: string[] } {
  const removed: string[] = [];
  const kept: string[] = [];
  for (const block of sql.split(/\n{2,}/)) {
    const lines = block.split('\n');
    const comments = lines.filter((l) => l.startsWith('--'));
    const statement = lines.filter((l) => !l.startsWith('--')).join('\n').trim();
    const alter = /^ALTER TABLE "([^"]+)" ([\s\S]*)$/.exec(statement);
    if (!alter) {
      if (block.trim()) kept.push(block.trim());
      continue;
    }
    const [, table, rest] = alter as unknown as [string, string, string];
    const clauses = rest.replace(/;\s*$/, '').split(/,\n/);
    const left = clauses.filter((c) => {
      if (!isResidue(table, c)) return true;
      removed.push(`ALTER TABLE "${table}" ${c.trim()}`);
      return false;
    });
    if (left.length === 0) continue;
    kept.push([...comments, `ALTER TABLE "${table}" ${left.join(',\n')};`].join('\n'));
  }
  return { sql: kept.length > 0 ? `${kept.join('\n\n')}\n` : null, removed };
}
