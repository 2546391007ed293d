"""The language server (`tracelore lsp`): diagnoses an open log as the editor changes it."""
