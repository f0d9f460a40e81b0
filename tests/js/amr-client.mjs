// Client side of the automerge-repo baseline benchmark (see amr-bench.mjs).
//
//   node amr-client.mjs --mode catchup|reconnect --storage DIR --urls-file FILE
//                       --url ws://127.0.0.1:PORT [--concurrency C]
//
// A Repo with NodeFSStorageAdapter(DIR) and a WebSocketClientAdapter (alias
// BrowserWebSocketClientAdapter; it runs on node through isomorphic-ws) pointed
// at --url. It calls repo.find(url) for every URL in FILE, concurrently
// (C = 0, the default here, means unbounded: Promise.all over all finds, which is
// the idiomatic way to open a set of documents; C > 0 bounds the number of
// outstanding finds; amr-bench.mjs passes 128 by default, see there).
//
// catchup:   storage starts empty; find() resolves when the handle is "ready",
//            i.e. the document arrived from the server. We then read every
//            doc's title and content and report their total UTF-8 size so the
//            orchestrator can check that all content is really there.
// reconnect: storage already holds every doc; find() resolves from local
//            storage, so "ready" says nothing about the server. A document is
//            counted as synced when the server's heads, as learnt in THIS
//            session from the server's sync messages, equal our local heads:
//              sameHeads(handle.getSyncInfo(serverStorageId).lastHeads,
//                        handle.heads())
//            automerge-repo sets that sync info from the sync state's
//            `theirHeads` every time a sync message from a peer with a storage
//            id is received; it lives only in memory, so it cannot be satisfied
//            by state left over from the previous run (the persisted sync state
//            keeps only sharedHeads, and the handle's sync info starts empty).
//
// After that the client flushes its storage (repo.flush(), then a short pause
// so the repo's own throttled sync-state saves land, then repo.shutdown()) and
// exits. stdout carries only JSON lines (timestamps are epoch milliseconds from
// performance.timeOrigin + performance.now(), comparable with the
// orchestrator's); progress goes to stderr.

import fs from "node:fs"
import { monitorEventLoopDelay } from "node:perf_hooks"
import { Repo } from "@automerge/automerge-repo"
import { WebSocketClientAdapter } from "@automerge/automerge-repo-network-websocket"
import { NodeFSStorageAdapter } from "@automerge/automerge-repo-storage-nodefs"

const now = () => performance.timeOrigin + performance.now()
const tMain = now()
const log = (...a) => console.error("[amr-client]", ...a)
const emit = obj => process.stdout.write(JSON.stringify(obj) + "\n")
const sleep = ms => new Promise(r => setTimeout(r, ms))

let peakRss = 0
function sampleRss() {
  const rss = process.memoryUsage().rss
  if (rss > peakRss) peakRss = rss
  return rss
}

function parseArgs(argv) {
  const out = {}
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i]
    if (!k.startsWith("--")) throw new Error(`unexpected argument ${k}`)
    out[k.slice(2)] = argv[++i]
  }
  return out
}

function sameHeads(a, b) {
  if (!a || !b || a.length !== b.length) return false
  const sa = [...a].sort()
  const sb = [...b].sort()
  return sa.every((h, i) => h === sb[i])
}

async function mapConcurrent(items, limit, fn) {
  if (!limit || limit <= 0 || limit >= items.length) return Promise.all(items.map(fn))
  const out = new Array(items.length)
  let next = 0
  const worker = async () => {
    while (next < items.length) {
      const i = next++
      out[i] = await fn(items[i], i)
    }
  }
  await Promise.all(Array.from({ length: limit }, worker))
  return out
}

function progress(label, total) {
  let done = 0
  let nextMark = Math.max(1, Math.ceil(total / 10))
  const step = nextMark
  return () => {
    done++
    if (done >= nextMark || done === total) {
      log(`${label} ${done}/${total} (+${((now() - tMain) / 1000).toFixed(1)} s)`)
      nextMark += step
    }
  }
}

async function main() {
  const opts = parseArgs(process.argv.slice(2))
  const mode = opts.mode
  if (mode !== "catchup" && mode !== "reconnect") throw new Error("--mode catchup|reconnect")
  if (!opts.storage || !opts["urls-file"] || !opts.url) throw new Error("need --storage, --urls-file, --url")
  const concurrency = Number(opts.concurrency ?? 0)
  const urls = fs.readFileSync(opts["urls-file"], "utf8").split("\n").filter(Boolean)
  emit({ event: "started", t_origin: performance.timeOrigin, t_main: tMain, docs: urls.length })

  const rssTimer = setInterval(sampleRss, 200)
  rssTimer.unref()

  fs.mkdirSync(opts.storage, { recursive: true })
  const adapter = new WebSocketClientAdapter(opts.url)
  const repo = new Repo({
    network: [adapter],
    storage: new NodeFSStorageAdapter(opts.storage),
    // default sharePolicy (share everything), as a normal client/app does
  })

  // Wait for the handshake with the server so that cold finds go to the
  // network rather than being declared unavailable if the connection were
  // slow (automerge-repo otherwise waits up to 1 s for the adapter).
  const serverPeer = await new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error("no connection to server within 30 s")), 30000)
    repo.networkSubsystem.once("peer", ({ peerId }) => {
      clearTimeout(t)
      resolve(peerId)
    })
  })
  const tConnected = now()
  const since = () => `+${((now() - tMain) / 1000).toFixed(1)} s`

  // Connection drops. The server's WebSocketServerAdapter pings every
  // keepAliveInterval (5 s by default; amr-bench.mjs passes 30 s) and
  // terminates a socket that has not answered the previous ping, so a client
  // or server whose event loop is busy for longer gets cut off. automerge-repo
  // then marks every document still being requested as "unavailable" (no peer
  // has it) and, once the adapter has reconnected (retry every 5 s), re-syncs
  // every open document with the server, which should make such handles ready
  // after all. findReady waits for that; the count is reported either way.
  let disconnects = 0
  let closing = false // our own shutdown disconnects too; don't count that
  repo.networkSubsystem.on("peer-disconnected", ({ peerId }) => {
    if (closing) return
    disconnects++
    log(`${mode}: disconnected from ${peerId} (${since()})`)
  })
  repo.networkSubsystem.on("peer", ({ peerId }) => log(`${mode}: reconnected to ${peerId} (${since()})`))
  let unavailableRecv = 0
  repo.networkSubsystem.on("message", m => {
    if (m.type === "doc-unavailable" && ++unavailableRecv <= 5) {
      log(`${mode}: server says doc-unavailable for ${m.documentId} (${since()})`)
    }
  })

  // Event-loop delay (how long the client was too busy to read its socket).
  const loopDelay = monitorEventLoopDelay({ resolution: 20 })
  loopDelay.enable()
  let loopDelayMaxMs = 0
  let found = 0
  const heartbeat = setInterval(() => {
    const maxMs = loopDelay.max / 1e6
    loopDelayMaxMs = Math.max(loopDelayMaxMs, maxMs)
    loopDelay.reset()
    log(`${mode}: ${found}/${urls.length} found, max event-loop delay ${maxMs.toFixed(0)} ms, rss ${(sampleRss() / 2 ** 20).toFixed(0)} MB (${since()})`)
  }, 10000)
  heartbeat.unref()

  const serverStorageId = repo.getStorageIdOfPeer(serverPeer)
  emit({ event: "connected", t: tConnected, server_peer: serverPeer, server_storage_id: serverStorageId })
  log(`${mode}: connected to ${serverPeer}; finding ${urls.length} docs (concurrency ${concurrency || "unbounded"})`)

  let recovered = 0 // handles that were unavailable at first and became ready
  async function findReady(url) {
    const t0 = now()
    let h
    try {
      h = await repo.find(url, { allowableStates: ["ready", "unavailable"] })
      if (!h.isReady()) recovered++
      while (!h.isReady()) {
        if (disconnects === 0) throw new Error("unavailable (and the connection never dropped)")
        if (now() - t0 > 600_000) throw new Error("still unavailable 600 s after the connection dropped")
        await sleep(200) // (whenReady would time out after 60 s and log to stdout)
      }
    } catch (err) {
      const waited = ((now() - t0) / 1000).toFixed(1)
      throw new Error(`find(${url}) failed after ${waited} s (${since()}): ${err.message}`)
    }
    return h
  }

  const tick = progress(`${mode}: found`, urls.length)
  const handles = await mapConcurrent(urls, concurrency, async url => {
    const h = await findReady(url)
    found++
    tick()
    return h
  })
  const tFound = now()
  sampleRss()

  const enc = new TextEncoder()
  let textBytes = 0
  for (const h of handles) {
    const d = h.doc()
    if (typeof d?.title !== "string" || typeof d?.content !== "string" || d.content.length === 0) {
      throw new Error(`document ${h.url} is ready but has no title/content`)
    }
    textBytes += enc.encode(d.title).length + enc.encode(d.content).length
  }
  emit({ event: "ready", t: tFound, docs: handles.length, text_bytes: textBytes })

  if (mode === "reconnect") {
    if (!serverStorageId) throw new Error("server did not advertise a storage id; cannot check remote heads")
    const listeners = new Map() // handle -> listener, while not yet synced
    const tickSync = progress("reconnect: synced", handles.length)
    await new Promise(resolve => {
      const check = h => {
        const fn = listeners.get(h)
        if (!fn) return
        if (sameHeads(h.getSyncInfo(serverStorageId)?.lastHeads, h.heads())) {
          listeners.delete(h)
          h.off("remote-heads", fn)
          h.off("heads-changed", fn)
          tickSync()
          if (listeners.size === 0) resolve()
        }
      }
      for (const h of handles) {
        const fn = () => check(h)
        listeners.set(h, fn)
        h.on("remote-heads", fn)
        h.on("heads-changed", fn)
      }
      for (const h of handles) check(h)
    })
    emit({ event: "synced", t: now(), docs: handles.length })
  }

  await repo.flush()
  const tFlushed = now()
  // The repo saves sync states through a 100 ms throttle that flush() does not
  // cover; give it a moment, as a long-running app would have, then shut down.
  await sleep(250)
  closing = true
  await repo.shutdown()
  sampleRss()
  clearInterval(rssTimer)
  clearInterval(heartbeat)
  loopDelayMaxMs = Math.max(loopDelayMaxMs, loopDelay.max / 1e6)
  emit({
    event: "done",
    disconnects,
    recovered_unavailable: recovered,
    max_event_loop_delay_ms: loopDelayMaxMs,
    t_flushed: tFlushed,
    t: now(),
    rss_peak: peakRss,
    rss_end: process.memoryUsage().rss,
    max_rss_rusage: process.resourceUsage().maxRSS * 1024,
  })
}

main().then(
  () => process.exit(0),
  err => {
    log("fatal:", err && err.stack ? err.stack : err)
    process.exit(1)
  },
)
