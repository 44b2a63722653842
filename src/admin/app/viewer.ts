import type { Catalog } from './catalog.ts';

/** Who is signed in (GraphQL `viewer`): what the console may show and do is what these scopes allow. */
export interface Viewer {
  kind: 'operator' | 'key' | 'session';
  keyId: string;
  projectId: string | null;
  scopes: string[];
}

export const VIEWER = `query Viewer { viewer { kind keyId projectId scopes } }`;

/** What every screen is given: the signed-in caller, the project it looks at, and the gateway's tables. */
export interface ScreenProps {
  viewer: Viewer;
  projectId: string;
  catalog: Catalog;
}
