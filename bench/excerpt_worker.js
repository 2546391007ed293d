// The browser's screening worker (app/web/static/excerpt-worker.js) run by Node over a log,
// for bench/browser.py --worker: its CPU time, without Chromium, the page or the machine's
// other threads. As the page does: 4 MiB blocks of whole lines, two workers taking every
// other block, and patterns past their cap told to both.
//
//     node bench/excerpt_worker.js WORKER.js SPEC.json LOG
//
// Prints one line of JSON: the CPU seconds and a digest of the answers (equal digests:
// equal answers).
"use strict";
const fs = require("fs");
const crypto = require("crypto");

const [workerPath, specPath, logPath] = process.argv.slice(2);
const spec = JSON.parse(fs.readFileSync(specPath, "utf8"));
const source = fs.readFileSync(workerPath, "utf8");
const data = fs.readFileSync(logPath);

// A worker's global scope, in this realm (a vm context's built-ins are slower to call).
function startWorker() {
  let answer = null;
  const post = (m) => (answer = m);
  const onmessage = new Function("postMessage", "onmessage", `${source}\nreturn onmessage;`)(post, null);
  return (message) => {
    onmessage({ data: message });
    return answer;
  };
}

const blocks = [];
for (let off = 0; off < data.length; ) {
  let end = Math.min(data.length, off + (4 << 20));
  if (end < data.length) end = data.lastIndexOf(10, end - 1) + 1;
  blocks.push(new Uint8Array(data.subarray(off, end)));
  off = end;
}
const digest = crypto.createHash("sha256");
const started = process.cpuUsage();
const workers = [startWorker(), startWorker()];
for (const send of workers) send({ spec });
const counts = new Map();
blocks.forEach((buf, seq) => {
  const a = workers[seq % 2]({ seq, buf });
  for (const k of ["ends", "matchIds", "matchOffsets", "matchLines", "lasts", "progress"]) digest.update(Buffer.from(a[k].buffer, a[k].byteOffset, a[k].byteLength));
  const capped = [];
  for (let k = 0; k < a.matchIds.length; k++) {
    const id = a.matchIds[k];
    const before = counts.get(id) || 0;
    const seen = Math.min(spec.rules.per_pattern, before + a.matchOffsets[k + 1] - a.matchOffsets[k]);
    counts.set(id, seen);
    if (before < spec.rules.per_pattern && seen >= spec.rules.per_pattern) capped.push(id);
  }
  if (capped.length) for (const send of workers) send({ capped });
});
const used = process.cpuUsage(started);
console.log(JSON.stringify({ cpu: (used.user + used.system) / 1e6, digest: digest.digest("hex").slice(0, 16) }));
