// dom.js: the one way the UI builds elements.
//
// Owns: `h()`, which makes elements from tag, properties and children. Text always goes
// in as text nodes, never as markup: nothing in this UI parses a string as HTML, so a note, a
// contact or a tool result written by a peer can never run script in the page (the
// Content-Security-Policy refuses inline script as a second wall). Must never take a
// string handler (`onclick: "…"`) or a `javascript:` URL.

const SAFE_URL = /^(https?:|mailto:|#|\/(?!\/))/i;

/** Whether `url` may go in an href or src: http(s), mailto, or this origin. */
export function safeUrl(url) {
  return typeof url === 'string' && SAFE_URL.test(url.trim());
}

/**
 * h('button', { class: 'primary', onclick: fn, disabled: true }, 'Save')
 * Properties: `class`, `style` (object), `dataset` (object), `on<event>` (a function),
 * `href`/`src` (checked by safeUrl), anything else as an attribute (`false`/`null`
 * leave it out, `true` sets it empty). Children: nodes, strings, numbers, arrays, null.
 */
export function h(tag, props, ...children) {
  const el = document.createElement(tag);
  if (props) {
    for (const [key, value] of Object.entries(props)) {
      if (value === null || value === undefined || value === false) continue;
      if (key.startsWith('on')) {
        if (typeof value !== 'function') throw new TypeError(`${key} must be a function`);
        el.addEventListener(key.slice(2), value);
      } else if (key === 'class') {
        el.className = Array.isArray(value) ? value.filter(Boolean).join(' ') : value;
      } else if (key === 'style') {
        Object.assign(el.style, value);
      } else if (key === 'dataset') {
        Object.assign(el.dataset, value);
      } else if (key === 'href' || key === 'src') {
        if (safeUrl(value)) el.setAttribute(key, value);
      } else if (key === 'value' || key === 'checked' || key === 'selected') {
        el[key] = value;
      } else {
        el.setAttribute(key, value === true ? '' : String(value));
      }
    }
  }
  append(el, children);
  return el;
}

/** Appends children (nodes, strings, numbers, nested arrays; null skipped). */
export function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

/** Replaces `el`'s children. */
export function replace(el, ...children) {
  el.replaceChildren();
  return append(el, children);
}

/** A short relative time ("just now", "5 min ago", "3 Nov") for ms or s since epoch. */
export function ago(t) {
  if (t === null || t === undefined) return 'never';
  const ms = t < 1e12 ? t * 1000 : t;
  const s = Math.round((Date.now() - ms) / 1000);
  if (s < 45) return 'just now';
  if (s < 3600) return `${Math.round(s / 60)} min ago`;
  if (s < 86400) return `${Math.round(s / 3600)} h ago`;
  return new Date(ms).toLocaleDateString(undefined, { day: 'numeric', month: 'short' });
}

/** Calls `fn` at most once per `ms`, with the last arguments. */
export function debounce(fn, ms) {
  let timer = null;
  return (...args) => {
    clearTimeout(timer);
    timer = setTimeout(() => fn(...args), ms);
  };
}
