// chat/list.js: a project's conversations, newest first, as links, with "New chat",
// archive and restore.
//
// Owns: `GET /projects/{p}/conversations` (paged, and the archived ones on demand),
// `PATCH …/conversations/{c} {archived}`, a per-project cache so coming back draws at
// once, the marks on a conversation whose turn is running or waits for an approval, and
// arrow-key movement between the links. `data-test`: `conversation-list`, `new-chat`,
// `conversation` (`data-conversation` its name, `aria-current` on the open one),
// `archive-conversation`, `more-conversations`, `archived-conversations`,
// `restore-conversation`. Must never draw a title as markup: titles are the user's
// words, but may have come from any device.

import * as api from '../api.js';
import { h, replace, ago } from '../dom.js';

const PAGE = 30;
const cache = new Map(); // project -> {rows, total}

/** The link to a conversation. */
export function conversationHash(project, name) {
  return `chat/${encodeURIComponent(name)}?project=${encodeURIComponent(project)}`;
}

/**
 * The list for `project` with `current` (a name or null) marked. `onError(e)` hears of
 * failed calls; `onArchived(name, archived)` after an archive or restore; `onLoad()`
 * after the rows were (re)loaded.
 */
export function createList({ project, current, onError, onArchived, onLoad }) {
  const state = cache.get(project) ?? { rows: [], total: 0, loaded: false };
  cache.set(project, state);
  let archived = null; // rows, once the archived section is opened
  let waiting = new Set();
  let running = new Set();

  const ul = h('ul', { class: 'conv-list', 'aria-label': 'Conversations' });
  const more = h('div', { class: 'conv-more' });
  const archivedList = h('ul', { class: 'conv-list archived' });
  const archivedSection = h(
    'details',
    {
      class: 'conv-archived',
      'data-test': 'archived-conversations',
      ontoggle: () => {
        if (archivedSection.open && !archived) loadArchived().catch((e) => onError?.(e));
      },
    },
    h('summary', null, 'Archived'),
    archivedList,
  );
  const el = h(
    'nav',
    { class: 'convs', 'data-test': 'conversation-list', 'aria-label': 'Conversations' },
    h(
      'div',
      { class: 'convs-head' },
      h('a', { class: 'button primary new-chat', 'data-test': 'new-chat', href: `#/chat?project=${encodeURIComponent(project)}` }, '+ New chat'),
    ),
    h('div', { class: 'convs-scroll' }, ul, more, archivedSection),
  );

  // One Tab stop for the whole list (the open conversation's link); arrows move within.
  ul.addEventListener('keydown', (e) => {
    const links = [...ul.querySelectorAll('a.conv')];
    const i = links.indexOf(document.activeElement);
    if (i < 0) return;
    const to = { ArrowDown: i + 1, ArrowUp: i - 1, Home: 0, End: links.length - 1 }[e.key];
    const next = to === undefined ? null : links[to];
    if (!next) return;
    e.preventDefault();
    for (const a of links) a.tabIndex = a === next ? 0 : -1;
    next.focus();
  });

  function item(c, { inArchive = false, tabStop = false } = {}) {
    const active = c.name === current;
    const marks = [];
    if (running.has(c.name)) marks.push(h('span', { class: 'conv-mark running', title: 'Answering now' }, h('span', { class: 'sr-only' }, 'answering now')));
    if (waiting.has(c.name)) marks.push(h('span', { class: 'conv-mark waiting', title: 'Waiting for your approval' }, 'approval'));
    const action = inArchive
      ? h('button', { type: 'button', class: 'link conv-action', 'data-test': 'restore-conversation', onclick: () => setArchived(c.name, false) }, 'Restore')
      : h(
          'button',
          {
            type: 'button',
            class: 'icon conv-action',
            'data-test': 'archive-conversation',
            'aria-label': `Archive “${c.title ?? c.name}”`,
            // The open conversation's archive button is in the header, for the keyboard.
            tabindex: '-1',
            title: 'Archive',
            onclick: () => setArchived(c.name, true),
          },
          h('span', { class: 'ico ico-archive', 'aria-hidden': 'true' }),
        );
    return h(
      'li',
      { class: ['conv-item', active ? 'active' : null] },
      h(
        'a',
        {
          class: 'conv',
          href: `#/${conversationHash(project, c.name)}`,
          'data-test': 'conversation',
          'data-conversation': c.name,
          'aria-current': active ? 'page' : null,
          tabindex: inArchive || tabStop ? '0' : '-1',
        },
        h('span', { class: 'conv-title' }, c.title ?? c.name),
        h('span', { class: 'conv-meta' }, marks, ago(c.last_at)),
      ),
      action,
    );
  }

  function draw() {
    // Redrawing must not lose the reader's place in the list.
    const focused = el.contains(document.activeElement) ? document.activeElement : null;
    const focusName = focused?.closest('li')?.querySelector('a.conv')?.dataset.conversation;
    const focusTest = focused?.dataset.test;
    if (!state.loaded) {
      replace(ul, h('li', { class: 'conv-empty muted' }, 'Loading…'));
    } else if (!state.rows.length) {
      replace(ul, h('li', { class: 'conv-empty muted' }, 'No conversations yet.'));
    } else {
      const stop = state.rows.some((c) => c.name === current) ? current : state.rows[0].name;
      replace(ul, state.rows.map((c) => item(c, { tabStop: c.name === stop })));
    }
    replace(
      more,
      state.rows.length < state.total
        ? h('button', { type: 'button', class: 'link', 'data-test': 'more-conversations', onclick: () => loadMore() }, 'Show more')
        : null,
    );
    if (archived) {
      replace(archivedList, archived.length ? archived.map((c) => item(c, { inArchive: true })) : h('li', { class: 'conv-empty muted' }, 'None.'));
    }
    if (focusName && !el.contains(document.activeElement)) {
      const li = [...el.querySelectorAll('a.conv')].find((a) => a.dataset.conversation === focusName)?.closest('li');
      (li?.querySelector(`[data-test="${focusTest}"]`) ?? li?.querySelector('a.conv'))?.focus();
    }
  }

  async function fetchRows(offset, limit, isArchived = false) {
    return api.get(`/projects/${encodeURIComponent(project)}/conversations`, { limit, offset, archived: isArchived || null });
  }

  /** Reloads as many rows as are shown. */
  async function reload() {
    try {
      const page = await fetchRows(0, Math.max(PAGE, Math.min(state.rows.length, 500)));
      Object.assign(state, { rows: page.data, total: page.total, loaded: true });
      draw();
      // The open conversation is not among the live ones: perhaps it is archived.
      const missing = current && !state.rows.some((r) => r.name === current) && state.rows.length >= state.total;
      if (archived || missing) await loadArchived();
      if (missing && archived?.some((r) => r.name === current)) archivedSection.open = true;
      onLoad?.();
    } catch (e) {
      onError?.(e);
    }
  }

  async function loadMore() {
    try {
      const page = await fetchRows(state.rows.length, PAGE);
      const names = new Set(state.rows.map((r) => r.name));
      state.rows.push(...page.data.filter((r) => !names.has(r.name)));
      state.total = page.total;
      draw();
    } catch (e) {
      onError?.(e);
    }
  }

  async function loadArchived() {
    const page = await fetchRows(0, 100, true);
    archived = page.data;
    draw();
  }

  async function setArchived(name, value) {
    try {
      await api.patch(`/projects/${encodeURIComponent(project)}/conversations/${encodeURIComponent(name)}`, { archived: value });
    } catch (e) {
      onError?.(e);
      return;
    }
    onArchived?.(name, value);
    await reload();
  }

  draw();
  return {
    el,
    reload,
    setArchived,
    /** The row of `name`, if loaded: `{name, title, last_at, …}`. */
    row: (name) => state.rows.find((r) => r.name === name) ?? archived?.find((r) => r.name === name) ?? null,
    isArchived: (name) => !!archived?.some((r) => r.name === name),
    /** Marks conversations waiting for an approval and those answering now. */
    mark({ waiting: w = waiting, running: r = running }) {
      waiting = w;
      running = r;
      draw();
    },
    setCurrent(name) {
      current = name;
      draw();
    },
    focusCurrent() {
      (ul.querySelector('a[aria-current]') ?? ul.querySelector('a.conv'))?.focus();
    },
  };
}
