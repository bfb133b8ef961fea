// infercast UI: draw the Plotly figures, copy the CLI command, follow a running job.
"use strict";

function drawCharts() {
  document.querySelectorAll(".chart[data-figure]").forEach((el) => {
    const fig = JSON.parse(el.dataset.figure);
    const layout = Object.assign({ font: { size: 12 }, paper_bgcolor: "#fff", plot_bgcolor: "#fff" }, fig.layout || {});
    Plotly.newPlot(el, fig.data, layout, { displaylogo: false, responsive: true }).then(() => {
      el.dataset.drawn = "1";
    });
  });
}

function setupCopy() {
  document.querySelectorAll("button[data-copy]").forEach((btn) => {
    btn.addEventListener("click", async () => {
      const text = document.getElementById(btn.dataset.copy).textContent;
      try {
        await navigator.clipboard.writeText(text);
      } catch (e) {
        const area = document.createElement("textarea");
        area.value = text;
        document.body.appendChild(area);
        area.select();
        document.execCommand("copy");
        area.remove();
      }
      btn.textContent = "Copied";
      setTimeout(() => { btn.textContent = "Copy as CLI command"; }, 1500);
    });
  });
}

function followJob() {
  const panel = document.getElementById("job");
  if (!panel || panel.dataset.state !== "running") return;
  const id = panel.dataset.job;
  const bar = document.getElementById("job-bar");
  const text = document.getElementById("job-text");
  document.getElementById("job-cancel").addEventListener("click", () => {
    fetch(`/api/jobs/${id}/cancel`, { method: "POST" });
  });
  const poll = async () => {
    const r = await fetch(`/api/jobs/${id}`);
    const j = await r.json();
    const frac = j.fraction === null ? Math.min(0.95, j.elapsed_s / j.limit_s) : j.fraction;
    bar.style.width = `${Math.round(frac * 100)}%`;
    text.textContent = `${j.state}${j.text ? ": " + j.text : ""} · ${j.elapsed_s.toFixed(1)} s (limit ${j.limit_s} s)`;
    if (j.state === "running") {
      setTimeout(poll, 400);
    } else {
      const url = new URL(window.location.href);
      url.searchParams.set("job", id);
      window.location.replace(url.toString());
    }
  };
  poll();
}

function showResults() {
  const results = document.getElementById("results");
  if (results && new URL(window.location.href).searchParams.has("run")) results.scrollIntoView({ block: "start" });
}

document.addEventListener("DOMContentLoaded", () => {
  drawCharts();
  showResults();
  setupCopy();
  followJob();
});
