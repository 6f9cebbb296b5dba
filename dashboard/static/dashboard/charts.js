// Draws every figure a page embeds: <div data-chart="ID"> + <script type="application/json" id="ID">.
// The JSON is a plotly figure built server-side (dashboard/charts.py); plotly.js is our own copy.
(function () {
  "use strict";
  var NARROW = 560;

  function draw(element) {
    var source = document.getElementById(element.dataset.chart);
    if (!source || typeof Plotly === "undefined") {
      return;
    }
    var figure = JSON.parse(source.textContent);
    var layout = figure.layout || {};
    var under = layout.legend && layout.legend.y < 0;
    if (element.clientWidth < NARROW && layout.showlegend !== false && figure.data.length > 1 && !under) {
      // A phone: the legend wraps onto several lines, so it goes under the plot instead of above.
      layout.legend = Object.assign({}, layout.legend, {y: -0.22, yanchor: "top"});
      layout.margin = Object.assign({}, layout.margin, {t: 40});
      layout.height = (layout.height || 320) + 24 * figure.data.length;
    }
    Plotly.newPlot(element, figure.data, layout, {
      responsive: true,
      displaylogo: false,
      modeBarButtonsToRemove: ["select2d", "lasso2d"],
    });
  }

  function start() {
    document.querySelectorAll("[data-chart]").forEach(draw);
    // The custom dates only matter for a custom range; the inputs stay usable without JS.
    var picker = document.querySelector("[data-range-picker]");
    if (picker) {
      var choice = picker.querySelector("select[name=range]");
      var sync = function () {
        picker.classList.toggle("is-custom", choice.value === "custom");
      };
      choice.addEventListener("change", sync);
      sync();
    }
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
