// The extension's logic that does not need VS Code: which documents are rank logs, how the
// server is started, what the status bar says. Tested against the real language server.

/** A log file's name declares a rank as Tracelore reads it: rank3.log, worker-3.log, node1-rank3.out, *-3.err. */
export function rankFromName(path: string): number | undefined {
  const base = path.replace(/\\/g, "/").split("/").pop() ?? "";
  const named = /rank[_-]?(\d{1,6})(?!\d)/i.exec(base);
  if (named) {
    return Number(named[1]);
  }
  const stem = base.includes(".") ? base.slice(0, base.lastIndexOf(".")) : base;
  const trailing = /[-_.](\d{1,6})$/.exec(stem);
  return trailing ? Number(trailing[1]) : undefined;
}

export const LOG_EXTENSIONS = [".log", ".out", ".err"];

export function isLog(path: string): boolean {
  return LOG_EXTENSIONS.some((ext) => path.toLowerCase().endsWith(ext));
}

/**
 * The open documents to diagnose as one job: the log files that name a rank, in the folder
 * holding the most of them (one job's files sit together); with none, every open log.
 */
export function rankLogUris(uris: string[]): string[] {
  const logs = uris.filter((u) => isLog(decodeURIComponent(new URL(u).pathname)));
  const ranked = logs.filter((u) => rankFromName(decodeURIComponent(new URL(u).pathname)) !== undefined);
  if (ranked.length === 0) {
    return [...logs].sort();
  }
  const byFolder = new Map<string, string[]>();
  for (const u of ranked) {
    const folder = u.slice(0, u.lastIndexOf("/"));
    byFolder.set(folder, [...(byFolder.get(folder) ?? []), u]);
  }
  const best = [...byFolder.values()].sort((a, b) => b.length - a.length || a[0].localeCompare(b[0]))[0];
  return [...best].sort();
}

export interface ServerCommand {
  command: string;
  args: string[];
}

/** How the language server is started: the configured command, `lsp`, the encyclopedia address. */
export function serverCommand(path: string | undefined, baseUrl: string | undefined): ServerCommand {
  const args = ["lsp"];
  if (baseUrl && baseUrl.trim()) {
    args.push("--base-url", baseUrl.trim());
  }
  return { command: path && path.trim() ? path.trim() : "tracelore", args };
}

/** What to tell a person whose tracelore command cannot be started. */
export function notInstalledMessage(command: string, error: string): string {
  return (
    `Tracelore: cannot start "${command} lsp" (${error}). Install it with ` +
    `pip install 'tracelore[lsp]', or set "tracelore.path" to the tracelore command ` +
    `(for example the one in your project's .venv/bin).`
  );
}

/** The `tracelore/status` notification the server sends with a job's verdict. */
export interface Status {
  uris: string[];
  verdict: string;
  initiating: { id: string; title: string; rank: number | null; file: string | null; line: number } | null;
  candidates: number;
  hang_rank: number | null;
  documents: { uri: string; lines: number; rescans: number }[];
}

/** The status bar text for a verdict (codicons: error when a failure started the job). */
export function statusText(status: Status): string {
  if (status.initiating) {
    return `$(error) Tracelore: ${status.verdict}`;
  }
  if (status.candidates > 0 || status.hang_rank !== null) {
    return `$(warning) Tracelore: ${status.verdict}`;
  }
  return `$(check) Tracelore: ${status.verdict}`;
}
