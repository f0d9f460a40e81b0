// api.js: the UI's one line to its server (hub or node): JSON calls, server-sent event
// streams, and the numbered event WebSocket.
//
// Owns: the request shape (same origin, the session cookie, JSON), turning every
// non-2xx answer into an `ApiError` with the API's `{error: {code, message}}`, and the
// event stream's resume (`after=<last seq>`) and reconnection. Must never hold a
// credential in script: the session cookie is HttpOnly and the browser sends it.

export const API_ROOT = '/api/v1';

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

const listeners = new Map(); // name -> Set<fn>

/** Subscribes to a UI-wide signal (`signedout`, `event`, `stream`); returns the unsubscribe. */
export function on(name, fn) {
  if (!listeners.has(name)) listeners.set(name, new Set());
  listeners.get(name).add(fn);
  return () => listeners.get(name)?.delete(fn);
}

export function emit(name, value) {
  for (const fn of [...(listeners.get(name) ?? [])]) {
    try {
      fn(value);
    } catch (e) {
      console.error(`listener of ${name}`, e);
    }
  }
}

function url(path, query) {
  const u = new URL(API_ROOT + path, location.origin);
  for (const [k, v] of Object.entries(query ?? {})) {
    if (v !== undefined && v !== null && v !== '') u.searchParams.set(k, String(v));
  }
  return u.pathname + u.search;
}

async function failure(resp) {
  let code = 'http_' + resp.status;
  let message = resp.statusText || 'request failed';
  try {
    const body = await resp.json();
    if (body?.error) ({ code, message } = body.error);
  } catch {
    // Not JSON: keep the status line.
  }
  if (resp.status === 401) emit('signedout', message);
  return new ApiError(resp.status, code, message);
}

/** One JSON call. `body` is sent as JSON; answers parsed JSON, or null for 204. */
export async function call(method, path, { query, body, signal } = {}) {
  let resp;
  try {
    resp = await fetch(url(path, query), {
      method,
      credentials: 'same-origin',
      headers: body === undefined ? {} : { 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal,
    });
  } catch (e) {
    if (e.name === 'AbortError') throw e;
    throw new ApiError(0, 'unreachable', 'the server does not answer');
  }
  if (!resp.ok) throw await failure(resp);
  if (resp.status === 204) return null;
  const text = await resp.text();
  return text ? JSON.parse(text) : null;
}

export const get = (path, query, opts) => call('GET', path, { ...opts, query });
export const post = (path, body, opts) => call('POST', path, { ...opts, body });
export const patch = (path, body, opts) => call('PATCH', path, { ...opts, body });
export const put = (path, body, opts) => call('PUT', path, { ...opts, body });
export const del = (path, opts) => call('DELETE', path, opts);

/**
 * POSTs `body` and reads the answer as server-sent events, calling `onEvent` with each
 * `data:` line's JSON. Resolves when the stream ends; `signal` aborts it.
 */
export async function stream(path, body, onEvent, { signal } = {}) {
  const resp = await fetch(url(path), {
    method: 'POST',
    credentials: 'same-origin',
    headers: { 'content-type': 'application/json', accept: 'text/event-stream' },
    body: JSON.stringify(body),
    signal,
  });
  if (!resp.ok) throw await failure(resp);
  const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += value;
    let cut;
    while ((cut = buffer.indexOf('\n\n')) >= 0) {
      const block = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      const data = block
        .split('\n')
        .filter((l) => l.startsWith('data:'))
        .map((l) => l.slice(5).replace(/^ /, ''))
        .join('\n');
      if (data) onEvent(JSON.parse(data));
    }
  }
}

/**
 * The numbered event stream (`GET /events`, WebSocket). One per page: it resumes after
 * the last `seq` it saw, so a reconnect loses nothing and repeats nothing. Every event
 * is emitted as `event`; a `resync` (or a `lost`) is emitted as `resync`, telling views
 * to reload. Its state (`connecting`, `open`, `closed`) is emitted as `stream`.
 */
class EventStream {
  constructor() {
    this.after = null;
    this.socket = null;
    this.delay = 250;
    this.state = 'closed';
    this.stopped = true;
  }

  start() {
    if (!this.stopped) return;
    this.stopped = false;
    this.connect();
  }

  stop() {
    this.stopped = true;
    this.socket?.close(1000);
    this.socket = null;
  }

  setState(state) {
    if (this.state === state) return;
    this.state = state;
    emit('stream', state);
  }

  connect() {
    if (this.stopped) return;
    const proto = location.protocol === 'https:' ? 'wss:' : 'ws:';
    const query = this.after === null ? '' : `?after=${this.after}`;
    const socket = new WebSocket(`${proto}//${location.host}${API_ROOT}/events${query}`);
    this.socket = socket;
    this.setState('connecting');
    socket.onopen = () => {
      this.delay = 250;
      this.setState('open');
    };
    socket.onmessage = (msg) => {
      let ev;
      try {
        ev = JSON.parse(msg.data);
      } catch {
        return;
      }
      if (ev.type === 'resync') {
        this.after = ev.after;
        emit('resync', ev);
        return;
      }
      if (typeof ev.seq === 'number') this.after = ev.seq;
      if (ev.type === 'lost') emit('resync', ev);
      emit('event', ev);
    };
    socket.onclose = () => {
      if (this.socket !== socket) return;
      this.socket = null;
      this.setState('closed');
      if (this.stopped) return;
      setTimeout(() => this.connect(), this.delay);
      this.delay = Math.min(this.delay * 2, 5000);
    };
  }
}

export const events = new EventStream();

/** Calls `fn(ev)` for every event whose `type` is in `types`; returns the unsubscribe. */
export function onEvent(types, fn) {
  const wanted = new Set(Array.isArray(types) ? types : [types]);
  return on('event', (ev) => {
    if (wanted.has(ev.type)) fn(ev);
  });
}
