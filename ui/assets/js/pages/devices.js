// pages/devices.js: the Devices page: pairing requests to approve or deny, and the
// paired devices with their key fingerprint, scope, admin flag and presence, to
// rename, rescope or revoke.
//
// Owns: `GET /devices/pending`, `POST /devices/approve` (bound to the fingerprint the
// page showed, so a code that changed hands is refused) and `/devices/deny`, `GET
// /devices`, `PATCH /devices/{id}` (name, scope, admin) and `DELETE /devices/{id}`.
// Follows `device` events (`pair_requested`, `paired`, `revoked`, `online`, `offline`)
// by fetching again; must never decide who may pair by itself, nor approve without the
// owner's click.
//
// data-test: "pending-list", "pending-request" (data-code), "pending-name",
// "pending-fingerprint", "pending-code", "approve-name", "approve-scope", "approve",
// "deny"; "device-list", "device-row" (data-node), "this-device", "device-name", "device-fingerprint",
// "device-presence", "device-scope", "device-admin", "rename", "rename-input",
// "save-name", "revoke", "confirm-revoke"; "revoked-device".

import * as api from '../api.js';
import { h, replace, ago } from '../dom.js';
import { flatTree } from '../projects.js';
import { confirmButton, fetchAll, projectName, reason, section, when } from '../admin/common.js';

const ADMIN_MEANS =
  'An admin device may approve devices and change settings, keys and tool permissions from its own page.';

/** A select of scopes: the whole hub, or one project's subtree. */
function scopeSelect(projects, selected, props) {
  const known = flatTree(projects);
  const missing = selected && !known.some(({ project }) => project.id === selected);
  return h(
    'select',
    props,
    h('option', { value: '', selected: !selected }, 'Whole hub'),
    known.map(({ project, depth }) =>
      h(
        'option',
        { value: project.id, selected: project.id === selected },
        '\u00a0\u00a0'.repeat(depth) + project.name,
      ),
    ),
    missing ? h('option', { value: selected, selected: true }, projectName(projects, selected)) : null,
  );
}

function minutesLeft(expiresAt) {
  const m = Math.max(0, Math.round((expiresAt - Date.now()) / 60000));
  return m <= 1 ? 'expires in a minute' : `expires in ${m} min`;
}

// ---------------------------------------------------------------- pairing requests

function pendingView(ctx, list, reload) {
  if (!list.length) {
    return h(
      'div',
      { class: 'empty pair-help' },
      h('p', null, 'No device is asking to pair.'),
      h(
        'p',
        { class: 'muted' },
        'On a laptop on the hub’s network, run ',
        h('code', null, 'hearth pair'),
        '. From elsewhere, run ',
        h('code', null, 'hearth-hub ticket'),
        ' on the hub, then ',
        h('code', null, 'hearth pair --ticket <ticket>'),
        ' on the laptop. The request shows up here at once.',
      ),
    );
  }
  return h(
    'ul',
    { class: 'pending-list', dataset: { test: 'pending-list' } },
    list.map((p) => {
      const name = h('input', {
        type: 'text',
        value: p.device_name,
        maxlength: '64',
        'aria-label': `Name for ${p.device_name}`,
        dataset: { test: 'approve-name' },
      });
      const scope = scopeSelect(ctx.projects, null, {
        'aria-label': `What ${p.device_name} may reach`,
        dataset: { test: 'approve-scope' },
      });
      const buttons = [];
      const decide = (verb) => async () => {
        for (const b of buttons) b.disabled = true;
        try {
          if (verb === 'approve') {
            const d = await api.post('/devices/approve', {
              code: p.code,
              fingerprint: p.fingerprint,
              name: name.value.trim() || null,
              scope: scope.value || null,
            });
            ctx.toast(`${d.name} is paired`, 'ok');
          } else {
            await api.post('/devices/deny', { code: p.code });
            ctx.toast(`${p.device_name} was refused`, 'ok');
          }
        } catch (e) {
          if (e.status !== 401) ctx.toast(reason(e), 'error');
        } finally {
          for (const b of buttons) b.disabled = false;
          reload();
        }
      };
      buttons.push(
        h('button', { class: 'primary', dataset: { test: 'approve' }, onclick: decide('approve') }, 'Approve'),
        h('button', { class: 'danger', dataset: { test: 'deny' }, onclick: decide('deny') }, 'Deny'),
      );
      return h(
        'li',
        { class: 'card pending-request', dataset: { test: 'pending-request', code: p.code } },
        h(
          'div',
          { class: 'pending-head' },
          h('strong', { class: 'pending-name', dataset: { test: 'pending-name' } }, p.device_name),
          h('span', { class: 'muted' }, `asked ${ago(p.created_at)} · ${minutesLeft(p.expires_at)}`),
        ),
        p.previously_revoked
          ? h(
              'p',
              { class: 'notice warn' },
              'This key was revoked before. Approve it only if you meant to let it back.',
            )
          : null,
        h(
          'dl',
          { class: 'pair-facts' },
          h('dt', null, 'Key fingerprint'),
          h('dd', { class: 'fingerprint', dataset: { test: 'pending-fingerprint' } }, p.fingerprint),
          h('dt', null, 'Code'),
          h('dd', { class: 'code', dataset: { test: 'pending-code' } }, p.code),
        ),
        h('p', { class: 'muted' }, 'Approve only if the laptop shows this same fingerprint and code.'),
        h(
          'div',
          { class: 'pending-choices' },
          h('label', { class: 'field' }, h('span', null, 'Name'), name),
          h('label', { class: 'field' }, h('span', null, 'May reach'), scope),
        ),
        h('div', { class: 'row' }, buttons),
      );
    }),
  );
}

// ---------------------------------------------------------------- paired devices

function presence(d) {
  if (d.online) return h('span', { class: 'pill ok', dataset: { test: 'device-presence' } }, 'online');
  return h(
    'span',
    { class: 'muted', dataset: { test: 'device-presence' } },
    d.last_seen ? `last seen ${ago(d.last_seen)}` : 'never connected',
  );
}

function deviceRow(ctx, d, reload) {
  const onNode = ctx.server.kind === 'node';
  const patch = async (body, done) => {
    try {
      const now = await api.patch(`/devices/${encodeURIComponent(d.node_id)}`, body);
      ctx.toast(done(now), 'ok');
    } catch (e) {
      if (e.status !== 401) ctx.toast(reason(e), 'error');
    }
    reload();
  };

  const nameEl = h('strong', { class: 'device-name', dataset: { test: 'device-name' } }, d.name);
  const renameButton = h('button', { dataset: { test: 'rename' }, onclick: () => editName() }, 'Rename');
  // On a node, its own row says so (its status names the device).
  const mine = ctx.server.kind === 'node' && ctx.server.status?.device === d.node_id;
  const head = h(
    'div',
    { class: 'device-head' },
    nameEl,
    presence(d),
    mine ? h('span', { class: 'pill ok', dataset: { test: 'this-device' } }, 'this laptop') : null,
  );
  const editName = () => {
    const input = h('input', {
      type: 'text',
      value: d.name,
      maxlength: '64',
      'aria-label': `New name for ${d.name}`,
      dataset: { test: 'rename-input' },
    });
    const cancel = () => {
      replace(head, nameEl, presence(d));
      renameButton.hidden = false;
      renameButton.focus();
    };
    const form = h(
      'form',
      {
        class: 'rename-form',
        onsubmit: (e) => {
          e.preventDefault();
          const name = input.value.trim();
          if (!name || name === d.name) return cancel();
          patch({ name }, (now) => `Renamed to ${now.name}`);
        },
        onkeydown: (e) => {
          if (e.key === 'Escape') {
            e.stopPropagation();
            cancel();
          }
        },
      },
      input,
      h('button', { type: 'submit', class: 'primary', dataset: { test: 'save-name' } }, 'Save'),
      h('button', { type: 'button', onclick: cancel }, 'Cancel'),
    );
    replace(head, form);
    renameButton.hidden = true;
    input.focus();
    input.select();
  };

  const scope = scopeSelect(ctx.projects, d.scope, {
    'aria-label': `What ${d.name} may reach`,
    dataset: { test: 'device-scope' },
    onchange: () =>
      patch({ scope: scope.value || null }, (now) => `${now.name} now reaches ${projectName(ctx.projects, now.scope)}`),
  });
  // The admin flag is the owner's alone; a node relays as its device, never as the owner.
  const admin = onNode
    ? d.admin
      ? h('span', { class: 'pill warn', title: ADMIN_MEANS, dataset: { test: 'device-admin' } }, 'admin')
      : null
    : h(
        'label',
        { class: 'check', title: ADMIN_MEANS },
        h('input', {
          type: 'checkbox',
          checked: d.admin,
          dataset: { test: 'device-admin' },
          onchange: (e) =>
            patch({ admin: e.target.checked }, (now) =>
              now.admin ? `${now.name} is an admin device` : `${now.name} is no longer admin`,
            ),
        }),
        ' Admin',
      );

  return h(
    'li',
    { class: 'device-row', dataset: { test: 'device-row', node: d.node_id } },
    head,
    h(
      'div',
      { class: 'meta device-facts' },
      h(
        'span',
        null,
        'key ',
        h('span', { class: 'fingerprint', dataset: { test: 'device-fingerprint' } }, d.fingerprint),
      ),
      h('span', null, `paired ${when(d.paired_at)}`),
    ),
    h(
      'div',
      { class: 'device-controls' },
      h('label', { class: 'inline' }, h('span', null, 'May reach'), scope),
      admin,
      h('span', { class: 'spacer' }),
      renameButton,
      confirmButton({
        label: 'Revoke',
        question: `Revoke ${d.name}? It disconnects now and cannot sync again.`,
        test: 'revoke',
        run: async () => {
          try {
            await api.del(`/devices/${encodeURIComponent(d.node_id)}`);
            ctx.toast(`${d.name} is revoked`, 'ok');
          } catch (e) {
            if (e.status !== 401) ctx.toast(reason(e), 'error');
          }
          reload();
        },
      }),
    ),
  );
}

function devicesView(ctx, list, reload) {
  const live = list
    .filter((d) => !d.revoked)
    .sort((a, b) => Number(b.online) - Number(a.online) || a.name.localeCompare(b.name));
  const revoked = list.filter((d) => d.revoked);
  return [
    live.length
      ? h(
          'ul',
          { class: 'list devices', dataset: { test: 'device-list' } },
          live.map((d) => deviceRow(ctx, d, reload)),
        )
      : h('p', { class: 'empty' }, 'No device is paired yet.'),
    revoked.length
      ? h(
          'details',
          { class: 'revoked' },
          h('summary', null, `Revoked (${revoked.length})`),
          h(
            'ul',
            { class: 'list' },
            revoked.map((d) =>
              h(
                'li',
                { dataset: { test: 'revoked-device', node: d.node_id } },
                h('strong', null, d.name),
                ' ',
                h('span', { class: 'fingerprint muted' }, d.fingerprint),
                h(
                  'div',
                  { class: 'meta' },
                  `paired ${when(d.paired_at)}`,
                  d.last_seen ? ` · last seen ${ago(d.last_seen)}` : '',
                ),
              ),
            ),
          ),
        )
      : null,
  ];
}

// ---------------------------------------------------------------- page

export default {
  title: 'Devices',
  async mount(el, ctx) {
    const pendingEl = h('div', null, h('p', { class: 'muted' }, 'Loading…'));
    const devicesEl = h('div', null, h('p', { class: 'muted' }, 'Loading…'));
    const pendingCount = h('span', { class: 'count' });
    replace(
      el,
      h('h1', null, 'Devices'),
      ctx.server.kind === 'node'
        ? h(
            'p',
            { class: 'muted intro' },
            'Shown from the hub. Changes made here go through the hub as this laptop, which needs to be marked admin there to make them.',
          )
        : null,
      h(
        'section',
        { class: 'admin-block', 'aria-labelledby': 'pending-title' },
        h('h2', { id: 'pending-title' }, 'Pairing requests ', pendingCount),
        pendingEl,
      ),
      h(
        'section',
        { class: 'admin-block', 'aria-labelledby': 'paired-title' },
        h('h2', { id: 'paired-title' }, 'Paired devices'),
        devicesEl,
      ),
    );

    // A decision in progress (a name being typed, a scope chosen) is not wiped by a
    // refresh for another request: the list is rebuilt only when its codes change.
    let shownCodes = null;
    const reloadPending = section(
      pendingEl,
      'pairing requests',
      () => fetchAll('/devices/pending'),
      (list) => {
        pendingCount.textContent = list.length ? `(${list.length})` : '';
        shownCodes = list.map((p) => p.code).join(',');
        return pendingView(ctx, list, refresh);
      },
      () => {
        pendingCount.textContent = '';
        return null;
      },
    );
    const reloadDevices = section(
      devicesEl,
      'the devices',
      () => fetchAll('/devices'),
      (list) => devicesView(ctx, list, refresh),
    );
    function refresh() {
      return Promise.all([reloadPending(), reloadDevices()]);
    }

    const refreshPendingIfChanged = async () => {
      if (pendingEl.contains(document.activeElement)) {
        try {
          const list = await fetchAll('/devices/pending');
          if (list.map((p) => p.code).join(',') === shownCodes) return;
        } catch {
          // Shown by the reload below.
        }
      }
      reloadPending();
    };

    ctx.onEvent('device', (ev) => {
      if (ev.event === 'pair_requested') refreshPendingIfChanged();
      else if (ev.event === 'online' || ev.event === 'offline') reloadDevices();
      else refresh();
    });
    ctx.on('resync', refresh);
    ctx.on('hub', (online) => online && refresh());
    ctx.on('projects', reloadDevices);
    // Requests expire quietly (no event): look again now and then, while the page lives
    // (it may be left before its first load ends and its cleanup is handed over).
    const timer = setInterval(() => (el.isConnected ? refreshPendingIfChanged() : clearInterval(timer)), 30_000);
    await refresh();
    return () => clearInterval(timer);
  },
};
