import type { Prisma } from '../../generated/prisma/client.ts';

/** The filter of a log query: `level:<level>` and `service:<name>` terms, the other words contained in the message. */
export function logFilter(projectId: string, from: Date, to: Date, query: string): Prisma.OpsLogEntryWhereInput {
  const and: Prisma.OpsLogEntryWhereInput[] = [{ projectId }, { timestamp: { gte: from, lte: to } }];
  for (const term of query.split(/\s+/).filter(Boolean)) {
    const m = /^(level|service):(.+)$/.exec(term);
    if (m) and.push({ [m[1]!]: m[2]! });
    else and.push({ message: { contains: term, mode: 'insensitive' } });
  }
  return { AND: and };
}

/** A line as prompts show it. */
export const lineText = (l: { timestamp: Date; level: string; service: string; message: string }) =>
  `${l.timestamp.toISOString()} ${l.level.toUpperCase()} [${l.service}] ${l.message}`;

/** How many lines a prompt carries at most (newest first). */
export const PROMPT_LINES = 200;
