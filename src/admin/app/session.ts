// The key lives in sessionStorage only: gone when the tab closes, never in localStorage, a cookie or a URL.
const KEY = 'svc.admin.key';
const PROJECT = 'svc.admin.project';
const CONSOLE_SESSION = 'svc.admin.session';

/** 128 random bits, base64url: the X-Svc-Console-Session id (it authenticates nothing; see README). */
function newSessionId(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return btoa(String.fromCharCode(...bytes)).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

/**
 * An operator signed in by OIDC or SAML (issue 22): the session is the gateway's HttpOnly cookie, which this page cannot
 * read; the page holds only the session's CSRF token, in memory (a reload asks GET /auth/session again).
 */
let csrfToken: string | null = null;
export const sso = {
  csrf: (): string | null => csrfToken,
  setCsrf: (token: string | null) => {
    csrfToken = token;
  },
};

export const session = {
  key: (): string | null => sessionStorage.getItem(KEY),
  /** Signing in starts a new console session: its first look at each page of keys is audited (key.list). */
  setKey: (key: string) => {
    sessionStorage.setItem(KEY, key);
    sessionStorage.setItem(CONSOLE_SESSION, newSessionId());
  },
  consoleSession: (): string | null => sessionStorage.getItem(CONSOLE_SESSION),
  /** The project the operator key is looking at (project keys have their own). */
  project: (): string | null => sessionStorage.getItem(PROJECT),
  setProject: (id: string | null) => (id ? sessionStorage.setItem(PROJECT, id) : sessionStorage.removeItem(PROJECT)),
  clear: () => {
    sessionStorage.removeItem(KEY);
    sessionStorage.removeItem(PROJECT);
    sessionStorage.removeItem(CONSOLE_SESSION);
  },
};
