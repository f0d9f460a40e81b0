// pages/tasks.js: the Tasks page: the chosen project's tasks (every project's when
// none is chosen) with subtasks nested under their parent, a status filter, search,
// quick add, done checkboxes, and at `#/tasks/<id>` the task's editor (title, notes,
// status, due date, recurrence, project, parent, subtasks, delete).
//
// Owns: how tasks are ordered and filtered on screen, and what "done" means for a
// recurring task (its due date moves on by its interval; it stays open). Must never
// keep tasks between visits (it fetches what it shows, again on every live change) nor
// build markup from strings.
//
// data-test: "task-quick-add", "task-search", "task-filter-open", "task-filter-done",
// "task-filter-cancelled", "task-filter-all", "task-list", "task-item" (data-id,
// data-status; data-parent on a subtask), "task-done", "task-open", "task-due"
// (class "overdue" when late), "task-repeat", "task-add-subtask", "task-subtask-input",
// "task-empty", "task-detail", "task-gone", "task-title", "task-notes", "task-status",
// "task-due-date", "task-due-time", "task-due-clear", "task-repeat-count",
// "task-repeat-unit", "task-repeat-unit-word", "task-project", "task-parent", "task-subtasks", "save-state",
// "delete", "delete-confirm", "back", "error".

import * as api from '../api.js';
import { h, append, replace, debounce } from '../dom.js';
import { flatTree } from '../projects.js';
import { arrowNav, deleteButton, errorBox, errorText, fetchAll, field, liveReload, pageHead, projectLabel, props, snippet } from '../records/common.js';
import { formatDue, intervalText, isOverdue, nextDue, parseInterval, splitDue } from '../records/dates.js';
import { recordEditor } from '../records/editor.js';
import { saveState, splitView } from '../records/split.js';

const FILTERS = [
  ['open', 'Open', (s) => s === 'incomplete' || s === 'recurring'],
  ['done', 'Done', (s) => s === 'complete'],
  ['cancelled', 'Cancelled', (s) => s === 'cancelled'],
  ['all', 'All', () => true],
];

/** Per interval unit: the choice's name, and the unit after "every 1" and "every n". */
const REPEAT_WORDS = {
  d: ['Daily', 'day', 'days'],
  w: ['Weekly', 'week', 'weeks'],
  m: ['Monthly', 'month', 'months'],
  y: ['Yearly', 'year', 'years'],
};

const view = { filter: sessionStorage.getItem('hearth.tasks.filter') || 'open', query: '' };

const isOpen = (s) => s === 'incomplete' || s === 'recurring';

/** Open first, then by due date (none last), then the most recently changed. */
function byUrgency(a, b) {
  return (
    Number(isOpen(b.status)) - Number(isOpen(a.status)) ||
    (a.due ?? '\uffff').localeCompare(b.due ?? '\uffff') ||
    b.updated_at - a.updated_at
  );
}

/** Subtasks keep a calm order: open first, then due date, then name. */
function bySteps(a, b) {
  return (
    Number(isOpen(b.status)) - Number(isOpen(a.status)) ||
    (a.due ?? '\uffff').localeCompare(b.due ?? '\uffff') ||
    a.title.localeCompare(b.title)
  );
}

/**
 * Marks a task done or not. A recurring task is never "done": its due date moves on by
 * its interval. Answers a message for a toast, or null.
 */
async function setDone(id, done) {
  const task = await api.get(`/tasks/${id}`);
  if (done && task.status === 'recurring' && task.interval) {
    const due = nextDue(task.due, task.interval);
    await api.patch(`/tasks/${id}`, { due });
    return `“${task.name}” repeats ${intervalText(task.interval)}: next due ${formatDue(due)}.`;
  }
  const status = done ? 'complete' : task.interval ? 'recurring' : 'incomplete';
  await api.patch(`/tasks/${id}`, { status });
  return null;
}

function doneBox(task, ctx, after) {
  const box = h('input', {
    type: 'checkbox',
    class: 'task-check',
    checked: task.status === 'complete',
    disabled: task.status === 'cancelled',
    'aria-label': task.status === 'recurring' ? `Done this time: ${task.title ?? task.name}` : `Done: ${task.title ?? task.name}`,
    title: task.status === 'recurring' ? 'Done this time: moves the due date on' : null,
    'data-test': 'task-done',
    onchange: async () => {
      box.disabled = true;
      box.closest('[data-test=task-item]')?.classList.toggle('is-done', box.checked);
      try {
        const note = await setDone(task.id, box.checked);
        if (note) ctx.toast(note, 'ok');
      } catch (e) {
        box.checked = !box.checked;
        ctx.toast(`Could not change the task: ${errorText(e)}`, 'error');
      } finally {
        box.disabled = false;
        after?.();
      }
    },
  });
  return box;
}

function dueLabel(due, status) {
  if (!due) return null;
  const late = isOpen(status) && isOverdue(due);
  return h(
    'span',
    { class: ['task-due', late ? 'overdue' : null], 'data-test': 'task-due', title: late ? `Overdue: due ${due}` : `Due ${due}` },
    late ? `overdue · ${formatDue(due)}` : formatDue(due),
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
        await api.post('/tasks', { name, project: ctx.project });
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
        h('button', { 'aria-pressed': String(view.filter === key), 'data-test': `task-filter-${key}`, onclick: () => setFilter(key) }, label),
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
    const shown = tops
      .filter((t) => ok(t.status) || (kids.get(t.id) ?? []).some((k) => ok(k.status)))
      .sort(byUrgency);
    if (!shown.length) {
      replace(listBox, empty(all.length));
      return;
    }
    const open = all.filter((t) => isOpen(t.status)).length;
    const late = all.filter((t) => isOpen(t.status) && isOverdue(t.due)).length;
    replace(
      listBox,
      h('p', { class: 'muted rec-count' }, `${open} open`, late ? h('span', { class: 'overdue' }, ` · ${late} overdue`) : null),
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
      replace(listBox, h('p', { class: 'empty', 'data-test': 'task-empty' }, `No ${view.filter === 'all' ? '' : view.filter + ' '}task matches “${view.query}”.`));
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
      class: ['task', sub ? 'subtask' : null, context ? 'context' : null, t.status === 'complete' ? 'is-done' : null, t.id === openId ? 'active' : null],
      'data-test': 'task-item',
      dataset: { id: t.id, status: t.status, navRow: '', ...(t.parent ? { parent: t.parent } : {}) },
    });
    const addSub = !sub && !t.parent && !hit
      ? h('button', {
          class: 'icon task-add-sub',
          'aria-label': `Add a subtask to ${t.title}`,
          title: 'Add a subtask',
          'data-test': 'task-add-subtask',
          onclick: () => {
            subForm.hidden = false;
            subForm.querySelector('input').focus();
          },
        }, '+')
      : null;
    const subInput = h('input', {
      type: 'text',
      placeholder: 'Subtask, then Enter',
      'aria-label': `New subtask of ${t.title}`,
      'data-test': 'task-subtask-input',
      enterkeyhint: 'done',
      onkeydown: async (e) => {
        if (e.key === 'Escape') {
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
          await load();
        } catch (err) {
          ctx.toast(`Subtask not added: ${errorText(err)}`, 'error');
        }
      },
    });
    const subForm = h('div', { class: 'task-sub-add', hidden: true }, subInput);
    const meta = [
      t.status === 'recurring' ? h('span', { class: 'task-repeat', title: 'Repeats', 'data-test': 'task-repeat' }, '↻') : null,
      dueLabel(t.due, t.status),
      progress ? h('span', { class: 'muted', title: 'Subtasks done' }, progress) : null,
      t.status === 'cancelled' ? h('span', { class: 'muted' }, 'cancelled') : null,
      !ctx.project && t.project && !sub ? h('span', { class: 'muted task-project' }, projectLabel(ctx.projects, t.project)) : null,
    ].filter(Boolean);
    append(li, [
      h(
        'div',
        { class: 'task-row' },
        doneBox(t, ctx, load),
        h(
          'div',
          { class: 'task-main' },
          h('a', { class: 'task-title', href: `#/tasks/${encodeURIComponent(t.id)}`, 'data-test': 'task-open' }, t.title),
          hit ? h('div', { class: 'task-snippet muted' }, snippet(hit)) : null,
          meta.length ? h('div', { class: 'task-meta' }, meta) : null,
        ),
        addSub,
      ),
      subs.length ? h('ul', { class: 'subtasks' }, subs.map((k) => row(k, { sub: true }))) : null,
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
  const index = [...box.querySelectorAll('.task-title')].indexOf(a.closest('[data-nav-row]')?.querySelector('.task-title'));
  return () => {
    const same = id && box.querySelector(`[data-id="${CSS.escape(id)}"] [data-test="${CSS.escape(test ?? '')}"]`);
    if (same) return same.focus();
    const titles = box.querySelectorAll('.task-title');
    titles[Math.min(index, titles.length - 1)]?.focus();
  };
}

// ---------------------------------------------------------------- detail

async function detailPane(pane, ctx, id) {
  let task;
  try {
    task = await api.get(`/tasks/${encodeURIComponent(id)}`);
  } catch (e) {
    replace(pane, h('div', { class: 'card' }, errorBox(e), h('a', { href: '#/tasks' }, 'Back to the tasks')));
    return () => {};
  }
  const state = saveState();
  const editor = recordEditor({ path: `/tasks/${encodeURIComponent(id)}`, record: task, onState: state.show, onRecord: draw });

  const title = editor.text(
    'name',
    h('textarea', { class: 'task-title-input', rows: 1, 'aria-label': 'Task', 'data-test': 'task-title', placeholder: 'What to do' }),
  );
  // A title is one line: Enter leaves the field (saving it) instead of breaking it.
  title.addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && !e.isComposing) {
      e.preventDefault();
      title.blur();
    }
  });
  const notes = editor.text('notes', h('textarea', { rows: 6, 'aria-label': 'Notes', 'data-test': 'task-notes', placeholder: 'Notes, links, details…' }));

  const check = h('span', { class: 'task-detail-check' });
  const status = h(
    'select',
    {
      'data-test': 'task-status',
      onchange: () => patch({ status: status.value === 'open' ? (editor.record.interval ? 'recurring' : 'incomplete') : status.value }),
    },
    h('option', { value: 'open' }, 'To do'),
    h('option', { value: 'complete' }, 'Done'),
    h('option', { value: 'cancelled' }, 'Cancelled'),
  );
  editor.scalar('status', status, (s) => (status.value = isOpen(s) ? 'open' : s));

  const dueDate = h('input', { type: 'date', 'aria-label': 'Due date', 'data-test': 'task-due-date', onchange: () => saveDue() });
  const dueTime = h('input', { type: 'time', 'aria-label': 'Due time (optional)', 'data-test': 'task-due-time', onchange: () => saveDue() });
  const dueClear = h('button', { class: 'link', 'data-test': 'task-due-clear', onclick: () => patch({ due: null }) }, 'clear');
  const dueNote = h('span', { class: 'task-due-note' });
  editor.scalar('due', dueDate, (due) => {
    const d = splitDue(due);
    dueDate.value = d?.date ?? '';
    if (document.activeElement !== dueTime) dueTime.value = d?.time ?? '';
    dueTime.disabled = !d;
    dueTime.hidden = !d;
    dueClear.hidden = !d;
    replace(dueNote, dueLabel(due, editor.record.status));
  });
  function saveDue() {
    if (!dueDate.value) return patch({ due: null });
    patch({ due: dueTime.value ? `${dueDate.value}T${dueTime.value}` : dueDate.value });
  }

  const repeatCount = h('input', { type: 'number', min: 1, max: 999, class: 'repeat-count', 'aria-label': 'Repeat every how many', 'data-test': 'task-repeat-count', onchange: () => saveRepeat() });
  const repeatUnit = h(
    'select',
    { 'aria-label': 'Repeats', 'data-test': 'task-repeat-unit', onchange: () => saveRepeat() },
    h('option', { value: '' }, 'Never'),
    Object.entries(REPEAT_WORDS).map(([k, [name]]) => h('option', { value: k }, name)),
  );
  const repeatText = h('span', { 'data-test': 'task-repeat-unit-word' });
  const repeatEvery = h('span', { class: 'repeat-every' }, 'every', repeatCount, repeatText);
  editor.scalar('interval', repeatUnit, (iv) => {
    const p = parseInterval(iv);
    repeatUnit.value = p?.unit ?? '';
    if (document.activeElement !== repeatCount) repeatCount.value = p?.count ?? 1;
    repeatCount.disabled = !p;
    repeatEvery.hidden = !p;
    repeatText.textContent = p ? REPEAT_WORDS[p.unit][p.count === 1 ? 1 : 2] : '';
  });
  function saveRepeat() {
    const s = editor.record.status;
    if (!repeatUnit.value) return patch({ interval: null, status: s === 'recurring' ? 'incomplete' : s });
    const n = Math.max(1, Math.min(999, parseInt(repeatCount.value, 10) || 1));
    patch({ interval: `${n}${repeatUnit.value}`, status: s === 'incomplete' ? 'recurring' : s });
  }

  const project = h('select', { 'data-test': 'task-project', onchange: () => moveProject(project.value || null) });
  editor.scalar('project', project, (p) => {
    replace(
      project,
      h('option', { value: '' }, 'No project'),
      flatTree(ctx.projects).map(({ project: pr, depth }) => h('option', { value: pr.id }, '\u00a0\u00a0'.repeat(depth) + pr.name)),
      p && !ctx.projects.some((x) => x.id === p) ? h('option', { value: p }, projectLabel(ctx.projects, p)) : null,
    );
    project.value = p ?? '';
  });

  const parent = h('select', { 'data-test': 'task-parent', onchange: () => patch({ parent: parent.value || null }) });
  const parentHint = h('small', { class: 'muted rec-hint' });
  const subBox = h('div', { class: 'task-subtasks', 'data-test': 'task-subtasks' });
  let subtasks = [];

  async function loadRelatives() {
    const t = editor.record;
    try {
      subtasks = (await fetchAll('/tasks', { parent: t.id })).sort(bySteps);
      const sameProject = t.project ? await fetchAll('/tasks', { project: t.project }) : (await fetchAll('/tasks')).filter((x) => !x.project);
      const candidates = sameProject.filter((x) => !x.parent && x.id !== t.id && (isOpen(x.status) || x.id === t.parent));
      candidates.sort((a, b) => a.title.localeCompare(b.title));
      replace(
        parent,
        h('option', { value: '' }, 'None (a task of its own)'),
        candidates.map((c) => h('option', { value: c.id }, c.title)),
      );
      parent.value = t.parent ?? '';
      parent.disabled = subtasks.length > 0;
      parentHint.textContent = subtasks.length ? 'A task with subtasks cannot become a subtask.' : '';
      drawSubtasks();
    } catch (e) {
      replace(subBox, errorBox(e));
    }
  }

  function drawSubtasks() {
    const t = editor.record;
    if (t.parent) {
      replace(subBox);
      return;
    }
    const input = h('input', {
      type: 'text',
      placeholder: 'Add a subtask and press Enter',
      'aria-label': 'New subtask',
      'data-test': 'task-subtask-input',
      enterkeyhint: 'done',
      onkeydown: async (e) => {
        if (e.key !== 'Enter' || e.isComposing) return;
        e.preventDefault();
        const name = input.value.trim();
        if (!name) return;
        try {
          await api.post('/tasks', { name, parent: t.id, project: t.project });
          input.value = '';
          await loadRelatives();
          subBox.querySelector('[data-test=task-subtask-input]')?.focus();
        } catch (err) {
          ctx.toast(`Subtask not added: ${errorText(err)}`, 'error');
        }
      },
    });
    replace(
      subBox,
      h('h2', null, 'Subtasks'),
      subtasks.length
        ? arrowNav(
            h(
              'ul',
              { class: 'list task-list' },
              subtasks.map((s) =>
                h(
                  'li',
                  { class: ['task', 'subtask', s.status === 'complete' ? 'is-done' : null], 'data-test': 'task-item', dataset: { id: s.id, status: s.status, parent: s.parent, navRow: '' } },
                  h(
                    'div',
                    { class: 'task-row' },
                    doneBox(s, ctx, loadRelatives),
                    h(
                      'div',
                      { class: 'task-main' },
                      h('a', { class: 'task-title', href: `#/tasks/${encodeURIComponent(s.id)}`, 'data-test': 'task-open' }, s.title),
                      s.due ? h('div', { class: 'task-meta' }, dueLabel(s.due, s.status)) : null,
                    ),
                  ),
                ),
              ),
            ),
            '.task-title',
          )
        : h('p', { class: 'muted' }, 'Break it into steps: add them here.'),
      input,
    );
  }

  async function patch(body) {
    try {
      await editor.set(body);
    } catch {
      // The save state shows why; put the controls back as the task is.
      editor.reread();
    }
  }

  async function moveProject(to) {
    try {
      await editor.set({ project: to, parent: null });
      // Subtasks go where their parent goes.
      for (const s of subtasks) await api.patch(`/tasks/${s.id}`, { project: to });
      loadRelatives();
    } catch {
      editor.reread();
    }
  }

  const parentLink = h('p', { class: 'muted task-parent-link' });
  let shownParent;
  function draw(t) {
    replace(check, doneBox({ ...t, title: t.name }, ctx, () => editor.refresh()));
    if (t.parent === shownParent) return;
    shownParent = t.parent;
    if (t.parent) {
      api.get(`/tasks/${encodeURIComponent(t.parent)}`).then(
        (p) => replace(parentLink, 'Subtask of ', h('a', { href: `#/tasks/${encodeURIComponent(p.id)}` }, p.name)),
        () => replace(parentLink),
      );
    } else replace(parentLink);
  }

  replace(
    pane,
    h(
      'article',
      { class: 'card task-detail', 'data-test': 'task-detail', dataset: { id } },
      parentLink,
      h('div', { class: 'task-detail-head' }, check, title),
      h('div', { class: 'rec-status-line' }, state),
      props([
        ['Status', status],
        ['Due', h('div', { class: 'row' }, dueDate, dueTime, dueClear), dueNote],
        ['Repeats', h('div', { class: 'row' }, repeatUnit, repeatEvery)],
        ['Project', project],
        ['Subtask of', parent, parentHint],
      ]),
      field('Notes', notes),
      subBox,
      h(
        'div',
        { class: 'rec-actions' },
        deleteButton({
          what: task.name,
          warning: () => (subtasks.length ? `Its ${subtasks.length} subtask${subtasks.length > 1 ? 's' : ''} go too.` : null),
          onDelete: async () => {
            try {
              for (const s of subtasks) await api.del(`/tasks/${s.id}`);
              await api.del(`/tasks/${encodeURIComponent(id)}`);
              ctx.toast('Task deleted.', 'ok');
              ctx.navigate(editor.record.parent ? `tasks/${editor.record.parent}` : 'tasks');
            } catch (e) {
              ctx.toast(`Not deleted: ${errorText(e)}`, 'error');
            }
          },
        }),
      ),
    ),
  );
  draw(task);
  loadRelatives();

  let gone = false;
  liveReload(ctx, ['task'], async () => {
    if (gone) return;
    const err = await editor.refresh();
    if (err?.status === 404 || err?.status === 410) {
      gone = true;
      replace(pane, h('div', { class: 'card', 'data-test': 'task-gone' }, h('p', null, 'This task was deleted, here or on another device.'), h('a', { href: '#/tasks' }, 'Back to the tasks')));
      return;
    }
    loadRelatives();
  });
  ctx.on('projects', () => editor.reread());
  return () => editor.close();
}

export default {
  title: 'Tasks',
  async mount(el, ctx) {
    const id = ctx.route.id;
    const split = splitView({ open: !!id, backHref: '#/tasks', backLabel: 'Tasks' });
    el.append(split.root);
    // Resolves once both panes show their first data (the shell then marks the page ready).
    const [, cleanup] = await Promise.all([listPane(split.list, ctx, id), id ? detailPane(split.detail, ctx, id) : null]);
    return cleanup;
  },
};
