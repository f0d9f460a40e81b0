// app.js: the shell of Hearth's web UI, the same page on hub and node.
//
// Owns: sign-in state, which server this is (hub or node), the hash router
// (`#/<page>/<id>?<params>`), the chosen project, the top bar with the node's status and
// its offline banner, the side bar (project tree and page links), keyboard shortcuts,
// and each page's lifetime: a page is a module of `pages/` whose default export is
// `{ title, mount(el, ctx) }`; `mount` may return a cleanup function, and every
// subscription made through `ctx` ends when the page is left. Must never render text
// as markup (see dom.js) nor keep data a page can fetch again.

import * as api from './api.js';
import { h, replace, ago } from './dom.js';
import { projectTree } from './projects.js';
import { notificationBell } from './notify/bell.js';

/** The pages, in the side bar's order. `hub: true`: served by the hub (a node relays it). */
export const PAGES = [
  { path: 'chat', title: 'Chat', key: 'c', hub: true },
  { path: 'notes', title: 'Notes', key: 'n' },
  { path: 'tasks', title: 'Tasks', key: 't' },
  { path: 'schedules', title: 'Schedules', key: 'r', hub: true },
  { path: 'contacts', title: 'Contacts', key: 'o' },
  { path: 'skills', title: 'Skills', key: 'k' },
  { path: 'projects', title: 'Projects', key: 'p' },
  { path: 'settings', title: 'Settings', key: 's', hub: true },
  { path: 'plugins', title: 'Plugins', key: 'l' }, // the hub's own, not relayed: a laptop's page says so
  { path: 'devices', title: 'Devices', key: 'd', hub: true },
  { path: 'usage', title: 'Usage', key: 'u', hub: true },
  { path: 'audit', title: 'Audit log', key: 'a', hub: true },
  { path: 'notifications', title: 'Notifications', key: 'i', hub: true },
];

const PROJECT_KEY = 'hearth.project';

const state = {
  server: { kind: 'hub', status: null },
  projects: [],
  project: localStorage.getItem(PROJECT_KEY) || null,
  hubOnline: true, // a node's relay link to its hub (the `hub` events)
  page: null, // { cleanup, subs }
};

function parseRoute() {
  const raw = location.hash.replace(/^#\/?/, '');
  const [path, query = ''] = raw.split('?');
  const [page = 'notes', ...rest] = path.split('/').map(decodeURIComponent);
  return { page: page || 'notes', id: rest[0] ?? null, rest, params: new URLSearchParams(query) };
}

/** Goes to `#/<hash>`; `replace` keeps the history entry. */
export function navigate(hash, { replace: rep = false } = {}) {
  const target = '#/' + hash.replace(/^#?\/?/, '');
  if (rep) {
    history.replaceState(null, '', target);
    route();
  } else if (location.hash !== target) {
    location.hash = target; // hashchange routes
  } else {
    route();
  }
}

// ---------------------------------------------------------------- toasts

const toasts = h('div', { class: 'toasts', role: 'status', 'aria-live': 'polite' });

export function toast(message, kind = 'info') {
  const el = h('div', { class: ['toast', kind] }, message);
  toasts.append(el);
  setTimeout(() => el.remove(), kind === 'error' ? 8000 : 4000);
}

// ---------------------------------------------------------------- projects

async function loadProjects() {
  try {
    const all = [];
    for (let offset = 0; ; offset += 500) {
      const page = await api.get('/projects', { limit: 500, offset });
      // Listed rows name a project by `title` and mark it archived by `status`.
      all.push(...page.data.map((p) => ({ ...p, name: p.title, archived: p.status === 'archived' })));
      if (all.length >= page.total || page.data.length === 0) break;
    }
    state.projects = all;
  } catch (e) {
    if (e.status !== 401) toast(`Projects: ${e.message}`, 'error');
  }
  if (state.project && !visibleProjects().some((p) => p.id === state.project)) setProject(null);
  renderSidebar();
  api.emit('projects', visibleProjects());
}

/**
 * The projects people may work in here: all of them, or on a node paired for one
 * project that project and those below it (a node whose scope was narrowed may still
 * hold others from before; the hub takes no change to them).
 */
function visibleProjects() {
  const scope = state.server.kind === 'node' ? state.server.status?.scope : null;
  if (!scope) return state.projects;
  const byId = new Map(state.projects.map((p) => [p.id, p]));
  const inside = (p) => {
    const seen = new Set();
    for (let q = p; q && !seen.has(q.id); q = byId.get(q.parent)) {
      if (q.id === scope) return true;
      seen.add(q.id);
    }
    return false;
  };
  return state.projects.filter(inside);
}

function setProject(id) {
  state.project = id;
  if (id) localStorage.setItem(PROJECT_KEY, id);
  else localStorage.removeItem(PROJECT_KEY);
  renderSidebar();
  api.emit('project', id);
}

// ---------------------------------------------------------------- layout

const topbar = h('header', { class: 'topbar' });
const banner = h('div', { class: 'banner', role: 'alert', hidden: true });
const sidebar = h('nav', { class: 'sidebar', id: 'sidebar', 'aria-label': 'Projects and pages' });
const main = h('main', { id: 'main', tabindex: '-1' });
const bell = notificationBell({ toast });

function renderTopbar() {
  const s = state.server;
  const status = [];
  if (s.kind === 'node' && s.status) {
    const st = s.status;
    status.push(
      h('span', { class: ['pill', st.online ? 'ok' : 'warn'], id: 'hub-status' }, st.online ? 'Online' : 'Offline'),
      h('span', { class: 'muted', id: 'last-sync' }, `synced ${ago(st.last_synced_at)}`),
      h(
        'span',
        { class: ['muted', st.pending_changes ? 'pending' : ''], id: 'pending-changes' },
        `${st.pending_changes} waiting`,
      ),
    );
  }
  replace(
    topbar,
    h(
      'button',
      {
        class: 'icon menu',
        'aria-label': 'Menu',
        'aria-controls': 'sidebar',
        onclick: () => document.body.classList.toggle('nav-open'),
      },
      '☰',
    ),
    h('a', { class: 'brand', href: '#/notes' }, 'Hearth'),
    h('span', { class: 'server-kind' }, s.kind === 'node' ? 'laptop' : 'hub'),
    h('span', { class: 'spacer' }),
    ...status,
    bell.el,
  );
  const offline = s.kind === 'node' && s.status && !s.status.online;
  banner.hidden = !offline;
  if (offline) {
    // The technical reason is there for whoever looks for it, not in the sentence.
    banner.title = s.status.detail ?? '';
    replace(
      banner,
      h('strong', null, 'The hub is out of reach. '),
      'Notes, tasks, contacts and skills keep working here and sync when it is back; chat, settings and devices need the hub.',
    );
  }
}

function renderSidebar() {
  const { page } = parseRoute();
  replace(
    sidebar,
    h('div', { class: 'nav-section' }, 'Pages'),
    h(
      'ul',
      { class: 'nav-pages' },
      PAGES.map((p) =>
        h(
          'li',
          null,
          h(
            'a',
            {
              href: `#/${p.path}`,
              class: p.path === page ? 'active' : null,
              'aria-current': p.path === page ? 'page' : null,
              title: `${p.title} (g ${p.key})`,
            },
            p.title,
          ),
        ),
      ),
    ),
    h('div', { class: 'nav-section' }, 'Projects'),
    projectTree({
      projects: visibleProjects(),
      selected: state.project,
      onSelect: (id) => {
        setProject(id);
        document.body.classList.remove('nav-open');
      },
    }),
  );
}

// ---------------------------------------------------------------- pages

function ctxFor(r) {
  const subs = [];
  const ctx = {
    server: state.server,
    route: r,
    get project() {
      return state.project;
    },
    get projects() {
      return visibleProjects();
    },
    /**
     * On a node paired for one project, that project: nothing may be put outside it (the
     * hub refuses it), so pages offer no "no project", "every project" or top level.
     */
    get scope() {
      return state.server.kind === 'node' ? (state.server.status?.scope ?? null) : null;
    },
    /** Whether the hub answers relayed routes (chat, settings, devices) now. */
    get hubOnline() {
      return state.server.kind === 'hub' || state.hubOnline;
    },
    setProject,
    reloadProjects: loadProjects,
    navigate,
    toast,
    /** Calls fn(ev) for events of these types while the page lives. */
    onEvent(types, fn) {
      subs.push(api.onEvent(types, fn));
    },
    /** Calls fn(value) on a UI signal (`project`, `projects`, `resync`, `hub`) while the page lives. */
    on(name, fn) {
      subs.push(api.on(name, fn));
    },
  };
  return { ctx, subs };
}

let routeToken = 0;

async function route() {
  const r = parseRoute();
  const token = ++routeToken;
  if (state.page) {
    for (const off of state.page.subs) off();
    try {
      state.page.cleanup?.();
    } catch (e) {
      console.error('page cleanup', e);
    }
    state.page = null;
  }
  renderSidebar();
  const meta = PAGES.find((p) => p.path === r.page);
  if (!meta) {
    replace(main, h('h1', null, 'Not found'), h('p', null, `No page “${r.page}”.`));
    return;
  }
  document.title = `${meta.title} · Hearth`;
  let mod;
  try {
    mod = await import(`./pages/${meta.path}.js`);
  } catch (e) {
    replace(main, h('h1', null, meta.title), h('p', { class: 'error' }, `This page failed to load: ${e.message}`));
    return;
  }
  if (token !== routeToken) return;
  const el = h('section', { class: ['page', `page-${meta.path}`], 'aria-label': meta.title });
  replace(main, el);
  const { ctx, subs } = ctxFor(r);
  const page = { cleanup: null, subs };
  state.page = page;
  try {
    page.cleanup = (await mod.default.mount(el, ctx)) ?? null;
    // Left while it mounted: its cleanup is due now (the next page is in state.page).
    if (state.page !== page) page.cleanup?.();
    // Tests and the bench wait for this: the page shows its first data.
    else el.dataset.ready = 'true';
  } catch (e) {
    console.error(e);
    if (e.status !== 401) el.append(h('p', { class: 'error' }, e.message));
  }
}

// ---------------------------------------------------------------- node status

let statusTimer = null;

async function refreshStatus() {
  try {
    state.server.status = await api.get('/status');
  } catch {
    return;
  }
  renderTopbar();
}

// ---------------------------------------------------------------- keyboard

let pendingG = 0;

function onKey(e) {
  const t = e.target;
  const typing = t instanceof HTMLElement && (t.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(t.tagName));
  if (e.key === 'Escape') {
    document.body.classList.remove('nav-open');
    if (typing) t.blur();
    return;
  }
  if (typing || e.ctrlKey || e.metaKey || e.altKey) return;
  if (e.key === '/') {
    const search = main.querySelector('input[type=search]');
    if (search) {
      e.preventDefault();
      search.focus();
    }
    return;
  }
  if (e.key === '?') {
    toast(PAGES.map((p) => `g ${p.key}: ${p.title}`).join(' · ') + ' · /: search · Esc: leave a field');
    return;
  }
  if (e.key === 'g') {
    pendingG = Date.now();
    return;
  }
  if (Date.now() - pendingG < 1500) {
    pendingG = 0;
    const p = PAGES.find((p) => p.key === e.key);
    if (p) {
      e.preventDefault();
      navigate(p.path);
    }
  }
}

// ---------------------------------------------------------------- start

function signedOut(message) {
  api.events.stop();
  clearInterval(statusTimer);
  replace(
    document.getElementById('app'),
    h(
      'div',
      { class: 'signin' },
      h('h1', null, 'Hearth'),
      h('p', null, 'This browser is not signed in.'),
      h('p', { class: 'muted', id: 'signin-message' }, message),
      h(
        'p',
        null,
        'On the hub, run ',
        h('code', null, 'hearth-hub open'),
        '; on a laptop, run ',
        h('code', null, 'hearth open'),
        '. Either opens this page signed in.',
      ),
    ),
  );
}

async function start() {
  const app = document.getElementById('app');
  // Nothing below waits for anything it does not need: the first page's module, the
  // projects and the server's status load at once.
  if (!location.hash) history.replaceState(null, '', '#/notes');
  const first = PAGES.find((p) => p.path === parseRoute().page);
  if (first) import(`./pages/${first.path}.js`).catch(() => {});
  const projectsLoaded = loadProjects();
  // Which server is this? Only a node has /status.
  try {
    state.server.status = await api.get('/status');
    state.server.kind = 'node';
    // Until the first `hub` event says otherwise, the relay is as up as replication.
    state.hubOnline = state.server.status.online;
  } catch (e) {
    if (e.status === 401) return signedOut(e.message);
    state.server.kind = 'hub';
    // The hub answers 404 for /status; anything else than that means trouble.
    if (e.status !== 404) toast(`Status: ${e.message}`, 'error');
  }
  document.body.dataset.server = state.server.kind;
  app.removeAttribute('aria-busy');
  replace(
    app,
    h('a', { class: 'skip', href: '#main', onclick: (e) => (e.preventDefault(), main.focus()) }, 'Skip to content'),
    topbar,
    banner,
    h('div', { class: 'body' }, sidebar, main),
    toasts,
  );
  api.on('signedout', signedOut);
  renderTopbar();
  await projectsLoaded;
  api.onEvent('document', (ev) => {
    if (ev.kind === 'project') loadProjects();
  });
  api.on('resync', () => loadProjects());
  if (state.server.kind === 'node') {
    // The `hub` event is the relay link (chat, settings: pages listen for it); the top
    // bar shows the replication status, which /status reports, so it asks again.
    api.onEvent('hub', (ev) => {
      state.hubOnline = !!ev.online;
      api.emit('hub', state.hubOnline);
      refreshStatus();
    });
    statusTimer = setInterval(refreshStatus, 3000);
  }
  bell.start();
  api.events.start();
  addEventListener('hashchange', route);
  addEventListener('keydown', onKey);
  route();
}

start();
