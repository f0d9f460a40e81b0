// pages/audit.js: the Audit log page: every tool the agent ran, newest first, a page
// at a time, filtered by project, tool and days.
//
// Owns: reading `GET /audit?project=&tool=&since=&until=&limit=&offset=` and showing
// each row as who (the agent, in which conversation), what (the tool), on what (the
// target named in its arguments, in which project), when, and how it ended, with the
// arguments and outcome behind a disclosure. The filters live in the page's address
// (`#/audit?project=&tool=&since=&until=&offset=`), so a reload or a link keeps them.
// Must never change the log (it is append-only) nor show more than the hub answered
// (values are redacted there).
//
// data-test: "audit-project", "audit-tool", "audit-since", "audit-until",
// "audit-clear"; "audit-list", "audit-row" (data-id), "audit-tool-name",
// "audit-outcome"; "audit-prev", "audit-next", "audit-range".

import * as api from '../api.js';
import { h, replace, ago, debounce } from '../dom.js';
import { projectSelect } from '../projects.js';
import { fetchAll, num, projectName, section, when } from '../admin/common.js';

const PAGE = 50;
const DAY = /^\d{4}-\d{2}-\d{2}$/;

/** Local midnight starting `day` (`YYYY-MM-DD`), in ms. */
function dayStart(day) {
  const [y, m, d] = day.split('-').map(Number);
  return new Date(y, m - 1, d).getTime();
}

/** What a tool acted on, from the arguments it was given. */
function target(args) {
  if (!args || typeof args !== 'object') return null;
  for (const key of ['title', 'name', 'query', 'url', 'path', 'id', 'note', 'task']) {
    const v = args[key];
    if (typeof v !== 'string' || !v.trim()) continue;
    // A document id says little beyond its start; the details show it whole.
    if (/^[0-9a-f]{32}$/.test(v)) return h('span', { class: 'id', title: v }, `${v.slice(0, 8)}…`);
    return v.length > 80 ? v.slice(0, 79) + '…' : v;
  }
  return null;
}

function row(ctx, a) {
  const what = target(a.args);
  return h(
    'li',
    { class: ['audit-row', a.is_error ? 'failed' : null], dataset: { test: 'audit-row', id: String(a.id) } },
    h('time', { class: 'audit-when', datetime: new Date(a.at).toISOString(), title: ago(a.at) }, when(a.at)),
    h(
      'div',
      { class: 'audit-what' },
      h(
        'div',
        null,
        h('code', { class: 'tool', dataset: { test: 'audit-tool-name' } }, a.tool),
        what ? [' on ', h('strong', null, what)] : null,
      ),
      h(
        'div',
        { class: 'meta' },
        'by the agent in conversation ',
        h('span', { class: 'conversation' }, `“${a.conversation}”`),
        ' · ',
        projectName(ctx.projects, a.project),
      ),
    ),
    h(
      'span',
      { class: ['pill', a.is_error ? 'danger' : 'ok'], dataset: { test: 'audit-outcome' } },
      a.is_error ? 'failed' : 'done',
    ),
    h(
      'details',
      { class: 'audit-details' },
      h('summary', null, 'Details'),
      h('h4', null, 'Arguments'),
      h('pre', null, JSON.stringify(a.args, null, 2)),
      h('h4', null, 'Outcome'),
      h('pre', null, a.outcome || '(nothing)'),
    ),
  );
}

export default {
  title: 'Audit log',
  async mount(el, ctx) {
    const p = ctx.route.params;
    const filters = {
      project: p.get('project') || '',
      tool: p.get('tool') || '',
      since: DAY.test(p.get('since') || '') ? p.get('since') : '',
      until: DAY.test(p.get('until') || '') ? p.get('until') : '',
    };
    const offset = Math.max(0, Math.floor(Number(p.get('offset')) || 0));

    const go = (changes) => {
      const next = { ...filters, offset: 0, ...changes };
      const q = new URLSearchParams();
      for (const [k, v] of Object.entries(next)) if (v) q.set(k, String(v));
      const query = q.toString();
      ctx.navigate(`audit${query ? `?${query}` : ''}`, { replace: true });
    };

    const project = projectSelect(ctx.projects, filters.project, {
      all: true,
      label: 'Project',
      dataset: { test: 'audit-project' },
      onchange: () => go({ project: project.value }),
    });
    const tools = h('datalist', { id: 'audit-tools' });
    const tool = h('input', {
      type: 'search',
      value: filters.tool,
      list: 'audit-tools',
      placeholder: 'Any tool',
      'aria-label': 'Tool',
      spellcheck: 'false',
      dataset: { test: 'audit-tool' },
      onchange: () => go({ tool: tool.value.trim() }),
    });
    const date = (key, label) => {
      const input = h('input', {
        type: 'date',
        value: filters[key],
        'aria-label': label,
        dataset: { test: `audit-${key}` },
        onchange: () => go({ [key]: DAY.test(input.value) ? input.value : '' }),
      });
      return h('label', { class: 'inline' }, h('span', null, label), input);
    };
    const filtered = Object.values(filters).some(Boolean);

    const body = h('div', null, h('p', { class: 'muted' }, 'Loading…'));
    replace(
      el,
      h('h1', null, 'Audit log'),
      h(
        'p',
        { class: 'muted intro' },
        'Every tool the agent ran, newest first. The log only grows: nothing here can be changed or removed.',
      ),
      h(
        'form',
        {
          class: 'toolbar audit-filters',
          role: 'search',
          onsubmit: (e) => (e.preventDefault(), go({ tool: tool.value.trim() })),
        },
        project,
        tool,
        tools,
        date('since', 'From'),
        date('until', 'To'),
        filtered
          ? h(
              'button',
              {
                type: 'button',
                dataset: { test: 'audit-clear' },
                onclick: () => go({ project: '', tool: '', since: '', until: '' }),
              },
              'Clear',
            )
          : null,
      ),
      body,
    );

    const query = () => ({
      project: filters.project,
      tool: filters.tool,
      since: filters.since ? dayStart(filters.since) : null,
      // `until` is exclusive on the hub: the end of the chosen day.
      until: filters.until ? dayStart(filters.until) + 86_400_000 : null,
      limit: PAGE,
      offset,
    });

    const reload = section(
      body,
      'the audit log',
      () => api.get('/audit', query()),
      (page) => {
        if (!page.data.length) {
          return h(
            'p',
            { class: 'empty' },
            offset
              ? 'No more entries.'
              : filtered
                ? 'Nothing matches these filters.'
                : 'The agent has not run a tool yet.',
          );
        }
        const first = page.offset + 1;
        const last = page.offset + page.data.length;
        return [
          h(
            'ol',
            { class: 'list audit-list', dataset: { test: 'audit-list' } },
            page.data.map((a) => row(ctx, a)),
          ),
          h(
            'nav',
            { class: 'pager', 'aria-label': 'Pages' },
            h(
              'button',
              {
                disabled: offset === 0,
                dataset: { test: 'audit-prev' },
                onclick: () => go({ ...filters, offset: Math.max(0, offset - PAGE) }),
              },
              '← Newer',
            ),
            h(
              'span',
              { class: 'muted', dataset: { test: 'audit-range' } },
              `${num(first)}–${num(last)} of ${num(page.total)}`,
            ),
            h(
              'button',
              {
                disabled: last >= page.total,
                dataset: { test: 'audit-next' },
                onclick: () => go({ ...filters, offset: offset + PAGE }),
              },
              'Older →',
            ),
          ),
        ];
      },
    );

    // Tool names for the filter's suggestions, from any project's catalog (the same list).
    const someProject = ctx.projects[0]?.id;
    if (someProject) {
      fetchAll(`/projects/${someProject}/tools`)
        .then((list) =>
          replace(
            tools,
            list.map((t) => h('option', { value: t.name })),
          ),
        )
        .catch(() => {});
    }

    // A tool that finished appended a row: the first page shows it.
    const fresh = debounce(reload, 500);
    ctx.onEvent('tool_result', () => offset === 0 && fresh());
    ctx.on('resync', reload);
    ctx.on('hub', (online) => online && reload());
    await reload();
  },
};
