// pages/projects.js: the Projects page: the project tree with create (at the top or
// under a parent), and at `#/projects/<id>` one project's rename, move, new
// subproject, instructions for the agent, archive or restore, and delete; archived
// projects are listed apart.
//
// Owns: the forms that change the tree. The tree itself comes from the shell
// (`ctx.projects`, drawn with projects.js `flatTree`); after every change the page
// calls `ctx.reloadProjects()`, and redraws when the shell says the projects changed.
// Refusals (a cycle, the hub's `general`, a bad name) are shown as the API words them.
// Must never build markup from strings.
//
// data-test: "project-new-name", "project-new-parent", "project-create",
// "project-tree", "project-item" (data-id), "project-open", "project-current",
// "project-archived-list", "project-archived-item" (data-id), "project-empty",
// "project-detail", "project-gone", "project-use", "project-rename-input",
// "project-rename", "project-move-parent", "project-move", "project-sub-name",
// "project-sub-create", "project-instructions", "project-archive",
// "project-unarchive", "project-said", "save-state", "delete", "delete-confirm",
// "back", "error".

import * as api from '../api.js';
import { h, replace } from '../dom.js';
import { flatTree, projectPath } from '../projects.js';
import { arrowNav, deleteButton, errorBox, errorText, fetchAll, followRecord, pageHead, slug } from '../records/common.js';
import { recordEditor } from '../records/editor.js';
import { saveState, splitPage } from '../records/split.js';

/**
 * A `<select>` of possible parents: "Top level" (unless `topLevel` is false: a device
 * paired for one project may not put anything there), then the tree, without `except`.
 */
function parentSelect(projects, selected, { except = null, topLevel = true, ...attrs } = {}) {
  return h(
    'select',
    attrs,
    topLevel ? h('option', { value: '' }, 'Top level') : null,
    flatTree(projects)
      .filter(({ project }) => project.id !== except)
      .map(({ project, depth }) =>
        h(
          'option',
          { value: project.id, selected: project.id === selected },
          '\u00a0\u00a0'.repeat(depth) + project.name,
        ),
      ),
  );
}

/** A form row: an input, a button, and a line under them for the outcome. */
function action({ input, button, onSubmit }) {
  const said = h('div', { class: 'proj-said', 'aria-live': 'polite' });
  const run = async () => {
    button.disabled = true;
    replace(said);
    try {
      const ok = await onSubmit();
      if (ok) replace(said, h('p', { class: 'muted', 'data-test': 'project-said' }, ok));
    } catch (e) {
      replace(said, errorBox(e));
    } finally {
      button.disabled = false;
    }
  };
  button.addEventListener('click', run);
  input?.addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && !e.isComposing) {
      e.preventDefault();
      run();
    }
  });
  return said;
}

/** What a typed name becomes, said under the field when it differs. */
function nameHint(input) {
  const hint = h('small', { class: 'muted rec-hint' });
  const draw = () => {
    const s = slug(input.value);
    hint.textContent =
      s && s !== input.value.trim() ? `Will be named “${s}”.` : 'Lowercase words joined by hyphens, like home-garden.';
  };
  input.addEventListener('input', draw);
  draw();
  return hint;
}

// ---------------------------------------------------------------- tree

function treePane(pane, ctx, openId) {
  const name = h('input', {
    type: 'text',
    placeholder: 'New project name',
    'aria-label': 'New project name',
    'data-test': 'project-new-name',
    autocomplete: 'off',
  });
  const create = h('button', { class: 'primary', 'data-test': 'project-create' }, 'Create');
  let parent = parentSelect(ctx.projects, null, { topLevel: !ctx.scope, 'aria-label': 'Under', 'data-test': 'project-new-parent' });
  const parentBox = h('span', null, parent);
  const said = action({
    input: name,
    button: create,
    onSubmit: async () => {
      const n = slug(name.value);
      if (!n) {
        name.focus();
        return 'Type a name first.';
      }
      const p = await api.post('/projects', { name: n, parent: parent.value || null });
      name.value = '';
      name.dispatchEvent(new Event('input'));
      await ctx.reloadProjects();
      ctx.navigate(`projects/${p.id}`);
      return null;
    },
  });
  const treeBox = h('div');
  const archivedBox = h('div');

  function drawTree() {
    const keepParent = parent.value;
    const next = parentSelect(ctx.projects, keepParent, { topLevel: !ctx.scope, 'aria-label': 'Under', 'data-test': 'project-new-parent' });
    parent.replaceWith(next);
    parent = next;
    const rows = flatTree(ctx.projects);
    const focused = document.activeElement?.closest?.('[data-test=project-item]')?.dataset.id;
    replace(
      treeBox,
      rows.length
        ? arrowNav(
            h(
              'ul',
              { class: 'list proj-tree', 'data-test': 'project-tree', 'aria-label': 'Projects' },
              rows.map(({ project: p, depth }) =>
                h(
                  'li',
                  {
                    class: p.id === openId ? 'active' : null,
                    'data-test': 'project-item',
                    dataset: { id: p.id, navRow: '' },
                  },
                  depth
                    ? h('span', { class: 'proj-indent', 'aria-hidden': 'true' }, '  '.repeat(depth - 1) + '└ ')
                    : null,
                  h(
                    'a',
                    { class: 'proj-link', href: `#/projects/${encodeURIComponent(p.id)}`, 'data-test': 'project-open' },
                    p.name,
                  ),
                  p.id === ctx.project
                    ? h(
                        'span',
                        { class: 'pill ok', 'data-test': 'project-current', title: 'The project you are working in' },
                        'current',
                      )
                    : null,
                ),
              ),
            ),
            '.proj-link',
          )
        : h(
            'p',
            { class: 'empty', 'data-test': 'project-empty' },
            'No projects yet. Name one above and press Enter: notes, tasks and skills can then live in it.',
          ),
    );
    if (focused) treeBox.querySelector(`[data-id="${CSS.escape(focused)}"] .proj-link`)?.focus();
  }

  async function drawArchived() {
    let archived;
    try {
      archived = (await fetchAll('/projects', { archived: true })).map((p) => ({
        ...p,
        name: p.title,
        archived: false,
      }));
    } catch (e) {
      replace(archivedBox, h('h2', null, 'Archived'), errorBox(e));
      return;
    }
    if (!archived.length) {
      replace(archivedBox);
      return;
    }
    // Archived ones are drawn as a tree of their own; a live parent makes one top-level.
    replace(
      archivedBox,
      h('h2', null, 'Archived'),
      arrowNav(
        h(
          'ul',
          {
            class: 'list proj-tree proj-archived',
            'data-test': 'project-archived-list',
            'aria-label': 'Archived projects',
          },
          flatTree(archived).map(({ project: p, depth }) =>
            h(
              'li',
              {
                class: p.id === openId ? 'active' : null,
                'data-test': 'project-archived-item',
                dataset: { id: p.id, navRow: '' },
              },
              depth ? h('span', { class: 'proj-indent', 'aria-hidden': 'true' }, '  '.repeat(depth - 1) + '└ ') : null,
              h(
                'a',
                { class: 'proj-link', href: `#/projects/${encodeURIComponent(p.id)}`, 'data-test': 'project-open' },
                p.name,
              ),
              h(
                'button',
                {
                  'data-test': 'project-unarchive',
                  'aria-label': `Restore ${p.name}`,
                  onclick: async (e) => {
                    e.currentTarget.disabled = true;
                    try {
                      await api.patch(`/projects/${encodeURIComponent(p.id)}`, { archived: false });
                      ctx.toast(`${p.name} is back.`, 'ok');
                      await ctx.reloadProjects();
                    } catch (err) {
                      ctx.toast(`Not restored: ${errorText(err)}`, 'error');
                      e.currentTarget.disabled = false;
                    }
                  },
                },
                'Restore',
              ),
            ),
          ),
        ),
        '.proj-link',
      ),
    );
  }

  replace(
    pane,
    pageHead(
      'Projects',
      'Projects hold notes, tasks and skills, and the agent’s instructions for them. Open one to rename, move, archive or delete it.',
    ),
    h('div', { class: 'proj-new' }, name, parentBox, create),
    nameHint(name),
    said,
    treeBox,
    archivedBox,
  );
  drawTree();
  const ready = drawArchived();
  ctx.on('projects', () => {
    drawTree();
    drawArchived();
  });
  ctx.on('project', drawTree);
  return ready;
}

// ---------------------------------------------------------------- one project

async function detailPane(pane, ctx, id) {
  let project;
  try {
    project = await api.get(`/projects/${encodeURIComponent(id)}`);
  } catch (e) {
    replace(pane, h('div', { class: 'card' }, errorBox(e), h('a', { href: '#/projects' }, 'Back to the projects')));
    return () => {};
  }
  const state = saveState();
  const heading = h('h2', { class: 'proj-title' });
  const path = h('p', { class: 'muted proj-path' });
  const badges = h('span', { class: 'row' });
  const editor = recordEditor({
    path: `/projects/${encodeURIComponent(id)}`,
    record: project,
    onState: state.show,
    onRecord: () => drawHead(),
  });

  /**
   * A change to the tree (rename, move, archive): its refusal is said beside the form
   * that asked, not in the instructions' save state, so it skips the editor.
   */
  async function change(body) {
    await editor.flush();
    await api.patch(`/projects/${encodeURIComponent(id)}`, body);
    await editor.refresh();
    await ctx.reloadProjects();
  }

  // Rename
  const renameInput = h('input', {
    type: 'text',
    'aria-label': 'New name',
    'data-test': 'project-rename-input',
    autocomplete: 'off',
    value: project.name,
  });
  const renameButton = h('button', { 'data-test': 'project-rename' }, 'Rename');
  const renameSaid = action({
    input: renameInput,
    button: renameButton,
    onSubmit: async () => {
      const n = slug(renameInput.value);
      if (!n || n === editor.record.name) return null;
      await change({ name: n });
      return `Renamed to ${n}.`;
    },
  });

  // Move
  let moveSelect = parentSelect(ctx.projects, project.parent, {
    topLevel: !ctx.scope,
    except: id,
    'aria-label': 'New parent',
    'data-test': 'project-move-parent',
  });
  const moveBox = h('span', null, moveSelect);
  const moveButton = h('button', { 'data-test': 'project-move' }, 'Move');
  const moveSaid = action({
    button: moveButton,
    onSubmit: async () => {
      const to = moveSelect.value || null;
      if (to === (editor.record.parent ?? null)) return null;
      await change({ parent: to });
      return to ? `Moved under ${projectPath(ctx.projects, to)}.` : 'Moved to the top level.';
    },
  });

  // New subproject
  const subName = h('input', {
    type: 'text',
    placeholder: 'Subproject name',
    'aria-label': 'New subproject name',
    'data-test': 'project-sub-name',
    autocomplete: 'off',
  });
  const subButton = h('button', { 'data-test': 'project-sub-create' }, 'Create');
  const subSaid = action({
    input: subName,
    button: subButton,
    onSubmit: async () => {
      const n = slug(subName.value);
      if (!n) return 'Type a name first.';
      await api.post('/projects', { name: n, parent: id });
      subName.value = '';
      subName.dispatchEvent(new Event('input'));
      await ctx.reloadProjects();
      return `Created ${n}.`;
    },
  });

  const instructions = editor.text(
    'instructions',
    h('textarea', {
      rows: 8,
      'aria-label': 'Instructions for the agent',
      'data-test': 'project-instructions',
      placeholder: 'What the agent should know when it works here: who it is for, the tone, what to avoid…',
    }),
  );

  const archiveBox = h('span');
  const archiveSaid = h('div', { 'aria-live': 'polite' });
  function drawArchive() {
    const archived = editor.record.archived;
    replace(
      archiveBox,
      h(
        'button',
        {
          'data-test': archived ? 'project-unarchive' : 'project-archive',
          onclick: async (e) => {
            e.currentTarget.disabled = true;
            replace(archiveSaid);
            try {
              if (!archived && ctx.project === id) ctx.setProject(null);
              await change({ archived: !archived });
              ctx.toast(
                archived
                  ? `${editor.record.name} is back.`
                  : `${editor.record.name} is archived: hidden from the side bar, kept with everything in it.`,
                'ok',
              );
            } catch (err) {
              replace(archiveSaid, errorBox(err));
            } finally {
              drawArchive();
            }
          },
        },
        archived ? 'Restore' : 'Archive',
      ),
    );
  }

  const deleteSaid = h('div', { 'aria-live': 'polite' });
  const subtreeSize = () => {
    const under = new Set([id]);
    let grew = true;
    while (grew) {
      grew = false;
      for (const p of ctx.projects)
        if (p.parent && under.has(p.parent) && !under.has(p.id)) (under.add(p.id), (grew = true));
    }
    return under.size - 1;
  };

  function drawHead() {
    const p = editor.record;
    heading.textContent = p.name;
    path.textContent = p.parent
      ? `in ${projectPath(ctx.projects, p.parent) || 'a project not on this device'}`
      : 'at the top level';
    replace(
      badges,
      p.archived ? h('span', { class: 'pill muted' }, 'archived') : null,
      ctx.project === id
        ? h('span', { class: 'pill ok', 'data-test': 'project-current' }, 'current')
        : p.archived
          ? null
          : h(
              'button',
              { class: 'primary', 'data-test': 'project-use', onclick: () => ctx.setProject(id) },
              'Work in this project',
            ),
    );
    if (document.activeElement !== renameInput) renameInput.value = p.name;
    if (document.activeElement !== moveSelect) {
      const next = parentSelect(ctx.projects, p.parent, {
        topLevel: !ctx.scope,
        except: id,
        'aria-label': 'New parent',
        'data-test': 'project-move-parent',
      });
      moveSelect.replaceWith(next);
      moveSelect = next;
    }
    drawArchive();
  }

  replace(
    pane,
    h(
      'article',
      { class: 'card proj-detail', 'data-test': 'project-detail', dataset: { id } },
      h('div', { class: 'rec-head' }, h('div', null, heading, path), badges),
      h(
        'p',
        { class: 'row' },
        h('a', { href: '#/tasks', onclick: () => ctx.setProject(id) }, 'Its tasks'),
        h('a', { href: '#/notes', onclick: () => ctx.setProject(id) }, 'Its notes'),
        h('a', { href: '#/skills', onclick: () => ctx.setProject(id) }, 'Its skills'),
      ),
      h(
        'section',
        { class: 'proj-section' },
        h('h2', null, 'Instructions for the agent'),
        instructions,
        h('div', { class: 'rec-status-line' }, state),
      ),
      // A device paired for this project may not rename or move it (the hub refuses).
      ctx.scope === id
        ? h('p', { class: 'muted', 'data-test': 'project-scope-root' }, 'This device was paired for this project: it is renamed or moved from the hub.')
        : [
            h(
              'section',
              { class: 'proj-section' },
              h('h2', null, 'Rename'),
              h('div', { class: 'row' }, renameInput, renameButton),
              nameHint(renameInput),
              renameSaid,
            ),
            h(
              'section',
              { class: 'proj-section' },
              h('h2', null, 'Move'),
              h('div', { class: 'row' }, h('span', null, 'Under'), moveBox, moveButton),
              moveSaid,
            ),
          ],
      h(
        'section',
        { class: 'proj-section' },
        h('h2', null, 'New subproject'),
        h('div', { class: 'row' }, subName, subButton),
        subSaid,
      ),
      h(
        'section',
        { class: 'proj-section' },
        h('h2', null, 'Archive or delete'),
        h(
          'p',
          { class: 'muted' },
          'Archiving hides a project and keeps everything in it; deleting removes it, its subprojects and every note, task and skill in them, on every device.',
        ),
        h(
          'div',
          { class: 'row' },
          archiveBox,
          deleteButton({
            what: project.name,
            warning: () => {
              const n = subtreeSize();
              return n
                ? `With its ${n} subproject${n > 1 ? 's' : ''} and everything in them.`
                : 'With everything in it.';
            },
            onDelete: async () => {
              replace(deleteSaid);
              try {
                const removed = await api.del(`/projects/${encodeURIComponent(id)}`);
                gone = true; // leaving: no "was deleted" notice for one's own delete
                if (ctx.project === id) ctx.setProject(null);
                ctx.toast(
                  `Deleted ${removed.projects} project${removed.projects === 1 ? '' : 's'} and ${removed.documents} document${removed.documents === 1 ? '' : 's'}.`,
                  'ok',
                );
                await ctx.reloadProjects();
                ctx.navigate('projects');
              } catch (e) {
                replace(deleteSaid, errorBox(e));
              }
            },
          }),
        ),
        deleteSaid,
        archiveSaid,
      ),
    ),
  );
  drawHead();

  const refresh = followRecord(ctx, 'project', 'projects', editor, pane, { live: false });
  // The shell reloads the projects on every project change and says so.
  ctx.on('projects', refresh);
  ctx.on('project', drawHead);
  ctx.on('resync', refresh);
  return () => editor.close();
}

export default splitPage('Projects', 'projects', treePane, detailPane);
