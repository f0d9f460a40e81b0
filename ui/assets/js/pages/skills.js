// pages/skills.js: the Skills page: the instructions the agent can load, those of the
// chosen project and those for every project (all when none is chosen), each with its
// description (from the listed rows), with search, quick add, and at `#/skills/<id>`
// the skill's editor (name, description, where it is available: every project or one,
// the Markdown body beside its rendered preview) and delete.
//
// Owns: which skills a project sees (its own and the ones without a project) and the
// body's preview. Must never render the body other than through markdown.js `render()`
// (a skill written by a peer or the agent must never run script here) nor build
// markup from strings.
//
// data-test: "skill-quick-add", "skill-search", "skill-list", "skill-item" (data-id),
// "skill-open", "skill-empty", "skill-detail", "skill-gone", "skill-name",
// "skill-description", "skill-body", "skill-preview", "skill-tab-edit",
// "skill-tab-preview", "skill-project", "save-state", "delete", "delete-confirm",
// "back", "error".

import * as api from '../api.js';
import { h, replace, debounce } from '../dom.js';
import { render } from '../markdown.js';
import { flatTree } from '../projects.js';
import {
  arrowNav,
  deleteButton,
  errorBox,
  errorText,
  fetchAll,
  followRecord,
  liveReload,
  pageHead,
  projectLabel,
  props,
  slug,
  snippet,
} from '../records/common.js';
import { recordEditor } from '../records/editor.js';
import { saveState, splitPage } from '../records/split.js';

const view = { query: '' };

const scopeText = (ctx, project) => (project ? `Only in ${projectLabel(ctx.projects, project)}` : 'In every project');

// ---------------------------------------------------------------- list

function listPane(pane, ctx, openId) {
  const listBox = h('div');
  const quickErr = h('p', { class: 'rec-error', role: 'alert', hidden: true });
  const quickHint = h('small', { class: 'muted rec-hint' });
  const quick = h('input', {
    type: 'text',
    class: 'quick-add',
    placeholder: 'New skill: type a name and press Enter',
    'aria-label': 'New skill’s name',
    'aria-describedby': 'skill-quick-hint',
    'data-test': 'skill-quick-add',
    enterkeyhint: 'done',
    autocomplete: 'off',
    oninput: () => drawHint(),
    onkeydown: async (e) => {
      if (e.key !== 'Enter' || e.isComposing) return;
      e.preventDefault();
      const name = slug(quick.value);
      if (!name) return;
      quick.disabled = true;
      try {
        const s = await api.post('/skills', { name, project: ctx.project ?? ctx.scope });
        quick.value = '';
        ctx.navigate(`skills/${s.id}?new=1`);
      } catch (err) {
        quickErr.hidden = false;
        quickErr.textContent = `Not added: ${errorText(err)}`;
        quick.disabled = false;
        quick.focus();
      }
    },
  });
  quickHint.id = 'skill-quick-hint';
  function drawHint() {
    const name = slug(quick.value);
    const where = ctx.project ? `for ${projectLabel(ctx.projects, ctx.project)} only` : 'for every project';
    quickHint.textContent =
      name && name !== quick.value.trim()
        ? `Will be named “${name}”, ${where}.`
        : `Names are lowercase words joined by hyphens; a new skill is ${where}.`;
  }
  drawHint();
  const search = h('input', {
    type: 'search',
    placeholder: 'Search skills',
    'aria-label': 'Search skills',
    'data-test': 'skill-search',
    value: view.query,
    oninput: debounce(() => {
      view.query = search.value.trim();
      load();
    }, 200),
  });
  let head = pageHead(
    'Skills',
    ctx.project ? `For ${projectLabel(ctx.projects, ctx.project)}, and for every project` : 'Every project',
  );
  replace(pane, head, quick, quickHint, quickErr, h('div', { class: 'toolbar' }, search), listBox);

  let token = 0;
  async function load() {
    const mine = ++token;
    let rows;
    let hits = null;
    try {
      rows = await fetchAll('/skills');
      if (ctx.project) rows = rows.filter((r) => !r.project || r.project === ctx.project);
      if (view.query)
        hits = new Map((await api.get('/search', { q: view.query, kind: 'skill', limit: 200 })).map((x) => [x.id, x]));
    } catch (e) {
      if (mine === token) replace(listBox, errorBox(e));
      return;
    }
    if (mine !== token) return;
    let shown = hits ? rows.filter((r) => hits.has(r.id)) : rows;
    shown = [...shown].sort((a, b) => a.title.localeCompare(b.title));
    const focused = document.activeElement?.closest?.('[data-test=skill-item]')?.dataset.id;
    if (!shown.length) {
      const text = !rows.length
        ? 'No skills yet. A skill is instructions the agent can follow on request, like a weekly review. Name one above and press Enter.'
        : `No skill matches “${view.query}”.`;
      replace(listBox, h('p', { class: 'empty', 'data-test': 'skill-empty' }, text));
      return;
    }
    replace(
      listBox,
      arrowNav(
        h(
          'ul',
          { class: 'list skill-list', 'data-test': 'skill-list' },
          shown.map((r) => {
            const hit = hits?.get(r.id)?.snippet;
            return h(
              'li',
              {
                class: r.id === openId ? 'active' : null,
                'data-test': 'skill-item',
                dataset: { id: r.id, navRow: '' },
              },
              h(
                'a',
                { class: 'skill-name', href: `#/skills/${encodeURIComponent(r.id)}`, 'data-test': 'skill-open' },
                r.title,
              ),
              r.description ? h('div', { class: 'skill-desc' }, r.description) : null,
              hit ? h('div', { class: 'skill-desc' }, snippet(hit)) : null,
              h('div', { class: 'meta' }, scopeText(ctx, r.project)),
            );
          }),
        ),
        '.skill-name',
      ),
    );
    if (focused) listBox.querySelector(`[data-id="${CSS.escape(focused)}"] .skill-name`)?.focus();
  }

  liveReload(ctx, ['skill'], load);
  ctx.on('project', () => {
    const next = pageHead(
      'Skills',
      ctx.project ? `For ${projectLabel(ctx.projects, ctx.project)}, and for every project` : 'Every project',
    );
    head.replaceWith(next);
    head = next;
    drawHint();
    load();
  });
  return load();
}

// ---------------------------------------------------------------- detail

async function detailPane(pane, ctx, id) {
  let skill;
  try {
    skill = await api.get(`/skills/${encodeURIComponent(id)}`);
  } catch (e) {
    replace(pane, h('div', { class: 'card' }, errorBox(e), h('a', { href: '#/skills' }, 'Back to the skills')));
    return () => {};
  }
  const state = saveState();
  const preview = h('div', {
    class: 'skill-preview',
    'data-test': 'skill-preview',
    'aria-label': 'Preview',
    role: 'region',
    tabindex: '0',
  });
  const editor = recordEditor({
    path: `/skills/${encodeURIComponent(id)}`,
    record: skill,
    onState: state.show,
    onRecord: () => drawPreview(),
  });
  const scope = h('select', {
    'aria-label': 'Available in',
    'data-test': 'skill-project',
    onchange: async () => {
      try {
        await editor.set({ project: scope.value || null });
      } catch {
        // The save state says why; show where the skill still is.
        editor.reread();
      }
    },
  });
  const drawScope = (p) => {
    replace(
      scope,
      ctx.scope ? null : h('option', { value: '' }, 'Every project'),
      flatTree(ctx.projects).map(({ project: pr, depth }) =>
        h('option', { value: pr.id }, '\u00a0\u00a0'.repeat(depth) + pr.name),
      ),
      p && !ctx.projects.some((x) => x.id === p) ? h('option', { value: p }, projectLabel(ctx.projects, p)) : null,
    );
    scope.value = p ?? '';
  };
  editor.scalar('project', scope, drawScope);

  const name = h('input', {
    type: 'text',
    class: 'skill-name-input',
    'aria-label': 'Name',
    'aria-describedby': 'skill-name-hint',
    autocomplete: 'off',
    spellcheck: 'false',
    'data-test': 'skill-name',
    onchange: async () => {
      try {
        await editor.set({ name: name.value.trim() });
      } catch {
        // The save state says why; the field keeps what was typed so it can be fixed.
      }
    },
    onkeydown: (e) => {
      if (e.key === 'Enter') name.blur();
    },
  });
  editor.scalar('name', name, (v) => (name.value = v ?? ''));
  const description = editor.text(
    'description',
    h('textarea', {
      rows: 2,
      'aria-label': 'Description',
      'data-test': 'skill-description',
      placeholder: 'One line: when should the agent use it?',
    }),
  );
  const body = editor.text(
    'body',
    h('textarea', {
      rows: 16,
      'aria-label': 'Instructions (Markdown)',
      'data-test': 'skill-body',
      placeholder: 'The instructions, in Markdown. $ARGUMENTS stands for what the skill is called with.',
      spellcheck: 'true',
    }),
  );
  const drawPreview = () =>
    replace(preview, body.value.trim() ? render(body.value) : h('p', { class: 'muted' }, 'The preview shows here.'));
  body.addEventListener('input', debounce(drawPreview, 120));

  const wrap = h('div', { class: 'skill-body-wrap', dataset: { show: 'edit' } }, body, preview);
  const tabs = h('div', { class: 'segmented skill-tabs', role: 'group', 'aria-label': 'Show' });
  const showTab = (which) => {
    wrap.dataset.show = which;
    for (const b of tabs.children) b.setAttribute('aria-pressed', String(b.dataset.tab === which));
  };
  tabs.append(
    h(
      'button',
      {
        'data-test': 'skill-tab-edit',
        dataset: { tab: 'edit' },
        'aria-pressed': 'true',
        onclick: () => showTab('edit'),
      },
      'Edit',
    ),
    h(
      'button',
      {
        'data-test': 'skill-tab-preview',
        dataset: { tab: 'preview' },
        'aria-pressed': 'false',
        onclick: () => showTab('preview'),
      },
      'Preview',
    ),
  );

  replace(
    pane,
    h(
      'article',
      { class: 'card skill-detail', 'data-test': 'skill-detail', dataset: { id } },
      h(
        'div',
        { class: 'field' },
        name,
        h(
          'small',
          { class: 'muted rec-hint', id: 'skill-name-hint' },
          'Lowercase words joined by hyphens; the agent calls the skill by this name.',
        ),
      ),
      h('div', { class: 'rec-status-line' }, state),
      props([
        ['Description', description],
        ['Available in', scope],
      ]),
      h('div', { class: 'rec-head' }, h('h2', null, 'Instructions'), tabs),
      wrap,
      h(
        'div',
        { class: 'rec-actions' },
        deleteButton({
          what: skill.name,
          onDelete: async () => {
            try {
              await api.del(`/skills/${encodeURIComponent(id)}`);
              ctx.toast('Skill deleted.', 'ok');
              ctx.navigate('skills');
            } catch (e) {
              ctx.toast(`Not deleted: ${errorText(e)}`, 'error');
            }
          },
        }),
      ),
    ),
  );
  drawPreview();
  if (ctx.route.params.get('new')) description.focus();

  followRecord(ctx, 'skill', 'skills', editor, pane);
  ctx.on('projects', () => drawScope(editor.record.project));
  return () => editor.close();
}

export default splitPage('Skills', 'skills', listPane, detailPane);
