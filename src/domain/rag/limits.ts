import type { Ctx } from '../context.ts';
import type { Plan } from '../projects/schema.ts';

const MB = 1024 * 1024;

/** CONTRACT §13: the largest document each plan may upload (bytes of the upload: the file, or the content's UTF-8). */
export const DOCUMENT_LIMITS: Readonly<Record<Plan, number>> = { starter: 1 * MB, growth: 10 * MB, enterprise: 50 * MB };

/** The largest limit of any plan: what the upload routes let through before the plan is known. */
export const MAX_DOCUMENT_BYTES = DOCUMENT_LIMITS.enterprise;

export function documentLimitOf(plan: string): number {
  return DOCUMENT_LIMITS[plan as Plan] ?? DOCUMENT_LIMITS.starter;
}

/** Room in an upload's body for what is not the document: the other fields, JSON punctuation, multipart boundaries. */
export const UPLOAD_BODY_SLACK = 1 * MB;

/**
 * The plan that bounds what a caller may send before its body is read: its key's project's. Null for the operator and
 * console sessions (they may name any project in the body): the largest plan's bounds apply until the service checks
 * the project the body names.
 */
export async function callerPlan(ctx: Ctx | null | undefined): Promise<Plan | null> {
  if (!ctx || ctx.caller.kind !== 'key' || !ctx.caller.projectId) return null;
  const project = await ctx.db.project.findUnique({ where: { id: ctx.caller.projectId }, select: { plan: true } });
  return (project?.plan as Plan | undefined) ?? null;
}

/**
 * The largest JSON body an upload of the plan reads: twice its document limit (JSON escapes a newline or a quote in two
 * bytes) plus the slack, never more than the largest plan's document plus the slack (starter 3 MB, growth 21 MB,
 * enterprise and the operator 51 MB). Larger: 413 document_too_large before the body is buffered.
 */
export function jsonUploadBodyLimit(plan: string | null): number {
  if (plan === null) return MAX_DOCUMENT_BYTES + UPLOAD_BODY_SLACK;
  return Math.min(2 * documentLimitOf(plan), MAX_DOCUMENT_BYTES) + UPLOAD_BODY_SLACK;
}

/** The largest multipart upload of the plan: its document limit plus the slack (starter 2 MB, …, enterprise 51 MB). */
export function multipartUploadBodyLimit(plan: string | null): number {
  return (plan === null ? MAX_DOCUMENT_BYTES : documentLimitOf(plan)) + UPLOAD_BODY_SLACK;
}

/**
 * Text extraction (extract.ts) runs in a worker thread per document, under these bounds:
 * - `workerHeapMb`: the worker's V8 heap (old generation); a document whose decoding needs more is refused (413);
 * - `deadlineMs`: the worker is stopped after this long (400);
 * - `concurrency`: extractions running at once in the process; others wait their turn (their deadline runs from
 *   their start);
 * - `htmlMaxDepth`: HTML nested deeper than this many elements is refused before it is parsed (400).
 * The extracted text itself is capped at the plan's document limit (413 document_too_large).
 */
export const EXTRACTION_LIMITS = Object.freeze({ workerHeapMb: 128, deadlineMs: 10_000, concurrency: 2, htmlMaxDepth: 500 });

/**
 * What a PDF's compressed streams (images left out) may inflate to in all, checked in the worker before pdf.js reads
 * the file: 64 times the plan's document limit, at least 64 MB and at most 256 MB (starter 64 MB, growth and
 * enterprise 256 MB). pdf.js holds decoded streams outside the worker's heap limit; more: 413 document_too_large.
 */
export function pdfDecodedLimit(documentLimit: number): number {
  return Math.min(256 * MB, Math.max(64 * MB, 64 * documentLimit));
}

/** "1 MB" */
export const showBytes = (n: number): string => `${Math.round(n / MB)} MB`;
