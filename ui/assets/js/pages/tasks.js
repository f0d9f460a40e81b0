// pages/tasks.js: the Tasks page: the chosen project's tasks (every project's when
// none is chosen) with subtasks nested under their parent, a status filter, search,
// quick add and done checkboxes; at `#/tasks/<id>` the task's editor
// (records/task-detail.js) opens beside the list.
//
// Owns: how tasks are ordered and filtered on screen, and the open subtask forms (with
// what is typed in them) across the redraw of a live change. Must never keep tasks
// between visits (it fetches what it shows, again on every live change) nor build
// markup from strings.
//
// data-test: "task-quick-add", "task-search", "task-filter-open", "task-filter-done",
// "task-filter-cancelled", "task-filter-all", "task-list", "task-item" (data-id,
// data-status; data-parent on a subtask), "task-done", "task-open", "task-due" (class
// "overdue" when late), "task-repeat", "task-add-subtask", "task-subtask-input",
// "task-empty", "back", "error"; the editor's are listed in records/task-detail.js.

import * as api from '../api.js';
import { h, append, replace, debounce } from '../dom.js';
import {
  arrowNav,
  errorBox,
  errorText,
  fetchAll,
  liveReload,
  pageHead,
  projectLabel,
  snippet,
} from '../records/common.js';
import { isOverdue } from '../records/dates.js';
import { splitPage } from '../records/split.js';
import { taskDetail } from '../records/task-detail.js';
import { bySteps, doneBox, dueLabel, isOpen, repeatLabel } from '../records/task-common.js';

const FILTERS = [
  ['open', 'Open', (s) => s === 'incomplete' || s === 'recurring'],
  ['done', 'Done', (s) => s === 'complete'],
  ['cancelled', 'Cancelled', (s) => s === 'cancelled'],
  ['all', 'All', () => true],
];

const view = { filter: sessionStorage.getItem('hearth.tasks.filter') || 'open', query: '' };

/** Open first, then by due date (none last), then the most recently changed. */
function byUrgency(a, b) {
  return (
    Number(isOpen(b.status)) - Number(isOpen(a.status)) ||
    (a.due ?? '\uffff').localeCompare(b.due ?? '\uffff') ||
    b.updated_at - a.updated_at
  );
}

// ---------------------------------------------------------------- list

function listPane(pane, ctx, openId) {
  const listBox = h('div', { class: 'task-list-box' });
  const quickErr = h('p', { class: 'rec-error', role: 'alert', hidden: true });
  const quick = h('input', {
    type: 'text',
    class: 'quick-add',
    placeholder: 'Add a task and press Enter',
    'aria-label': 'New task',
    'data-test': 'task-quick-add',
    enterkeyhint: 'done',
    autocomplete: 'off',
    onkeydown: async (e) => {
      if (e.key !== 'Enter' || e.isComposing) return;
      e.preventDefault();
      const name = quick.value.trim();
      if (!name) return;
      quick.disabled = true;
      try {
        await api.post('/tasks', { name, project: ctx.project ?? ctx.scope });
        quick.value = '';
        quickErr.hidden = true;
        if (view.filter !== 'open' && view.filter !== 'all') setFilter('open');
        await load();
      } catch (err) {
        quickErr.hidden = false;
        quickErr.textContent = `Not added: ${errorText(err)}`;
      } finally {
        quick.disabled = false;
        quick.focus();
      }
    },
  });
  const search = h('input', {
    type: 'search',
    placeholder: 'Search tasks',
    'aria-label': 'Search tasks',
    'data-test': 'task-search',
    value: view.query,
    oninput: debounce(() => {
      view.query = search.value.trim();
      load();
    }, 200),
  });
  const filterBar = h('div', { class: 'segmented', role: 'group', 'aria-label': 'Show' });
  function drawFilters() {
    replace(
      filterBar,
      FILTERS.map(([key, label]) =>
        h(
          'button',
          {
            'aria-pressed': String(view.filter === key),
            'data-test': `task-filter-${key}`,
            onclick: () => setFilter(key),
          },
          label,
        ),
      ),
    );
  }
  function setFilter(key) {
    view.filter = key;
    sessionStorage.setItem('hearth.tasks.filter', key);
    drawFilters();
    load();
  }
  drawFilters();

  let head = pageHead('Tasks', ctx.project ? projectLabel(ctx.projects, ctx.project) : 'All projects');
  replace(pane, head, quick, quickErr, h('div', { class: 'toolbar' }, search, filterBar), listBox);

  // Subtask forms open across redraws (a live change redraws the list), with what was
  // typed in them, by parent id.
  const drafts = new Map();

  let token = 0;
  async function load() {
    const mine = ++token;
    let rows;
    let hits = null;
    try {
      if (view.query) {
        hits = await api.get('/search', { q: view.query, kind: 'task', limit: 200 });
        rows = hits;
      } else {
        rows = await fetchAll('/tasks', { project: ctx.project });
      }
    } catch (e) {
      if (mine === token) replace(listBox, errorBox(e));
      return;
    }
    if (mine !== token) return;
    if (ctx.project) rows = rows.filter((t) => t.project === ctx.project);
    const keep = rememberFocus(listBox);
    if (hits) drawHits(rows);
    else drawTree(rows);
    keep();
  }

  const pass = () => FILTERS.find(([k]) => k === view.filter)[2];

  function drawTree(all) {
    const ok = pass();
    const byId = new Map(all.map((t) => [t.id, t]));
    const kids = new Map();
    const tops = [];
    for (const t of all) {
      if (t.parent && byId.has(t.parent)) {
        if (!kids.has(t.parent)) kids.set(t.parent, []);
        kids.get(t.parent).push(t);
      } else tops.push(t);
    }
    const shown = tops.filter((t) => ok(t.status) || (kids.get(t.id) ?? []).some((k) => ok(k.status))).sort(byUrgency);
    if (!shown.length) {
      replace(listBox, empty(all.length));
      return;
    }
    const open = all.filter((t) => isOpen(t.status)).length;
    const late = all.filter((t) => isOpen(t.status) && isOverdue(t.due)).length;
    replace(
      listBox,
      h(
        'p',
        { class: 'muted rec-count' },
        `${open} open`,
        late ? h('span', { class: 'overdue' }, ` · ${late} overdue`) : null,
      ),
      arrowNav(
        h(
          'ul',
          { class: 'list task-list', 'data-test': 'task-list' },
          shown.map((t) => {
            const subs = (kids.get(t.id) ?? []).sort(bySteps);
            return row(t, {
              context: !ok(t.status),
              subs: subs.filter((k) => ok(k.status)),
              progress: subs.length ? `${subs.filter((k) => k.status === 'complete').length}/${subs.length}` : null,
            });
          }),
        ),
        '.task-title',
      ),
    );
  }

  function drawHits(hits) {
    const ok = pass();
    const shown = hits.filter((t) => ok(t.status));
    if (!shown.length) {
      replace(
        listBox,
        h(
          'p',
          { class: 'empty', 'data-test': 'task-empty' },
          `No ${view.filter === 'all' ? '' : view.filter + ' '}task matches “${view.query}”.`,
        ),
      );
      return;
    }
    replace(
      listBox,
      arrowNav(
        h(
          'ul',
          { class: 'list task-list', 'data-test': 'task-list' },
          shown.map((t) => row(t, { hit: t.snippet })),
        ),
        '.task-title',
      ),
    );
  }

  function empty(total) {
    const where = ctx.project ? `in ${projectLabel(ctx.projects, ctx.project)}` : 'yet';
    const text =
      total === 0
        ? `No tasks ${where}. Type one above and press Enter.`
        : view.filter === 'open'
          ? 'Nothing left to do here. Add a task above, or look at the done ones.'
          : view.filter === 'done'
            ? 'No finished tasks here yet.'
            : 'No cancelled tasks here.';
    return h('p', { class: 'empty', 'data-test': 'task-empty' }, text);
  }

  function row(t, { context = false, subs = [], progress = null, hit = null, sub = false }) {
    const li = h('li', {
      class: [
        'task',
        sub ? 'subtask' : null,
        context ? 'context' : null,
        t.status === 'complete' ? 'is-done' : null,
        t.id === openId ? 'active' : null,
      ],
      'data-test': 'task-item',
      dataset: { id: t.id, status: t.status, navRow: '', ...(t.parent ? { parent: t.parent } : {}) },
    });
    const addSub =
      !sub && !t.parent && !hit
        ? h(
            'button',
            {
              class: 'icon task-add-sub',
              'aria-label': `Add a subtask to ${t.title}`,
              title: 'Add a subtask',
              'data-test': 'task-add-subtask',
              onclick: () => {
                subForm.hidden = false;
                if (!drafts.has(t.id)) drafts.set(t.id, '');
                subForm.querySelector('input').focus();
              },
            },
            '+',
          )
        : null;
    const subInput = h('input', {
      type: 'text',
      value: drafts.get(t.id) ?? '',
      oninput: () => drafts.set(t.id, subInput.value),
      placeholder: 'Subtask, then Enter',
      'aria-label': `New subtask of ${t.title}`,
      'data-test': 'task-subtask-input',
      enterkeyhint: 'done',
      onkeydown: async (e) => {
        if (e.key === 'Escape') {
          drafts.delete(t.id);
          subForm.hidden = true;
          addSub?.focus();
          return;
        }
        if (e.key !== 'Enter' || e.isComposing) return;
        e.preventDefault();
        const name = subInput.value.trim();
        if (!name) return;
        try {
          await api.post('/tasks', { name, parent: t.id, project: t.project });
          subInput.value = '';
          drafts.set(t.id, '');
          await load();
        } catch (err) {
          ctx.toast(`Subtask not added: ${errorText(err)}`, 'error');
        }
      },
    });
    const subForm = h('div', { class: 'task-sub-add', hidden: !drafts.has(t.id) }, subInput);
    const meta = [
      repeatLabel(t),
      dueLabel(t.due, t.status),
      progress ? h('span', { class: 'muted', title: 'Subtasks done' }, progress) : null,
      t.status === 'cancelled' ? h('span', { class: 'muted' }, 'cancelled') : null,
      !ctx.project && t.project && !sub
        ? h('span', { class: 'muted task-project' }, projectLabel(ctx.projects, t.project))
        : null,
    ].filter(Boolean);
    append(li, [
      h(
        'div',
        { class: 'task-row' },
        doneBox(t, ctx, load),
        h(
          'div',
          { class: 'task-main' },
          h(
            'a',
            { class: 'task-title', href: `#/tasks/${encodeURIComponent(t.id)}`, 'data-test': 'task-open' },
            t.title,
          ),
          hit ? h('div', { class: 'task-snippet muted' }, snippet(hit)) : null,
          meta.length ? h('div', { class: 'task-meta' }, meta) : null,
        ),
        addSub,
      ),
      subs.length
        ? h(
            'ul',
            { class: 'subtasks' },
            subs.map((k) => row(k, { sub: true })),
          )
        : null,
      addSub ? subForm : null,
    ]);
    return li;
  }

  liveReload(ctx, ['task'], load);
  ctx.on('project', () => {
    const next = pageHead('Tasks', ctx.project ? projectLabel(ctx.projects, ctx.project) : 'All projects');
    head.replaceWith(next);
    head = next;
    load();
  });
  ctx.on('projects', load);
  return load();
}

/** Keeps keyboard focus on the same control of the same task across a redraw. */
function rememberFocus(box) {
  const a = document.activeElement;
  if (!box.contains(a)) return () => {};
  const id = a.closest('[data-id]')?.dataset.id;
  const test = a.dataset.test;
  const index = [...box.querySelectorAll('.task-title')].indexOf(
    a.closest('[data-nav-row]')?.querySelector('.task-title'),
  );
  return () => {
    const same = id && box.querySelector(`[data-id="${CSS.escape(id)}"] [data-test="${CSS.escape(test ?? '')}"]`);
    if (same) return same.focus();
    const titles = box.querySelectorAll('.task-title');
    titles[Math.min(index, titles.length - 1)]?.focus();
  };
}

export default splitPage('Tasks', 'tasks', listPane, taskDetail);
