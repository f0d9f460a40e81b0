// records/common.js: small pieces the tasks, contacts, skills and projects pages share.
//
// Owns: reading every page of a list, saying an API error in plain words (a node whose
// hub is away included), the two-step delete button, arrow-key movement in a list, tag
// chips, labelled fields and a page's live refetch. Must never hold a record between
// pages (each page fetches what it shows) nor build markup from strings.
//
// data-test: "delete" (first step), "delete-confirm", "delete-cancel", "error"; a chip
// editor's "<prefix>" (a chip, data-tag), "<prefix>-remove" and "<prefix>-input".

import * as api from '../api.js';
import { h, replace, debounce } from '../dom.js';
import { projectPath } from '../projects.js';

/** Every row of a paged list (`Page<T>`), 500 at a time. */
export async function fetchAll(path, query = {}) {
  const all = [];
  for (let offset = 0; ; offset += 500) {
    const page = await api.get(path, { ...query, limit: 500, offset });
    all.push(...page.data);
    if (all.length >= page.total || page.data.length === 0) return all;
  }
}

/** An API error as a sentence a person can act on. */
export function errorText(e) {
  if (!e) return '';
  if (e.code === 'hub_unreachable')
    return 'The hub is out of reach right now; this needs the hub. Try again when it is back.';
  if (e.code === 'unreachable') return 'This server does not answer. Is Hearth still running?';
  if (e.status === 404 || e.status === 410) return 'It is gone: deleted, or never here.';
  const msg = e.message || String(e);
  return msg.charAt(0).toUpperCase() + msg.slice(1);
}

/** A paragraph showing an error plainly (role=alert so a screen reader says it). */
export function errorBox(e) {
  return h('p', { class: 'rec-error', role: 'alert', 'data-test': 'error' }, errorText(e));
}

/**
 * A delete button asking once more before it acts: "Delete" becomes "Delete for good"
 * and "Cancel". `onDelete` runs on the second click; `what` names it for screen readers.
 */
export function deleteButton({ label = 'Delete', confirm = 'Delete for good', what = '', warning = null, onDelete }) {
  const box = h('span', { class: 'rec-delete' });
  const first = () =>
    replace(
      box,
      h(
        'button',
        {
          class: 'danger',
          'data-test': 'delete',
          'aria-label': what ? `${label} ${what}` : null,
          onclick: () => {
            second();
            box.querySelector('[data-test=delete-cancel]').focus();
          },
        },
        label,
      ),
    );
  const second = () => {
    const said = typeof warning === 'function' ? warning() : warning;
    replace(
      box,
      said ? h('span', { class: 'rec-warn' }, said) : null,
      h(
        'button',
        {
          class: 'danger primary',
          'data-test': 'delete-confirm',
          onclick: async (e) => {
            e.currentTarget.disabled = true;
            try {
              await onDelete();
            } finally {
              if (box.isConnected) first();
            }
          },
        },
        confirm,
      ),
      h(
        'button',
        {
          'data-test': 'delete-cancel',
          onclick: () => {
            first();
            box.querySelector('[data-test=delete]').focus();
          },
        },
        'Cancel',
      ),
    );
  };
  first();
  return box;
}

/**
 * Arrow keys move focus among `selector` inside `list` (Up, Down, Home, End); Enter on
 * a link follows it as usual.
 */
export function arrowNav(list, selector) {
  list.addEventListener('keydown', (e) => {
    if (!['ArrowDown', 'ArrowUp', 'Home', 'End'].includes(e.key)) return;
    const t = e.target;
    if (t instanceof HTMLElement && /^(INPUT|TEXTAREA|SELECT)$/.test(t.tagName) && t.type !== 'checkbox') return;
    const items = [...list.querySelectorAll(selector)].filter((el) => el.offsetParent !== null);
    if (!items.length) return;
    const row = t.closest?.('[data-nav-row]');
    const i = items.findIndex((el) => el === t || (row && row.contains(el)));
    let next;
    if (e.key === 'Home') next = items[0];
    else if (e.key === 'End') next = items[items.length - 1];
    else if (e.key === 'ArrowDown') next = items[Math.min(items.length - 1, i + 1)];
    else next = items[Math.max(0, i < 0 ? 0 : i - 1)];
    if (next) {
      e.preventDefault();
      next.focus();
    }
  });
  return list;
}

/** A labelled field: `<label class="field"><span>Label</span>control</label>`. */
export function field(label, control, hint = null) {
  return h(
    'label',
    { class: 'field' },
    h('span', null, label),
    control,
    hint ? h('small', { class: 'muted rec-hint' }, hint) : null,
  );
}

/**
 * Tag chips with a remove button each, and an input adding one on Enter or comma.
 * `onChange(tags)` is called with the new list; it may reject (the chips then stay).
 */
export function chipEditor({ tags, onChange, label = 'Add a tag', testPrefix = 'chip' }) {
  let current = [...tags];
  const box = h('div', { class: 'chips' });
  const input = h('input', {
    type: 'text',
    class: 'chip-input',
    placeholder: 'add tag…',
    'aria-label': label,
    'data-test': `${testPrefix}-input`,
    enterkeyhint: 'done',
    onkeydown: async (e) => {
      if (e.key === 'Backspace' && !input.value && current.length) {
        e.preventDefault();
        await commit(current.slice(0, -1));
        return;
      }
      if (e.key !== 'Enter' && e.key !== ',') return;
      e.preventDefault();
      const tag = input.value.trim().replace(/,+$/, '');
      if (!tag || current.includes(tag)) {
        input.value = '';
        return;
      }
      if (await commit([...current, tag])) input.value = '';
    },
  });
  async function commit(next) {
    try {
      await onChange(next);
      current = next;
      draw();
      return true;
    } catch {
      return false;
    }
  }
  function draw() {
    // The input stays where it is (moving it would drop its focus); chips go before it.
    for (const el of [...box.children]) if (el !== input) el.remove();
    if (!input.parentNode) box.append(input);
    input.before(
      ...current.map((t) =>
        h(
          'span',
          { class: 'chip', 'data-test': testPrefix, dataset: { tag: t } },
          t,
          h(
            'button',
            {
              class: 'chip-remove',
              'aria-label': `Remove tag ${t}`,
              'data-test': `${testPrefix}-remove`,
              onclick: async () => {
                await commit(current.filter((x) => x !== t));
                input.focus();
              },
            },
            '×',
          ),
        ),
      ),
    );
  }
  draw();
  box.set = (next) => {
    current = [...next];
    draw();
  };
  return box;
}

/**
 * Calls `reload()` (debounced) when a document of `kinds` changes, or after a resync.
 * The shell drops these subscriptions when the page is left.
 */
export function liveReload(ctx, kinds, reload, ms = 250) {
  const wanted = new Set(kinds);
  const later = debounce(reload, ms);
  ctx.onEvent('document', (ev) => {
    if (wanted.has(ev.kind)) later(ev);
  });
  ctx.on('resync', () => later(null));
}

/** The name of a project for a label: its path, or `fallback` when it has none. */
export function projectLabel(projects, id, fallback = 'No project') {
  if (!id) return fallback;
  return projectPath(projects, id) || 'a project not on this device';
}

/**
 * A record's properties as a two-column table: rows of `[label, control, ...more]`;
 * the controls carry their own aria-label, the visible label is for the eye.
 */
export function props(rows) {
  return h(
    'div',
    { class: 'rec-props' },
    rows
      .filter(Boolean)
      .map(([label, ...value]) => [
        h('span', { class: 'prop-label' }, label),
        h('div', { class: 'prop-value' }, value),
      ]),
  );
}

/** The page heading with an optional context line under it and actions on its right. */
export function pageHead(title, sub = null, ...actions) {
  return h(
    'div',
    { class: 'rec-head' },
    h('div', null, h('h1', null, title), sub ? h('p', { class: 'muted rec-sub' }, sub) : null),
    actions.length ? h('div', { class: 'row' }, actions) : null,
  );
}

/** "Weekly Review" → "weekly-review": project and skill names are lowercase words joined by hyphens. */
export function slug(text) {
  return text
    .trim()
    .toLowerCase()
    .normalize('NFKD')
    .replace(/[\u0300-\u036f]/g, '')
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '');
}

/** A search snippet (`[match]` marks a hit) as text with the hits in <mark>. */
export function snippet(text) {
  const parts = String(text ?? '').split(/(\[[^\]]*\])/);
  return parts.map((p) => (/^\[[^\]]*\]$/.test(p) ? h('mark', null, p.slice(1, -1)) : p));
}

/**
 * Follows an open record: on every change of its kind, `editor.refresh()`; once the
 * record is gone (deleted here or on another device) `pane` says so and links back to
 * `#/<plural>`. `refreshed()` runs after each refresh that found it. Returns the
 * follow function, for other triggers (a project list reload).
 */
export function followRecord(ctx, kind, plural, editor, pane, { refreshed = null, live = true } = {}) {
  let gone = false;
  const follow = async () => {
    if (gone) return;
    const err = await editor.refresh();
    if (err?.status === 404 || err?.status === 410) {
      gone = true;
      replace(
        pane,
        h(
          'div',
          { class: 'card', 'data-test': `${kind}-gone` },
          h('p', null, `This ${kind} was deleted, here or on another device.`),
          h('a', { href: `#/${plural}` }, `Back to the ${plural}`),
        ),
      );
      return;
    }
    refreshed?.();
  };
  if (live) liveReload(ctx, [kind], follow);
  return follow;
}
