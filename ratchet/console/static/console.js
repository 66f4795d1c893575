// The live part of a run's page: its stream (GET /runs/ID/events, Server-Sent Events) from where
// the page's state left off. Tokens as they are written, one line per step event; when the run
// comes to wait for a person, ends a turn or closes, the page reloads to show its state.
"use strict";
(function () {
  const live = document.getElementById("live");
  if (!live || live.dataset.running !== "1") return;
  const status = live.querySelector(".live-status");
  const tokens = live.querySelector(".tokens");
  const steps = live.querySelector(".steps");
  const url = live.dataset.events + "?from_offset=" + encodeURIComponent(live.dataset.from || "0");
  const source = new EventSource(url);
  const reloadOn = new Set(["AWAITING_APPROVAL", "AWAITING_DECISION", "AWAITING_MESSAGE", "AWAITING_PERSON", "PAUSED"]);
  let text = "", step = -1, reloading = false, submitting = false;
  document.addEventListener("submit", function () { submitting = true; });

  function typing() {
    return Array.from(document.querySelectorAll("main textarea, main input:not([type=hidden])"))
      .some(function (field) { return field.value !== ""; });
  }
  // A page being sent or written in is not reloaded under the person: it says what changed instead.
  function reload() {
    if (reloading) return;
    reloading = true;
    source.close();
    setTimeout(function () {
      if (submitting) return;
      if (typing()) {
        status.textContent = "the run has moved on: reload the page to see it";
        return;
      }
      window.location.reload();
    }, 300);
  }
  function line(what) {
    const item = document.createElement("li");
    item.textContent = what;
    steps.appendChild(item);
  }
  source.addEventListener("open", function () { status.textContent = "live"; live.classList.add("connected"); });
  source.addEventListener("error", function () { status.textContent = "reconnecting"; });
  source.addEventListener("attempt_started", function (m) {
    const e = JSON.parse(m.data);
    if (e.call === "model") { text = ""; step = e.step; tokens.textContent = ""; }
  });
  source.addEventListener("text", function (m) {
    const e = JSON.parse(m.data);
    if (e.step !== step) { text = ""; step = e.step; }
    text = text.slice(0, e.at) + e.text;
    tokens.textContent = text;
  });
  source.addEventListener("tool_call_started", function (m) { const e = JSON.parse(m.data); line("step " + e.step + ": " + e.tool + " started"); });
  source.addEventListener("tool_call_finished", function (m) { const e = JSON.parse(m.data); line("step " + e.step + ": " + e.tool + (e.ok ? " done" : " failed")); });
  source.addEventListener("checkpoint", function (m) { const e = JSON.parse(m.data); line("checkpoint " + e.checkpoint_id + ": " + e.evidence); });
  source.addEventListener("approval_requested", reload);
  source.addEventListener("decision_requested", reload);
  source.addEventListener("rollback", reload);
  source.addEventListener("phase", function (m) {
    const e = JSON.parse(m.data);
    document.getElementById("state-phase").textContent = e.phase;
    if (reloadOn.has(e.phase)) reload();
  });
  source.addEventListener("end", function () { status.textContent = "closed"; reload(); });
  source.addEventListener("console_error", function (m) { status.textContent = JSON.parse(m.data); source.close(); });
})();
