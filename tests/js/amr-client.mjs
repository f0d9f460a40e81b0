// Client side of the automerge-repo baseline benchmark (see amr-bench.mjs).
//
//   node amr-client.mjs --mode catchup|reconnect --storage DIR --urls-file FILE
//                       --url ws://127.0.0.1:PORT [--concurrency C]
//
// A Repo with NodeFSStorageAdapter(DIR) and a WebSocketClientAdapter (alias
// BrowserWebSocketClientAdapter; it runs on node through isomorphic-ws) pointed
// at --url. It calls repo.find(url) for every URL in FILE, concurrently
// (C = 0, the default, means unbounded: Promise.all over all finds, which is
// the idiomatic way to open a set of documents; C > 0 bounds the number of
// outstanding finds).
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
  const serverStorageId = repo.getStorageIdOfPeer(serverPeer)
  emit({ event: "connected", t: tConnected, server_peer: serverPeer, server_storage_id: serverStorageId })
  log(`${mode}: connected to ${serverPeer}; finding ${urls.length} docs (concurrency ${concurrency || "unbounded"})`)

  const tick = progress(`${mode}: found`, urls.length)
  const handles = await mapConcurrent(urls, concurrency, async url => {
    const t0 = now()
    try {
      const h = await repo.find(url)
      tick()
      return h
    } catch (err) {
      const waited = ((now() - t0) / 1000).toFixed(1)
      throw new Error(`find(${url}) failed after ${waited} s (+${((now() - tMain) / 1000).toFixed(1)} s): ${err.message}`)
    }
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
    const pending = new Set()
    const tickSync = progress("reconnect: synced", handles.length)
    await new Promise(resolve => {
      const check = h => {
        if (!pending.has(h)) return
        if (sameHeads(h.getSyncInfo(serverStorageId)?.lastHeads, h.heads())) {
          pending.delete(h)
          h.off("remote-heads", h.__amrCheck)
          h.off("heads-changed", h.__amrCheck)
          tickSync()
          if (pending.size === 0) resolve()
        }
      }
      for (const h of handles) {
        pending.add(h)
        h.__amrCheck = () => check(h)
        h.on("remote-heads", h.__amrCheck)
        h.on("heads-changed", h.__amrCheck)
      }
      for (const h of handles) check(h)
      if (pending.size === 0) resolve()
    })
    emit({ event: "synced", t: now(), docs: handles.length })
  }

  await repo.flush()
  const tFlushed = now()
  // The repo saves sync states through a 100 ms throttle that flush() does not
  // cover; give it a moment, as a long-running app would have, then shut down.
  await sleep(250)
  await repo.shutdown()
  sampleRss()
  clearInterval(rssTimer)
  emit({
    event: "done",
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
