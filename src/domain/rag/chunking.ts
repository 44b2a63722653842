/**
 * How documents are cut (README "RAG"): chunks of about CHUNK_CHARS characters, each starting CHUNK_OVERLAP characters
 * before the previous one ended, so that a sentence cut at a border is whole in one of the two. A chunk ends at the
 * last paragraph break, else sentence end, else space in its second half; a text without any is cut hard. 1,000
 * characters is about 250 tokens: five chunks (the default top_k) fit easily in a prompt, and a chunk is small enough
 * to be about one thing, which keyword ranking and embeddings both reward.
 */
export const CHUNK_CHARS = 1000;
export const CHUNK_OVERLAP = 200;

/** Paragraphs kept, runs of blanks and spaces folded. */
function normalize(text: string): string {
  return text
    .replace(/\r\n?/g, '\n')
    .replace(/[ \t\f\v\u00a0]+/g, ' ')
    .replace(/ *\n */g, '\n')
    .replace(/\n{3,}/g, '\n\n')
    .trim();
}

function breakAt(text: string, start: number, end: number): number {
  if (end >= text.length) return text.length;
  const min = start + Math.floor((end - start) / 2);
  const window = text.slice(min, end);
  for (const re of [/\n\n(?![\s\S]*\n\n)/, /[.!?]["')\]]?\s(?![\s\S]*[.!?]["')\]]?\s)/, /\s(?![\s\S]*\s)/]) {
    const m = re.exec(window);
    if (m) return min + m.index + m[0].length;
  }
  return end;
}

export function chunkText(raw: string, size = CHUNK_CHARS, overlap = CHUNK_OVERLAP): string[] {
  const text = normalize(raw);
  const chunks: string[] = [];
  let start = 0;
  while (start < text.length) {
    const end = breakAt(text, start, start + size);
    const chunk = text.slice(start, end).trim();
    if (chunk) chunks.push(chunk);
    if (end >= text.length) break;
    // The next chunk starts `overlap` earlier, at a word's start, and always moves forward.
    let next = Math.max(end - overlap, start + 1);
    const space = text.indexOf(' ', next);
    if (space !== -1 && space < end) next = space + 1;
    start = next;
  }
  return chunks;
}
