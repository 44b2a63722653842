import multipart from '@fastify/multipart';
import { createHash } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Static, TSchema } from 'typebox';
import { beginMultipartIdempotency } from '../http/hooks/idempotency.ts';
import { contentTypeOf } from '../domain/rag/extract.ts';
import { MAX_DOCUMENT_BYTES } from '../domain/rag/limits.ts';
import type { ContentType } from '../domain/rag/schema.ts';
import { parseInput } from '../domain/validation.ts';
import { invalid } from '../errors/svc-error.ts';

/**
 * Document uploads (RAG documents, Legal contracts): JSON with the text, or a multipart form with one file. Both are
 * held to the project's plan limit by the service (domain/rag/limits.ts: 413 document_too_large); here they are only
 * kept from growing past the largest plan's.
 */

/** A JSON upload's body may be as large as the largest plan's document, plus room for the other fields. */
const UPLOAD_JSON_BODY_LIMIT = MAX_DOCUMENT_BYTES + 1024 * 1024;

/**
 * The route options of an upload route: `bodyLimit`, the 413's code and param, and a body schema taking `json` as
 * JSON or a multipart form of one `file` plus `fields` (described for OpenAPI, checked by readUpload once read).
 */
export function uploadRouteOptions<J extends TSchema>(json: J, fields: Record<string, { type: 'string'; description?: string }>) {
  return {
    bodyLimit: UPLOAD_JSON_BODY_LIMIT,
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
  for await (const part of req.parts()) {
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
      if (part.file.truncated) bytes = MAX_DOCUMENT_BYTES + 1;
      form.file = { data: Buffer.concat(chunks), bytes, filename: part.filename, mimetype: part.mimetype };
    } else {
      form.fields[part.fieldname] = String(part.value);
    }
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
