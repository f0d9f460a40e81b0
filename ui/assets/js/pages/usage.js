// pages/usage.js: the Usage page: tokens, requests and estimated cost over the last 7,
// 30 or 90 days, as a bar chart of tokens per day and tables per day, model and
// project, each with its total.
//
// Owns: reading `GET /usage?since=` (rows per day, model and project; every page of
// them) and adding them up here. The cost is the hub's estimate from its price table
// (`cost_micro_usd`); a model the table does not know (`priced: false`) shows "—" and
// is left out of the totals, which then say so. Must never present the estimate as a
// bill. Days are UTC, as the hub counts them.
//
// data-test: "range" (data-days, aria-pressed), "usage-project", "usage-chart", "usage-bar" (data-day),
// "usage-total", "usage-by-day", "usage-by-model", "usage-by-project" (tables; rows
// "usage-row").

import { h, replace, debounce } from '../dom.js';
import { projectSelect } from '../projects.js';
import { compact, fetchAll, money, num, projectName, section } from '../admin/common.js';

const RANGES = [7, 30, 90];

/** `YYYY-MM-DD` of the UTC day `back` days before today. */
function utcDay(back) {
  return new Date(Date.now() - back * 86_400_000).toISOString().slice(0, 10);
}

function emptyTotals() {
  return { input: 0, output: 0, cached: 0, requests: 0, cost: 0, unpriced: 0 };
}

function add(t, r) {
  t.input += r.input_tokens;
  t.output += r.output_tokens;
  t.cached += r.cached_tokens;
  t.requests += r.requests;
  if (r.priced) t.cost += r.cost_micro_usd;
  else t.unpriced += r.input_tokens + r.output_tokens;
  return t;
}

/** Totals of `rows` grouped by `key(row)`: Map<key, totals>. */
function group(rows, key) {
  const by = new Map();
  for (const r of rows) {
    const k = key(r);
    add(by.get(k) ?? by.set(k, emptyTotals()).get(k), r);
  }
  return by;
}

/** The estimate; "—" when nothing in it has a price, and `*` on a total that leaves some out. */
function costCell(t, { total = false } = {}) {
  if (t.unpriced && !t.cost) return '—';
  return total && t.unpriced ? `${money(t.cost)}*` : money(t.cost);
}

/** "Sun, Nov 23" for a UTC day. */
function dayLabel(day) {
  return new Date(day + 'T00:00:00Z').toLocaleDateString(undefined, {
    weekday: 'short',
    day: 'numeric',
    month: 'short',
    timeZone: 'UTC',
  });
}

function table(test, caption, firstHeader, entries, total, label = (k) => k) {
  // Exact counts, or compact ones ("1.9M") where the screen is narrow.
  const count = (n) => [h('span', { class: 'full' }, num(n)), h('span', { class: 'short' }, compact(n))];
  const cells = (t, opts) => [
    h('td', { class: 'num hide-narrow' }, num(t.requests)),
    h('td', { class: 'num' }, count(t.input)),
    h('td', { class: 'num' }, count(t.output)),
    h('td', { class: 'num hide-narrow' }, num(t.cached)),
    h('td', { class: 'num' }, costCell(t, opts)),
  ];
  return h(
    'div',
    { class: 'table-wrap' },
    h(
      'table',
      { class: 'usage-table', dataset: { test } },
      h('caption', null, caption),
      h(
        'thead',
        null,
        h(
          'tr',
          null,
          h('th', { scope: 'col' }, firstHeader),
          h('th', { scope: 'col', class: 'num hide-narrow' }, 'Requests'),
          h('th', { scope: 'col', class: 'num' }, 'Input'),
          h('th', { scope: 'col', class: 'num' }, 'Output'),
          h('th', { scope: 'col', class: 'num hide-narrow' }, 'Cached'),
          h('th', { scope: 'col', class: 'num' }, 'Est. cost'),
        ),
      ),
      h(
        'tbody',
        null,
        entries.map(([k, t]) =>
          h('tr', { dataset: { test: 'usage-row' } }, h('th', { scope: 'row' }, label(k)), cells(t)),
        ),
      ),
      h('tfoot', null, h('tr', null, h('th', { scope: 'row' }, 'Total'), cells(total, { total: true }))),
    ),
  );
}

function chart(days, byDay) {
  const max = Math.max(1, ...days.map((d) => (byDay.get(d)?.input ?? 0) + (byDay.get(d)?.output ?? 0)));
  const label = (d) =>
    new Date(d + 'T00:00:00Z').toLocaleDateString(undefined, { day: 'numeric', month: 'short', timeZone: 'UTC' });
  return h(
    'figure',
    { class: 'usage-chart', dataset: { test: 'usage-chart' } },
    h(
      'div',
      { class: 'bars', role: 'img', 'aria-label': `Tokens per day; the busiest day used ${num(max)}` },
      days.map((d) => {
        const t = byDay.get(d);
        const input = t?.input ?? 0;
        const output = t?.output ?? 0;
        return h(
          'div',
          {
            class: 'bar',
            dataset: { test: 'usage-bar', day: d },
            title: `${label(d)}: ${num(input)} in, ${num(output)} out`,
          },
          h('div', { class: 'bar-output', style: { height: `${(100 * output) / max}%` } }),
          h('div', { class: 'bar-input', style: { height: `${(100 * input) / max}%` } }),
        );
      }),
    ),
    h(
      'figcaption',
      { class: 'chart-axis' },
      h('span', null, label(days[0])),
      h(
        'span',
        { class: 'legend' },
        h('i', { class: 'key-input' }),
        'input ',
        h('i', { class: 'key-output' }),
        'output',
      ),
      h('span', null, label(days[days.length - 1])),
    ),
  );
}

function view(ctx, rows, range) {
  const days = Array.from({ length: range }, (_, i) => utcDay(range - 1 - i));
  const total = rows.reduce(add, emptyTotals());
  const byDay = group(rows, (r) => r.day);
  const byModel = group(rows, (r) => r.model);
  const byProject = group(rows, (r) => r.project);
  const stat = (label, value, test) =>
    h(
      'div',
      { class: 'stat', dataset: test ? { test } : null },
      h('div', { class: 'stat-value' }, value),
      h('div', { class: 'stat-label' }, label),
    );

  if (!rows.length) {
    return h('p', { class: 'empty' }, `No model was used in the last ${range} days.`);
  }
  const sorted = (m) => [...m].sort((a, b) => b[1].input + b[1].output - (a[1].input + a[1].output));
  return [
    h(
      'div',
      { class: 'stats', dataset: { test: 'usage-total' } },
      stat('tokens in', compact(total.input)),
      stat('tokens out', compact(total.output)),
      stat('requests', num(total.requests)),
      stat('estimated cost', costCell(total, { total: true })),
    ),
    chart(days, byDay),
    total.unpriced
      ? h(
          'p',
          { class: 'muted note' },
          `* Costs leave out the ${num(total.unpriced)} tokens of models the hub has no price for (shown as “—”). `,
          'They are estimates from list prices, not a bill.',
        )
      : h('p', { class: 'muted note' }, 'Costs are estimates from list prices, not a bill.'),
    table('usage-by-model', 'Per model', 'Model', sorted(byModel), total),
    table('usage-by-project', 'Per project', 'Project', sorted(byProject), total, (id) =>
      projectName(ctx.projects, id),
    ),
    table(
      'usage-by-day',
      'Per day',
      'Day',
      [...byDay].sort((a, b) => b[0].localeCompare(a[0])),
      total,
      dayLabel,
    ),
  ];
}

export default {
  title: 'Usage',
  async mount(el, ctx) {
    const params = ctx.route.params;
    let range = Number(params.get('days'));
    if (!RANGES.includes(range)) range = 30;
    const project = params.get('project') || '';
    const go = (days, p) =>
      ctx.navigate(`usage?days=${days}${p ? `&project=${encodeURIComponent(p)}` : ''}`, { replace: true });
    const body = h('div', null, h('p', { class: 'muted' }, 'Loading…'));
    const buttons = RANGES.map((days) =>
      h(
        'button',
        {
          'aria-pressed': String(days === range),
          dataset: { test: 'range', days: String(days) },
          onclick: () => go(days, project),
        },
        `${days} days`,
      ),
    );
    const select = projectSelect(ctx.projects, project, {
      all: true,
      label: 'Project',
      dataset: { test: 'usage-project' },
      onchange: () => go(range, select.value),
    });
    replace(
      el,
      h('h1', null, 'Usage'),
      h(
        'div',
        { class: 'toolbar' },
        h('div', { class: 'segmented', role: 'group', 'aria-label': 'Period' }, buttons),
        select,
      ),
      body,
    );
    const reload = section(
      body,
      'usage figures',
      () => fetchAll('/usage', { since: utcDay(range - 1), project }),
      (rows) => view(ctx, rows, range),
      (e) =>
        e.code === 'out_of_scope' && !project
          ? h('p', { class: 'notice' }, 'This laptop is paired for one project: choose it above to see its usage.')
          : null,
    );
    ctx.on('resync', reload);
    ctx.on('hub', (online) => online && reload());
    ctx.on('projects', reload);
    // A finished turn has added its tokens.
    ctx.onEvent('finished', debounce(reload, 1000));
    await reload();
  },
};
