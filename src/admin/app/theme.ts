import { useEffect, useState } from 'preact/hooks';

export type Theme = 'light' | 'dark';

// Only a choice made with the toggle is remembered (localStorage holds nothing else of the console's); without one
// the page follows the system's prefers-color-scheme, live.
const KEY = 'svc.admin.theme';
const media = () => matchMedia('(prefers-color-scheme: dark)');

function chosen(): Theme | null {
  const v = localStorage.getItem(KEY);
  return v === 'light' || v === 'dark' ? v : null;
}

/** Sets <html data-theme>, which style.css's two palettes hang on. Called at load, before the first paint. */
export function applyTheme(theme: Theme = chosen() ?? (media().matches ? 'dark' : 'light')): Theme {
  document.documentElement.dataset.theme = theme;
  return theme;
}

export function useTheme(): [Theme, () => void] {
  const [theme, setTheme] = useState<Theme>(() => applyTheme());
  useEffect(() => {
    const m = media();
    const follow = () => {
      if (!chosen()) setTheme(applyTheme());
    };
    m.addEventListener('change', follow);
    return () => m.removeEventListener('change', follow);
  }, []);
  const toggle = () => {
    const next: Theme = theme === 'dark' ? 'light' : 'dark';
    localStorage.setItem(KEY, next);
    setTheme(applyTheme(next));
  };
  return [theme, toggle];
}
