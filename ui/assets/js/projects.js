// projects.js: the project tree in the side bar, and the helpers every page uses to
// name and order projects.
//
// Owns: turning the flat list of projects (`{id, name, parent, archived}`) into a tree,
// and the tree's keyboard behaviour (arrows move, Enter selects, Left/Right fold).
// Must never fetch: the shell loads projects and hands them in.

import { h } from './dom.js';

/** Projects by parent: Map<parentId|null, project[]>, children sorted by name. */
export function childrenOf(projects, { archived = false } = {}) {
  const ids = new Set(projects.map((p) => p.id));
  const by = new Map();
  for (const p of projects) {
    if (p.archived && !archived) continue;
    // A parent this device cannot see (a scoped device's root) makes a top-level project.
    const parent = p.parent && ids.has(p.parent) ? p.parent : null;
    if (!by.has(parent)) by.set(parent, []);
    by.get(parent).push(p);
  }
  for (const list of by.values()) list.sort((a, b) => a.name.localeCompare(b.name));
  return by;
}

/** The path of names from the top to `id` ("Home / Garden"). */
export function projectPath(projects, id) {
  const byId = new Map(projects.map((p) => [p.id, p]));
  const names = [];
  const seen = new Set();
  for (let p = byId.get(id); p && !seen.has(p.id); p = byId.get(p.parent)) {
    seen.add(p.id);
    names.unshift(p.name);
  }
  return names.join(' / ');
}

/** Projects in tree order with their depth: [{project, depth}]. */
export function flatTree(projects, opts) {
  const by = childrenOf(projects, opts);
  const out = [];
  const walk = (parent, depth) => {
    for (const p of by.get(parent) ?? []) {
      out.push({ project: p, depth });
      walk(p.id, depth + 1);
    }
  };
  walk(null, 0);
  return out;
}

/** A `<select>` of projects in tree order; `all` adds an "All projects" choice (value ""). */
export function projectSelect(projects, selected, { all = false, label = 'Project', ...props } = {}) {
  return h(
    'select',
    { 'aria-label': label, ...props },
    all ? h('option', { value: '', selected: !selected }, 'All projects') : null,
    flatTree(projects).map(({ project, depth }) =>
      h(
        'option',
        { value: project.id, selected: project.id === selected },
        '\u00a0\u00a0'.repeat(depth) + project.name,
      ),
    ),
  );
}

const folded = new Set(JSON.parse(localStorage.getItem('hearth.folded') || '[]'));

function saveFolded() {
  localStorage.setItem('hearth.folded', JSON.stringify([...folded]));
}

/** The side bar's tree: "All projects", then every live project; `onSelect(id|null)`. */
export function projectTree({ projects, selected, onSelect }) {
  const by = childrenOf(projects);
  const item = (p, depth) => {
    const kids = by.get(p.id) ?? [];
    const open = !folded.has(p.id);
    return h(
      'li',
      { role: 'treeitem', 'aria-expanded': kids.length ? String(open) : null, 'aria-selected': String(p.id === selected) },
      h(
        'div',
        { class: 'tree-row', style: { paddingLeft: `${0.5 + depth * 0.9}rem` } },
        kids.length
          ? h(
              'button',
              {
                class: 'fold',
                'aria-label': open ? `Fold ${p.name}` : `Unfold ${p.name}`,
                tabindex: '-1',
                onclick: () => {
                  if (open) folded.add(p.id);
                  else folded.delete(p.id);
                  saveFolded();
                  onSelect(selected);
                },
              },
              open ? '▾' : '▸',
            )
          : h('span', { class: 'fold' }),
        h(
          'button',
          {
            class: ['tree-label', p.id === selected ? 'active' : null],
            dataset: { project: p.id },
            onclick: () => onSelect(p.id),
          },
          p.name,
        ),
      ),
      kids.length && open ? h('ul', { role: 'group' }, kids.map((k) => item(k, depth + 1))) : null,
    );
  };
  const tree = h(
    'ul',
    { class: 'tree', role: 'tree', 'aria-label': 'Projects' },
    h(
      'li',
      { role: 'treeitem', 'aria-selected': String(!selected) },
      h(
        'div',
        { class: 'tree-row' },
        h('span', { class: 'fold' }),
        h('button', { class: ['tree-label', !selected ? 'active' : null], onclick: () => onSelect(null) }, 'All projects'),
      ),
    ),
    (by.get(null) ?? []).map((p) => item(p, 0)),
  );
  tree.addEventListener('keydown', (e) => {
    const labels = [...tree.querySelectorAll('.tree-label')];
    const i = labels.indexOf(document.activeElement);
    if (i < 0) return;
    if (e.key === 'ArrowDown' && i + 1 < labels.length) labels[i + 1].focus();
    else if (e.key === 'ArrowUp' && i > 0) labels[i - 1].focus();
    else if (e.key === 'ArrowLeft' || e.key === 'ArrowRight') {
      const id = labels[i].dataset.project;
      if (!id) return;
      if (e.key === 'ArrowLeft') folded.add(id);
      else folded.delete(id);
      saveFolded();
      onSelect(selected);
    } else return;
    e.preventDefault();
  });
  return tree;
}
