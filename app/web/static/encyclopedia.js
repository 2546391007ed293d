// Progressive enhancement of the encyclopedia: the filter box narrows the index as you type.
// Without JavaScript the box is a search form (on the service) and every page still works.
"use strict";
document.addEventListener("DOMContentLoaded", () => {
  const input = document.getElementById("filter");
  if (!input) return;
  const form = input.form;
  if (form.hasAttribute("data-js-only")) {
    form.hidden = false;
    form.addEventListener("submit", (event) => event.preventDefault());
  }
  const groups = Array.from(document.querySelectorAll("[data-filter-group]"));
  const empty = document.querySelector("[data-filter-empty]");
  const status = document.getElementById("filter-status");
  const total = groups.reduce((n, g) => n + g.querySelectorAll("li[data-filter]").length, 0);
  const apply = () => {
    const words = input.value.toLowerCase().split(/[^a-z0-9_.]+/).filter(Boolean);
    let shown = 0;
    for (const group of groups) {
      let inGroup = 0;
      for (const item of group.querySelectorAll("li[data-filter]")) {
        const text = item.dataset.filter + " " + item.textContent.toLowerCase();
        const match = words.every((w) => text.includes(w));
        item.hidden = !match;
        if (match) inGroup += 1;
      }
      group.hidden = inGroup === 0;
      const count = group.querySelector("[data-count]");
      if (count) count.textContent = String(inGroup);
      shown += inGroup;
    }
    if (empty) empty.hidden = shown !== 0;
    if (status) status.textContent = words.length ? `${shown} of ${total} entries shown` : "";
  };
  input.addEventListener("input", apply);
  if (input.value) apply();
});
