// Sync-server side of the automerge-repo baseline benchmark (see amr-bench.mjs).
//
// Two modes:
//   node amr-server.mjs seed  --storage DIR --docs N --urls-file FILE
//       Creates N note documents in a Repo backed by NodeFSStorageAdapter(DIR),
//       flushes them to disk, writes their URLs (one per line) to FILE, prints
//       one JSON line {"event":"seeded",...} on stdout and exits.
//   node amr-server.mjs serve --storage DIR [--keepalive-ms MS]
//       Runs a sync server the way automerge-repo-sync-server does: a Repo with
//       NodeFSStorageAdapter + WebSocketServerAdapter (alias NodeWSServerAdapter)
//       and `sharePolicy: async () => false` ("since this is a server, we don't
//       share generously — we only sync documents they already know about and
//       can ask for by ID"). The WebSocketServer is bound to 127.0.0.1 on an
//       ephemeral port, announced as {"event":"listening","port":P} on stdout.
//       Reading "stats" on stdin prints {"event":"stats",...} (RSS figures);
//       stdin closing or SIGTERM makes it exit.
//
// stdout carries only JSON lines for the orchestrator; progress goes to stderr.

import fs from "node:fs"
import path from "node:path"
import readline from "node:readline"
import { WebSocketServer } from "ws"
import { Repo } from "@automerge/automerge-repo"
import { WebSocketServerAdapter } from "@automerge/automerge-repo-network-websocket"
import { NodeFSStorageAdapter } from "@automerge/automerge-repo-storage-nodefs"

const log = (...a) => console.error("[amr-server]", ...a)
const emit = obj => process.stdout.write(JSON.stringify(obj) + "\n")
const sleep = ms => new Promise(r => setTimeout(r, ms))

function parseArgs(argv) {
  const out = { mode: argv[0] }
  for (let i = 1; i < argv.length; i++) {
    const k = argv[i]
    if (!k.startsWith("--")) throw new Error(`unexpected argument ${k}`)
    out[k.slice(2)] = argv[++i]
  }
  return out
}

// --- peak RSS tracking (process.memoryUsage().rss sampled) ---
let peakRss = 0
function sampleRss() {
  const rss = process.memoryUsage().rss
  if (rss > peakRss) peakRss = rss
  return rss
}

// --- deterministic pseudo-random note text ---
function mulberry32(seed) {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}
const SYLLABLES = [
  "ka", "lo", "mi", "ren", "tas", "vo", "ne", "dri", "sul", "pha", "ith", "or",
  "bel", "cu", "fen", "gar", "hu", "jo", "quin", "sta", "tre", "ul", "wy", "zen",
]
const CONTENT_CHARS = 2000
function noteContent(i) {
  const rnd = mulberry32(0x9e3779b9 ^ (i * 2654435761))
  const words = []
  let len = 0
  while (len < CONTENT_CHARS) {
    const n = 1 + Math.floor(rnd() * 3)
    let w = ""
    for (let s = 0; s < n; s++) w += SYLLABLES[Math.floor(rnd() * SYLLABLES.length)]
    if (rnd() < 0.08) w += "."
    words.push(w)
    len += w.length + 1
  }
  return words.join(" ").slice(0, CONTENT_CHARS)
}

async function seed(opts) {
  const n = Number(opts.docs)
  if (!Number.isInteger(n) || n < 1) throw new Error("--docs must be a positive integer")
  if (!opts.storage || !opts["urls-file"]) throw new Error("seed needs --storage and --urls-file")
  fs.mkdirSync(opts.storage, { recursive: true })
  // NodeFSStorageAdapter keeps every key it has saved in an in-memory cache
  // and scans that cache on every load/save, so one adapter used for all N
  // docs makes seeding quadratic. Seeding is not measured, so use a fresh
  // Repo + adapter per batch to keep it linear; the files on disk are the
  // same as a single long-lived repo would write.
  const enc = new TextEncoder()
  const urls = []
  let rawBytes = 0
  const BATCH = 500
  for (let start = 0; start < n; start += BATCH) {
    const repo = new Repo({
      storage: new NodeFSStorageAdapter(opts.storage),
      network: [],
      peerId: "amr-bench-seeder",
      sharePolicy: async () => false,
    })
    for (let i = start; i < Math.min(n, start + BATCH); i++) {
      const title = `note ${i}`
      const content = noteContent(i)
      rawBytes += enc.encode(title).length + enc.encode(content).length
      const handle = repo.create({ title, content })
      urls.push(handle.url)
    }
    await repo.flush()
    // Let the repo's own throttled saves (saveDebounceRate, 100 ms) drain,
    // then flush once more so nothing is left only in memory.
    await sleep(150)
    await repo.flush()
    await repo.shutdown()
    sampleRss()
    if ((start / BATCH) % 4 === 0 || start + BATCH >= n) log(`seeded ${Math.min(n, start + BATCH)}/${n}`)
  }
  fs.writeFileSync(opts["urls-file"], urls.join("\n") + "\n")
  emit({ event: "seeded", docs: n, raw_text_bytes: rawBytes, rss_peak: peakRss })
}

async function serve(opts) {
  if (!opts.storage) throw new Error("serve needs --storage")
  // WebSocketServerAdapter pings every keepAliveInterval ms (default 5000) and
  // terminates a socket that has not answered the previous ping by then.
  const keepAliveMs = opts["keepalive-ms"] !== undefined ? Number(opts["keepalive-ms"]) : 5000
  if (!(keepAliveMs > 0)) throw new Error("--keepalive-ms must be positive")
  fs.mkdirSync(opts.storage, { recursive: true })
  const wss = new WebSocketServer({ host: "127.0.0.1", port: 0 })
  await new Promise((resolve, reject) => {
    wss.once("listening", resolve)
    wss.once("error", reject)
  })
  const repo = new Repo({
    network: [new WebSocketServerAdapter(wss, keepAliveMs)],
    storage: new NodeFSStorageAdapter(opts.storage),
    peerId: "amr-bench-sync-server",
    // As in automerge-repo-sync-server: a server does not announce documents,
    // it only syncs documents a client asks for by ID.
    sharePolicy: async () => false,
  })
  const storageId = await repo.storageId()
  // Diagnostics only: report every "doc-unavailable" the server sends (a
  // healthy run sends none, since every requested doc is in its storage).
  let unavailableSent = 0
  repo.synchronizer.on("message", m => {
    if (m.type === "doc-unavailable") {
      unavailableSent++
      const h = repo.handles[m.documentId]
      if (unavailableSent <= 5) log(`sent doc-unavailable for ${m.documentId} (server handle state: ${h?.state})`)
    }
  })
  const timer = setInterval(sampleRss, 200)
  timer.unref()
  sampleRss()

  let shuttingDown = false
  const shutdown = async code => {
    if (shuttingDown) return
    shuttingDown = true
    clearInterval(timer)
    try {
      await Promise.race([repo.shutdown(), sleep(5000)])
    } catch (e) {
      log("shutdown error", e)
    }
    wss.close()
    process.exit(code)
  }
  process.on("SIGTERM", () => void shutdown(0))
  process.on("SIGINT", () => void shutdown(0))

  const rl = readline.createInterface({ input: process.stdin })
  rl.on("line", line => {
    const cmd = line.trim()
    if (cmd === "stats") {
      const rss = sampleRss()
      emit({
        event: "stats",
        rss_now: rss,
        rss_peak: peakRss,
        max_rss_rusage: process.resourceUsage().maxRSS * 1024,
        handles: Object.keys(repo.handles).length,
        unavailable_sent: unavailableSent,
      })
    } else if (cmd === "exit") {
      void shutdown(0)
    }
  })
  rl.on("close", () => void shutdown(0))

  const port = wss.address().port
  log(`listening on 127.0.0.1:${port}, storage ${path.resolve(opts.storage)}, keepalive ${keepAliveMs} ms`)
  emit({ event: "listening", port, storage_id: storageId, peer_id: repo.peerId })
}

const opts = parseArgs(process.argv.slice(2))
const run = opts.mode === "seed" ? seed : opts.mode === "serve" ? serve : null
if (!run) {
  console.error("usage: amr-server.mjs seed|serve --storage DIR [...]")
  process.exit(64)
}
run(opts).catch(err => {
  log("fatal:", err && err.stack ? err.stack : err)
  process.exit(1)
})
