// The screening half of the browser's evidence pass (excerpt.js), run in Web Workers.
//
// A block of whole lines comes in; out go its line ends and, per pattern, the lines it
// matches. One pass over the bytes says which patterns' atoms (the required literals the
// server publishes with each pattern, compared in ASCII lower case) occur in the block at
// all (`scanBlock`); each of those patterns is then searched for in the block's decoded text
// as a whole (two texts, see `Block`; the browser's own regular expression engine, one
// search per match, not one call per line), and only the lines it finds are tried with the pattern as the rules say
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

// Which atoms a block holds, and on which lines, found in one pass over its bytes read four
// at a time (a 32-bit word; ASCII case folded loosely by setting bit 5 of every byte, exact
// folding is left to the comparison). An atom of seven bytes or more covers a whole word at
// a multiple of four wherever it starts: per start modulo four, its rarest such piece (a
// sample of the first block a worker reads tells how often each occurs) is entered in a
// table of word hashes (a bit per hash, 8 KB: it stays in the CPU's first cache), and the
// atom is compared only where a word's hash is set. An atom of three to six bytes covers a
// whole two-byte half of a word: a table of halves says where to look, and since two bytes
// tell little (`00` of `100%` is on every line of a training log), a table of the three bytes
// there or one to the left says whether to compare. So a block costs a load, a hash and
// three tests per four bytes rather than a hash per byte. The same pass finds the
// newlines and the lines holding bytes over 0x7f. An atom found on many lines of a block is
// looked for no more in it (its patterns search the block's text instead): a hash whose
// atoms are all so is cleared from the block's table.
const WORD_BITS = 16;
// Lines of an atom listed per block, per byte of the block, before its patterns are searched
// for in the text instead: trying a pattern on a line costs about what searching 200-500
// bytes of text does (Chromium, Node), so a pattern is tried line by line up to a line per
// KB (a seventh of the lines of a training log), and the block is searched past that.
const DENSE_BYTES = 1024;
const DENSE_MIN = 48;
const LOOSE4 = 0x20202020;
const LOOSE2 = 0x2020;
const LOOSE3 = 0x202020;
const HIGH = 0x80808080 | 0; // bit 7 of each byte
const GOLDEN = 0x9e3779b1 | 0;
const hashWord = (x) => Math.imul(x | LOOSE4, GOLDEN) >>> (32 - WORD_BITS);
const hashThree = (x) => Math.imul(x | LOOSE3, GOLDEN) >>> (32 - WORD_BITS); // x: three bytes
// A block's words are read little-endian (the pieces' keys are made so): on a big-endian
// machine the block's copy is turned around first.
const LITTLE = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1;
const swapped = (x) => ((x & 0xff) << 24) | ((x & 0xff00) << 8) | ((x >>> 8) & 0xff00) | (x >>> 24);
const wordAt = (bytes, at) => bytes[at] | (bytes[at + 1] << 8) | (bytes[at + 2] << 16) | (bytes[at + 3] << 24);
const halfAt = (bytes, at) => bytes[at] | (bytes[at + 1] << 8);
const threeAt = (bytes, at) => bytes[at] | (bytes[at + 1] << 8) | (bytes[at + 2] << 16);
let atomPatterns = null; // the patterns with atoms, until the first block comes
// An atom on many lines of one block is on many lines of the next, in most logs: listing its
// first lines again in every block (a thousand per block for each of `loss`, `info`,
// `grad_norm`, ... in a training log) cost most of the comparisons. So the atoms found dense
// in a worker's last block start the next one as dense (their patterns search the text, which
// finds the same lines), except every RECOUNT-th block, which counts afresh: an atom that
// became rare is listed again from there.
const RECOUNT = 8;
let lastDense = null;
let blocksScanned = 0;

function pieceCounts(block) {
  const buf = block.subarray(0, 128 << 10); // a sample ranks the pieces well enough, and costs little before the code is optimised
  const words = new Int32Array(1 << WORD_BITS);
  const halves = new Int32Array(1 << 16);
  const threes = new Int32Array(1 << WORD_BITS);
  for (let i = 0; i + 4 <= buf.length; i++) words[hashWord(wordAt(buf, i))]++;
  for (let i = 0; i + 2 <= buf.length; i++) halves[(halfAt(buf, i) | LOOSE2) & 0xffff]++;
  for (let i = 0; i + 3 <= buf.length; i++) threes[hashThree(threeAt(buf, i))]++;
  return { words, halves, threes };
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
  const words = new Map(); // word hash -> [atom, offset, ...]
  const halves = new Map(); // half -> [atom, offset, ...]
  const threes = new Map(); // hash of three bytes -> [atom, offset, ...]
  const homes = bytes.map(() => []); // per atom: its entries, [table, key] pairs
  const short = []; // atoms of fewer than three bytes (none are published): compared everywhere
  const enter = (table, key, k, off) => {
    if (!table.has(key)) table.set(key, []);
    const list = table.get(key);
    if (list.some((v, j) => j % 2 === 0 && v === k)) return; // one entry per atom and key
    list.push(k, off);
    homes[k].push(table === words ? 0 : table === halves ? 1 : 2, key);
  };
  bytes.forEach((atom, k) => {
    if (atom.length < 3) {
      short.push(k);
      return;
    }
    const wide = atom.length >= 7;
    const step = wide ? 4 : 2;
    const span = wide ? 4 : 2;
    const keyAt = wide ? (off) => hashWord(wordAt(atom, off)) : (off) => (halfAt(atom, off) | LOOSE2) & 0xffff;
    const count = wide ? counts.words : counts.halves;
    for (let r = 0; r < step; r++) {
      let best = r;
      for (let off = r + step; off + span <= atom.length; off += step) if (count[keyAt(off)] < count[keyAt(best)]) best = off;
      enter(wide ? words : halves, keyAt(best), k, best);
      if (wide) continue;
      // The three bytes compared at that half: itself and the byte after or the one before.
      const right = best + 3 <= atom.length ? hashThree(threeAt(atom, best)) : -1;
      const left = best >= 1 ? hashThree(threeAt(atom, best - 1)) : -1;
      if (left < 0 || (right >= 0 && counts.threes[right] <= counts.threes[left])) enter(threes, right, k, best);
      else enter(threes, left, k, best - 1);
    }
  });
  const table = (map, size) => {
    const bitmap = new Int32Array(size >>> 5); // a bit per key: 8 KB, in the CPU's first cache
    const lists = new Array(size);
    const sizes = new Int32Array(size);
    for (const [key, list] of map) {
      bitmap[key >>> 5] |= 1 << (key & 31);
      lists[key] = Int32Array.from(list);
      sizes[key] = list.length / 2;
    }
    return { bitmap, lists, sizes };
  };
  const atomsOf = new Map(); // pattern -> its atoms' indexes
  owners.forEach((ids, k) => {
    for (const id of ids) {
      if (!atomsOf.has(id)) atomsOf.set(id, []);
      atomsOf.get(id).push(k);
    }
  });
  return {
    bytes,
    homes,
    owners: owners.map((o) => Int32Array.from(o)),
    atomsOf,
    words: table(words, 1 << WORD_BITS),
    halves: table(halves, 1 << 16),
    threes: table(threes, 1 << WORD_BITS),
    short,
  };
}

// The atoms of a table entry that are at `pos - offset`, on `line`: their lines recorded
// (one function for every block, so the engine keeps its optimised code).
function check(state, list, pos, line) {
  const { buf, bytes, lines, dense, lastLine } = state;
  const n = buf.length;
  for (let e = 0; e < list.length; e += 2) {
    const atom = list[e];
    if (dense[atom] || lastLine[atom] === line) continue; // the line is listed already
    const word = bytes[atom];
    const start = pos - list[e + 1];
    if (start < 0 || start + word.length > n) continue;
    let j = 0;
    while (j < word.length && FOLD[buf[start + j]] === word[j]) j++;
    if (j < word.length) continue;
    let at = lines[atom];
    if (at === null) at = lines[atom] = [];
    lastLine[atom] = line;
    at.push(line);
    if (at.length >= state.denseAt) markDense(state, atom);
  }
}

// An atom on too many lines of the block to list: its patterns search the text, and a table
// entry whose atoms are all so is cleared.
function markDense(state, atom) {
  state.dense[atom] = 1;
  const home = state.homes[atom];
  for (let h = 0; h < home.length; h += 2) {
    const key = home[h + 1];
    if (home[h] === 0) {
      if (--state.wordLeft[key] === 0) state.wordBits[key >>> 5] &= ~(1 << (key & 31));
    } else if (home[h] === 1) {
      if (--state.halfLeft[key] === 0) state.halfBits[key >>> 5] &= ~(1 << (key & 31));
    } else if (--state.threeLeft[key] === 0) state.threeBits[key >>> 5] &= ~(1 << (key & 31));
  }
}

// A half of a word set in the table of halves, at `pos`: the atoms entered by the three bytes
// from `pos - 1` (`left`) or from `pos` (`right`) are compared.
function atHalf(state, left, right, pos, line) {
  const bits = state.threeBits;
  const l = hashThree(left);
  if ((bits[l >>> 5] & (1 << (l & 31))) !== 0) check(state, grams.threes.lists[l], pos - 1, line);
  const r = hashThree(right);
  if ((bits[r >>> 5] & (1 << (r & 31))) !== 0) check(state, grams.threes.lists[r], pos, line);
}

// The pass itself, apart: a small function the engine optimises once for every block.
// `words` has one word of zeros after the block's; the newlines' offsets and the lines with
// bytes over 0x7f are written to `ends` and `wide` (typed arrays: a list growing by a push
// per line made the engine compile the pass again when the list's kind of elements changed),
// their counts to the state.
function scanWords(state, words, ends, wide) {
  const { buf, wordBits, halfBits } = state;
  const wordLists = grams.words.lists;
  const n = buf.length;
  const last = words.length - 1;
  let line = 0; // newlines before the word
  let before = 0; // the word before
  let endCount = 0;
  let wideCount = 0;
  let wideLine = -1; // the last line listed in `wide`
  for (let w = 0; w < last; w++, before = words[w - 1]) {
    const x = words[w];
    const y = x ^ 0x0a0a0a0a;
    if (((y - 0x01010101) & ~y & HIGH) === 0) {
      // No newline in the word (the usual case).
      if ((x & HIGH) !== 0 && wideLine !== line) wide[wideCount++] = wideLine = line;
      const h = Math.imul(x | LOOSE4, GOLDEN) >>> (32 - WORD_BITS);
      if ((wordBits[h >>> 5] & (1 << (h & 31))) !== 0) check(state, wordLists[h], w << 2, line);
      const lo = (x | LOOSE2) & 0xffff;
      if ((halfBits[lo >>> 5] & (1 << (lo & 31))) !== 0) atHalf(state, (before >>> 24) | ((x & 0xffff) << 8), x & 0xffffff, w << 2, line);
      const hi = ((x >>> 16) | LOOSE2) & 0xffff;
      if ((halfBits[hi >>> 5] & (1 << (hi & 31))) !== 0) atHalf(state, (x >>> 8) & 0xffffff, (x >>> 16) | ((words[w + 1] & 0xff) << 16), (w << 2) + 2, line);
      continue;
    }
    // A word with a newline: byte by byte; only its halves without one can be in an atom.
    const pos = w << 2;
    let loLine = line; // the line of each half, or -1 when it holds a newline
    let hiLine = line;
    for (let j = 0; j < 4 && pos + j < n; j++) {
      const b = buf[pos + j];
      if (b === 10) {
        ends[endCount++] = pos + j;
        line++;
        if (j < 2) loLine = -1;
        hiLine = j < 2 ? line : -1;
      } else if (b > 0x7f && wideLine !== line) wide[wideCount++] = wideLine = line;
    }
    const lo = (x | LOOSE2) & 0xffff;
    if (loLine >= 0 && (halfBits[lo >>> 5] & (1 << (lo & 31))) !== 0) {
      atHalf(state, (before >>> 24) | ((x & 0xffff) << 8), x & 0xffffff, pos, loLine);
    }
    const hi = ((x >>> 16) | LOOSE2) & 0xffff;
    if (hiLine >= 0 && (halfBits[hi >>> 5] & (1 << (hi & 31))) !== 0) {
      atHalf(state, (x >>> 8) & 0xffffff, (x >>> 16) | ((words[w + 1] & 0xff) << 16), pos + 2, hiLine);
    }
  }
  state.endCount = endCount;
  state.wideCount = wideCount;
}

let endsOut = new Int32Array(0); // the pass's lists, kept from block to block
let wideOut = new Int32Array(0);

// One pass over a block: its newlines, the lines with bytes over 0x7f, which patterns'
// atoms it holds and on which lines. `copy` is the block followed by at least four zero
// bytes, in a buffer of whole words.
function scanBlock(buf, copy) {
  if (grams === null) grams = buildGrams(atomPatterns, pieceCounts(buf));
  const { bytes, homes, owners, short } = grams;
  const wordBits = grams.words.bitmap.slice();
  const halfBits = grams.halves.bitmap.slice();
  const wordLeft = grams.words.sizes.slice(); // per key: its atoms still recorded line by line
  const halfLeft = grams.halves.sizes.slice();
  const threeBits = grams.threes.bitmap.slice();
  const threeLeft = grams.threes.sizes.slice();
  const lines = bytes.map(() => null); // per atom: the lines holding it, or null
  const dense = new Uint8Array(bytes.length); // atoms on too many lines to list: their patterns search the text
  const n = buf.length;
  if (endsOut.length < n + 1) endsOut = new Int32Array(n + 1 + (n >>> 3));
  if (wideOut.length < n + 1) wideOut = new Int32Array(n + 1 + (n >>> 3));
  const denseAt = Math.max(DENSE_MIN, Math.floor(n / DENSE_BYTES));
  const lastLine = new Int32Array(bytes.length).fill(-1); // per atom: the last line listed
  const state = { buf, bytes, homes, lines, dense, lastLine, denseAt, wordBits, halfBits, threeBits, wordLeft, halfLeft, threeLeft, endCount: 0, wideCount: 0 };
  if (lastDense !== null && blocksScanned % RECOUNT !== 0) for (let k = 0; k < bytes.length; k++) if (lastDense[k]) markDense(state, k);
  blocksScanned++;
  const words = new Int32Array(copy.buffer, 0, ((n + 3) >>> 2) + 1); // and a word of zeros; signed: small integers to the engine
  if (!LITTLE) for (let w = 0; w < words.length; w++) words[w] = swapped(words[w]); // read as little-endian
  scanWords(state, words, endsOut, wideOut);
  if (n && buf[n - 1] !== 10) endsOut[state.endCount++] = n; // a last line without a newline
  const ends = endsOut.slice(0, state.endCount);
  const wide = wideOut.slice(0, state.wideCount); // lines holding a byte over 0x7f
  if (short.length) {
    const text = lowerAscii(decoder.decode(buf));
    for (const atom of short) if (text.includes(new TextDecoder().decode(bytes[atom]))) dense[atom] = 1;
  }
  lastDense = dense;
  const on = new Uint8Array(patternCount);
  for (let k = 0; k < bytes.length; k++) if (lines[k] !== null || dense[k]) for (const id of owners[k]) on[id] = 1;
  for (const id of always) on[id] = 1;
  return { ends, wide, on, lines, dense };
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
// required group stays. An alternative that opens with ^ stays whole (below) unless two
// literal characters follow it. Undone where the pattern is written in a way this reading
// does not follow (an alternative then left empty, a source that no longer compiles).
const ONE_CHAR = /^(?:\\.|[^\\])$/; // a token that is one literal character, escaped or not
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
      out.push({ text: branch.slice(start, i), skip: optional || kind === "class", kind });
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
  // How many literal characters a search from part k opens with (a group of alternatives:
  // its shortest alternative's), the engine's fast scan being for those.
  const literalRun = (parts, k) => {
    const t = parts[k];
    if (t.kind === "literal") {
      let run = 0;
      while (k + run < parts.length && parts[k + run].kind === "literal" && ONE_CHAR.test(parts[k + run].text)) run++;
      return run;
    }
    if (t.kind !== "group" || !t.text.startsWith("(?:") || !t.text.endsWith(")") || /[()[]/.test(t.text.slice(3, -1))) return 0;
    return Math.min(...t.text.slice(3, -1).split("|").map((alt) => /^(?:\\[^\dA-Za-z]|[^\\^$.|?*+()[\]{}])*/.exec(alt)[0].replace(/\\/g, "").length));
  };
  const cut = branches.map((branch) => {
    const parts = tokens(branch);
    const keep = parts.findIndex((t) => !t.skip);
    // A later required part that opens with more literal characters is searched from
    // instead (a line the pattern matches holds a match of it too): the engine scans for
    // `(?:nan|inf)` quickly, where from `\[` it stops at every line that opens with one.
    if (keep >= 0 && !/\\[1-9]|\\k</.test(source)) {
      let best = keep;
      for (let k = keep + 1; k < parts.length; k++) if (!parts[k].skip && literalRun(parts, k) > literalRun(parts, best)) best = k;
      if (best !== keep && literalRun(parts, best) >= 2) return parts.slice(best).map((t) => t.text).join("");
    }
    // An alternative anchored at a line's start stays whole unless its selective part opens
    // with two literal characters or more: with "m", ^ holds after a line end or a CR only,
    // and the engine gives up at once everywhere else, where from that part on it would be
    // tried at every digit (`(?<epoch>\d{1,5})/`) or every quote or bar of a training log
    // (`'[^'\s]{1,200}' `, `\|\s{1,4}`): 1.5-3x slower. Two literal characters lead a fast
    // scan for themselves: `#0` is searched as before.
    if (parts.length && parts[0].text === "^" && keep >= 0) {
      let run = 0;
      while (keep + run < parts.length && parts[keep + run].kind === "literal" && ONE_CHAR.test(parts[keep + run].text)) run++;
      if (run < 2) return branch;
    }
    return keep < 0 ? null : parts.slice(keep).map((t) => t.text).join("");
  });
  if (cut.some((b) => b === null || b === "")) return source;
  return cut.join("|");
}

// A source with its capturing groups made non-capturing: a search of the whole block only
// needs where a match starts, and the engine spends a quarter less on a pattern such as the
// `stateless_job` row (two named groups) without them. Left as it is when a group is referred
// to (\1, \k<name>).
function withoutCaptures(source) {
  if (/\\[1-9]|\\k</.test(source)) return source;
  let out = "";
  for (let i = 0; i < source.length; i++) {
    const c = source[i];
    if (c === "\\") {
      out += source.slice(i, i + 2);
      i++;
    } else if (c === "[") {
      let j = i + 1;
      if (source[j] === "^") j++;
      if (source[j] === "]") j++;
      while (j < source.length && source[j] !== "]") j += source[j] === "\\" ? 2 : 1;
      out += source.slice(i, j + 1);
      i = j;
    } else if (c === "(" && source[i + 1] !== "?") {
      out += "(?:";
    } else if (c === "(" && source[i + 2] === "<" && source[i + 3] !== "=" && source[i + 3] !== "!") {
      const close = source.indexOf(">", i);
      out += "(?:";
      i = close;
    } else {
      out += c;
    }
  }
  return out;
}

// A pattern's expression over a whole block (searchSource), made on its first search: "m" so
// that ^ and $ see line ends (and a CR, which starts a frame); "g" to search from a given line on.
function wholeOf(p) {
  if (p.all === undefined) {
    try {
      p.all = new RegExp(withoutCaptures(searchSource(p.js)), p.flags + "gm");
    } catch (err) {
      p.all = new RegExp(p.js, p.flags + "gm");
    }
  }
  return p.all;
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

// Two ascending lists of lines as one, without repeats.
function merged(a, b) {
  const out = [];
  let j = 0;
  for (const x of a) {
    while (j < b.length && b[j] < x) out.push(b[j++]);
    if (j < b.length && b[j] === x) j++;
    out.push(x);
  }
  while (j < b.length) out.push(b[j++]);
  return out;
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

// The block's lines of ASCII only are decoded as "latin1" (windows-1252; the same characters
// under 0x80): one character per byte, so the text needs no search for its newlines.
const asciiDecoder = new TextDecoder("latin1");
// One text searched as a whole: its lines' ends (`ends`, when they are its offsets), where
// each starts once escapes are removed, and the line holding an offset. Classes here and
// below, not closures made per block: the engine's optimised code calls the same functions
// from block to block instead of being thrown away at each new block's closures and
// compiled again (that recompiling took a fifth of the page's CPU).
class Part {
  constructor(raw, ends, count) {
    this.raw = raw;
    this.hasEscapes = raw.includes("\x1b");
    this.searched = this.hasEscapes ? raw.replace(ansi, "") : raw; // as the rules judge it (escapes hold no newline)
    this.rawStops = ends || newlines(raw, "\n", raw.length);
    this.stops = this.hasEscapes ? newlines(this.searched, "\n", this.searched.length) : this.rawStops;
    this.count = count;
    this.lowered = null; // the searched text in ASCII lower case, for patterns judged by their atoms alone
    this.aligned = this.stops.length === count && this.rawStops.length === count;
  }

  rawLine(i) {
    return this.raw.slice(i ? this.rawStops[i - 1] + 1 : 0, this.rawStops[i]);
  }

  lineStart(i) {
    return i ? this.stops[i - 1] + 1 : 0;
  }

  lineOf(at, from) {
    const stops = this.stops;
    let lo = from;
    let hi = this.count;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (stops[mid] < at) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  // The first line from `from` on where the pattern may match, or the line count.
  next(p, from) {
    const all = wholeOf(p);
    if (all) {
      all.lastIndex = this.lineStart(from);
      const m = all.exec(this.searched);
      return m === null ? this.count : this.lineOf(m.index, from);
    }
    if (this.lowered === null) this.lowered = lowerAscii(this.searched);
    let found = this.count;
    for (const a of p.atoms) {
      const at = this.lowered.indexOf(a, this.lineStart(from));
      if (at >= 0) found = Math.min(found, this.lineOf(at, from));
    }
    return found;
  }
}

let scratch = new Uint8Array(0); // the block's copy, kept from block to block

const byteStart = (ends, i) => (i ? ends[i - 1] + 1 : 0);

// Lines over line_bytes are judged on their start, which a search of the whole line does not
// see as the end of a text: they are tried with every pattern present.
function longLines(ends, count) {
  const long = [];
  for (let i = 0; i < count; i++) if (ends[i] - byteStart(ends, i) > rules.line_bytes) long.push(i);
  return long;
}

// The lines holding a byte over 0x7f that are not long, each line's index among them (or
// -1), and the block's copy with those bytes made DEL.
function wideOf(ends, count, wide, copy) {
  const wideAt = new Int32Array(count).fill(-1);
  const wideLines = [];
  for (const i of wide) {
    for (let b = byteStart(ends, i); b < ends[i]; b++) if (copy[b] > 0x7f) copy[b] = 0x7f;
    if (ends[i] - byteStart(ends, i) > rules.line_bytes) continue; // long: tried with every pattern anyway
    wideAt[i] = wideLines.length;
    wideLines.push(i);
  }
  return { wideAt, wideLines };
}

// Those lines' bytes one after another, each ending with a newline.
function joinedLines(buf, ends, lines) {
  let total = 0;
  for (const i of lines) total += ends[i] + 1 - byteStart(ends, i);
  const joined = new Uint8Array(total);
  let at = 0;
  for (const i of lines) {
    joined.set(buf.subarray(byteStart(ends, i), ends[i]), at);
    at += ends[i] - byteStart(ends, i);
    joined[at++] = 10;
  }
  return joined;
}

// The lines holding an escape: one inside an atom hides it from the byte pass, so they are
// tried with each pattern present that is tried line by line.
function escapedLines(part, ends, count) {
  const escaped = [];
  if (!part.hasEscapes) return escaped;
  const raw = part.raw;
  let line = 0;
  for (let at = raw.indexOf("\x1b"); at >= 0; at = raw.indexOf("\x1b", at + 1)) {
    while (line < count && ends[line] < at) line++;
    if (escaped[escaped.length - 1] !== line) escaped.push(line);
  }
  return escaped;
}

// A block being answered: its lines, its text and where each pattern may match. Its loops
// are functions of their own: a loop that runs long in a constructor called once per block
// had its code compiled anew at every block.
class Block {
  constructor(buf) {
    const n = buf.length;
    const size = (((n + 3) >>> 2) << 2) + 4; // whole words, zeros after the block
    if (scratch.length < size) scratch = new Uint8Array(size + (size >>> 3));
    const copy = scratch.subarray(0, size);
    copy.set(buf);
    copy.fill(0, n);
    const scan = scanBlock(buf, copy);
    const { ends, wide } = scan; // the page's line ends (in bytes)
    const count = ends.length;
    this.buf = buf;
    this.scan = scan;
    this.ends = ends;
    this.count = count;
    this.long = longLines(ends, count);
    // The block's text in two parts, each searched as a whole. Its lines without a byte over
    // 0x7f are one text of one character per byte (latin1: V8 keeps it one byte per character,
    // which decodes and searches about twice as fast as the two bytes a UTF-8 text with any
    // other character takes, and its offsets are the bytes'); in it the bytes over 0x7f of the
    // other lines are made DEL, so that it stays one byte per character, and what is found on
    // those lines is passed over. Those lines (a few in a hundred in a training log) are the
    // second text, decoded as UTF-8, searched the same way.
    const { wideAt, wideLines } = wideOf(ends, count, wide, copy);
    this.wideAt = wideAt;
    this.wideLines = wideLines;
    this.big = new Part(asciiDecoder.decode(wide.length ? copy.subarray(0, n) : buf), ends, count);
    this.small = wideLines.length ? new Part(decoder.decode(joinedLines(buf, ends, wideLines)), null, wideLines.length) : null;
    this.aligned = this.big.aligned && (this.small === null || this.small.aligned);
    this.escaped = escapedLines(this.big, ends, count);
    this.texts = new Map();
    this.listed = new Map(); // pattern -> the lines its atoms are on (null: search the text)
  }

  text(i) {
    let t = this.texts.get(i);
    if (t === undefined) {
      const start = byteStart(this.ends, i);
      if (this.ends[i] - start > rules.line_bytes) t = decoder.decode(this.buf.subarray(start, start + rules.line_bytes));
      else if (this.wideAt[i] >= 0) t = this.small.rawLine(this.wideAt[i]);
      else t = this.big.rawLine(i);
      this.texts.set(i, t);
    }
    return t;
  }

  test(i, id) {
    return matchesOne(this.text(i), id);
  }

  // The first line from `from` on where the first text finds the pattern, unless it is on a
  // line of the second.
  nextBig(p, from) {
    let i = from;
    for (;;) {
      const found = this.big.next(p, i);
      if (found >= this.count || this.wideAt[found] < 0) return found;
      i = found + 1;
    }
  }

  // The same in the second text.
  nextSmall(p, from) {
    const wideLines = this.wideLines;
    if (this.small === null) return this.count;
    let lo = 0;
    let hi = wideLines.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (wideLines[mid] < from) lo = mid + 1;
      else hi = mid;
    }
    if (lo >= wideLines.length) return this.count;
    const found = this.small.next(p, lo);
    return found >= wideLines.length ? this.count : wideLines[found];
  }

  // The lines from `from` on where the pattern may match, in order: each one search of a
  // text from the start of a line (a match reaching over a line end is found again from the
  // next line, so no line is skipped), merged with the long lines.
  *candidates(id, from) {
    const p = patterns[id];
    const { count, long } = this;
    if (!this.listed.has(id)) {
      const few = atomLines(id, this.scan);
      this.listed.set(id, few !== null && this.escaped.length ? merged(few, this.escaped) : few);
    }
    const few = this.listed.get(id);
    if (few !== null) {
      // Its atoms are on a few lines only (a line it matches holds one of them).
      for (const i of few) if (i >= from) yield i;
      return;
    }
    let k = 0;
    while (k < long.length && long[k] < from) k++;
    if (!this.aligned) {
      for (let i = from; i < count; i++) yield i; // every line, judged one by one
      return;
    }
    let i = from;
    let inBig = -1; // the next finding of each text, once searched
    let inSmall = -1;
    while (i < count) {
      if (inBig < i) inBig = this.nextBig(p, i);
      if (inSmall < i) inSmall = this.nextSmall(p, i);
      const found = Math.min(inBig, inSmall);
      while (k < long.length && long[k] < found) yield long[k++];
      if (found >= count) return;
      if (k < long.length && long[k] === found) k++;
      yield found;
      i = found + 1;
    }
  }

  // The last line from `from` on that the pattern matches, or -1: first among the last lines
  // (a frequent pattern's last match is near the end), else along the rest of the block.
  lastMatch(id, from) {
    const tailFrom = Math.max(from, this.count - 64);
    let last = -1;
    for (const i of this.candidates(id, tailFrom)) if (this.test(i, id)) last = i;
    if (last >= 0 || tailFrom === from) return last;
    for (const i of this.candidates(id, from)) {
      if (i >= tailFrom) break;
      if (this.test(i, id)) last = i;
    }
    return last;
  }
}

// Per pattern present: its first matches (at most per_pattern) and its last.
function matchesOf(block) {
  const { count } = block;
  const on = block.scan.on;
  const matchIds = [];
  const matchOffsets = [0];
  const matchLines = [];
  const lasts = [];
  for (let id = 0; id < patternCount; id++) {
    if (!on[id] || !patterns[id] || patterns[id].progress) continue;
    const first = [];
    let from = 0;
    if (!capped.has(id)) {
      for (const i of block.candidates(id, 0)) {
        from = i + 1;
        if (block.test(i, id)) {
          first.push(i);
          if (first.length >= rules.per_pattern) break;
        }
      }
      if (first.length < rules.per_pattern) from = count; // examined to the end
    }
    let last = first.length ? first[first.length - 1] : -1;
    if (from < count) {
      const later = block.lastMatch(id, from);
      if (later >= 0) last = later;
    }
    if (last < 0) continue;
    matchIds.push(id);
    for (const i of first) matchLines.push(i);
    matchOffsets.push(matchLines.length);
    lasts.push(last);
  }
  return {
    matchIds: Int32Array.from(matchIds),
    matchOffsets: Int32Array.from(matchOffsets),
    matchLines: Int32Array.from(matchLines),
    lasts: Int32Array.from(lasts),
  };
}

// The last progress lines, from the end: windows of lines growing eightfold.
function progressOf(block) {
  const progress = [];
  const shown = progressIds.filter((id) => block.scan.on[id]);
  if (!shown.length) return Int32Array.from(progress);
  let hi = block.count;
  let size = rules.progress * 2;
  while (hi > 0 && progress.length < rules.progress) {
    const lo = Math.max(0, hi - size);
    const lines = new Set();
    for (const id of shown) {
      for (const i of block.candidates(id, lo)) {
        if (i >= hi) break;
        lines.add(i);
      }
    }
    const sorted = [...lines].sort((a, b) => b - a);
    for (const i of sorted) {
      if (shown.some((id) => block.test(i, id))) {
        progress.push(i);
        if (progress.length >= rules.progress) break;
      }
    }
    hi = lo;
    size *= 8;
  }
  progress.reverse();
  return Int32Array.from(progress);
}

function work(buf) {
  const block = new Block(buf);
  return { ends: block.ends, ...matchesOf(block), progress: progressOf(block) };
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
      const all = re === null ? null : undefined; // made on first use (wholeOf): few are ever searched
      return { re, all, js: p.js, flags: p.flags, atoms: p.atoms, progress: p.kind === "progress" };
    });
    const usable = spec.patterns.filter((p, i) => patterns[i].re || p.atoms);
    patternCount = spec.patterns.length;
    progressIds = usable.filter((p) => p.kind === "progress").map((p) => p.id);
    always = usable.filter((p) => !p.atoms).map((p) => p.id);
    atomPatterns = usable.filter((p) => p.atoms);
    grams = null;
    lastDense = null;
    blocksScanned = 0;
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
