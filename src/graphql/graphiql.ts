import type { GraphiQLOptions } from 'graphql-yoga';

const pages = new Map<string, Promise<string>>();

/**
 * GraphiQL served whole by the gateway: @graphql-yoga/render-graphiql inlines GraphiQL's scripts, styles and editor
 * workers in the page, so the page makes no request beyond this origin (yoga's own renderer loads them from a CDN and
 * stays blank offline). The package is about 9 MB of JavaScript: imported on the first page asked for, then kept.
 */
export function renderOfflineGraphiQL(opts: GraphiQLOptions): Promise<string> {
  const key = JSON.stringify(opts);
  let page = pages.get(key);
  if (!page) {
    page = import('@graphql-yoga/render-graphiql').then((m) => m.renderGraphiQL({ favicon: '/favicon.ico', ...opts }));
    pages.set(key, page);
  }
  return page;
}
