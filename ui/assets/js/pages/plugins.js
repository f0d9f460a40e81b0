// pages/plugins.js: the Plugins page (hub only): the installed plugins with their MCP
// servers' states and tools; adding one is plugins/add.js (the form, then the hub's
// warning with the exact command before anything runs).
//
// Owns: `GET /plugins` (kept fresh every 2 s while a server starts or restarts, and no
// longer once the page is left), `PATCH /plugins/{name}` (the enable switch, the
// built-in computer plugin's settings), `DELETE /plugins/{name}` (after a confirmation)
// and `GET /plugins/{name}/tools`. The plugin routes are the hub's own (never relayed):
// on a laptop the page says where plugins are managed and calls nothing. Must never
// enable a plugin but on the owner's click, nor start anything itself (the hub runs the
// programs; the page only shows what they are and how they fare).
//
// data-test: "plugins-on-hub" (a laptop's notice); "add-plugin" (opens the form),
// "add-form", "add-name", "add-kind" (radios, value command|url), "add-command",
// "add-argv" (the parsed command line) with "argv-item", "add-url", "add-env",
// "env-row" with "env-name", "env-source" (hub|value|secret), "env-value",
// "env-remove"; "add-project", "add-sandbox", "add-timeout", "add-submit",
// "add-cancel", "add-error"; "plugin-warning" (after adding) with "warning-text",
// "warning-command", "warning-enable", "warning-leave"; "plugin-list", "plugin-card"
// (data-plugin, data-enabled), "plugin-builtin", "plugin-enabled" (the switch),
// "plugin-project", "plugin-env", "plugin-settings", "allow-private-network",
// "server" (data-server, data-state), "server-command", "server-state",
// "server-error", "server-sandbox"; "plugin-tools-toggle", "plugin-tools", "tool"
// (data-tool) with "tool-risky"; "plugin-remove", "confirm-plugin-remove"; "problem".

import * as api from '../api.js';
import { h, replace } from '../dom.js';
import { confirmButton, fetchAll, problem, projectName, reason } from '../admin/common.js';
import { addForm, warningView } from '../plugins/add.js';

/** How often the list is read again while a server starts or restarts. */
const POLL_MS = 2000;

const PRIVATE_NETWORK_MEANS =
  'Lets web_fetch reach machines on your home network (private, loopback and link-local addresses); off, it reaches only the public internet.';

/** A server's command line as one readable line (the hub's warning quotes it exactly). */
function commandText(server) {
  if (server.transport === 'http') return server.url;
  const quote = (w) => (w === '' || /[\s'"\\$`]/.test(w) ? `'${w.replace(/'/g, `'\\''`)}'` : w);
  return [server.command, ...(server.args ?? [])].map(quote).join(' ');
}

function bindingText(b) {
  if (b.source === 'hub') return `${b.name} (from the hub’s environment)`;
  if (b.source?.secret !== undefined) return `${b.name} (project secret ${b.source.secret})`;
  return `${b.name} = ${b.source?.value ?? ''}`;
}

// ---------------------------------------------------------------- a server's state

function statePill(status) {
  const s = status.state;
  const [kind, text] = {
    running: ['ok', `running · ${status.tools} ${status.tools === 1 ? 'tool' : 'tools'}`],
    starting: ['warn', 'starting…'],
    restarting: ['warn', `restarting · ${status.restarts} ${status.restarts === 1 ? 'restart' : 'restarts'}`],
    failed: ['danger', 'failed'],
    stopped: ['', 'stopped'],
  }[s] ?? ['', s];
  return h('span', { class: ['pill', kind], dataset: { test: 'server-state' } }, text);
}

function serverView(server, single) {
  const st = server.status;
  const remote = server.transport === 'http';
  const sandbox = remote
    ? h('span', { class: 'muted', dataset: { test: 'server-sandbox' } }, 'remote: runs elsewhere')
    : st.sandboxed
      ? h(
          'span',
          {
            class: 'sandbox-yes',
            dataset: { test: 'server-sandbox' },
            title: 'It cannot read the hub’s data directory.',
          },
          'sandboxed',
        )
      : h(
          'span',
          { class: 'sandbox-no', dataset: { test: 'server-sandbox' } },
          h('strong', null, 'not sandboxed'),
          st.sandbox_note ? `: ${st.sandbox_note}` : null,
        );
  return h(
    'li',
    { class: 'server', dataset: { test: 'server', server: server.name, state: st.state } },
    h(
      'div',
      { class: 'server-head' },
      single ? null : h('strong', { class: 'server-name' }, server.name),
      statePill(st),
      h('span', { class: 'server-facts' }, sandbox, ` · calls time out after ${server.call_timeout_secs} s`),
    ),
    h(
      'code',
      { class: 'cmdline', dataset: { test: 'server-command' }, title: remote ? 'Streamable HTTP' : 'Command line' },
      commandText(server),
    ),
    remote && server.headers?.length
      ? h(
          'p',
          { class: 'server-headers' },
          h('span', { class: 'muted' }, 'Headers: '),
          // A header is most often a credential: its fixed value is not put on screen.
          server.headers.map((b, i) => [
            i ? ', ' : null,
            h(
              'code',
              null,
              b.source === 'hub' || b.source?.secret !== undefined ? bindingText(b) : `${b.name} (a fixed value)`,
            ),
          ]),
        )
      : null,
    // A server starting again after failing keeps its last error in view.
    st.error && st.state !== 'running' && st.state !== 'stopped'
      ? h(
          'p',
          { class: 'server-error', dataset: { test: 'server-error' } },
          st.state === 'starting' ? `Last attempt: ${st.error}` : st.error,
        )
      : null,
  );
}

// ---------------------------------------------------------------- a plugin's card

/**
 * One plugin's card. Its controls are made once and its facts replaced on `update`, so
 * a refresh never takes the focus from a switch or the tools button.
 */
function pluginCard(ctx, first, reload) {
  let plugin = first;
  let open = false;
  let toolsKey = null; // the servers' state when the tools were read
  const name = first.name;

  const toggle = h('input', {
    type: 'checkbox',
    role: 'switch',
    id: `plugin-enabled-${name}`,
    dataset: { test: 'plugin-enabled' },
    onchange: async () => {
      const want = toggle.checked;
      toggle.disabled = true;
      try {
        update(await api.patch(`/plugins/${encodeURIComponent(name)}`, { enabled: want }));
        ctx.toast(want ? `${name} is enabled` : `${name} is disabled: its servers stop`, 'ok');
        reload();
      } catch (e) {
        toggle.checked = !want;
        if (e.status !== 401) ctx.toast(reason(e), 'error');
      } finally {
        toggle.disabled = false;
      }
    },
  });
  const switchLabel = h('span', null);
  const projectEl = h('span', { class: 'plugin-project', dataset: { test: 'plugin-project' } });
  const facts = h('div', { class: 'plugin-facts' });
  const toolsPanel = h('div', { class: 'plugin-tools', dataset: { test: 'plugin-tools' }, hidden: true });
  const toolsButton = h(
    'button',
    {
      type: 'button',
      class: 'link',
      'aria-expanded': 'false',
      'aria-controls': `plugin-tools-${name}`,
      dataset: { test: 'plugin-tools-toggle' },
      onclick: () => {
        open = !open;
        toolsButton.setAttribute('aria-expanded', String(open));
        toolsButton.textContent = open ? 'Hide tools' : 'Show tools';
        toolsPanel.hidden = !open;
        if (open) loadTools();
      },
    },
    'Show tools',
  );
  toolsPanel.id = `plugin-tools-${name}`;

  const serversKey = () =>
    plugin.servers.map((s) => `${s.name}:${s.status.state}:${s.status.tools}`).join(',') + plugin.enabled;

  async function loadTools() {
    toolsKey = serversKey();
    if (!toolsPanel.childNodes.length) replace(toolsPanel, h('p', { class: 'muted' }, 'Loading tools…'));
    try {
      const tools = await fetchAll(`/plugins/${encodeURIComponent(name)}/tools`);
      replace(toolsPanel, toolsView(plugin, tools));
    } catch (e) {
      if (e.status !== 401) replace(toolsPanel, problem(e, `${name}’s tools`));
    }
  }

  const el = h(
    'li',
    { class: 'card plugin-card', dataset: { test: 'plugin-card', plugin: name } },
    h(
      'div',
      { class: 'plugin-head' },
      h('h2', { class: 'plugin-name' }, name),
      first.builtin ? h('span', { class: 'pill', dataset: { test: 'plugin-builtin' } }, 'built in') : null,
      h('span', { class: 'spacer' }),
      h('label', { class: 'switch', for: toggle.id }, toggle, switchLabel),
    ),
    h('div', { class: 'plugin-where' }, projectEl),
    facts,
    h(
      'div',
      { class: 'plugin-actions' },
      toolsButton,
      h('span', { class: 'spacer' }),
      first.builtin
        ? null
        : confirmButton({
            label: 'Remove',
            question: `Remove ${name}? Its servers stop and its tools go.`,
            test: 'plugin-remove',
            run: async () => {
              try {
                await api.del(`/plugins/${encodeURIComponent(name)}`);
                ctx.toast(`${name} removed`, 'ok');
                reload();
              } catch (e) {
                if (e.status !== 401) ctx.toast(reason(e), 'error');
              }
            },
          }),
    ),
    toolsPanel,
  );

  function update(p) {
    plugin = p;
    el.dataset.enabled = String(p.enabled);
    el.classList.toggle('off', !p.enabled);
    if (!toggle.disabled) toggle.checked = p.enabled;
    switchLabel.textContent = p.enabled ? 'Enabled' : 'Disabled';
    replace(
      projectEl,
      p.project ? ['Only in ', h('strong', null, projectName(ctx.projects, p.project))] : 'Offered in every project',
    );
    replace(
      facts,
      p.builtin ? builtinView(ctx, p, update) : null,
      p.servers.length
        ? h(
            'ul',
            { class: 'servers' },
            p.servers.map((s) => serverView(s, p.servers.length === 1)),
          )
        : null,
      p.env.length
        ? h(
            'p',
            { class: 'plugin-env', dataset: { test: 'plugin-env' } },
            h('span', { class: 'muted' }, 'Variables: '),
            p.env.map((b, i) => [i ? ', ' : null, h('code', null, bindingText(b))]),
          )
        : null,
    );
    // The tools shown follow the servers: read them again when a server's state moved.
    if (open && toolsKey !== serversKey()) loadTools();
  }

  update(first);
  return { el, update };
}

/** The built-in computer plugin: what it is, and its settings. */
function builtinView(ctx, p, update) {
  const settings = p.settings ?? {};
  const rows = Object.entries(settings).map(([key, value]) => {
    if (key === 'allow_private_network' && typeof value === 'boolean') {
      const box = h('input', {
        type: 'checkbox',
        checked: value,
        dataset: { test: 'allow-private-network' },
        onchange: async () => {
          box.disabled = true;
          try {
            update(
              await api.patch(`/plugins/${encodeURIComponent(p.name)}`, {
                settings: { ...settings, allow_private_network: box.checked },
              }),
            );
            ctx.toast(
              box.checked ? 'web_fetch may reach the home network' : 'web_fetch reaches the internet only',
              'ok',
            );
          } catch (e) {
            box.checked = !box.checked;
            box.disabled = false;
            if (e.status !== 401) ctx.toast(reason(e), 'error');
          }
        },
      });
      return h(
        'li',
        null,
        h('label', { class: 'check' }, box, 'Allow the home network'),
        h('small', { class: 'hint' }, PRIVATE_NETWORK_MEANS),
      );
    }
    return h('li', null, h('code', null, key), ': ', h('code', null, JSON.stringify(value)));
  });
  return [
    h(
      'p',
      { class: 'muted builtin-what' },
      'Built into the hub: the project’s files, a terminal and web pages, confined to the project’s folder. It can be turned off, not removed.',
    ),
    rows.length ? h('ul', { class: 'plugin-settings', dataset: { test: 'plugin-settings' } }, rows) : null,
  ];
}

function toolsView(plugin, tools) {
  if (!tools.length) {
    return h(
      'p',
      { class: 'muted' },
      plugin.enabled ? 'No tools yet: they show once its server runs.' : 'No tools known: enable it to list them.',
    );
  }
  const remembered = tools.some((t) => !t.live);
  return [
    remembered
      ? h(
          'p',
          { class: 'muted hint' },
          'Greyed tools are remembered from the last time the server ran; they are not offered now.',
        )
      : null,
    h(
      'ul',
      { class: 'tool-list' },
      tools.map((t) =>
        h(
          'li',
          { class: t.live ? null : 'stale', dataset: { test: 'tool', tool: t.name } },
          h(
            'div',
            { class: 'tool-head' },
            h('code', { class: 'tool-name' }, t.name),
            t.risky
              ? h(
                  'span',
                  {
                    class: 'pill warn',
                    dataset: { test: 'tool-risky' },
                    title: 'Waits for your approval unless allowed for the project',
                  },
                  'risky',
                )
              : null,
          ),
          t.description ? h('p', { class: 'tool-description' }, t.description) : null,
        ),
      ),
    ),
  ];
}

// ---------------------------------------------------------------- page

function onLaptop() {
  return h(
    'div',
    { class: 'notice', role: 'status', dataset: { test: 'plugins-on-hub' } },
    h('strong', null, 'Plugins run on the hub and are managed there. '),
    'Their programs run on the hub’s machine, so they are added, enabled and removed from this page opened on the hub, or with ',
    h('code', null, 'hearth-hub plugins'),
    ' there. Their tools are offered in chat from every device.',
  );
}

export default {
  title: 'Plugins',
  async mount(el, ctx) {
    const heading = h('h1', null, 'Plugins');
    if (ctx.server.kind === 'node') {
      replace(el, heading, onLaptop());
      return;
    }
    const top = h('div', { class: 'plugins-top' });
    const listEl = h('ul', { class: 'plugin-list', dataset: { test: 'plugin-list' } });
    const status = h('div');
    const cards = new Map(); // name -> {el, update}
    let timer = null;
    let left = false;
    let token = 0;

    const openButton = h(
      'button',
      { type: 'button', class: 'primary', dataset: { test: 'add-plugin' }, onclick: openForm },
      'Add a plugin',
    );
    replace(
      el,
      h('div', { class: 'plugins-title' }, heading, h('span', { class: 'spacer' }), openButton),
      h(
        'p',
        { class: 'muted intro' },
        'Plugins give the agent tools from MCP servers: programs running on this machine as the hub’s user, or remote servers. Tools are offered in every project, or in the one a plugin is bound to; risky ones wait for your approval.',
      ),
      top,
      status,
      listEl,
    );

    function openForm() {
      const { form, focus } = addForm(
        ctx,
        (created) => {
          replace(top, warningView(ctx, created, closeTop));
          openButton.hidden = true;
          top.querySelector('[data-test=warning-enable]')?.focus();
          load();
        },
        () => closeTop(),
      );
      replace(top, form);
      openButton.hidden = true;
      focus();
    }

    function closeTop(focusPlugin) {
      replace(top);
      openButton.hidden = false;
      load().then(() => {
        const card = focusPlugin && cards.get(focusPlugin);
        (card?.el.querySelector('[data-test=plugin-enabled]') ?? openButton).focus();
      });
    }

    async function load() {
      const mine = ++token;
      clearTimeout(timer);
      let plugins;
      try {
        plugins = await fetchAll('/plugins');
      } catch (e) {
        if (mine === token && e.status !== 401) replace(status, problem(e, 'the plugins'));
        return;
      }
      if (mine !== token || left) return;
      replace(status);
      show(plugins);
      const busy = plugins.some((p) =>
        p.servers.some((s) => s.status.state === 'starting' || s.status.state === 'restarting'),
      );
      if (busy) timer = setTimeout(load, POLL_MS);
    }

    function show(plugins) {
      const names = new Set(plugins.map((p) => p.name));
      for (const [name, card] of cards) {
        if (!names.has(name)) {
          card.el.remove();
          cards.delete(name);
        }
      }
      let previous = null;
      for (const p of plugins) {
        let card = cards.get(p.name);
        if (card) card.update(p);
        else cards.set(p.name, (card = pluginCard(ctx, p, load)));
        // Moved only when out of place, so a focused control keeps its focus.
        const want = previous ? previous.nextSibling : listEl.firstChild;
        if (card.el !== want) listEl.insertBefore(card.el, want);
        previous = card.el;
      }
      if (!plugins.length) replace(status, h('p', { class: 'empty' }, 'No plugins yet.'));
    }

    ctx.on('resync', load);
    ctx.on('projects', load);
    await load();
    return () => {
      left = true;
      clearTimeout(timer);
    };
  },
};
