// Progressive enhancement only: every page works without this file.
"use strict";
document.addEventListener("DOMContentLoaded", () => {
  // Copy buttons for verify commands (hidden unless JavaScript and the clipboard are available).
  if (navigator.clipboard) {
    for (const button of document.querySelectorAll("button.copy[data-copy]")) {
      button.hidden = false;
      button.addEventListener("click", async () => {
        const source = document.getElementById(button.dataset.copy);
        try {
          await navigator.clipboard.writeText(source.innerText.trim());
          button.textContent = "Copied";
        } catch (err) {
          button.textContent = "Copy failed";
        }
        setTimeout(() => { button.textContent = "Copy"; }, 2000);
      });
    }
  }
  // Reset times are sent in UTC; show them in the reader's own time too.
  const zone = Intl.DateTimeFormat().resolvedOptions().timeZone;
  const utc = zone === "UTC" || zone === "Etc/UTC"; // the UTC time already says it
  for (const el of utc ? [] : document.querySelectorAll("time.local[datetime]")) {
    const when = new Date(el.getAttribute("datetime"));
    if (Number.isNaN(when.getTime())) continue;
    const local = when.toLocaleString(undefined, { weekday: "short", hour: "2-digit", minute: "2-digit", timeZoneName: "short" });
    el.title = el.textContent;
    el.textContent = `${local} (${el.textContent})`;
  }
  // Pages cached for everyone (the encyclopedia) ask for the reader's own allowance.
  const quota = document.querySelector("[data-quota-url]");
  if (quota && window.fetch) {
    fetch(quota.dataset.quotaUrl, { headers: { Accept: "application/json" }, credentials: "same-origin" })
      .then((r) => (r.ok ? r.json() : null))
      .then((q) => {
        if (!q) return;
        if (q.tier === "local") {
          quota.textContent = "Local mode: no daily allowance on this machine.";
          quota.hidden = false;
          return;
        }
        const left = q.remaining > 0 ? `${q.remaining} of ${q.limit} diagnoses left` : `no diagnoses left (all ${q.limit} used)`;
        quota.textContent = `Today: ${left}; the count starts again at midnight UTC.`;
        quota.hidden = false;
      })
      .catch(() => {});
  }
  // A chosen file wins over the paste box: say so instead of sending both.
  const file = document.getElementById("file");
  const log = document.getElementById("log");
  if (file && log) {
    file.addEventListener("change", () => {
      log.disabled = file.files.length > 0;
      log.setAttribute("aria-disabled", String(log.disabled));
    });
  }
});
