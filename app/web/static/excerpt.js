// Large logs: pick the evidence out in the browser and send only that.
//
// A file picked or dropped on a form marked `data-excerpt` is read here in blocks (slices
// of the file, or a stream when it is compressed: never the whole file in memory). The
// rules and patterns come from the server (GET /api/v1/signatures/prefilter.json;
// app/core/selection/rules.py defines them and implements the same rules in Python): the
// head and tail of the log, every line a library pattern or an error marker matches
// (capped per pattern), context around the first matches, the last progress lines. The
// page shows what it kept, and on submit posts only that, each line with its number in the
// original file. Without JavaScript, or if anything here fails before sending, the form
// posts the whole file as usual.
//
// Speed: the costly part, finding the lines each pattern matches in a block, runs in Web
// Workers (excerpt-worker.js), one per core, on the next blocks while this page applies
// the rules to the answers in order (caps, context, head and tail).
"use strict";
(() => {
  // Beside this script: its URL is known only while it first runs.
  const WORKER_URL = document.currentScript ? new URL("excerpt-worker.js", document.currentScript.src).href : null;
  const BLOCK = 4 << 20; // bytes judged at a time
  const MAX_CARRY = 8 << 20; // a line longer than this is judged on its start only
  const SHOWN = 400; // kept lines listed on the page before sending

  const form = document.querySelector("form[data-excerpt]");
  if (!form || !window.TextDecoder || !window.ReadableStream || !window.fetch) return;
  const fileInput = form.querySelector("input[type=file]");
  if (!fileInput) return;

  // ---- the page --------------------------------------------------------------------------
  const panel = document.createElement("section");
  panel.className = "excerpt";
  panel.id = "excerpt";
  panel.hidden = true;
  panel.setAttribute("aria-live", "polite");
  const status = document.createElement("p");
  status.id = "excerpt-status";
  const bar = document.createElement("progress");
  bar.id = "excerpt-progress";
  bar.max = 1;
  bar.value = 0;
  bar.setAttribute("aria-labelledby", "excerpt-status");
  const summary = document.createElement("p");
  summary.id = "excerpt-summary";
  summary.className = "excerpt-summary";
  const details = document.createElement("details");
  details.id = "excerpt-lines";
  const detailsTitle = document.createElement("summary");
  detailsTitle.textContent = "The lines that will be sent";
  const pre = document.createElement("pre");
  pre.className = "window";
  details.append(detailsTitle, pre);
  const alert = document.createElement("div");
  alert.className = "alert";
  alert.id = "excerpt-error";
  alert.setAttribute("role", "alert");
  alert.hidden = true;
  panel.append(status, bar, summary, details);
  form.querySelector(".actions").before(panel);
  form.before(alert);

  let job = 0; // the current file's run; a newer pick cancels an older one
  let excerpt = null; // the evidence of the chosen file, ready to send

  const fmtInt = (n) => n.toLocaleString("en-US");
  const fmtBytes = (n) => {
    const units = [["GB", 1 << 30], ["MB", 1 << 20], ["KB", 1 << 10]];
    for (const [unit, size] of units) {
      if (n >= size) return `${(n / size).toFixed(n >= 10 * size ? 0 : 1)} ${unit}`;
    }
    return `${n} bytes`;
  };

  function showError(title, detail) {
    alert.replaceChildren();
    const strong = document.createElement("strong");
    strong.textContent = title;
    alert.append(strong, " ", detail);
    alert.hidden = false;
    alert.scrollIntoView({ block: "nearest" });
  }

  // ---- the rules -------------------------------------------------------------------------
  function compileSpec(spec) {
    return { spec, rules: spec.rules, patterns: spec.patterns };
  }

  // Workers that find each block's matches (excerpt-worker.js); answers come back in the
  // order asked, each worker taking every size-th block.
  class WorkerPool {
    constructor(spec, size) {
      this.spec = spec;
      this.workers = [];
      this.waiting = new Map(); // seq -> {resolve, reject}
      this.seq = 0;
      for (let k = 0; k < size; k++) {
        const worker = new Worker(WORKER_URL);
        worker.onmessage = (event) => {
          const entry = this.waiting.get(event.data.seq);
          this.waiting.delete(event.data.seq);
          if (entry) entry.resolve(event.data);
        };
        worker.onerror = (event) => {
          event.preventDefault();
          this.fail(new Error("the log could not be read in the background"));
        };
        worker.postMessage({ spec });
        this.workers.push(worker);
      }
    }

    work(buf) {
      const seq = this.seq++;
      const promise = new Promise((resolve, reject) => {
        this.waiting.set(seq, { resolve, reject });
        this.workers[seq % this.workers.length].postMessage({ seq, buf }, [buf.buffer]);
      });
      promise.catch(() => {}); // a cancelled run leaves answers nobody waits for
      return promise;
    }

    // Patterns past their cap: workers then look only for their last match.
    capped(ids) {
      if (ids.length) for (const worker of this.workers) worker.postMessage({ capped: ids });
    }

    fail(err) {
      for (const entry of this.waiting.values()) entry.reject(err);
      this.waiting.clear();
    }

    close() {
      for (const worker of this.workers) worker.terminate();
      this.fail(new Error("cancelled"));
    }
  }

  class Selector {
    constructor(compiled) {
      this.c = compiled;
      this.r = compiled.rules;
      this.decoder = new TextDecoder("utf-8", { ignoreBOM: true });
      this.kept = new Map(); // line number -> text
      this.counts = new Map(); // pattern id -> matching lines so far
      this.last = new Map(); // pattern id -> [line, text] of its last match
      this.progress = []; // [line, text] of the last progress lines
      this.tail = []; // [line, text] of the last lines
      this.before = []; // [line, text] of the last `context` lines of the previous block
      this.afterUntil = 0;
      this.lines = 0; // lines judged so far
      this.bytes = 0;
    }

    // Apply the rules to one block of whole lines (the last block may end without a newline),
    // given a worker's answer: the block, its line ends, per pattern its first matches and
    // its last, and its last progress lines. Returns the patterns that reached their cap.
    block(done) {
      const { buf, ends } = done;
      const r = this.r;
      const base = this.lines;
      const count = ends.length;
      const text = (i) => {
        const start = i ? ends[i - 1] + 1 : 0;
        // A line over line_bytes is judged and kept by its start (a truncated one already is).
        return this.decoder.decode(buf.subarray(start, Math.min(ends[i], start + r.line_bytes)));
      };
      const keep = (i) => {
        if (i >= 0 && i < count && !this.kept.has(base + i + 1)) this.kept.set(base + i + 1, text(i));
      };

      // Head, and the context after a match in the previous block.
      for (let i = 0; i < count && (base + i + 1 <= r.head || base + i + 1 <= this.afterUntil); i++) keep(i);

      const capped = [];
      for (let k = 0; k < done.matchIds.length; k++) {
        const id = done.matchIds[k];
        let seen = this.counts.get(id) || 0;
        const before = seen;
        for (let m = done.matchOffsets[k]; m < done.matchOffsets[k + 1] && seen < r.per_pattern; m++) {
          const i = done.matchLines[m];
          seen += 1;
          const no = base + i + 1;
          keep(i);
          if (seen <= r.with_context && r.context) {
            for (let j = i - r.context; j < i; j++) {
              if (j >= 0) keep(j);
              else {
                for (const [bno, btext] of this.before) if (bno === base + j + 1) this.kept.set(bno, btext);
              }
            }
            for (let j = i + 1; j <= i + r.context; j++) keep(j);
            this.afterUntil = Math.max(this.afterUntil, no + r.context);
          }
        }
        this.counts.set(id, seen);
        if (before < r.per_pattern && seen >= r.per_pattern) capped.push(id);
        const last = done.lasts[k];
        this.last.set(id, [base + last + 1, text(last)]);
      }
      const found = Array.from(done.progress, (i) => [base + i + 1, text(i)]);
      this.progress = this.progress.concat(found).slice(-r.progress);
      const lastLines = [];
      for (let i = Math.max(0, count - Math.max(r.tail, r.context)); i < count; i++) lastLines.push([base + i + 1, text(i)]);
      this.tail = this.tail.concat(lastLines.slice(-r.tail)).slice(-r.tail);
      this.before = r.context ? this.before.concat(lastLines.slice(-r.context)).slice(-r.context) : [];
      this.lines += count;
      this.bytes += buf.length;
      return capped;
    }

    excerpt() {
      const kept = new Map(this.kept);
      for (const [no, text] of [...this.last.values(), ...this.progress, ...this.tail]) kept.set(no, text);
      const numbers = [...kept.keys()].sort((a, b) => a - b);
      return { lines: numbers.map((no) => ({ line: no, text: kept.get(no) })), total_lines: this.lines, total_bytes: this.bytes };
    }
  }

  // ---- reading ---------------------------------------------------------------------------
  async function* blocks(stream, lineBytes) {
    // Whole lines in blocks of about BLOCK bytes; a line longer than MAX_CARRY is cut to
    // its first line_bytes bytes (the rest is counted, not held).
    const reader = stream.getReader();
    let parts = [];
    let size = 0;
    let skipping = false; // inside an over-long line, dropping bytes until its newline
    let prefix = null; // the kept start of that line
    let dropped = 0;
    const join = (chunks, total) => {
      const out = new Uint8Array(total);
      let at = 0;
      for (const c of chunks) {
        out.set(c, at);
        at += c.length;
      }
      return out;
    };
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      let chunk = value;
      if (skipping) {
        const nl = chunk.indexOf(10);
        if (nl < 0) {
          dropped += chunk.length;
          continue;
        }
        dropped += nl;
        yield { buf: join([prefix, new Uint8Array([10])], prefix.length + 1), truncated: [0], extra: dropped };
        skipping = false;
        prefix = null;
        dropped = 0;
        chunk = chunk.subarray(nl + 1);
      }
      parts.push(chunk);
      size += chunk.length;
      if (size < BLOCK) continue;
      const buf = join(parts, size);
      const cut = buf.lastIndexOf(10);
      if (cut < 0) {
        if (size > MAX_CARRY) {
          prefix = buf.slice(0, lineBytes);
          dropped = size - prefix.length;
          skipping = true;
          parts = [];
          size = 0;
        } else {
          parts = [buf];
        }
        continue;
      }
      const rest = buf.slice(cut + 1); // before the block is handed over to a worker
      parts = rest.length ? [rest] : [];
      size = rest.length;
      yield { buf: buf.subarray(0, cut + 1), truncated: [], extra: 0 };
    }
    if (skipping) yield { buf: prefix, truncated: [0], extra: dropped };
    else if (size) yield { buf: join(parts, size), truncated: [], extra: 0 };
  }

  // A file that is not compressed is read in slices of BLOCK bytes, each from the start of a
  // line: a slice arrives as one buffer that goes to a worker as it is, where a stream's
  // chunks had to be copied into a new buffer per block (about 0.4 s of the page's CPU per
  // 100 MB, most of it the new buffer's first writes). The next slice is asked for while a
  // worker takes this one. A slice without a newline (a line longer than BLOCK) hands the
  // rest of the file to `blocks`, which cuts over-long lines.
  async function* sliceBlocks(file, lineBytes, onBytes) {
    let pos = 0;
    let next = file.slice(0, BLOCK).arrayBuffer();
    while (pos < file.size) {
      const bytes = new Uint8Array(await next);
      const end = pos + bytes.length;
      if (end >= file.size) {
        onBytes(end);
        yield { buf: bytes, truncated: [], extra: 0 };
        return;
      }
      const cut = bytes.lastIndexOf(10);
      if (cut < 0) {
        yield* blocks(counted(file.slice(pos).stream(), (n) => onBytes(pos + n)), lineBytes);
        return;
      }
      pos += cut + 1;
      next = file.slice(pos, pos + BLOCK).arrayBuffer();
      onBytes(pos);
      yield { buf: bytes.subarray(0, cut + 1), truncated: [], extra: 0 };
    }
  }

  function counted(stream, onBytes) {
    let seen = 0;
    return stream.pipeThrough(
      new TransformStream({
        transform(chunk, controller) {
          seen += chunk.length;
          onBytes(seen);
          controller.enqueue(chunk);
        },
      }),
    );
  }

  async function isGzip(file) {
    const head = new Uint8Array(await file.slice(0, 2).arrayBuffer());
    return head.length === 2 && head[0] === 0x1f && head[1] === 0x8b;
  }

  let specPromise = null;
  function loadSpec() {
    if (!specPromise) {
      specPromise = fetch(form.dataset.specUrl, { headers: { Accept: "application/json" } }).then((r) => {
        if (!r.ok) throw new Error(`the pattern list could not be loaded (HTTP ${r.status})`);
        return r.json();
      });
      specPromise.catch(() => {
        specPromise = null;
      });
    }
    return specPromise;
  }

  const poolSize = () => Math.max(1, Math.min(4, navigator.hardwareConcurrency || 2));

  // Starting the workers and compiling the rules in them takes a few tenths of a second. It
  // begins when a person shows they are about to pick a file (pointing at or focusing the
  // picker, dragging a file over the form), so it passes while they choose one. A pool
  // that no pick uses within a minute is let go.
  const WARM_FOR = 60000;
  let warm = null; // {pool, timer}: workers made ready ahead of a pick

  function letGo(entry) {
    clearTimeout(entry.timer);
    if (entry.pool) entry.pool.close();
    if (warm === entry) {
      warm = null;
      delete form.dataset.warm;
    }
  }

  async function prewarm() {
    if (warm || !WORKER_URL) return;
    const entry = { pool: null, timer: 0 };
    warm = entry;
    try {
      const spec = await loadSpec();
      if (warm !== entry) return; // taken or let go meanwhile
      entry.pool = new WorkerPool(spec, poolSize());
      entry.timer = setTimeout(() => letGo(entry), WARM_FOR);
      form.dataset.warm = "ready";
    } catch (err) {
      if (warm === entry) warm = null; // the pick loads the rules again and says what failed
    }
  }

  // The pool made ready for this pick, or a new one. A pool serves one file: it keeps
  // which patterns reached their cap.
  function takePool(spec) {
    const entry = warm;
    if (entry && entry.pool && entry.pool.spec === spec) {
      clearTimeout(entry.timer);
      warm = null;
      delete form.dataset.warm;
      return entry.pool;
    }
    if (entry) letGo(entry);
    return new WorkerPool(spec, poolSize());
  }

  async function selectFile(file, run) {
    panel.hidden = false;
    alert.hidden = true;
    details.hidden = true;
    summary.textContent = "";
    status.textContent = `Reading ${file.name} (${fmtBytes(file.size)}) in your browser…`;
    bar.value = 0;
    const compiled = compileSpec(await loadSpec());
    const onBytes = (n) => {
      bar.value = file.size ? n / file.size : 1;
    };
    const lineBytes = compiled.rules.line_bytes;
    let source;
    if (await isGzip(file)) {
      if (!window.DecompressionStream) throw new Error("this browser cannot read .gz files");
      source = blocks(counted(file.stream(), onBytes).pipeThrough(new DecompressionStream("gzip")), lineBytes);
    } else {
      source = sliceBlocks(file, lineBytes, onBytes);
    }
    const selector = new Selector(compiled);
    const started = performance.now();
    let lastPaint = 0;
    const size = poolSize();
    const pool = takePool(compiled.spec);
    const pending = []; // blocks being worked on, in order
    const settle = async () => {
      const { promise, extra } = pending.shift();
      const done = await promise;
      if (run !== job) return false;
      pool.capped(selector.block(done));
      selector.bytes += extra;
      const now = performance.now();
      if (now - lastPaint > 100) {
        lastPaint = now;
        status.textContent = `Reading ${file.name}: ${fmtInt(selector.lines)} lines so far…`;
        await new Promise((resolve) => setTimeout(resolve, 0)); // let the page paint
      }
      return run === job;
    };
    try {
      for await (const { buf, extra } of source) {
        if (run !== job) return null; // another file was picked
        pending.push({ promise: pool.work(buf), extra });
        // A block per worker in flight while the next one is read.
        if (pending.length > size && !(await settle())) return null;
      }
      while (pending.length) if (!(await settle())) return null;
    } finally {
      pool.close();
    }
    bar.value = 1;
    const result = selector.excerpt();
    result.name = file.name;
    result.seconds = (performance.now() - started) / 1000;
    return result;
  }

  function show(result) {
    const encoder = new TextEncoder();
    const keptBytes = result.lines.reduce((sum, l) => sum + encoder.encode(l.text).length + 1, 0);
    result.kept_bytes = keptBytes;
    status.textContent = `Read ${result.name} in ${result.seconds.toFixed(1)} s. Only these lines are sent; the rest stays on your computer.`;
    summary.textContent =
      `Kept ${fmtInt(result.lines.length)} of ${fmtInt(result.total_lines)} lines, ` +
      `${fmtBytes(keptBytes)} of ${fmtBytes(result.total_bytes)}: the start and end of the log, ` +
      `every line that matches a known failure or an error marker, and the lines around them.`;
    summary.dataset.kept = String(result.lines.length);
    summary.dataset.seconds = String(result.seconds);
    summary.dataset.total = String(result.total_lines);
    const rows = [];
    let previous = 0;
    for (const l of result.lines.slice(0, SHOWN)) {
      if (l.line > previous + 1) rows.push(`      … ${fmtInt(l.line - previous - 1)} lines not sent\n`);
      rows.push(`${String(l.line).padStart(9)}  ${l.text.slice(0, 300)}\n`);
      previous = l.line;
    }
    if (result.lines.length > SHOWN) rows.push(`      … and ${fmtInt(result.lines.length - SHOWN)} more lines\n`);
    pre.textContent = rows.join("");
    details.hidden = false;
  }

  async function pick() {
    const run = ++job;
    excerpt = null;
    const file = fileInput.files && fileInput.files[0];
    if (!file) {
      panel.hidden = true;
      return;
    }
    // The logs of a job (several files, or an archive of them) go whole, as one diagnosis:
    // the evidence is picked out here one log at a time only.
    const files = Array.from(fileInput.files);
    if (files.length > 1 || /\.(tar|tar\.gz|tgz)$/i.test(file.name)) {
      const size = files.reduce((sum, f) => sum + f.size, 0);
      panel.hidden = false;
      alert.hidden = true;
      details.hidden = true;
      summary.textContent = "";
      bar.value = 1;
      status.textContent =
        files.length > 1
          ? `${fmtInt(files.length)} files (${fmtBytes(size)}) will be sent whole and diagnosed as one job.`
          : `${file.name} (${fmtBytes(size)}) will be sent whole; its logs are diagnosed as one job.`;
      return;
    }
    try {
      const result = await selectFile(file, run);
      if (result === null || run !== job) return;
      excerpt = result;
      show(result);
    } catch (err) {
      if (run !== job) return;
      // Fall back to sending the whole file with the form.
      status.textContent = `The evidence could not be picked out here (${err.message}); the whole file will be sent.`;
      summary.textContent = "";
      details.hidden = true;
    }
  }

  fileInput.addEventListener("change", pick);
  for (const target of [fileInput, ...(fileInput.labels || [])]) {
    target.addEventListener("pointerenter", prewarm);
    target.addEventListener("focus", prewarm);
  }
  form.addEventListener("dragenter", prewarm);
  form.addEventListener("dragover", (event) => {
    event.preventDefault();
    form.classList.add("dropping");
  });
  form.addEventListener("dragleave", () => form.classList.remove("dropping"));
  form.addEventListener("drop", (event) => {
    event.preventDefault();
    form.classList.remove("dropping");
    if (event.dataTransfer && event.dataTransfer.files.length) {
      fileInput.files = event.dataTransfer.files;
      fileInput.dispatchEvent(new Event("change", { bubbles: true }));
    }
  });

  // ---- sending ---------------------------------------------------------------------------
  async function gzip(text) {
    const stream = new Blob([text]).stream().pipeThrough(new CompressionStream("gzip"));
    return new Uint8Array(await new Response(stream).arrayBuffer());
  }

  async function problemOf(response) {
    const type = response.headers.get("content-type") || "";
    let title = `The server answered ${response.status}`;
    let detail = "";
    if (type.includes("json")) {
      try {
        const body = await response.json();
        title = body.title || title;
        detail = body.detail || "";
      } catch (err) {
        detail = "";
      }
    }
    detail = detail.trim();
    if (detail && !/[.!?]$/.test(detail)) detail += ".";
    const retry = response.headers.get("retry-after");
    if (retry && /^\d+$/.test(retry) && !/\bagain\b/i.test(detail)) {
      const seconds = Number(retry);
      const when = seconds < 120 ? `${seconds} s` : seconds < 7200 ? `${Math.round(seconds / 60)} min` : `${Math.round(seconds / 3600)} h`;
      detail += ` Try again in ${when}.`;
    }
    return { title: `${title}.`, detail: detail.trim() };
  }

  form.addEventListener("submit", async (event) => {
    if (!excerpt || !fileInput.files || !fileInput.files.length) return; // the form posts as it is
    event.preventDefault();
    const button = form.querySelector("button[type=submit]");
    button.disabled = true;
    status.textContent = `Sending ${fmtInt(excerpt.lines.length)} lines…`;
    try {
      const payload = JSON.stringify({
        excerpt: excerpt.lines,
        total_lines: excerpt.total_lines,
        total_bytes: excerpt.total_bytes,
        name: excerpt.name,
      });
      const headers = { "Content-Type": "application/json", Accept: "application/json" };
      let body = payload;
      if (window.CompressionStream) {
        body = await gzip(payload);
        headers["Content-Encoding"] = "gzip";
      }
      const response = await fetch(form.dataset.apiUrl, { method: "POST", headers, body, credentials: "same-origin" });
      if (response.ok) {
        const record = await response.json();
        status.textContent = "Diagnosed. Opening the diagnosis…";
        window.location.assign(record.url);
        return;
      }
      const problem = await problemOf(response);
      showError(problem.title, problem.detail);
      status.textContent = "Nothing was diagnosed.";
    } catch (err) {
      showError("The log could not be sent.", `${err.message}. Check the connection and try again.`);
    } finally {
      button.disabled = false;
    }
  });
})();
