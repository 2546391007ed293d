// The client's logic against the real language server: `tracelore lsp` is started as the
// extension starts it (serverCommand), the corpus's per-rank logs are opened, the documents
// rankLogUris picks are diagnosed as one job, and the status bar text comes from the
// server's own notification. TRACELORE sets the command (default: the checkout's .venv).

import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import * as path from "node:path";
import { pathToFileURL } from "node:url";
import { createMessageConnection, StreamMessageReader, StreamMessageWriter } from "vscode-jsonrpc/node";
import { isLog, notInstalledMessage, rankFromName, rankLogUris, serverCommand, Status, statusText } from "../src/logic";

const root = path.resolve(__dirname, "..", "..", "..", "..");
const caseDir = path.join(root, "tests", "corpus", "cases", "gen-dist-per-rank-index-error");
const tracelore = process.env.TRACELORE ?? path.join(root, ".venv", "bin", "tracelore");

test("rank names are read as the server reads them", () => {
  assert.equal(rankFromName("/runs/7/rank3.log"), 3);
  assert.equal(rankFromName("node1-rank12.out"), 12);
  assert.equal(rankFromName("worker-5.err"), 5);
  assert.equal(rankFromName("train.log"), undefined);
  assert.ok(isLog("a/b.ERR") && !isLog("a/b.py"));
});

test("the server command carries the path and the encyclopedia address", () => {
  assert.deepEqual(serverCommand(undefined, ""), { command: "tracelore", args: ["lsp"] });
  assert.deepEqual(serverCommand(" /venv/bin/tracelore ", "https://t.example"), {
    command: "/venv/bin/tracelore",
    args: ["lsp", "--base-url", "https://t.example"],
  });
  assert.match(notInstalledMessage("tracelore", "ENOENT"), /pip install 'tracelore\[lsp\]'/);
});

test("a command that is not there fails to start, and the message says what to do", async () => {
  const { command, args } = serverCommand("/nonexistent/tracelore", "");
  const error = await new Promise<Error>((resolve) => spawn(command, args).on("error", resolve));
  assert.match(notInstalledMessage(command, error.message), /ENOENT.*tracelore\.path/s);
});

test("all open rank logs are one job on the real server", async () => {
  const { command, args } = serverCommand(tracelore, "");
  const server = spawn(command, args, { stdio: ["pipe", "pipe", "inherit"] });
  const connection = createMessageConnection(
    new StreamMessageReader(server.stdout!),
    new StreamMessageWriter(server.stdin!),
  );
  const statuses: Status[] = [];
  const diagnostics = new Map<string, { severity: number; code: string; range: { start: { line: number } } }[]>();
  connection.onNotification("tracelore/status", (params: Status) => {
    statuses.push(params);
  });
  connection.onNotification("textDocument/publishDiagnostics", (params: { uri: string; diagnostics: never[] }) => {
    diagnostics.set(params.uri, params.diagnostics);
  });
  connection.listen();
  try {
    await connection.sendRequest("initialize", { processId: process.pid, rootUri: null, capabilities: {} });
    await connection.sendNotification("initialized", {});
    const open = ["rank0.log", "rank1.log", "rank2.log"].map((name) => pathToFileURL(path.join(caseDir, name)).href);
    const notes = pathToFileURL(path.join(caseDir, "case.yaml")).href;
    for (const uri of open) {
      await connection.sendNotification("textDocument/didOpen", {
        textDocument: { uri, languageId: "log", version: 1, text: readFileSync(new URL(uri), "utf-8") },
      });
    }
    const job = rankLogUris([notes, ...open].reverse());
    assert.deepEqual(job, open);
    const result = (await connection.sendRequest("workspace/executeCommand", {
      command: "tracelore.diagnoseJob",
      arguments: job,
    })) as { candidates: string[] };
    assert.equal(result.candidates[0], "data.index_out_of_range");
    const last = statuses[statuses.length - 1];
    assert.equal(statusText(last).startsWith("$(error) Tracelore: data.index_out_of_range on rank 2"), true);
    assert.deepEqual([...last.uris].sort(), open);
    const errors = (diagnostics.get(open[2]) ?? []).filter((d) => d.severity === 1);
    // The evidence lines: the F.embedding frame (line 35) and the IndexError (line 40).
    assert.deepEqual(
      errors.map((d) => [d.code, d.range.start.line]),
      [
        ["data.index_out_of_range", 34],
        ["data.index_out_of_range", 39],
      ],
    );
    await connection.sendRequest("shutdown");
    await connection.sendNotification("exit");
  } finally {
    connection.dispose();
    server.kill();
  }
});
