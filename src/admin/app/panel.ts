import type { ComponentChildren } from 'preact';
import { useEffect, useRef } from 'preact/hooks';
import { html } from './ui.ts';

/**
 * A form or a detail beside the list: a modal <dialog> docked to the right. The browser traps focus in it and closes
 * it on Escape; focus returns to what opened it. Lists stay first on every screen; forms open here.
 */
export function SidePanel({ title, open, onClose, children, wide }: {
  title: string;
  open: boolean;
  onClose: () => void;
  children: ComponentChildren;
  wide?: boolean;
}) {
  const ref = useRef<HTMLDialogElement>(null);
  useEffect(() => {
    const d = ref.current;
    if (!d) return;
    if (open && !d.open) {
      const opener = document.activeElement as HTMLElement | null;
      d.showModal();
      return () => opener?.focus?.();
    }
    if (!open && d.open) d.close();
  }, [open]);
  const id = `panel-${title.replace(/[^a-z0-9]+/gi, '-').toLowerCase()}`;
  return html`<dialog ref=${ref} class=${`side-panel${wide ? ' wide' : ''}`} aria-labelledby=${id}
    onClose=${onClose} onCancel=${(e: Event) => { e.preventDefault(); onClose(); }}>
    ${open
      ? html`<header><h2 id=${id}>${title}</h2><button type="button" class="close" aria-label="Close" onClick=${onClose}>×</button></header>
        <div class="panel-body">${children}</div>`
      : null}
  </dialog>`;
}
