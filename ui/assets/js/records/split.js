// records/split.js: the list-and-detail layout of the tasks, contacts and skills pages.
//
// Owns: two panes side by side on a wide screen (the list stays while a record is
// open) and one at a time on a narrow one (the open record takes the screen, with a
// link back). Must never fetch: pages fill the panes.

import { h } from '../dom.js';

/** `{root, list, detail}`: append `root` to the page, fill `list` and `detail`. */
export function splitView({ open, backHref, backLabel }) {
  const list = h('div', { class: 'rec-list-pane' });
  const detail = h('div', { class: 'rec-detail-pane' });
  const back = open ? h('a', { class: 'rec-back', href: backHref, 'data-test': 'back' }, `← ${backLabel}`) : null;
  const root = h(
    'div',
    { class: ['rec-split', open ? 'has-detail' : null] },
    list,
    open ? h('div', { class: 'rec-detail-wrap' }, back, detail) : null,
  );
  return { root, list, detail };
}

/** "Saving…", "Saved" or the error, said to screen readers as it changes. */
export function saveState() {
  const el = h('span', { class: 'save-state muted', role: 'status', 'aria-live': 'polite', 'data-test': 'save-state' });
  el.show = (state, message) => {
    el.className = ['save-state', state === 'error' ? 'error' : 'muted'].join(' ');
    el.dataset.state = state;
    el.textContent =
      state === 'saving' ? 'Saving…' : state === 'saved' ? 'Saved' : state === 'error' ? `Not saved: ${message}` : '';
  };
  return el;
}

/**
 * A records page: `listPane(el, ctx, id)` beside `detailPane(el, ctx, id)` when a
 * record is open (`#/<path>/<id>`). Mounting resolves once both show their first data
 * (the shell then marks the page ready) with the detail's cleanup.
 */
export function splitPage(title, path, listPane, detailPane) {
  return {
    title,
    async mount(el, ctx) {
      const id = ctx.route.id;
      const split = splitView({ open: !!id, backHref: `#/${path}`, backLabel: title });
      el.append(split.root);
      const [, cleanup] = await Promise.all([
        listPane(split.list, ctx, id),
        id ? detailPane(split.detail, ctx, id) : null,
      ]);
      return cleanup;
    },
  };
}
