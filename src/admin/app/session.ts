// The key lives in sessionStorage only: gone when the tab closes, never in localStorage, a cookie or a URL.
const KEY = 'svc.admin.key';
const PROJECT = 'svc.admin.project';

export const session = {
  key: (): string | null => sessionStorage.getItem(KEY),
  setKey: (key: string) => sessionStorage.setItem(KEY, key),
  /** The project the operator key is looking at (project keys have their own). */
  project: (): string | null => sessionStorage.getItem(PROJECT),
  setProject: (id: string | null) => (id ? sessionStorage.setItem(PROJECT, id) : sessionStorage.removeItem(PROJECT)),
  clear: () => {
    sessionStorage.removeItem(KEY);
    sessionStorage.removeItem(PROJECT);
  },
};
