import { invalid } from '../../errors/svc-error.ts';
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

/**
 * The text to index. Markdown is indexed as written (its markup is mostly punctuation, which full text search drops);
 * HTML through html-to-text (scripts, styles and link targets left out); PDF through unpdf (pdf.js), pages joined.
 * Both are loaded with the first document of their type: a gateway that indexes none never holds them.
 */
export async function extractDocumentText(type: ContentType, data: Uint8Array | string, param: string): Promise<string> {
  if (type === 'application/pdf') {
    if (typeof data === 'string') throw invalid('content_type', 'A PDF must be uploaded as a file (multipart/form-data).');
    const { extractText, getDocumentProxy } = await import('unpdf');
    try {
      const pdf = await getDocumentProxy(new Uint8Array(data));
      const { text } = await extractText(pdf, { mergePages: true });
      return text;
    } catch (err) {
      throw invalid(param, `The PDF could not be read (${(err as Error).message.split('\n')[0]!.slice(0, 200)}).`);
    }
  }
  const text = typeof data === 'string' ? data : new TextDecoder('utf-8', { fatal: false }).decode(data);
  if (type === 'text/html') {
    const { convert } = await import('html-to-text');
    return convert(text, {
      wordwrap: false,
      selectors: [
        { selector: 'a', options: { ignoreHref: true } },
        { selector: 'img', format: 'skip' },
        { selector: 'script', format: 'skip' },
        { selector: 'style', format: 'skip' },
      ],
    });
  }
  return text;
}
