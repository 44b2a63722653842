import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import type { BatchFile } from '../../generated/prisma/client.ts';
import { unixOrNull, unixSeconds } from '../../domain/context.ts';
import { batchPortsOf } from '../../domain/batches/ports.ts';
import { FileIdParams } from '../../domain/batches/schema.ts';
import { createFile, deleteFile, fileContent, getFile } from '../../domain/batches/service.ts';
import { documentLimitOf, MAX_DOCUMENT_BYTES, multipartUploadBodyLimit, showBytes, UPLOAD_BODY_SLACK } from '../../domain/rag/limits.ts';
import { invalid, SvcError } from '../../errors/svc-error.ts';
import { beginMultipartIdempotency } from '../hooks/idempotency.ts';
import { Bool, Int, NullableStr, ObjectType, Str, Unix, UnixOrNull } from '../response-fields.ts';
import { acceptUploads, boundBody } from './uploads.ts';
import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';

/** OpenAI's file object (CONTRACT §21), plus the project. */
const FileObject = Type.Object(
  {
    id: Str('The file id (file-…).'),
    object: ObjectType('file'),
    bytes: Int('Its size in bytes.'),
    created_at: Unix('Uploaded'),
    expires_at: UnixOrNull("When its content goes, with the project's retention"),
    filename: Str('Its name.'),
    purpose: Str('"batch" (an uploaded input) or "batch_output" (a batch\'s output or error file).'),
    status: Str('Always "processed" (checked on upload).'),
    status_details: NullableStr('Always null.'),
    project_id: Str('The project it belongs to.'),
  },
  { description: "OpenAI's file object." },
);

const Deleted = Type.Object({ id: Str('The file id.'), object: ObjectType('file'), deleted: Bool('Always true.') }, { description: 'A deleted file.' });

/**
 * GET /v1/files/{id}/content: the file as it is, JSONL (sent raw, never serialized). Described by one line: an output or
 * error file's (OpenAI's shape); an input file's lines are what was uploaded ({custom_id, method, url, body}).
 */
const FileContent = {
  description: 'The file as JSONL: one JSON object a line.',
  content: {
    'application/jsonl': {
      schema: Type.Object(
        {
          id: Str('batch_req_… (output and error files).'),
          custom_id: Str("The line's custom_id."),
          response: Type.Unknown({ description: '{status_code, request_id, body}: what the endpoint answered, or null.' }),
          error: Type.Unknown({ description: '{code, message, …} for a failed line, else null.' }),
        },
        { description: "One line of an output or error file (an input file's lines are {custom_id, method, url, body})." },
      ),
    },
  },
};

export function presentFile(f: BatchFile) {
  return {
    id: f.id,
    object: 'file' as const,
    bytes: f.bytes,
    created_at: unixSeconds(f.createdAt),
    expires_at: unixOrNull(f.expiresAt),
    filename: f.filename,
    purpose: f.purpose,
    status: 'processed',
    status_details: null,
    project_id: f.projectId,
  };
}

/** 413 document_too_large param file: a multipart body over the caller's plan, before it is read. */
const fileBodyBound = boundBody({
  limitOf: (plan) => multipartUploadBodyLimit(plan),
  refuse: (plan, limit) =>
    new SvcError('document_too_large', {
      param: 'file',
      message: plan === null ? `The request body is over ${limit} bytes.` : `The request body is over ${limit} bytes: the ${plan} plan accepts files of up to ${showBytes(documentLimitOf(plan))}.`,
    }),
});

/** The multipart form: one `file`, text fields; null when an Idempotency-Key's first answer was replayed. */
async function readFileForm(req: FastifyRequest, reply: FastifyReply) {
  if (!req.isMultipart()) throw invalid('file', 'POST /v1/files takes multipart/form-data: a `file` and `purpose: "batch"`.');
  const fields: Record<string, string> = {};
  let file: { data: Buffer; bytes: number; filename: string } | null = null;
  try {
    for await (const part of req.parts({ limits: { fileSize: MAX_DOCUMENT_BYTES } })) {
      if (part.type === 'file') {
        if (part.fieldname !== 'file' || file) {
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
        file = { data: Buffer.concat(chunks), bytes, filename: part.filename };
      } else fields[part.fieldname] = String(part.value);
    }
  } catch (err) {
    if (err instanceof SvcError || typeof (err as { statusCode?: unknown }).statusCode === 'number') throw err;
    throw invalid(null, `The multipart/form-data body could not be read (${((err as Error).message ?? 'unreadable').slice(0, 200)}).`);
  }
  const seen = file && { sha256: createHash('sha256').update(file.data).digest('hex'), bytes: file.bytes, filename: file.filename };
  if (!(await beginMultipartIdempotency(req, reply, { ...fields, file: seen }))) return null;
  if (!file) throw invalid('file', 'Missing required parameter: file.');
  return { fields, file };
}

export const filesRoutes: FastifyPluginAsyncTypebox = async (app) => {
  await acceptUploads(app);
  const ports = () => batchPortsOf(app.ports.inference);

  app.post('/v1/files',
    {
      bodyLimit: MAX_DOCUMENT_BYTES + UPLOAD_BODY_SLACK,
      preParsing: fileBodyBound,
      config: { action: 'file.create', bodyTooLarge: { code: 'document_too_large', param: 'file' } },
      schema: {
        consumes: ['multipart/form-data'],
        body: {
          content: {
            'multipart/form-data': {
              schema: {
                description: 'A JSONL batch file (one request a line) and its purpose.',
                properties: { file: { type: 'string', description: 'The JSONL file (binary).' }, purpose: { type: 'string', description: '"batch".' }, project_id: { type: 'string' } },
                required: ['file', 'purpose'],
              },
            },
          },
        },
        response: { 200: FileObject },
      },
    },
    async (req, reply) => {
      const form = await readFileForm(req, reply);
      if (!form) return reply;
      return presentFile(await createFile(ports(), req.ctx, form.fields, form.file));
    },
  );

  app.get('/v1/files/:file_id', { config: { action: 'file.read' }, schema: { params: FileIdParams, response: { 200: FileObject } } }, async (req) => presentFile(await getFile(req.ctx, req.params.file_id)));

  app.get('/v1/files/:file_id/content', { config: { action: 'file.read' }, schema: { params: FileIdParams, response: { 200: FileContent } } }, async (req, reply) => {
    const content = await fileContent(ports(), req.ctx, req.params.file_id);
    // The chunks streamed as they are read and opened (the response schema only describes the lines).
    return reply.type('application/jsonl').header('content-length', content.bytes).send(Readable.from(content.body) as never);
  });

  app.delete('/v1/files/:file_id', { config: { action: 'file.delete' }, schema: { params: FileIdParams, response: { 200: Deleted } } }, async (req) => {
    const f = await deleteFile(req.ctx, req.params.file_id);
    return { id: f.id, object: 'file' as const, deleted: true };
  });
};
