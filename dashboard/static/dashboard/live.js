// Parts of a page that refresh themselves while it is open: an element with data-live="<seconds>"
// and an id is replaced by the same element of a fresh copy of the page, every so many seconds,
// while the tab is visible. Nothing else on the page moves (forms keep what was typed).
(() => {
  "use strict";
  const parts = [...document.querySelectorAll("[data-live][id]")];
  if (!parts.length) return;
  const seconds = Math.max(2, Math.min(...parts.map((part) => Number(part.dataset.live) || 10)));
  async function refresh() {
    if (!document.hidden) {
      try {
        const response = await fetch(window.location.href, {headers: {Accept: "text/html"}, credentials: "same-origin"});
        if (response.ok) {
          const fresh = new DOMParser().parseFromString(await response.text(), "text/html");
          for (const part of parts) {
            const next = fresh.getElementById(part.id);
            if (next && next.innerHTML !== part.innerHTML) {
              part.innerHTML = next.innerHTML;
              part.dispatchEvent(new CustomEvent("live:updated", {bubbles: true}));
            }
          }
        }
      } catch (error) {
        // Offline for a moment: the next round tries again.
      }
    }
    window.setTimeout(refresh, seconds * 1000);
  }
  window.setTimeout(refresh, seconds * 1000);
})();
