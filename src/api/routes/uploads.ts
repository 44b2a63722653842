import multipart from '@fastify/multipart';
import { createHash } from 'node:crypto';
import { Transform, type TransformCallback } from 'node:stream';
import type { FastifyInstance, FastifyReply, FastifyRequest, RequestPayload } from 'fastify';
import type { Static, TSchema } from 'typebox';
import { beginMultipartIdempotency } from '../hooks/idempotency.ts';
import { contentTypeOf } from '../../domain/rag/extract.ts';
import {
  callerPlan,
  documentLimitOf,
  jsonUploadBodyLimit,
  MAX_DOCUMENT_BYTES,
  multipartUploadBodyLimit,
  showBytes,
} from '../../domain/rag/limits.ts';
import type { Plan } from '../../domain/projects/schema.ts';
import type { ContentType } from '../../domain/rag/schema.ts';
import { parseInput } from '../../domain/validation.ts';
import { invalid, SvcError } from '../../errors/svc-error.ts';

/**
 * Document uploads (RAG documents, Legal contracts): JSON with the text, or a multipart form with one file. Both are
 * held to the project's plan limit by the service (domain/rag/limits.ts: 413 document_too_large). Before that, the
 * body itself is bounded by the caller's plan while it arrives (boundBody): a starter key cannot make the gateway
 * buffer the largest plan's 51 MB.
 */

/** A JSON upload's body may be as large as the largest plan's document, plus room for the other fields. */
const UPLOAD_JSON_BODY_LIMIT = MAX_DOCUMENT_BYTES + 1024 * 1024;

/** The caller's plan as boundBody found it (null: the operator or a console session), for readForm's file limit. */
const planOfRequest = new WeakMap<FastifyRequest, Plan | null>();

/** Counts a body's bytes as they arrive and fails with `refuse()` at the first byte past `limit`. */
class ByteCap extends Transform {
  private seen = 0;
  constructor(
    private readonly limit: number,
    private readonly refuse: () => Error,
  ) {
    super();
  }
  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    this.seen += chunk.length;
    if (this.seen > this.limit) callback(this.refuse());
    else callback(null, chunk);
  }
}

export interface BodyBound {
  /** The largest body, in bytes, a caller of this plan (null: the operator or a console session) may send. */
  limitOf(plan: Plan | null, multipart: boolean): number;
  /** The error for a body over it (the route's own code and param). */
  refuse(plan: Plan | null, limit: number, multipart: boolean): SvcError;
}

/**
 * A route's preParsing hook bounding its body by the caller's plan (the caller is known: auth runs on onRequest): a
 * declared Content-Length over the bound is refused at once, before any of the body is read, and a body streaming past
 * it (chunked, or longer than declared) as soon as it does; so the memory one request takes is bounded by its plan,
 * not by the largest. The rest of a refused body is drained, within bounds, by the error handler. A multipart body is
 * read by @fastify/multipart from the raw request: only its Content-Length is checked here, and readForm limits the
 * file to the plan's document limit.
 */
export function boundBody(bound: BodyBound): never {
  // `never`: a route's hooks take that route's request type (params, body, config), and this one serves any route;
  // typed as the route's own it would decide them instead of the route's schema.
  const hook = async (req: FastifyRequest, _reply: unknown, payload: RequestPayload): Promise<RequestPayload> => {
    const plan = await callerPlan(req.ctx);
    planOfRequest.set(req, plan);
    // By its header: req.isMultipart() is only set once the body's parser runs, after this hook.
    const isMultipart = /^\s*multipart\/form-data/i.test(req.headers['content-type'] ?? '');
    const limit = bound.limitOf(plan, isMultipart);
    const declared = Number(req.headers['content-length']);
    if (declared > limit) throw bound.refuse(plan, limit, isMultipart);
    if (isMultipart) return payload;
    return payload.pipe(new ByteCap(limit, () => bound.refuse(plan, limit, isMultipart)));
  };
  return hook as never;
}

/** The upload routes' bound: 413 document_too_large naming `content` (JSON) or `file` (multipart). */
const uploadBodyBound: BodyBound = {
  limitOf: (plan, isMultipart) => (isMultipart ? multipartUploadBodyLimit(plan) : jsonUploadBodyLimit(plan)),
  refuse: (plan, limit, isMultipart) =>
    new SvcError('document_too_large', {
      param: isMultipart ? 'file' : 'content',
      message:
        plan === null
          ? `The request body is over ${limit} bytes: no plan accepts documents over ${showBytes(MAX_DOCUMENT_BYTES)}.`
          : `The request body is over ${limit} bytes: the ${plan} plan accepts documents of up to ${showBytes(documentLimitOf(plan))} (${documentLimitOf(plan)} bytes).`,
    }),
};

/**
 * The route options of an upload route: `bodyLimit`, the 413's code and param, and a body schema taking `json` as
 * JSON or a multipart form of one `file` plus `fields` (described for OpenAPI, checked by readUpload once read).
 */
export function uploadRouteOptions<J extends TSchema>(json: J, fields: Record<string, { type: 'string'; description?: string }>) {
  return {
    bodyLimit: UPLOAD_JSON_BODY_LIMIT,
    preParsing: boundBody(uploadBodyBound),
    // A JSON body over the limit is over every plan: 413 document_too_large, param content (error-handler.ts).
    config: { bodyTooLarge: { code: 'document_too_large', param: 'content' } },
    schema: {
      consumes: ['application/json', 'multipart/form-data'],
      body: {
        content: {
          'application/json': { schema: json },
          // Described, not validated here (no `type`: the body is still unread when validation runs): readUpload reads it.
          'multipart/form-data': {
            schema: {
              description: 'One file (text/plain, text/markdown, text/html or application/pdf) plus the text fields.',
              properties: { file: { type: 'string', description: 'The file itself (binary).' }, ...fields },
              required: ['file'],
            },
          },
        },
      },
    },
  };
}

/** Reads multipart bodies in the plugin that calls it (and only there): one file, a few text fields. */
export async function acceptUploads(app: FastifyInstance): Promise<void> {
  await app.register(multipart, { throwFileSizeLimit: false, limits: { fileSize: MAX_DOCUMENT_BYTES, files: 1, fields: 10, fieldSize: 64 * 1024 } });
}

export interface Form {
  fields: Record<string, string>;
  file: { data: Buffer; bytes: number; filename: string; mimetype: string } | null;
}

/**
 * The multipart form: one file in `file`, and text fields. The file is read up to the largest plan's limit plus one
 * byte (multipart's own fileSize limit, not thrown): anything longer is over every plan, and the service answers
 * 413 document_too_large for the project's plan. Then the request's Idempotency-Key, if any, is begun with the form
 * as its body (the file by its SHA-256): null when the first answer was replayed instead (the reply is sent).
 */
async function readForm(req: FastifyRequest, reply: FastifyReply): Promise<Form | null> {
  const form: Form = { fields: {}, file: null };
  const plan = planOfRequest.get(req) ?? null;
  const fileLimit = plan === null ? MAX_DOCUMENT_BYTES : documentLimitOf(plan);
  try {
    for await (const part of req.parts({ limits: { fileSize: fileLimit } })) {
      if (part.type === 'file') {
        if (part.fieldname !== 'file' || form.file) {
          part.file.resume();
          throw invalid(part.fieldname, 'Send one file, in the form field "file".');
        }
        const chunks: Buffer[] = [];
        let bytes = 0;
        for await (const c of part.file) {
          bytes += (c as Buffer).length;
          chunks.push(c as Buffer);
        }
        // Over the caller's plan: the service answers 413 document_too_large for the project's plan.
        if (part.file.truncated) bytes = fileLimit + 1;
        form.file = { data: Buffer.concat(chunks), bytes, filename: part.filename, mimetype: part.mimetype };
      } else {
        form.fields[part.fieldname] = String(part.value);
      }
    }
  } catch (err) {
    // Ours, and @fastify/multipart's limits (they carry their status).
    if (err instanceof SvcError || typeof (err as { statusCode?: unknown }).statusCode === 'number') throw err;
    // busboy's own: the body ended inside a part ("Unexpected end of form"), a malformed part header, a limit.
    const message = (err as Error).message ?? 'unreadable';
    throw invalid(null, `The multipart/form-data body could not be read (${message.slice(0, 200)}).`);
  }
  const file = form.file && {
    sha256: createHash('sha256').update(form.file.data).digest('hex'),
    bytes: form.file.bytes,
    filename: form.file.filename,
    mimetype: form.file.mimetype,
  };
  return (await beginMultipartIdempotency(req, reply, { ...form.fields, file })) ? form : null;
}

export interface Upload<F> {
  file: NonNullable<Form['file']>;
  contentType: ContentType;
  fields: F;
}

/**
 * A multipart upload read whole (readForm) and checked: the one file present and of a readable type, the text fields
 * against `fields`. Null when an Idempotency-Key's first answer was replayed instead (the reply is sent).
 */
export async function readUpload<S extends TSchema>(req: FastifyRequest, reply: FastifyReply, fields: S): Promise<Upload<Static<S>> | null> {
  const form = await readForm(req, reply);
  if (!form) return null;
  if (!form.file) throw invalid('file', 'Missing required parameter: file.');
  const parsed = parseInput(fields, form.fields);
  const contentType = contentTypeOf(form.file.mimetype, form.file.filename);
  if (!contentType) throw invalid('file', 'The file must be text/plain, text/markdown, text/html or application/pdf.');
  return { file: form.file, contentType, fields: parsed };
}
