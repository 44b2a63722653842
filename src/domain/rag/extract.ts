import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { invalid, SvcError } from '../../errors/svc-error.ts';
import type { ExtractAnswer, ExtractJob } from './extract-worker.ts';
import { EXTRACTION_LIMITS, MAX_DOCUMENT_BYTES, pdfDecodedLimit, showBytes } from './limits.ts';
import type { ContentType } from './schema.ts';

/** The content type of an upload: its declared type, else the file name's extension; null: not one we index. */
export function contentTypeOf(declared: string | undefined, fileName: string | undefined): ContentType | null {
  const type = (declared ?? '').split(';')[0]!.trim().toLowerCase();
  if (type === 'text/plain' || type === 'text/markdown' || type === 'text/html' || type === 'application/pdf') return type;
  if (type === 'text/x-markdown') return 'text/markdown';
  const ext = (fileName ?? '').toLowerCase().split('.').pop();
  if (ext === 'md' || ext === 'markdown') return 'text/markdown';
  if (ext === 'html' || ext === 'htm') return 'text/html';
  if (ext === 'pdf') return 'application/pdf';
  if (ext === 'txt' || ext === 'text') return 'text/plain';
  return null;
}

/** Elements whose end tag HTML lets out (a parser closes them itself): they count for no depth. */
const OPTIONAL_END = new Set(['p', 'li', 'dt', 'dd', 'tr', 'td', 'th', 'option', 'optgroup', 'thead', 'tbody', 'tfoot', 'colgroup', 'rb', 'rt', 'rtc', 'rp']);
const VOID = new Set(['area', 'base', 'br', 'col', 'embed', 'hr', 'img', 'input', 'link', 'meta', 'param', 'source', 'track', 'wbr', 'basefont', 'bgsound', 'frame', 'keygen']);
const RAW_TEXT = new Set(['script', 'style', 'textarea', 'title', 'xmp', 'noscript', 'iframe', 'noembed', 'noframes']);
const isNameStart = (c: number) => (c >= 65 && c <= 90) || (c >= 97 && c <= 122);
const isNameChar = (c: number) => isNameStart(c) || (c >= 48 && c <= 57) || c === 45 || c === 58 || c === 95;

/**
 * An upper bound of the element nesting of an HTML text, in one pass (each character looked at a few times at most):
 * open tags count up, end tags down; void, self-closing and optional-end elements (p, li, td, …: a parser closes them
 * itself) count for nothing; comments and the content of script/style are skipped. Stops once over `max`.
 */
export function htmlNestingOver(html: string, max: number): boolean {
  let depth = 0;
  let i = 0;
  for (;;) {
    const lt = html.indexOf('<', i);
    if (lt < 0) return false;
    if (html.startsWith('<!--', lt)) {
      const end = html.indexOf('-->', lt + 4);
      if (end < 0) return false;
      i = end + 3;
      continue;
    }
    let j = lt + 1;
    const closing = html.charCodeAt(j) === 47; // '/'
    if (closing) j++;
    if (!isNameStart(html.charCodeAt(j))) {
      i = lt + 1;
      continue;
    }
    const nameStart = j;
    while (j < html.length && isNameChar(html.charCodeAt(j))) j++;
    const name = html.slice(nameStart, j).toLowerCase();
    const gt = html.indexOf('>', j);
    if (gt < 0) return false; // no tag can end after this point
    i = gt + 1;
    if (VOID.has(name) || OPTIONAL_END.has(name)) continue;
    if (closing) {
      if (depth > 0) depth--;
      continue;
    }
    if (html.charCodeAt(gt - 1) === 47) continue; // <x/>
    if (RAW_TEXT.has(name)) {
      const end = new RegExp(`</${name}`, 'ig');
      end.lastIndex = i;
      if (!end.exec(html)) return false;
      i = end.lastIndex;
      continue;
    }
    if (++depth > max) return true;
  }
}

/**
 * The worker beside this module: extract-worker.js when compiled (dist/), extract-worker.ts from src/ (tsx, vitest),
 * then loaded through tsx's require hook (a dev dependency, present wherever src/ runs): Node 20 gives a worker thread
 * none of the module hooks of its parent, so `--import tsx` would not reach it.
 */
const FROM_SOURCE = import.meta.url.endsWith('.ts');
const WORKER_URL = new URL(FROM_SOURCE ? './extract-worker.ts' : './extract-worker.js', import.meta.url);
const workerEntry = (): { entry: URL | string; eval: boolean } => {
  if (!FROM_SOURCE) return { entry: WORKER_URL, eval: false };
  const tsx = createRequire(import.meta.url).resolve('tsx/cjs');
  return { entry: `require(${JSON.stringify(tsx)}); require(${JSON.stringify(fileURLToPath(WORKER_URL))});`, eval: true };
};

let running = 0;
const waiting: (() => void)[] = [];

/** At most EXTRACTION_LIMITS.concurrency workers at once: each may take its heap limit of memory. */
async function inTurn<T>(work: () => Promise<T>): Promise<T> {
  if (running >= EXTRACTION_LIMITS.concurrency) await new Promise<void>((resolve) => waiting.push(resolve));
  running++;
  try {
    return await work();
  } finally {
    running--;
    waiting.shift()?.();
  }
}

export interface ExtractOptions {
  /** The plan's document limit (bytes): longer extracted text is 413 document_too_large. Default: the largest plan's. */
  maxTextBytes?: number;
  /** Default EXTRACTION_LIMITS.deadlineMs. */
  deadlineMs?: number;
  /** The worker's heap; default EXTRACTION_LIMITS.workerHeapMb. */
  heapMb?: number;
}

const tooLarge = (param: string, limit: number, why = `its text is over ${limit} bytes once extracted`) =>
  new SvcError('document_too_large', {
    param,
    message: `The document is too large: ${why}; the plan accepts documents of up to ${showBytes(limit)} (${limit} bytes).`,
  });

/**
 * Runs one extraction in a worker thread of its own, under a heap limit and a deadline (EXTRACTION_LIMITS). The worker
 * dying (out of memory, a crash) or being stopped at the deadline is an answer like any other: the event loop and the
 * process carry on.
 */
function inWorker(job: ExtractJob, param: string, deadlineMs: number, heapMb: number): Promise<string> {
  return new Promise<string>((resolve, reject) => {
    const { entry, eval: isCode } = workerEntry();
    const worker = new Worker(entry, {
      eval: isCode,
      workerData: job,
      execArgv: [],
      resourceLimits: { maxOldGenerationSizeMb: heapMb, maxYoungGenerationSizeMb: 16, stackSizeMb: 4 },
      // pdf.js warns on stdout about every oddity of a file: not ours to log.
      stdout: true,
      stderr: true,
    });
    worker.stdout.resume();
    worker.stderr.resume();
    let settled = false;
    const settle = (fn: () => void) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      void worker.terminate();
      fn();
    };
    const timer = setTimeout(
      () => settle(() => reject(invalid(param, `The document could not be read within ${Math.round(deadlineMs / 1000)} s.`))),
      deadlineMs,
    );
    worker.once('message', (answer: ExtractAnswer) =>
      settle(() => {
        if (answer.ok) resolve(answer.text);
        else if (answer.reason === 'too_large') reject(tooLarge(param, job.maxTextBytes, answer.message));
        else reject(invalid(param, `The ${job.type === 'application/pdf' ? 'PDF' : 'HTML'} could not be read (${answer.message}).`));
      }),
    );
    worker.once('error', (err: Error & { code?: string }) =>
      settle(() =>
        // Out of its heap: what the document decodes into is too large (the upload itself was within the plan).
        reject(
          err.code === 'ERR_WORKER_OUT_OF_MEMORY'
            ? tooLarge(param, job.maxTextBytes, `reading it takes over ${heapMb} MB`)
            : invalid(param, 'The document could not be read.'),
        ),
      ),
    );
    worker.once('exit', () => settle(() => reject(invalid(param, 'The document could not be read.'))));
  });
}

/**
 * The text to index. Plain text and Markdown are indexed as written (Markdown's markup is mostly punctuation, which
 * full text search drops). PDF (unpdf: pdf.js, pages joined) and HTML (html-to-text: scripts, styles and link targets
 * left out) are extracted in a worker thread (inWorker) under EXTRACTION_LIMITS, the text capped at `maxTextBytes`
 * (413 document_too_large); HTML nested deeper than EXTRACTION_LIMITS.htmlMaxDepth is refused before it is parsed
 * (400 invalid_request), as is a document that cannot be read or not within the deadline.
 */
export async function extractDocumentText(type: ContentType, data: Uint8Array | string, param: string, opts: ExtractOptions = {}): Promise<string> {
  const maxTextBytes = opts.maxTextBytes ?? MAX_DOCUMENT_BYTES;
  const deadlineMs = opts.deadlineMs ?? EXTRACTION_LIMITS.deadlineMs;
  const heapMb = opts.heapMb ?? EXTRACTION_LIMITS.workerHeapMb;
  if (type === 'application/pdf') {
    if (typeof data === 'string') throw invalid('content_type', 'A PDF must be uploaded as a file (multipart/form-data).');
    const maxDecodedBytes = pdfDecodedLimit(maxTextBytes);
    return inTurn(() => inWorker({ type, data, maxTextBytes, maxDecodedBytes }, param, deadlineMs, heapMb));
  }
  const text = typeof data === 'string' ? data : new TextDecoder('utf-8', { fatal: false }).decode(data);
  if (type === 'text/html') {
    const max = EXTRACTION_LIMITS.htmlMaxDepth;
    if (htmlNestingOver(text, max)) throw invalid(param, `The HTML is nested too deeply: at most ${max} elements inside one another.`);
    return inTurn(() => inWorker({ type, data: text, maxTextBytes, maxDecodedBytes: 0 }, param, deadlineMs, heapMb));
  }
  return text;
}
