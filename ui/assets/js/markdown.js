// markdown.js: Markdown to DOM nodes, for notes, skills and the agent's answers.
//
// Owns: the subset people and models write (headings, paragraphs, emphasis, strong,
// strike, code spans and fenced blocks, links, autolinks, block quotes, ordered,
// unordered and task lists, rules, pipe tables). Output is built node by node with
// dom.js: text is always a text node, so `<script>`, `<img onerror=…>` or any other
// markup in the source shows as the characters it is and never becomes an element.
// Links keep only http(s), mailto and same-origin targets; images become links
// (remote images would leak that a note was opened, and the page's policy refuses
// them). Must never parse a string as HTML, nor take an attribute from the source other than
// a checked URL.

import { h, safeUrl } from './dom.js';

const INLINE = [
  // [regex, build(match) -> node]; tried left to right at each position, earliest match wins.
  [/`+/y, null], // code span: handled specially below
  [/!\[([^\]\n]*)\]\(([^)\s]+)(?:\s+"[^"]*")?\)/y, (m) => link(m[2], `🖼 ${m[1] || 'image'}`)],
  [/\[([^\]\n]+)\]\(([^)\s]+)(?:\s+"[^"]*")?\)/y, (m) => link(m[2], inline(m[1]))],
  [/<(https?:\/\/[^>\s]+)>/y, (m) => link(m[1], m[1])],
  [/https?:\/\/[^\s<>()]+[^\s<>().,;:!?'"]/y, (m) => link(m[0], m[0])],
  [/\*\*(?=\S)([\s\S]*?\S)\*\*/y, (m) => h('strong', null, inline(m[1]))],
  [/__(?=\S)([\s\S]*?\S)__(?!\w)/y, (m) => h('strong', null, inline(m[1]))],
  [/~~(?=\S)([\s\S]*?\S)~~/y, (m) => h('del', null, inline(m[1]))],
  [/\*(?=[^\s*])([\s\S]*?[^\s*])\*/y, (m) => h('em', null, inline(m[1]))],
  [/_(?=[^\s_])([\s\S]*?[^\s_])_(?!\w)/y, (m) => h('em', null, inline(m[1]))],
  [/\\([\\`*_{}[\]()#+\-.!~|<>])/y, (m) => m[1]],
];

function link(url, children) {
  if (!safeUrl(url)) return h('span', null, children);
  const external = /^https?:/i.test(url);
  return h('a', { href: url, target: external ? '_blank' : null, rel: external ? 'noopener noreferrer nofollow' : null }, children);
}

const TRIGGERS = /[`!\[<h*_~\\]/g;

/** Inline Markdown in `text` as an array of nodes and strings. */
export function inline(text) {
  const out = [];
  let plain = '';
  let i = 0;
  while (i < text.length) {
    TRIGGERS.lastIndex = i;
    const next = TRIGGERS.exec(text);
    if (!next) break;
    plain += text.slice(i, next.index);
    i = next.index;
    let matched = false;
    if (text[i] === '`') {
      const ticks = /`+/y;
      ticks.lastIndex = i;
      const run = ticks.exec(text)[0];
      const close = text.indexOf(run, i + run.length);
      if (close > 0) {
        if (plain) out.push(plain), (plain = '');
        out.push(h('code', null, text.slice(i + run.length, close).replace(/^ (.*) $/, '$1')));
        i = close + run.length;
        matched = true;
      }
    } else {
      // An autolink starting with 'h' must begin a word.
      for (const [re, build] of INLINE) {
        if (!build) continue;
        if (text[i] === 'h' && i > 0 && /\w/.test(text[i - 1])) break;
        re.lastIndex = i;
        const m = re.exec(text);
        if (m) {
          if (plain) out.push(plain), (plain = '');
          out.push(build(m));
          i += m[0].length;
          matched = true;
          break;
        }
      }
    }
    if (!matched) {
      plain += text[i];
      i += 1;
    }
  }
  plain += text.slice(i);
  if (plain) out.push(plain);
  // Hard line breaks inside a paragraph keep the writer's lines.
  return out.flatMap((part) =>
    typeof part === 'string' ? part.split('\n').flatMap((line, j) => (j ? [h('br'), line] : [line])) : [part],
  );
}

const LIST_ITEM = /^(\s*)([-*+]|\d{1,9}[.)])\s+(.*)$/;
const FENCE = /^\s{0,3}(```+|~~~+)\s*([\w+-]*)/;

function tableCells(line) {
  return line.replace(/^\s*\|/, '').replace(/\|\s*$/, '').split(/(?<!\\)\|/).map((c) => c.trim());
}

/** Markdown `source` as a DocumentFragment. */
export function render(source) {
  const lines = String(source ?? '').replace(/\r\n?/g, '\n').split('\n');
  const frag = document.createDocumentFragment();
  blocks(lines, frag);
  return frag;
}

function blocks(lines, parent) {
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    if (/^\s*$/.test(line)) {
      i += 1;
      continue;
    }
    const fence = FENCE.exec(line);
    if (fence) {
      const body = [];
      i += 1;
      while (i < lines.length && !lines[i].trim().startsWith(fence[1])) body.push(lines[i++]);
      i += 1;
      parent.append(h('pre', null, h('code', { class: fence[2] ? `lang-${fence[2]}` : null }, body.join('\n'))));
      continue;
    }
    const heading = /^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$/.exec(line);
    if (heading) {
      parent.append(h(`h${heading[1].length}`, null, inline(heading[2])));
      i += 1;
      continue;
    }
    if (/^\s{0,3}([-*_])(\s*\1){2,}\s*$/.test(line)) {
      parent.append(h('hr'));
      i += 1;
      continue;
    }
    if (/^\s{0,3}>/.test(line)) {
      const inner = [];
      while (i < lines.length && /^\s{0,3}>/.test(lines[i])) inner.push(lines[i++].replace(/^\s{0,3}>\s?/, ''));
      const quote = h('blockquote');
      blocks(inner, quote);
      parent.append(quote);
      continue;
    }
    if (line.includes('|') && i + 1 < lines.length && /^\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$/.test(lines[i + 1])) {
      const head = tableCells(line);
      i += 2;
      const rows = [];
      while (i < lines.length && lines[i].includes('|') && lines[i].trim()) rows.push(tableCells(lines[i++]));
      parent.append(
        h(
          'div',
          { class: 'table-wrap' },
          h(
            'table',
            null,
            h('thead', null, h('tr', null, head.map((c) => h('th', null, inline(c))))),
            h('tbody', null, rows.map((r) => h('tr', null, head.map((_, j) => h('td', null, inline(r[j] ?? '')))))),
          ),
        ),
      );
      continue;
    }
    const item = LIST_ITEM.exec(line);
    if (item) {
      i = list(lines, i, parent);
      continue;
    }
    const para = [];
    while (
      i < lines.length &&
      !/^\s*$/.test(lines[i]) &&
      !FENCE.test(lines[i]) &&
      !/^\s{0,3}(#{1,6}\s|>)/.test(lines[i]) &&
      !(para.length && LIST_ITEM.test(lines[i]))
    ) {
      para.push(lines[i++].trim());
    }
    parent.append(h('p', null, inline(para.join('\n'))));
  }
}

function list(lines, start, parent) {
  const first = LIST_ITEM.exec(lines[start]);
  const indent = first[1].length;
  const ordered = /\d/.test(first[2]);
  const el = h(ordered ? 'ol' : 'ul');
  if (ordered && parseInt(first[2], 10) !== 1) el.setAttribute('start', String(parseInt(first[2], 10)));
  let i = start;
  while (i < lines.length) {
    const m = LIST_ITEM.exec(lines[i]);
    if (!m || m[1].length !== indent || /\d/.test(m[2]) !== ordered) break;
    const body = [m[3]];
    i += 1;
    while (i < lines.length && !/^\s*$/.test(lines[i])) {
      const sub = LIST_ITEM.exec(lines[i]);
      if (sub && sub[1].length <= indent) break;
      body.push(lines[i].slice(Math.min(indent + 2, lines[i].search(/\S/))));
      i += 1;
    }
    const li = h('li');
    const task = /^\[([ xX])\]\s+(.*)$/.exec(body[0]);
    if (task) {
      li.className = 'task-item';
      li.append(h('input', { type: 'checkbox', checked: task[1] !== ' ', disabled: true, 'aria-label': 'done' }), ' ');
      body[0] = task[2];
    }
    const [head, ...rest] = body;
    li.append(...inline(head));
    if (rest.length) blocks(rest, li);
    el.append(li);
    while (i < lines.length && /^\s*$/.test(lines[i]) && LIST_ITEM.test(lines[i + 1] ?? '')) i += 1;
  }
  parent.append(el);
  return i;
}
