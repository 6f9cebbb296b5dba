// The policy draft page: the always-on set's schema tokens, summed as boxes are checked, so the
// cost shows without a round trip. The server renders the same sum; this only keeps it current.
(function () {
  "use strict";

  function watch(output) {
    var name = output.dataset.tokenSum;
    var boxes = document.querySelectorAll('input[type="checkbox"][name="' + name + '"]');
    var count = document.querySelector('[data-token-count="' + name + '"]');

    function update() {
      var tokens = 0;
      var checked = 0;
      boxes.forEach(function (box) {
        if (box.checked) {
          tokens += parseInt(box.dataset.tokens, 10) || 0;
          checked += 1;
        }
      });
      output.textContent = tokens.toLocaleString("en-US");
      if (count) {
        count.textContent = checked.toLocaleString("en-US");
      }
    }

    boxes.forEach(function (box) {
      box.addEventListener("change", update);
    });
    update();
  }

  function start() {
    document.querySelectorAll("[data-token-sum]").forEach(watch);
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
