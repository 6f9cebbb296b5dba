// A session's page: its turns are <details>, most of them closed. A link to #turn-N or #call-N
// (from this page's tables, another page, or a duplicate's first occurrence) opens the turn that
// holds its target before the browser scrolls to it; "Open all" and "Close all" do every turn.
(function () {
  "use strict";

  function reveal(hash) {
    var id = decodeURIComponent((hash || "").replace(/^#/, ""));
    var target = id && document.getElementById(id);
    if (!target) {
      return;
    }
    for (var node = target; node; node = node.parentElement) {
      if (node.tagName === "DETAILS") {
        node.open = true;
      }
    }
    target.scrollIntoView();
  }

  function start() {
    reveal(location.hash);
    window.addEventListener("hashchange", function () {
      reveal(location.hash);
    });
    // A click on a link to the current hash fires no hashchange: open its turn all the same.
    document.addEventListener("click", function (event) {
      var link = event.target.closest && event.target.closest("a[href^='#']");
      if (link && link.getAttribute("href") === location.hash) {
        reveal(location.hash);
      }
    });
    document.querySelectorAll("[data-turns]").forEach(function (button) {
      button.addEventListener("click", function () {
        var open = button.dataset.turns === "open";
        document.querySelectorAll("details.turn").forEach(function (turn) {
          turn.open = open;
        });
      });
    });
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
