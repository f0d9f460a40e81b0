#!/usr/bin/env node
// automerge-repo baseline benchmark (orchestrator).
//
//   node tests/js/amr-bench.mjs --docs N --workdir DIR
//        [--timeout-s 900] [--concurrency 128] [--keepalive-ms 30000]
//        [--restart-server-before-reconnect]
//
// --concurrency: how many repo.find() calls the client keeps outstanding
//   (0 = unbounded, i.e. Promise.all over every URL). Unbounded does not work
//   at 10,000 docs here: every handle starts its 60 s request timeout at once
//   and the ones at the back of the queue are declared unavailable before the
//   server gets to them. 128 was as fast as unbounded at 1,000 docs.
// --keepalive-ms: keepAliveInterval of the server's WebSocketServerAdapter.
//   The adapter's default is 5000: it pings every 5 s and terminates a socket
//   that has not answered the previous ping. With thousands of docs on two
//   cores the client's or server's event loop stalls for more than that, the
//   connection is cut, automerge-repo marks every doc still being requested as
//   unavailable and re-syncs every open doc after reconnecting, which stalls
//   the loop again (a cascade that never finished 10,000 docs in 15 min here).
//   30 s only changes how fast a dead peer is detected, not what is synced;
//   pass 5000 for the stock behaviour. Drops are reported as
//   amr_*_disconnects either way.
//
// DIR should be a fresh directory (it is created if missing); the benchmark
// uses DIR/server (server storage), DIR/client (client storage) and
// DIR/urls.txt.
//
// Steps:
//  1. seed (not measured): `amr-server.mjs seed` creates N docs
//     { title: "note i", content: ~2000 chars of deterministic pseudo-random
//     words } in NodeFSStorageAdapter(DIR/server), flushes them, writes the
//     document URLs to DIR/urls.txt and exits.
//  2. `amr-server.mjs serve` starts a sync server (Repo + NodeFSStorageAdapter
//     on DIR/server + WebSocketServerAdapter on a ws WebSocketServer bound to
//     127.0.0.1:0, sharePolicy false as in automerge-repo-sync-server). It
//     loads the seeded docs from disk on demand.
//  3. A byte-counting TCP proxy (in this process, 127.0.0.1:0) sits between the
//     client and the server; it counts bytes in both directions per phase.
//  4. cold catch-up: `amr-client.mjs --mode catchup` with empty storage
//     DIR/client finds all N docs through the proxy; timed from the spawn of
//     the client process to "all N docs ready with content".
//  5. unchanged reconnect: the same client script again on the same client
//     storage (so it already has every doc); timed from spawn until every doc
//     is known to have the server's heads equal to the local heads (see
//     amr-client.mjs for the exact criterion). By default the server process
//     from step 2 keeps running (as a real sync server would);
//     --restart-server-before-reconnect restarts it first.
//
// Results go to stdout, one per line, as `name value unit`. Everything else
// (progress, child logs) goes to stderr. Exit status is non-zero on failure.

import { spawn } from "node:child_process"
import fs from "node:fs"
import net from "node:net"
import path from "node:path"
import readline from "node:readline"
import { fileURLToPath } from "node:url"

const HERE = path.dirname(fileURLToPath(import.meta.url))
const SERVER_JS = path.join(HERE, "amr-server.mjs")
const CLIENT_JS = path.join(HERE, "amr-client.mjs")

// Extra node flags for the child processes (debugging aid, e.g.
// AMR_BENCH_NODE_ARGS="--cpu-prof --cpu-prof-dir=/tmp/prof"); empty by default.
const EXTRA_NODE_ARGS = (process.env.AMR_BENCH_NODE_ARGS ?? "").split(/\s+/).filter(Boolean)

const now = () => performance.timeOrigin + performance.now()
const log = (...a) => console.error("[amr-bench]", ...a)
const sleep = ms => new Promise(r => setTimeout(r, ms))

// ---------------------------------------------------------------- arguments
function usage(msg) {
  if (msg) console.error(`amr-bench: ${msg}`)
  console.error(
    "usage: node amr-bench.mjs --docs N --workdir DIR [--timeout-s 900] [--concurrency 128] [--keepalive-ms 30000] [--restart-server-before-reconnect]",
  )
  process.exit(2)
}
function parseArgs(argv) {
  const o = { timeoutS: 900, concurrency: 128, keepaliveMs: 30000, restartServer: false }
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i]
    const val = () => {
      if (i + 1 >= argv.length) usage(`${k} needs a value`)
      return argv[++i]
    }
    switch (k) {
      case "--docs": o.docs = Number(val()); break
      case "--workdir": o.workdir = val(); break
      case "--timeout-s": o.timeoutS = Number(val()); break
      case "--concurrency": o.concurrency = Number(val()); break
      case "--keepalive-ms": o.keepaliveMs = Number(val()); break
      case "--restart-server-before-reconnect": o.restartServer = true; break
      case "-h": case "--help": usage()
      default: usage(`unknown argument ${k}`)
    }
  }
  if (!Number.isInteger(o.docs) || o.docs < 1) usage("--docs must be a positive integer")
  if (!o.workdir) usage("--workdir is required")
  if (!(o.timeoutS > 0)) usage("--timeout-s must be positive")
  if (!Number.isInteger(o.concurrency) || o.concurrency < 0) usage("--concurrency must be >= 0")
  if (!Number.isInteger(o.keepaliveMs) || o.keepaliveMs < 1) usage("--keepalive-ms must be a positive integer")
  return o
}

// ---------------------------------------------------------------- children
const children = new Set()

function killAll(signal = "SIGKILL") {
  for (const c of children) {
    if (c.exitCode === null && c.signalCode === null) {
      try { c.kill(signal) } catch { /* already gone */ }
    }
  }
}
process.on("exit", () => killAll("SIGKILL"))

let failing = false
function fail(msg) {
  if (failing) return
  failing = true
  console.error(`amr-bench: FAILED: ${msg}`)
  killAll("SIGKILL")
  process.exit(1)
}
for (const sig of ["SIGINT", "SIGTERM", "SIGHUP"]) {
  process.on(sig, () => fail(`interrupted by ${sig}`))
}

/**
 * Spawns `node script args`, forwards its stderr to ours, parses JSON lines on
 * its stdout into events. Returns { child, waitEvent(name), exited }.
 */
function startNode(name, script, args, { cwd } = {}) {
  const child = spawn(process.execPath, [...EXTRA_NODE_ARGS, script, ...args], {
    cwd,
    stdio: ["pipe", "pipe", "pipe"],
  })
  children.add(child)
  const events = []
  const waiters = []
  const rlOut = readline.createInterface({ input: child.stdout })
  rlOut.on("line", line => {
    let ev
    try { ev = JSON.parse(line) } catch { console.error(`[${name} stdout] ${line}`); return }
    ev.t_recv = now()
    events.push(ev)
    for (const w of [...waiters]) {
      if (w.name === ev.event) {
        waiters.splice(waiters.indexOf(w), 1)
        w.resolve(ev)
      }
    }
  })
  readline.createInterface({ input: child.stderr }).on("line", line => console.error(line))
  const exited = new Promise(resolve => {
    child.on("exit", (code, signal) => {
      children.delete(child)
      rlOut.close()
      for (const w of waiters.splice(0)) {
        w.reject(new Error(`${name} exited (code ${code}, signal ${signal}) before sending "${w.name}"`))
      }
      resolve({ code, signal })
    })
  })
  child.on("error", err => fail(`${name}: could not start: ${err.message}`))
  const waitEvent = evName => {
    const seen = events.find(e => e.event === evName)
    if (seen) return Promise.resolve(seen)
    if (child.exitCode !== null || child.signalCode !== null) {
      return Promise.reject(new Error(`${name} already exited before sending "${evName}"`))
    }
    return new Promise((resolve, reject) => waiters.push({ name: evName, resolve, reject }))
  }
  return { child, events, waitEvent, exited, name }
}

async function expectCleanExit(proc) {
  const { code, signal } = await proc.exited
  if (code !== 0) throw new Error(`${proc.name} exited with code ${code}${signal ? `, signal ${signal}` : ""}`)
}

// ---------------------------------------------------------------- proxy
function startProxy() {
  let target = null // port of the server
  let counters = { up: 0, down: 0, conns: 0 }
  const open = new Set()
  const server = net.createServer(clientSock => {
    const c = counters
    c.conns++
    const upstream = net.connect({ host: "127.0.0.1", port: target })
    open.add(clientSock)
    open.add(upstream)
    clientSock.setNoDelay(true)
    upstream.setNoDelay(true)
    clientSock.on("data", buf => { c.up += buf.length })
    upstream.on("data", buf => { c.down += buf.length })
    clientSock.pipe(upstream)
    upstream.pipe(clientSock)
    const done = s => () => { open.delete(s) }
    const destroyBoth = () => { clientSock.destroy(); upstream.destroy() }
    clientSock.on("close", done(clientSock))
    upstream.on("close", done(upstream))
    clientSock.on("error", destroyBoth)
    upstream.on("error", destroyBoth)
    clientSock.on("close", () => upstream.end())
    upstream.on("close", () => clientSock.end())
  })
  return new Promise((resolve, reject) => {
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      resolve({
        port: server.address().port,
        setTarget: p => { target = p },
        reset: () => { counters = { up: 0, down: 0, conns: 0 }; return counters },
        // wait until every proxied socket has closed (or give up after ms)
        drain: async ms => {
          const end = Date.now() + ms
          while (open.size > 0 && Date.now() < end) await sleep(20)
          return open.size
        },
        close: () => { for (const s of open) s.destroy(); server.close() },
      })
    })
  })
}

// ---------------------------------------------------------------- helpers
function dirBytes(dir) {
  let total = 0
  let entries
  try { entries = fs.readdirSync(dir, { withFileTypes: true }) } catch { return 0 }
  for (const e of entries) {
    const p = path.join(dir, e.name)
    if (e.isDirectory()) total += dirBytes(p)
    else if (e.isFile()) total += fs.statSync(p).size
  }
  return total
}

const results = []
function result(name, value, unit) {
  results.push(`${name} ${value} ${unit}`)
}
const fmt = (x, digits) => Number(x.toFixed(digits)).toString()
const mb = bytes => fmt(bytes / (1024 * 1024), 1)

async function startServer(serverDir, keepaliveMs) {
  const srv = startNode("amr-server", SERVER_JS, ["serve", "--storage", serverDir, "--keepalive-ms", String(keepaliveMs)])
  const listening = await srv.waitEvent("listening")
  log(`server listening on 127.0.0.1:${listening.port} (storage id ${listening.storage_id})`)
  return { srv, listening }
}

async function stopServer(srv) {
  const stats = await Promise.race([
    srv.waitEvent("stats").catch(() => null),
    (srv.child.stdin.write("stats\n"), sleep(10000).then(() => null)),
  ])
  srv.child.stdin.end() // server shuts down when stdin closes
  const timer = setTimeout(() => srv.child.kill("SIGKILL"), 10000)
  await srv.exited
  clearTimeout(timer)
  return stats
}

async function runClient(mode, opts, paths, proxy) {
  const counters = proxy.reset()
  const args = [
    "--mode", mode,
    "--storage", paths.client,
    "--urls-file", paths.urls,
    "--url", `ws://127.0.0.1:${proxy.port}`,
    "--concurrency", String(opts.concurrency),
  ]
  const tSpawn = now()
  const cl = startNode(`amr-client(${mode})`, CLIENT_JS, args)
  await expectCleanExit(cl)
  const left = await proxy.drain(5000)
  if (left > 0) log(`warning: ${left} proxied sockets still open after ${mode}`)
  const ev = name => {
    const e = cl.events.find(x => x.event === name)
    if (!e) throw new Error(`client (${mode}) did not report "${name}"`)
    return e
  }
  const st = ev("started")
  log(
    `${mode} client timeline: spawn->main ${fmt(st.t_main - tSpawn, 1)} ms, ` +
      `main->connected ${fmt(ev("connected").t - st.t_main, 1)} ms, ` +
      `connected->ready ${fmt(ev("ready").t - ev("connected").t, 1)} ms` +
      (mode === "reconnect" ? `, ready->synced ${fmt(ev("synced").t - ev("ready").t, 1)} ms` : ""),
  )
  return {
    tSpawn,
    started: st,
    connected: ev("connected"),
    ready: ev("ready"),
    synced: mode === "reconnect" ? ev("synced") : null,
    done: ev("done"),
    wire: { up: counters.up, down: counters.down, total: counters.up + counters.down, conns: counters.conns },
  }
}

// ---------------------------------------------------------------- main
async function main() {
  const opts = parseArgs(process.argv.slice(2))
  const globalTimer = setTimeout(
    () => fail(`global timeout of ${opts.timeoutS} s exceeded`),
    opts.timeoutS * 1000,
  )
  globalTimer.unref()

  const workdir = path.resolve(opts.workdir)
  fs.mkdirSync(workdir, { recursive: true })
  const paths = {
    server: path.join(workdir, "server"),
    client: path.join(workdir, "client"),
    urls: path.join(workdir, "urls.txt"),
  }
  for (const p of [paths.server, paths.client, paths.urls]) {
    if (fs.existsSync(p)) throw new Error(`${p} already exists; --workdir must be a fresh directory`)
  }
  const tBench = now()
  log(`automerge-repo baseline: ${opts.docs} docs, workdir ${workdir}`)

  // 1. seed
  const tSeed = now()
  const seeder = startNode("amr-server(seed)", SERVER_JS, [
    "seed", "--storage", paths.server, "--docs", String(opts.docs), "--urls-file", paths.urls,
  ])
  await expectCleanExit(seeder)
  const seeded = await seeder.waitEvent("seeded")
  log(`seeded ${seeded.docs} docs (${seeded.raw_text_bytes} bytes of text) in ${fmt((now() - tSeed) / 1000, 1)} s`)

  // 2. server + 3. proxy
  const proxy = await startProxy()
  let { srv, listening } = await startServer(paths.server, opts.keepaliveMs)
  proxy.setTarget(listening.port)
  log(`proxy on 127.0.0.1:${proxy.port} -> ${listening.port}`)

  // 4. cold catch-up
  log("phase 1: cold catch-up")
  const cu = await runClient("catchup", opts, paths, proxy)
  if (cu.ready.docs !== opts.docs) throw new Error(`catch-up found ${cu.ready.docs} docs, expected ${opts.docs}`)
  if (cu.ready.text_bytes !== seeded.raw_text_bytes) {
    throw new Error(`catch-up text bytes ${cu.ready.text_bytes} != seeded ${seeded.raw_text_bytes}`)
  }
  const cuSeconds = (cu.ready.t - cu.tSpawn) / 1000
  if (cu.done.disconnects > 0) {
    log(`warning: the catch-up client lost its connection ${cu.done.disconnects} time(s); ` +
      `${cu.done.recovered_unavailable} docs were unavailable until it reconnected`)
  }
  log(`catch-up: ${fmt(cuSeconds, 3)} s, ${cu.wire.total} wire bytes (${cu.wire.up} up, ${cu.wire.down} down)`)

  // 5. unchanged reconnect
  let serverStatsBefore = null
  if (opts.restartServer) {
    log("restarting server before reconnect")
    serverStatsBefore = await stopServer(srv)
    ;({ srv, listening } = await startServer(paths.server, opts.keepaliveMs))
    proxy.setTarget(listening.port)
  }
  log("phase 2: unchanged reconnect")
  const rc = await runClient("reconnect", opts, paths, proxy)
  if (rc.ready.docs !== opts.docs) throw new Error(`reconnect found ${rc.ready.docs} docs, expected ${opts.docs}`)
  if (rc.ready.text_bytes !== seeded.raw_text_bytes) {
    throw new Error(`reconnect text bytes ${rc.ready.text_bytes} != seeded ${seeded.raw_text_bytes}`)
  }
  const rcMs = rc.synced.t - rc.tSpawn
  if (rc.done.disconnects > 0) {
    log(`warning: the reconnect client lost its connection ${rc.done.disconnects} time(s)`)
  }
  log(`reconnect: ${fmt(rcMs, 1)} ms, ${rc.wire.total} wire bytes (${rc.wire.up} up, ${rc.wire.down} down)`)

  const serverStats = await stopServer(srv)
  proxy.close()
  if (!serverStats) throw new Error("server did not report its stats")
  const serverPeak = Math.max(serverStats.rss_peak, serverStatsBefore?.rss_peak ?? 0)

  // 6. results
  result("amr_docs", opts.docs, "docs")
  result("amr_catchup_seconds", fmt(cuSeconds, 3), "s")
  result("amr_catchup_inprocess_seconds", fmt((cu.ready.t - cu.started.t_main) / 1000, 3), "s")
  result("amr_catchup_persisted_seconds", fmt((cu.done.t_flushed - cu.tSpawn) / 1000, 3), "s")
  result("amr_catchup_wire_bytes", cu.wire.total, "bytes")
  result("amr_catchup_wire_up_bytes", cu.wire.up, "bytes")
  result("amr_catchup_wire_down_bytes", cu.wire.down, "bytes")
  result("amr_raw_text_bytes", seeded.raw_text_bytes, "bytes")
  result("amr_catchup_wire_ratio", fmt(cu.wire.total / seeded.raw_text_bytes, 3), "x")
  result("amr_reconnect_ms", fmt(rcMs, 1), "ms")
  result("amr_reconnect_inprocess_ms", fmt(rc.synced.t - rc.started.t_main, 1), "ms")
  result("amr_reconnect_wire_bytes", rc.wire.total, "bytes")
  result("amr_reconnect_wire_up_bytes", rc.wire.up, "bytes")
  result("amr_reconnect_wire_down_bytes", rc.wire.down, "bytes")
  result("amr_catchup_disconnects", cu.done.disconnects, "count")
  result("amr_reconnect_disconnects", rc.done.disconnects, "count")
  result("amr_catchup_client_max_loop_delay_ms", fmt(cu.done.max_event_loop_delay_ms, 0), "ms")
  result("amr_reconnect_client_max_loop_delay_ms", fmt(rc.done.max_event_loop_delay_ms, 0), "ms")
  result("amr_server_rss_mb", mb(serverPeak), "MB")
  result("amr_client_rss_mb", mb(cu.done.rss_peak), "MB")
  result("amr_reconnect_client_rss_mb", mb(rc.done.rss_peak), "MB")
  result("amr_server_storage_bytes", dirBytes(paths.server), "bytes")
  result("amr_client_storage_bytes", dirBytes(paths.client), "bytes")
  process.stdout.write(results.join("\n") + "\n")
  log(`done in ${fmt((now() - tBench) / 1000, 1)} s total`)
}

main().then(
  () => process.exit(0),
  err => fail(err && err.message ? err.message : String(err)),
)
