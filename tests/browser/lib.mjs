// lib.mjs: what every browser journey shares. A journey is a script run by a Rust
// integration test (tests/tests/it/ui_*.rs through hearth_tests::browser::Journey),
// which starts the real hub and node processes and hands the script their addresses.
//
// Owns: launching Debian's Chromium headless with no network beyond this machine,
// signing a browser in with a one-time login link, screenshots (light and dark), and
// the control channel back to the Rust test (`control('cut')` prints one line on
// stdout and waits for the test's answer on stdin). Never starts a server itself.

import { chromium } from 'playwright-core';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';

/** The journey's configuration from the Rust test (`HEARTH_JOURNEY`, JSON). */
export const config = JSON.parse(process.env.HEARTH_JOURNEY ?? '{}');

const CHROMIUM = process.env.HEARTH_CHROMIUM || '/usr/bin/chromium';

// The flags keep Chromium off every network but the servers under test.
const ARGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--disable-default-apps',
  '--disable-extensions',
  '--metrics-recording-only',
  '--no-default-browser-check',
];

export async function launch() {
  return chromium.launch({ executablePath: CHROMIUM, args: ARGS, headless: true });
}

/**
 * A new browser context signed in through `loginUrl` (a one-time link), on the page
 * the link redirects to. Console errors and page errors are logged and counted in
 * `page.errors`, so a journey can assert none happened.
 */
export async function signIn(browser, loginUrl, { colorScheme = 'light', width = 1280, height = 800, name = 'page' } = {}) {
  const context = await browser.newContext({ colorScheme, viewport: { width, height } });
  const page = await context.newPage();
  page.errors = [];
  page.on('pageerror', (e) => {
    page.errors.push(e.message);
    log(`${name}: page error: ${e.message}`);
  });
  page.on('console', (m) => {
    if (m.type() === 'error') log(`${name}: console: ${m.text()}`);
  });
  // Another test adding a veth pair on this machine makes Chromium drop the loads under
  // way (net::ERR_NETWORK_CHANGED); the app then never boots. The link was used and
  // the cookie set by then, so one reload is what a person would do.
  let networkChanged = false;
  page.on('requestfailed', (r) => {
    if (r.failure()?.errorText === 'net::ERR_NETWORK_CHANGED') networkChanged = true;
  });
  await page.goto(loginUrl);
  try {
    await page.waitForSelector('#main', { timeout: 15000 });
  } catch (e) {
    if (!networkChanged) throw e;
    log(`${name}: the network changed while the app loaded; reloading once`);
    await page.reload();
    await page.waitForSelector('#main', { timeout: 15000 });
  }
  return page;
}

/** Logs a step (the Rust test shows the script's output when it fails). */
export function log(...parts) {
  console.log(parts.join(' '));
}

/** Writes `<shots>/<name>-<scheme>.png` for the page as it is, in light and in dark. */
export async function shot(page, name, { schemes = ['light', 'dark'], fullPage = true } = {}) {
  const dir = config.shots;
  if (!dir) return;
  mkdirSync(dir, { recursive: true });
  for (const scheme of schemes) {
    await page.emulateMedia({ colorScheme: scheme });
    // Give a repaint a frame.
    await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));
    await page.screenshot({ path: join(dir, `${name}-${scheme}.png`), fullPage });
  }
  await page.emulateMedia({ colorScheme: null });
}

let replies = null;

/**
 * Asks the Rust test to act (`cut`, `heal`, `stop-hub`, `start-hub`, … as the test
 * defines) and resolves with its answer (JSON), or rejects with its error.
 */
export async function control(command, arg = null) {
  if (!replies) {
    replies = [];
    const waiting = [];
    const rl = createInterface({ input: process.stdin });
    rl.on('line', (line) => {
      const w = waiting.shift();
      if (w) w(line);
      else replies.push(line);
    });
    replies.next = () => (replies.length ? Promise.resolve(replies.shift()) : new Promise((r) => waiting.push(r)));
  }
  process.stdout.write(`@@control ${command} ${JSON.stringify(arg)}\n`);
  const line = await replies.next();
  if (line.startsWith('@@ok ')) return JSON.parse(line.slice(5));
  throw new Error(`control ${command}: ${line.replace(/^@@err /, '')}`);
}

/** Fails with `message` unless `cond`. */
export function assert(cond, message) {
  if (!cond) throw new Error(`assertion failed: ${message}`);
}

/** Polls `fn` until it returns a truthy value or `timeout` ms pass. */
export async function until(fn, { timeout = 15000, interval = 50, what = 'condition' } = {}) {
  const end = Date.now() + timeout;
  let last;
  for (;;) {
    try {
      const v = await fn();
      if (v) return v;
    } catch (e) {
      last = e;
    }
    if (Date.now() > end) throw new Error(`${what} not met within ${timeout} ms${last ? `: ${last.message}` : ''}`);
    await new Promise((r) => setTimeout(r, interval));
  }
}

/** Runs `main`, exiting 0 on success and 1 (with the error) on failure. */
export async function run(main) {
  const started = Date.now();
  try {
    await main();
    log(`journey passed in ${Date.now() - started} ms`);
    process.exit(0);
  } catch (e) {
    console.error(e?.stack ?? String(e));
    process.exit(1);
  }
}
