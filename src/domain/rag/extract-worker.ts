/**
 * The worker thread of extract.ts: extracts the text of one PDF or HTML document and posts it back. It runs under the
 * heap limit and deadline extract.ts gives it, so a document that decodes into far more than it weighs (a PDF bomb)
 * or that no parser survives (HTML nested thousands deep) costs this thread, never the gateway's event loop.
 * Self-contained on purpose (no relative imports): it is loaded by URL, from src/ (tests, tsx) or dist/.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { constants, inflateSync } from 'node:zlib';

export interface ExtractJob {
  type: 'application/pdf' | 'text/html';
  data: Uint8Array | string;
  /** The plan's document limit: extracted text longer than this (UTF-8 bytes) is refused, and reading it stops. */
  maxTextBytes: number;
  /** PDF: what its streams (other than images) may inflate to, in all; more is refused before pdf.js reads it. */
  maxDecodedBytes: number;
}

export type ExtractAnswer = { ok: true; text: string } | { ok: false; reason: 'too_large' | 'unreadable'; message: string };

const firstLine = (err: unknown) => String((err as Error)?.message ?? err).split('\n')[0]!.slice(0, 200);

/**
 * Whether the PDF's compressed streams (images left out: text extraction never decodes them) inflate to more than
 * `cap` bytes in all. pdf.js keeps a decoded stream whole in an ArrayBuffer, which the worker's heap limit does not
 * cover: a 1 MB PDF can hold a gigabyte of blanks. Each stream is inflated with zlib's output limit, so this costs at
 * most `cap` bytes at a time. A stream that is not zlib data (another filter, none) is not counted.
 */
function inflatesOver(pdf: Uint8Array, cap: number): boolean {
  const buf = Buffer.from(pdf.buffer, pdf.byteOffset, pdf.byteLength);
  let total = 0;
  let i = 0;
  for (;;) {
    const at = buf.indexOf('stream', i, 'latin1');
    if (at < 0) return false;
    i = at + 6;
    if (at >= 3 && buf.toString('latin1', at - 3, at) === 'end') continue;
    let start = at + 6;
    if (buf[start] === 0x0d) start++;
    if (buf[start] === 0x0a) start++;
    const end = buf.indexOf('endstream', start, 'latin1');
    if (end < 0) return false;
    i = end + 9;
    const head = buf.toString('latin1', Math.max(0, at - 1024), at);
    const dict = head.slice(Math.max(0, head.lastIndexOf(' obj')));
    if (/\/Subtype\s*\/Image/.test(dict)) continue;
    try {
      total += inflateSync(buf.subarray(start, end), { maxOutputLength: cap - total + 1, finishFlush: constants.Z_SYNC_FLUSH }).length;
    } catch (err) {
      if ((err as { code?: string }).code === 'ERR_BUFFER_TOO_LARGE') return true;
    }
    if (total > cap) return true;
  }
}

/** unpdf's extractText({mergePages: true}), page by page and item by item, stopping once over the text limit. */
async function pdfText(data: Uint8Array, maxTextBytes: number, maxDecodedBytes: number): Promise<ExtractAnswer> {
  if (inflatesOver(data, maxDecodedBytes)) return { ok: false, reason: 'too_large', message: `its streams inflate to over ${maxDecodedBytes} bytes` };
  const { getDocumentProxy } = await import('unpdf');
  const pdf = await getDocumentProxy(data);
  const pages: string[] = [];
  let bytes = 0;
  for (let n = 1; n <= pdf.numPages; n++) {
    const page = await pdf.getPage(n);
    const reader = page.streamTextContent().getReader();
    const parts: string[] = [];
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      for (const item of value.items) {
        if (!('str' in item)) continue;
        const s = item.str + (item.hasEOL ? '\n' : '');
        bytes += Buffer.byteLength(s, 'utf8');
        // Not read any further: the thread is stopped once it answers.
        if (bytes > maxTextBytes) {
          return { ok: false, reason: 'too_large', message: `over ${maxTextBytes} bytes of text` };
        }
        parts.push(s);
      }
    }
    pages.push(parts.join(''));
  }
  const text = pages.join('\n').replace(/[^\S\n]+/g, ' ').replace(/ ?\n ?/g, '\n').replace(/\n{3,}/g, '\n\n');
  return { ok: true, text };
}

/** html-to-text: scripts, styles, images and link targets left out. */
async function htmlText(html: string): Promise<ExtractAnswer> {
  const { convert } = await import('html-to-text');
  const text = convert(html, {
    wordwrap: false,
    selectors: [
      { selector: 'a', options: { ignoreHref: true } },
      { selector: 'img', format: 'skip' },
      { selector: 'script', format: 'skip' },
      { selector: 'style', format: 'skip' },
    ],
  });
  return { ok: true, text };
}

async function run(job: ExtractJob): Promise<ExtractAnswer> {
  try {
    const answer =
      job.type === 'application/pdf'
        ? await pdfText(job.data instanceof Uint8Array ? job.data : new TextEncoder().encode(job.data), job.maxTextBytes, job.maxDecodedBytes)
        : await htmlText(typeof job.data === 'string' ? job.data : new TextDecoder('utf-8', { fatal: false }).decode(job.data));
    if (answer.ok && Buffer.byteLength(answer.text, 'utf8') > job.maxTextBytes) {
      return { ok: false, reason: 'too_large', message: `over ${job.maxTextBytes} bytes of text` };
    }
    return answer;
  } catch (err) {
    if (err instanceof RangeError && /call stack/i.test(err.message)) return { ok: false, reason: 'unreadable', message: 'it is nested too deeply' };
    return { ok: false, reason: 'unreadable', message: firstLine(err) };
  }
}

if (parentPort) {
  const port = parentPort;
  void run(workerData as ExtractJob).then((answer) => port.postMessage(answer));
}
