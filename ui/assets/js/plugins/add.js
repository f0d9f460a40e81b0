// plugins/add.js: adding a plugin on the Plugins page (pages/plugins.js): the form and,
// once the hub took it, the hub's warning with the owner's choice to enable it.
//
// Owns: splitting a typed command line into its words like a shell (and showing them
// back), checking the form before the hub is asked, `POST /plugins` (the plugin is added
// disabled) and the warning's Enable (`PATCH /plugins/{name} {enabled: true}`). Must
// never enable a plugin the owner did not choose to after seeing its warning, nor run
// or expand anything it splits (no variables, no globs: the words go to the hub as typed).
//
// data-test: see pages/plugins.js, which lists every one of the page.

import * as api from '../api.js';
import { h, replace } from '../dom.js';
import { flatTree } from '../projects.js';
import { action, reason } from '../admin/common.js';

const NAME = /^[a-z0-9][a-z0-9-]{0,31}$/;
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,127}$/;
const MAX_TIMEOUT = 3600;
const SANDBOX_OFF_MEANS =
  'Off, the program can read and change everything the hub’s user can, the hub’s keys and database included.';

/**
 * Splits one command line into its words, like a shell without expansions: spaces
 * separate, 'single quotes' keep everything, "double quotes" keep everything but a
 * backslash before " \ $ or `, and a backslash outside quotes keeps the next character.
 * Answers `{argv}` or `{error}`.
 */
export function splitCommandLine(line) {
  const argv = [];
  let word = null; // null: between words
  let quote = null;
  for (let i = 0; i < line.length; i++) {
    const c = line[i];
    if (quote === "'") {
      if (c === "'") quote = null;
      else word += c;
    } else if (quote === '"') {
      if (c === '"') quote = null;
      else if (c === '\\' && i + 1 < line.length && '"\\$`'.includes(line[i + 1])) word += line[++i];
      else word += c;
    } else if (/\s/.test(c)) {
      if (word !== null) argv.push(word);
      word = null;
    } else {
      word ??= '';
      if (c === "'" || c === '"') quote = c;
      else if (c === '\\') {
        if (i + 1 >= line.length) return { error: 'The line ends with a lone backslash.' };
        word += line[++i];
      } else word += c;
    }
  }
  if (quote) return { error: `A ${quote === "'" ? 'single' : 'double'} quote is not closed.` };
  if (word !== null) argv.push(word);
  return { argv };
}

function field(label, control, hint) {
  return h(
    'label',
    { class: 'field' },
    h('span', null, label),
    control,
    hint ? h('small', { class: 'hint' }, hint) : null,
  );
}

function envRow(onRemove) {
  const name = h('input', {
    type: 'text',
    placeholder: 'NAME',
    spellcheck: 'false',
    'aria-label': 'Name',
    dataset: { test: 'env-name' },
  });
  const value = h('input', { type: 'text', spellcheck: 'false', autocomplete: 'off', dataset: { test: 'env-value' } });
  const source = h(
    'select',
    { 'aria-label': 'Its value', dataset: { test: 'env-source' } },
    h('option', { value: 'hub' }, 'from the hub’s environment'),
    h('option', { value: 'value' }, 'this value'),
    h('option', { value: 'secret' }, 'a project secret'),
  );
  const show = () => {
    value.hidden = source.value === 'hub';
    value.placeholder = source.value === 'secret' ? 'secret key' : 'value';
    value.setAttribute('aria-label', source.value === 'secret' ? 'Secret key' : 'Value');
  };
  source.addEventListener('change', show);
  show();
  const row = h(
    'li',
    { class: 'env-row', dataset: { test: 'env-row' } },
    name,
    source,
    value,
    h(
      'button',
      {
        type: 'button',
        class: 'icon',
        'aria-label': 'Remove this variable',
        dataset: { test: 'env-remove' },
        onclick: () => onRemove(row),
      },
      '✕',
    ),
  );
  row.read = () => ({
    name: name.value.trim(),
    source:
      source.value === 'hub' ? 'hub' : { [source.value]: source.value === 'secret' ? value.value.trim() : value.value },
    field: name,
    valueField: value,
  });
  return row;
}

/** The add form; `done(created)` after the hub took it, `cancel()` to close it. */
export function addForm(ctx, done, cancel) {
  const error = h('p', { class: 'notice error', role: 'alert', dataset: { test: 'add-error' }, hidden: true });
  const name = h('input', {
    type: 'text',
    required: true,
    spellcheck: 'false',
    autocomplete: 'off',
    placeholder: 'e.g. github',
    dataset: { test: 'add-name' },
  });
  const kindRadio = (value, label) =>
    h(
      'label',
      { class: 'check' },
      h('input', {
        type: 'radio',
        name: 'plugin-kind',
        value,
        checked: value === 'command',
        dataset: { test: 'add-kind' },
        onchange: showKind,
      }),
      label,
    );
  const command = h('input', {
    type: 'text',
    spellcheck: 'false',
    autocomplete: 'off',
    placeholder: 'npx -y @modelcontextprotocol/server-github',
    dataset: { test: 'add-command' },
  });
  const argv = h('div', { class: 'argv', 'aria-live': 'polite', dataset: { test: 'add-argv' } });
  const url = h('input', {
    type: 'url',
    spellcheck: 'false',
    autocomplete: 'off',
    placeholder: 'https://example.com/mcp',
    dataset: { test: 'add-url' },
  });
  const envList = h('ul', { class: 'env-list' });
  const envTitle = h('span', null);
  const removeRow = (row) => {
    row.remove();
    addEnv.focus();
  };
  const addEnv = h(
    'button',
    {
      type: 'button',
      dataset: { test: 'add-env' },
      onclick: () => {
        const row = envRow(removeRow);
        envList.append(row);
        row.querySelector('input').focus();
      },
    },
    'Add a variable',
  );
  const project = h(
    'select',
    { dataset: { test: 'add-project' } },
    h('option', { value: '' }, 'Every project'),
    flatTree(ctx.projects).map(({ project: p, depth }) =>
      h('option', { value: p.id }, '\u00a0\u00a0'.repeat(depth) + p.name),
    ),
  );
  const sandbox = h('input', { type: 'checkbox', checked: true, dataset: { test: 'add-sandbox' } });
  const sandboxField = h(
    'div',
    { class: 'field' },
    h('label', { class: 'check' }, sandbox, 'Run it in the sandbox'),
    h(
      'small',
      { class: 'hint' },
      'Where the hub can (Linux with bubblewrap), the program then cannot read the hub’s data directory: it sees its own folder and the bound project’s. ',
      SANDBOX_OFF_MEANS,
    ),
  );
  const timeout = h('input', {
    type: 'number',
    min: '1',
    max: String(MAX_TIMEOUT),
    step: '1',
    value: '30',
    dataset: { test: 'add-timeout' },
  });
  const commandField = field(
    'Command line',
    h('div', null, command, argv),
    'The program and its arguments, as you would type them in a shell (quotes group words; nothing is expanded).',
  );
  const urlField = field('Address', url, 'A remote MCP server speaking streamable HTTP.');

  const parsed = () => splitCommandLine(command.value);
  function showArgv() {
    const p = parsed();
    if (!command.value.trim()) return replace(argv);
    if (p.error) return replace(argv, h('span', { class: 'error' }, p.error));
    replace(
      argv,
      h('span', { class: 'muted' }, 'Runs '),
      h(
        'ol',
        { class: 'argv-list' },
        p.argv.map((w, i) =>
          h('li', { class: i ? null : 'program', dataset: { test: 'argv-item' } }, h('code', null, w)),
        ),
      ),
    );
  }
  command.addEventListener('input', showArgv);

  function kind() {
    return form.querySelector('input[name=plugin-kind]:checked')?.value ?? 'command';
  }
  function showKind() {
    const remote = kind() === 'url';
    commandField.hidden = remote;
    sandboxField.hidden = remote;
    urlField.hidden = !remote;
    envTitle.textContent = remote ? 'Headers sent with every request' : 'Environment variables';
    addEnv.textContent = remote ? 'Add a header' : 'Add a variable';
  }

  const fail = (message, focus) => {
    error.textContent = message;
    error.hidden = false;
    focus?.focus();
  };

  function body() {
    const n = name.value.trim();
    if (!NAME.test(n)) return fail('The name is 1-32 of a-z, 0-9 and “-”, starting with a letter or digit.', name);
    const secs = Number(timeout.value);
    if (!Number.isInteger(secs) || secs < 1 || secs > MAX_TIMEOUT)
      return fail(`The call timeout is a whole number of seconds, 1 to ${MAX_TIMEOUT}.`, timeout);
    const remote = kind() === 'url';
    const bindings = [];
    for (const row of envList.children) {
      const b = row.read();
      if (!b.name && !b.valueField.value) continue;
      if (!remote && !ENV_NAME.test(b.name))
        return fail(`“${b.name}” is not a variable name (letters, digits and _, not starting with a digit).`, b.field);
      if (remote && !/^[A-Za-z0-9!#$%&'*+.^_`|~-]+$/.test(b.name))
        return fail(`“${b.name}” is not a header name.`, b.field);
      if (b.source.secret !== undefined && !b.source.secret)
        return fail(`${b.name}: name the project secret it reads.`, b.valueField);
      if (b.source.secret !== undefined && !project.value)
        return fail(`${b.name} reads a project secret: bind the plugin to a project.`, project);
      bindings.push({ name: b.name, source: b.source });
    }
    const server = { name: 'main', call_timeout_secs: secs };
    if (remote) {
      const u = url.value.trim();
      if (!/^https?:\/\/\S+$/.test(u)) return fail('The address starts with http:// or https://.', url);
      Object.assign(server, { transport: 'http', url: u, headers: bindings });
    } else {
      const p = parsed();
      if (p.error) return fail(p.error, command);
      if (!p.argv?.length) return fail('Type the command that starts the server.', command);
      const [program, ...args] = p.argv;
      Object.assign(server, { transport: 'stdio', command: program, args, sandbox: sandbox.checked ? 'auto' : 'off' });
    }
    return { name: n, servers: [server], env: remote ? [] : bindings, project: project.value || null };
  }

  const submit = h('button', { type: 'submit', class: 'primary', dataset: { test: 'add-submit' } }, 'Add plugin');
  const form = h(
    'form',
    {
      class: 'card add-form',
      dataset: { test: 'add-form' },
      'aria-labelledby': 'add-title',
      onsubmit: async (e) => {
        e.preventDefault();
        error.hidden = true;
        const b = body();
        if (!b) return;
        submit.disabled = true;
        try {
          done(await api.post('/plugins', b));
        } catch (err) {
          if (err.status !== 401) fail(reason(err));
        } finally {
          submit.disabled = false;
        }
      },
      // A refusal stays until the next change, not past it.
      oninput: () => (error.hidden = true),
    },
    h('h2', { id: 'add-title' }, 'Add a plugin'),
    h('p', { class: 'muted intro' }, 'It is added disabled: you see what will run before it does.'),
    error,
    field('Name', name, 'Its tools are named after it: name_tool.'),
    h(
      'fieldset',
      { class: 'kind' },
      h('legend', null, 'Its MCP server'),
      kindRadio('command', 'a program on the hub'),
      kindRadio('url', 'a remote server (URL)'),
    ),
    commandField,
    urlField,
    h(
      'fieldset',
      { class: 'env' },
      h('legend', null, envTitle),
      h(
        'small',
        { class: 'hint' },
        'It receives nothing else of the hub’s environment but PATH, HOME, LANG and TMPDIR.',
      ),
      envList,
      addEnv,
    ),
    h(
      'div',
      { class: 'grid-form' },
      field(
        'Project',
        project,
        'Bound to a project, its tools are offered only there, and it may read that project’s secrets.',
      ),
      field('Call timeout (seconds)', timeout, 'A tool call taking longer fails.'),
    ),
    sandboxField,
    h(
      'div',
      { class: 'row' },
      submit,
      h('button', { type: 'button', dataset: { test: 'add-cancel' }, onclick: cancel }, 'Cancel'),
    ),
  );
  showKind();
  return { form, focus: () => name.focus() };
}

/** After adding: the hub's warning, the command, and the owner's choice. */
export function warningView(ctx, created, close) {
  const lines = (created.warning ?? '').split('\n').filter(Boolean);
  const enable = action(
    ctx,
    `Enable ${created.name}`,
    { class: 'primary', dataset: { test: 'warning-enable' } },
    async () => {
      await api.patch(`/plugins/${encodeURIComponent(created.name)}`, { enabled: true });
      ctx.toast(`${created.name} is enabled: its server is starting`, 'ok');
      close(created.name);
    },
  );
  return h(
    'section',
    {
      class: 'notice warn plugin-warning',
      role: 'alert',
      'aria-labelledby': 'warning-title',
      dataset: { test: 'plugin-warning' },
    },
    h('h2', { id: 'warning-title' }, `${created.name} was added, disabled. Read this before enabling it.`),
    lines.map((line) => {
      // The hub ends each program's line with its exact command: shown apart, whole.
      const at = line.lastIndexOf(' Command: ');
      const text = at < 0 ? line : line.slice(0, at);
      return [
        h('p', { dataset: { test: 'warning-text' } }, text),
        at < 0
          ? null
          : h(
              'pre',
              { class: 'warning-command', dataset: { test: 'warning-command' } },
              line.slice(at + ' Command: '.length),
            ),
      ];
    }),
    h(
      'div',
      { class: 'row' },
      enable,
      h(
        'button',
        {
          type: 'button',
          dataset: { test: 'warning-leave' },
          onclick: () => {
            ctx.toast(`${created.name} stays disabled; its switch below enables it`);
            close(created.name);
          },
        },
        'Leave disabled',
      ),
    ),
  );
}
