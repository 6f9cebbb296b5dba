// A running simulation's (or recommendation's) progress bar: polls its status once a second,
// shows the steps done (sessions replayed, candidates scored: the card's data-unit) and the time
// left at the pace so far, or while it waits its turn how many of its project's runs are ahead,
// and reloads the page (with the result) once it has ended. The Runs page, while one of its runs
// is pending or running, reloads every few seconds.
(function () {
  "use strict";
  if (document.querySelector("[data-runs-live]")) window.setTimeout(() => window.location.reload(), 3000);
  const card = document.querySelector("[data-simulation-status]");
  if (!card) return;
  const bar = card.querySelector("[data-progress]");
  const text = card.querySelector("[data-progress-text]");
  const number = new Intl.NumberFormat();
  async function poll() {
    let status;
    try {
      const response = await fetch(card.dataset.simulationStatus, {headers: {Accept: "application/json"}});
      if (!response.ok) throw new Error(String(response.status));
      status = await response.json();
    } catch (error) {
      text.textContent = "Could not read the progress (" + error.message + "); retrying…";
      window.setTimeout(poll, 3000);
      return;
    }
    if (status.status !== "pending" && status.status !== "running") {
      window.location.reload();
      return;
    }
    bar.value = status.progress;
    const unit = card.dataset.unit || "sessions";
    let line = number.format(status.done) + " of " + number.format(status.total) + " " + unit;
    if (status.eta_seconds !== null) line += ", about " + Math.ceil(status.eta_seconds) + " s left";
    // Pending: the project's runs ahead of it (a project runs a few at a time).
    if (status.queued_behind > 0) {
      line = "Queued behind " + number.format(status.queued_behind) + " run" +
        (status.queued_behind === 1 ? "" : "s") + " of this project";
    } else if (status.queued_behind === 0) {
      line = "Queued: starting as soon as a simulator process is free";
    }
    text.textContent = line;
    window.setTimeout(poll, 1000);
  }
  window.setTimeout(poll, 500);
})();
