// The screening half of the browser's evidence pass (excerpt.js), run in Web Workers.
//
// A block of whole lines comes in; out go its line ends and, per pattern, the lines it
// matches: lines are screened by the pattern's atoms (the required literals the server
// publishes with each pattern, compared in ASCII lower case) in one Aho-Corasick pass over
// the bytes, and only those lines are tried with the pattern itself. Per pattern only its
// first `per_pattern` matches and its last are needed (fewer once the page says the pattern
// is past its cap), and the last `progress` progress lines. None of this needs earlier
// blocks, so blocks are worked on in parallel, one worker per core; the page applies the
// rules to the answers in order (caps, context), touching only the lines they name.
"use strict";

let ac = null;
let patternCount = 0;
let rules = null;
let patterns = null; // per id: { re, atoms, progress }
let ansi = null;
let progressIds = [];
let progressAlways = false;
let always = []; // patterns without atoms: every line is a candidate
const capped = new Set(); // patterns the page has seen past their cap: only their last match is needed
const decoder = new TextDecoder("utf-8", { ignoreBOM: true });
const lowerAscii = (s) => s.replace(/[A-Z]+/g, (m) => m.toLowerCase());

const FOLD = new Uint8Array(256);
for (let b = 0; b < 256; b++) FOLD[b] = b >= 65 && b <= 90 ? b + 32 : b;

// Aho-Corasick over bytes, ASCII case folded: one pass finds every atom on every line.
function buildAutomaton(patterns) {
  const encoder = new TextEncoder();
  const words = [];
  for (const p of patterns) for (const a of p.atoms) words.push([encoder.encode(a), p.id]);
  const classOf = new Uint8Array(256);
  let classes = 1;
  for (const [bytes] of words) for (const b of bytes) if (!classOf[b]) classOf[b] = classes++;
  const cls = new Uint8Array(256);
  for (let b = 0; b < 256; b++) cls[b] = classOf[FOLD[b]];
  const gotos = [new Map()];
  const own = [[]];
  for (const [bytes, id] of words) {
    let s = 0;
    for (const b of bytes) {
      const c = classOf[b];
      let next = gotos[s].get(c);
      if (next === undefined) {
        next = gotos.length;
        gotos.push(new Map());
        own.push([]);
        gotos[s].set(c, next);
      }
      s = next;
    }
    own[s].push(id);
  }
  const n = gotos.length;
  const Table = n < 65536 ? Uint16Array : Uint32Array;
  const delta = new Table(n * classes);
  const fail = new Int32Array(n);
  const outs = new Array(n);
  outs[0] = [];
  const queue = [];
  for (let c = 1; c < classes; c++) {
    const next = gotos[0].get(c);
    if (next !== undefined) {
      delta[c] = next;
      fail[next] = 0;
      queue.push(next);
    }
  }
  for (let head = 0; head < queue.length; head++) {
    const s = queue[head];
    outs[s] = own[s].concat(outs[fail[s]]);
    for (let c = 1; c < classes; c++) {
      const next = gotos[s].get(c);
      if (next !== undefined) {
        fail[next] = delta[fail[s] * classes + c];
        delta[s * classes + c] = next;
        queue.push(next);
      } else {
        delta[s * classes + c] = delta[fail[s] * classes + c];
      }
    }
  }
  const outIndex = new Int32Array(n).fill(-1);
  const outLists = [];
  for (let s = 0; s < n; s++) {
    if (outs[s] && outs[s].length) {
      outIndex[s] = outLists.length;
      outLists.push(Int32Array.from(new Set(outs[s])));
    }
  }
  return { delta, cls, classes, outIndex, outLists };
}

function screen(buf) {
  const { delta, cls, classes, outIndex, outLists } = ac;
  const n = buf.length;
  const ends = [];
  const seen = new Int32Array(patternCount).fill(-1); // pattern id -> the last line it was listed for
  const lists = new Array(patternCount); // pattern id -> its candidate lines, in order
  const listed = [];
  let s = 0;
  let li = 0;
  for (let i = 0; i < n; i++) {
    const b = buf[i];
    if (b === 10) {
      ends.push(i);
      s = 0;
      li++;
      continue;
    }
    s = delta[s * classes + cls[b]];
    const o = outIndex[s];
    if (o >= 0) {
      const ids = outLists[o];
      for (let k = 0; k < ids.length; k++) {
        const id = ids[k];
        if (seen[id] !== li) {
          if (seen[id] === -1) {
            lists[id] = [];
            listed.push(id);
          }
          seen[id] = li;
          lists[id].push(li);
        }
      }
    }
  }
  if (n && buf[n - 1] !== 10) ends.push(n); // a last line without a newline
  const ids = listed.sort((a, b) => a - b);
  let total = 0;
  for (const id of ids) total += lists[id].length;
  const offsets = new Int32Array(ids.length + 1);
  const lines = new Int32Array(total);
  let at = 0;
  ids.forEach((id, k) => {
    offsets[k] = at;
    lines.set(lists[id], at);
    at += lists[id].length;
  });
  offsets[ids.length] = at;
  return { ends: Int32Array.from(ends), ids: Int32Array.from(ids), offsets, lines };
}

// What the page's `matches` says of one pattern on one line of text: escapes removed,
// frame by frame (a carriage return starts one), empty frames never match.
function matchesOne(text, id, lowered) {
  const p = patterns[id];
  if (!text.includes("\x1b") && !text.includes("\r")) {
    if (!text) return false;
    return p.re ? p.re.test(text) : p.atoms.some((a) => lowered().includes(a));
  }
  const t = text.includes("\x1b") ? text.replace(ansi, "") : text;
  for (const f of t.includes("\r") ? t.split("\r") : [t]) {
    if (!f) continue;
    if (p.re ? p.re.test(f) : p.atoms.some((a) => lowerAscii(f).includes(a))) return true;
  }
  return false;
}

function work(buf) {
  const found = screen(buf);
  const { ends } = found;
  const count = ends.length;
  let lines = null; // the block's lines as text, decoded once when first needed
  const texts = new Map(); // lines over line_bytes, judged on their start
  const text = (i) => {
    const start = i ? ends[i - 1] + 1 : 0;
    if (ends[i] - start > rules.line_bytes) {
      let t = texts.get(i);
      if (t === undefined) texts.set(i, (t = decoder.decode(buf.subarray(start, start + rules.line_bytes))));
      return t;
    }
    if (lines === null) lines = decoder.decode(buf).split("\n");
    return lines[i];
  };
  const lowers = new Map();
  const test = (i, id) =>
    matchesOne(text(i), id, () => {
      let l = lowers.get(i);
      if (l === undefined) lowers.set(i, (l = lowerAscii(text(i))));
      return l;
    });
  const candidates = new Map();
  for (let k = 0; k < found.ids.length; k++) {
    candidates.set(found.ids[k], found.lines.subarray(found.offsets[k], found.offsets[k + 1]));
  }
  let every = null;
  const everyLine = () => every || (every = Int32Array.from({ length: count }, (_, i) => i));
  // Per pattern: its first matches (at most per_pattern) and its last.
  const matchIds = [];
  const matchOffsets = [0];
  const matchLines = [];
  const lasts = [];
  const ids = [...candidates.keys()].filter((id) => !patterns[id].progress);
  for (const id of always) ids.push(id);
  for (const id of ids.sort((a, b) => a - b)) {
    const where = candidates.get(id) || everyLine();
    const first = [];
    let k = 0;
    if (!capped.has(id)) {
      for (; k < where.length && first.length < rules.per_pattern; k++) if (test(where[k], id)) first.push(where[k]);
    }
    let last = first.length ? first[first.length - 1] : -1;
    for (let m = where.length - 1; m >= k; m--) {
      if (test(where[m], id)) {
        last = where[m];
        break;
      }
    }
    if (last < 0) continue;
    matchIds.push(id);
    for (const i of first) matchLines.push(i);
    matchOffsets.push(matchLines.length);
    lasts.push(last);
  }
  // The last progress lines, from the end.
  const progress = [];
  if (progressIds.length) {
    let marks = null;
    if (!progressAlways) {
      marks = new Uint8Array(count);
      for (const id of progressIds) for (const i of candidates.get(id) || []) marks[i] = 1;
    }
    for (let i = count - 1; i >= 0 && progress.length < rules.progress; i--) {
      if (marks && !marks[i]) continue;
      if (progressIds.some((id) => test(i, id))) progress.push(i);
    }
    progress.reverse();
  }
  return {
    ends,
    matchIds: Int32Array.from(matchIds),
    matchOffsets: Int32Array.from(matchOffsets),
    matchLines: Int32Array.from(matchLines),
    lasts: Int32Array.from(lasts),
    progress: Int32Array.from(progress),
  };
}

onmessage = (event) => {
  const message = event.data;
  if (message.spec) {
    const spec = message.spec;
    rules = spec.rules;
    ansi = new RegExp(spec.ansi, "g");
    patterns = spec.patterns.map((p) => {
      let re = null;
      if (p.js !== null) {
        try {
          re = new RegExp(p.js, p.flags);
        } catch (err) {
          re = null; // judged on its atoms, as the page does
        }
      }
      return { re, atoms: p.atoms, progress: p.kind === "progress" };
    });
    const usable = spec.patterns.filter((p, i) => patterns[i].re || p.atoms);
    patternCount = spec.patterns.length;
    progressIds = usable.filter((p) => p.kind === "progress").map((p) => p.id);
    progressAlways = usable.some((p) => !p.atoms && p.kind === "progress");
    always = usable.filter((p) => !p.atoms && p.kind !== "progress").map((p) => p.id);
    ac = buildAutomaton(usable.filter((p) => p.atoms));
    return;
  }
  if (message.capped) {
    for (const id of message.capped) capped.add(id);
    return;
  }
  const { seq, buf } = message;
  const out = work(buf);
  const transfer = [buf.buffer, ...Object.values(out).map((a) => a.buffer)];
  postMessage({ seq, buf, ...out }, transfer);
};
