// The screening half of the browser's evidence pass (excerpt.js), run in Web Workers.
//
// A block of whole lines comes in; out go its line ends and, per pattern, the lines it
// matches. One pass over the bytes says which patterns' atoms (the required literals the
// server publishes with each pattern, compared in ASCII lower case) occur in the block at
// all (`scanBlock`); each of those patterns is then searched for in the block's decoded text
// as a whole (the browser's own regular expression engine, one search per match, not one
// call per line), and only the lines it finds are tried with the pattern as the rules say
// (frame by frame, escapes removed). Per pattern only its first `per_pattern` matches and
// its last are needed (only its last once the page says the pattern is past its cap), and
// the last `progress` progress lines. None of this needs earlier blocks, so blocks are
// worked on in parallel, one worker per core; the page applies the rules to the answers in
// order (caps, context), touching only the lines they name.
"use strict";

let grams = null;
let patternCount = 0;
let rules = null;
let patterns = null; // per id: { re, all, atoms, progress }: `all` finds its matches in a whole block
let ansi = null;
let progressIds = [];
let always = []; // patterns without atoms: searched for in every block
const capped = new Set(); // patterns the page has seen past their cap: only their last match is needed
const decoder = new TextDecoder("utf-8", { ignoreBOM: true });
const lowerAscii = (s) => s.replace(/[A-Z]+/g, (m) => m.toLowerCase());

const FOLD = new Uint8Array(256);
for (let b = 0; b < 256; b++) FOLD[b] = b >= 65 && b <= 90 ? b + 32 : b;

// Which atoms a block holds, and on which lines, found in one pass over its bytes (ASCII
// case folded): a hash of the last three bytes is looked up in a table (32 KB: it stays in
// the CPU's first cache) of the hashes of one three-byte piece of each atom, and only where
// it is set are the atoms with that piece compared. The piece is the atom's rarest in the
// log itself (the first block a worker reads tells how often each occurs), not its first.
// An atom found on DENSE lines of a block is looked for no more in it (its patterns search
// the block's text instead): a hash whose atoms are all so is cleared from the block's table.
const GRAM_BITS = 15;
const GRAM_MASK = (1 << GRAM_BITS) - 1;
// Lines of an atom listed per block before its patterns are searched for in the text instead:
// trying a pattern on a few lines is cheaper than one search of the block, on many it is not.
const DENSE = 48;
const gramOf = (a, b, c) => ((((FOLD[a] << 5) ^ FOLD[b]) << 5) ^ FOLD[c]) & GRAM_MASK;
let atomPatterns = null; // the patterns with atoms, until the first block comes

function gramCounts(buf) {
  const counts = new Int32Array(GRAM_MASK + 1);
  let h = 0;
  for (let i = 0; i < buf.length; i++) {
    h = ((h << 5) ^ FOLD[buf[i]]) & GRAM_MASK;
    counts[h]++;
  }
  return counts;
}

function buildGrams(patterns, counts) {
  const encoder = new TextEncoder();
  const atoms = new Map(); // atom -> index
  const bytes = []; // index -> its bytes
  const owners = []; // index -> the patterns it screens for
  for (const p of patterns) {
    for (const a of p.atoms) {
      let k = atoms.get(a);
      if (k === undefined) {
        k = bytes.length;
        atoms.set(a, k);
        bytes.push(encoder.encode(a));
        owners.push([]);
      }
      owners[k].push(p.id);
    }
  }
  const buckets = new Map(); // hash -> atom indexes
  const offsets = new Int32Array(bytes.length); // where in each atom its piece starts
  const short = []; // atoms of fewer than three bytes (none are published): compared everywhere
  bytes.forEach((atom, k) => {
    if (atom.length < 3) {
      short.push(k);
      return;
    }
    let best = 0;
    for (let off = 1; off + 3 <= atom.length; off++) {
      if (counts[gramOf(atom[off], atom[off + 1], atom[off + 2])] < counts[gramOf(atom[best], atom[best + 1], atom[best + 2])]) best = off;
    }
    offsets[k] = best;
    const g = gramOf(atom[best], atom[best + 1], atom[best + 2]);
    if (!buckets.has(g)) buckets.set(g, []);
    buckets.get(g).push(k);
  });
  const bitmap = new Uint8Array(GRAM_MASK + 1); // a byte per hash: one load to test
  const lists = new Array(GRAM_MASK + 1);
  const sizes = new Int32Array(GRAM_MASK + 1);
  for (const [g, ks] of buckets) {
    bitmap[g] = 1;
    lists[g] = Int32Array.from(ks);
    sizes[g] = ks.length;
  }
  const atomsOf = new Map(); // pattern -> its atoms' indexes
  owners.forEach((ids, k) => {
    for (const id of ids) {
      if (!atomsOf.has(id)) atomsOf.set(id, []);
      atomsOf.get(id).push(k);
    }
  });
  return { bytes, offsets, owners: owners.map((o) => Int32Array.from(o)), atomsOf, bitmap, lists, sizes, short };
}

// One pass over a block: its newlines, and which patterns' atoms it holds.
function scanBlock(buf) {
  if (grams === null) grams = buildGrams(atomPatterns, gramCounts(buf));
  const { bytes, offsets, owners, lists, sizes, short } = grams;
  const bitmap = grams.bitmap.slice();
  const left = sizes.slice(); // per hash: its atoms still recorded line by line in this block
  const lines = bytes.map(() => null); // per atom: the lines holding it, or null
  const dense = new Uint8Array(bytes.length); // atoms on too many lines to list: their patterns search the text
  const ends = [];
  const n = buf.length;
  let h = 0;
  for (let i = 0; i < n; i++) {
    const b = buf[i];
    if (b === 10) {
      ends.push(i);
      continue; // in no atom
    }
    h = ((h << 5) ^ FOLD[b]) & GRAM_MASK;
    if (bitmap[h] === 0) continue;
    const list = lists[h];
    for (let k = 0; k < list.length; k++) {
      const atom = list[k];
      if (dense[atom]) continue;
      const word = bytes[atom];
      const start = i - 2 - offsets[atom];
      if (start < 0 || start + word.length > n) continue;
      let j = 0;
      while (j < word.length && FOLD[buf[start + j]] === word[j]) j++;
      if (j < word.length) continue;
      const line = ends.length;
      let at = lines[atom];
      if (at === null) at = lines[atom] = [];
      if (at.length && at[at.length - 1] === line) continue;
      at.push(line);
      if (at.length >= DENSE) {
        dense[atom] = 1;
        if (--left[h] === 0) bitmap[h] = 0;
      }
    }
  }
  if (n && buf[n - 1] !== 10) ends.push(n); // a last line without a newline
  if (short.length) {
    const text = lowerAscii(decoder.decode(buf));
    for (const atom of short) if (text.includes(new TextDecoder().decode(bytes[atom]))) dense[atom] = 1;
  }
  const on = new Uint8Array(patternCount);
  for (let k = 0; k < bytes.length; k++) if (lines[k] !== null || dense[k]) for (const id of owners[k]) on[id] = 1;
  for (const id of always) on[id] = 1;
  return { ends: Int32Array.from(ends), on, lines, dense };
}

// The lines a pattern's atoms were found on, in order, or null when one of its atoms is on
// too many lines to list (its matches are then searched for in the text).
function atomLines(id, scan) {
  const mine = grams.atomsOf.get(id);
  if (!mine) return null;
  const out = new Set();
  for (const atom of mine) {
    if (scan.dense[atom]) return null;
    for (const line of scan.lines[atom] || []) out.add(line);
  }
  return Int32Array.from(out).sort();
}

// The end of a pattern (per alternative) from its first selective part on: a line holding
// a match of the pattern holds a match of that part, so searching a whole block for it finds
// the same lines and more, and the engine is spared the tries at every position that a
// pattern opening with a class or an optional part costs it over a long text. Leading
// anchors, classes, optional parts and groups holding an anchor go; a literal character or a
// required group stays. Undone where the pattern is written in a way this reading does not
// follow (an alternative then left empty, a source that no longer compiles).
function searchSource(source) {
  const tokens = (branch) => {
    const out = [];
    let i = 0;
    while (i < branch.length) {
      const start = i;
      const c = branch[i];
      let kind = "literal";
      if (c === "\\") {
        const e = branch[i + 1];
        if (e === "x") i += 4;
        else if (e === "u") i += 6;
        else if (e === "c") i += 3;
        else i += 2;
        if ("dDwWsSbB".includes(e)) kind = "class";
      } else if (c === "[") {
        i++;
        if (branch[i] === "^") i++;
        if (branch[i] === "]") i++;
        while (i < branch.length && branch[i] !== "]") i += branch[i] === "\\" ? 2 : 1;
        i++;
        kind = "class";
      } else if (c === "(") {
        let depth = 0;
        for (; i < branch.length; i++) {
          const d = branch[i];
          if (d === "\\") i++;
          else if (d === "[") {
            i++;
            if (branch[i] === "^") i++;
            if (branch[i] === "]") i++;
            while (i < branch.length && branch[i] !== "]") i += branch[i] === "\\" ? 2 : 1;
          } else if (d === "(") depth++;
          else if (d === ")" && --depth === 0) break;
        }
        i++;
        kind = /(?:^|[^\\])[$^]/.test(branch.slice(start, i)) ? "class" : "group";
      } else {
        i++;
        if (c === "^" || c === "$" || c === ".") kind = "class";
      }
      const q = /^(?:[*+?]|\{(\d+)(?:,\d*)?\})\??/.exec(branch.slice(i));
      let optional = false;
      if (q) {
        i += q[0].length;
        optional = q[0][0] === "*" || q[0][0] === "?" || q[1] === "0";
      }
      out.push({ text: branch.slice(start, i), skip: optional || kind === "class" });
    }
    return out;
  };
  const branches = [];
  let depth = 0;
  let from = 0;
  for (let i = 0; i < source.length; i++) {
    const c = source[i];
    if (c === "\\") i++;
    else if (c === "[") {
      i++;
      if (source[i] === "^") i++;
      if (source[i] === "]") i++;
      while (i < source.length && source[i] !== "]") i += source[i] === "\\" ? 2 : 1;
    } else if (c === "(") depth++;
    else if (c === ")") depth--;
    else if (c === "|" && depth === 0) {
      branches.push(source.slice(from, i));
      from = i + 1;
    }
  }
  branches.push(source.slice(from));
  const cut = branches.map((branch) => {
    const parts = tokens(branch);
    const keep = parts.findIndex((t) => !t.skip);
    return keep < 0 ? null : parts.slice(keep).map((t) => t.text).join("");
  });
  if (cut.some((b) => b === null || b === "")) return source;
  return cut.join("|");
}

// Offsets of the newlines in a string (or a byte array), and of its end when it lacks a last one.
function newlines(data, nl, length) {
  const out = [];
  let p = data.indexOf(nl);
  while (p >= 0) {
    out.push(p);
    p = data.indexOf(nl, p + 1);
  }
  if (length && (!out.length || out[out.length - 1] !== length - 1)) out.push(length);
  return Int32Array.from(out);
}

// What the page's `matches` says of one pattern on one line of text: escapes removed,
// frame by frame (a carriage return starts one), empty frames never match.
function matchesOne(text, id) {
  const p = patterns[id];
  if (!text.includes("\x1b") && !text.includes("\r")) {
    if (!text) return false;
    return p.re ? p.re.test(text) : p.atoms.some((a) => lowerAscii(text).includes(a));
  }
  const t = text.includes("\x1b") ? text.replace(ansi, "") : text;
  for (const f of t.includes("\r") ? t.split("\r") : [t]) {
    if (!f) continue;
    if (p.re ? p.re.test(f) : p.atoms.some((a) => lowerAscii(f).includes(a))) return true;
  }
  return false;
}

function work(buf) {
  const scan = scanBlock(buf);
  const { ends, on } = scan; // the page's line ends (in bytes), the patterns present
  const count = ends.length;
  const raw = decoder.decode(buf);
  // The text searched: as the rules judge it, without escapes (they hold no newline, so
  // the lines stay the same lines).
  const hasEscapes = raw.includes("\x1b");
  const searched = hasEscapes ? raw.replace(ansi, "") : raw;
  const stops = newlines(searched, "\n", searched.length); // line ends in the searched text
  const rawStops = hasEscapes ? newlines(raw, "\n", raw.length) : stops;
  const aligned = stops.length === count && rawStops.length === count;
  const lineStart = (i) => (i ? stops[i - 1] + 1 : 0);
  const lineOf = (at, from) => {
    let lo = from;
    let hi = count;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (stops[mid] < at) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  };
  // Lines over line_bytes are judged on their start, which a search of the whole line does
  // not see as the end of a text: they are tried with every pattern present.
  const long = [];
  for (let i = 0; i < count; i++) if (ends[i] - (i ? ends[i - 1] + 1 : 0) > rules.line_bytes) long.push(i);
  const texts = new Map();
  const text = (i) => {
    let t = texts.get(i);
    if (t === undefined) {
      const start = i ? ends[i - 1] + 1 : 0;
      if (ends[i] - start > rules.line_bytes) t = decoder.decode(buf.subarray(start, start + rules.line_bytes));
      else t = raw.slice(i ? rawStops[i - 1] + 1 : 0, rawStops[i]);
      texts.set(i, t);
    }
    return t;
  };
  const test = (i, id) => matchesOne(text(i), id);
  let lowered = null; // the searched text in ASCII lower case, for patterns judged by their atoms alone

  // The lines from `from` on where the pattern may match, in order: each one search of the
  // text from the start of a line (a match reaching over a line end is found again from the
  // next line, so no line is skipped), merged with the long lines.
  const listed = new Map(); // pattern -> the lines its atoms are on (null: search the text)
  function* candidates(id, from) {
    const p = patterns[id];
    if (!listed.has(id)) listed.set(id, atomLines(id, scan));
    const few = listed.get(id);
    if (few !== null) {
      // Its atoms are on a few lines only (a line it matches holds one of them).
      for (const i of few) if (i >= from) yield i;
      return;
    }
    let k = 0;
    while (k < long.length && long[k] < from) k++;
    if (!aligned) {
      for (let i = from; i < count; i++) yield i; // every line, judged one by one
      return;
    }
    let i = from;
    while (i < count) {
      let found = count;
      if (p.all) {
        p.all.lastIndex = lineStart(i);
        const m = p.all.exec(searched);
        if (m !== null) found = lineOf(m.index, i);
      } else {
        if (lowered === null) lowered = lowerAscii(searched);
        for (const a of p.atoms) {
          const at = lowered.indexOf(a, lineStart(i));
          if (at >= 0) found = Math.min(found, lineOf(at, i));
        }
      }
      while (k < long.length && long[k] < found) yield long[k++];
      if (found >= count) return;
      if (k < long.length && long[k] === found) k++;
      yield found;
      i = found + 1;
    }
  }

  // The last line from `from` on that the pattern matches, or -1: first among the last lines
  // (a frequent pattern's last match is near the end), else along the rest of the block.
  function lastMatch(id, from) {
    const tailFrom = Math.max(from, count - 64);
    let last = -1;
    for (const i of candidates(id, tailFrom)) if (test(i, id)) last = i;
    if (last >= 0 || tailFrom === from) return last;
    for (const i of candidates(id, from)) {
      if (i >= tailFrom) break;
      if (test(i, id)) last = i;
    }
    return last;
  }

  // Per pattern: its first matches (at most per_pattern) and its last.
  const matchIds = [];
  const matchOffsets = [0];
  const matchLines = [];
  const lasts = [];
  for (let id = 0; id < patternCount; id++) {
    if (!on[id] || !patterns[id] || patterns[id].progress) continue;
    const first = [];
    let from = 0;
    if (!capped.has(id)) {
      for (const i of candidates(id, 0)) {
        from = i + 1;
        if (test(i, id)) {
          first.push(i);
          if (first.length >= rules.per_pattern) break;
        }
      }
      if (first.length < rules.per_pattern) from = count; // examined to the end
    }
    let last = first.length ? first[first.length - 1] : -1;
    if (from < count) {
      const later = lastMatch(id, from);
      if (later >= 0) last = later;
    }
    if (last < 0) continue;
    matchIds.push(id);
    for (const i of first) matchLines.push(i);
    matchOffsets.push(matchLines.length);
    lasts.push(last);
  }
  // The last progress lines, from the end: windows of lines growing eightfold.
  const progress = [];
  const shown = progressIds.filter((id) => on[id]);
  if (shown.length) {
    let hi = count;
    let size = rules.progress * 2;
    while (hi > 0 && progress.length < rules.progress) {
      const lo = Math.max(0, hi - size);
      const lines = new Set();
      for (const id of shown) {
        for (const i of candidates(id, lo)) {
          if (i >= hi) break;
          lines.add(i);
        }
      }
      const sorted = [...lines].sort((a, b) => b - a);
      for (const i of sorted) {
        if (shown.some((id) => test(i, id))) {
          progress.push(i);
          if (progress.length >= rules.progress) break;
        }
      }
      hi = lo;
      size *= 8;
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
      // The same expression over a whole block: "m" so that ^ and $ see line ends (and a CR,
      // which starts a frame); "g" to search from a given line on.
      let all = null;
      if (re) {
        try {
          all = new RegExp(searchSource(p.js), p.flags + "gm");
        } catch (err) {
          all = new RegExp(p.js, p.flags + "gm");
        }
      }
      return { re, all, atoms: p.atoms, progress: p.kind === "progress" };
    });
    const usable = spec.patterns.filter((p, i) => patterns[i].re || p.atoms);
    patternCount = spec.patterns.length;
    progressIds = usable.filter((p) => p.kind === "progress").map((p) => p.id);
    always = usable.filter((p) => !p.atoms).map((p) => p.id);
    atomPatterns = usable.filter((p) => p.atoms);
    grams = null;
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
