// A thin client: it starts `tracelore lsp` and forwards what the server says. All the
// diagnosing is the server's.

import * as vscode from "vscode";
import { LanguageClient, LanguageClientOptions, ServerOptions, State } from "vscode-languageclient/node";
import { notInstalledMessage, rankLogUris, serverCommand, Status, statusText } from "./logic";

let client: LanguageClient | undefined;

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  const config = vscode.workspace.getConfiguration("tracelore");
  const { command, args } = serverCommand(config.get<string>("path"), config.get<string>("baseUrl"));
  const serverOptions: ServerOptions = { command, args };
  const clientOptions: LanguageClientOptions = {
    documentSelector: [
      { scheme: "file", language: "log" },
      { scheme: "file", pattern: "**/*.{log,out,err}" },
    ],
    middleware: {
      // The server's commands are registered by the client; copying needs VS Code's clipboard.
      executeCommand: async (name, args, next) => {
        if (name === "tracelore.copyVerify" && typeof args[0] === "string") {
          await vscode.env.clipboard.writeText(args[0]);
          void vscode.window.showInformationMessage("Tracelore: verify command copied.");
          return args[0];
        }
        return next(name, args);
      },
    },
  };
  const status = vscode.window.createStatusBarItem(vscode.StatusBarAlignment.Left, 10);
  status.command = "tracelore.diagnoseOpenRankLogs";
  context.subscriptions.push(status);

  client = new LanguageClient("tracelore", "Tracelore", serverOptions, clientOptions);
  client.onDidChangeState((event) => {
    if (event.newState === State.Stopped) {
      status.hide();
    }
  });
  try {
    await client.start();
  } catch (error) {
    void vscode.window.showErrorMessage(notInstalledMessage(command, String(error)));
    return;
  }
  context.subscriptions.push(
    client.onNotification("tracelore/status", (params: Status) => {
      status.text = statusText(params);
      status.tooltip = params.initiating
        ? `${params.initiating.title}: ${params.initiating.file ?? ""}:${params.initiating.line}`
        : params.verdict;
      status.show();
    }),
    vscode.commands.registerCommand("tracelore.diagnoseThisLog", async () => {
      const editor = vscode.window.activeTextEditor;
      if (!editor) {
        void vscode.window.showInformationMessage("Tracelore: open a log first.");
        return;
      }
      await vscode.commands.executeCommand("tracelore.diagnoseJob", editor.document.uri.toString());
    }),
    vscode.commands.registerCommand("tracelore.diagnoseOpenRankLogs", async () => {
      const open = vscode.workspace.textDocuments.map((d) => d.uri.toString());
      const uris = rankLogUris(open);
      if (uris.length === 0) {
        void vscode.window.showInformationMessage("Tracelore: no log files are open.");
        return;
      }
      await vscode.commands.executeCommand("tracelore.diagnoseJob", ...uris);
    }),
  );
}

export async function deactivate(): Promise<void> {
  await client?.stop();
}
