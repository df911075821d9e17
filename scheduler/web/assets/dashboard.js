// The dashboard: reads GET /api/state every two seconds and draws it. Every
// text from the cluster goes in with textContent (never as HTML): names,
// output lines and metrics are whatever jobs chose.
"use strict";

const REFRESH_MS = 2000;
const SVG = "http://www.w3.org/2000/svg";
// The job whose output is shown: #job=ID in the address, else the first
// running one.
let selectedJob = new URLSearchParams(window.location.hash.slice(1)).get("job");

function el(tag, text, className) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  if (className) node.className = className;
  return node;
}

function fillTable(id, header, rows, onClick) {
  const table = document.getElementById(id);
  table.replaceChildren();
  const head = el("tr");
  header.forEach((h) => head.appendChild(el("th", h)));
  table.appendChild(head);
  if (rows.length === 0) {
    const row = el("tr");
    const cell = el("td", "none", "empty");
    cell.colSpan = header.length;
    row.appendChild(cell);
    table.appendChild(row);
    return;
  }
  rows.forEach((r) => {
    const row = el("tr");
    r.cells.forEach((c) => {
      const cell = el("td", c.text === undefined ? c : c.text, c.className);
      row.appendChild(cell);
    });
    if (r.key !== undefined) row.dataset.key = r.key;
    if (onClick) {
      row.classList.add("clickable");
      if (r.key === selectedJob) row.classList.add("selected");
      row.addEventListener("click", () => onClick(r.key));
    }
    table.appendChild(row);
  });
}

function shape(resources) {
  const parts = Object.keys(resources || {}).sort().map((k) => {
    let v = resources[k];
    if (k === "memory" || k === "object_store_memory") v = bytes(v);
    else v = Math.round(v * 100) / 100;
    return k + ": " + v;
  });
  return "{" + parts.join(", ") + "}";
}

function bytes(n) {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return (Math.round(n * 10) / 10) + " " + units[i];
}

function duration(ms) {
  const s = Math.floor(ms / 1000);
  if (s < 120) return s + " s";
  if (s < 7200) return Math.floor(s / 60) + " min";
  return Math.floor(s / 3600) + " h";
}

function drawNodes(state) {
  // Each GPU as NVML last reported it: device, busy, memory, temperature, power.
  const gpus = (n) => (n.gpu_usage || []).map((g) =>
      g.device + ": " + Math.round(g.utilization * 100) + "% " + bytes(g.memory_used_bytes) +
      "/" + bytes(g.memory_total_bytes) + " " + Math.round(g.temperature_celsius) + "°C " +
      Math.round(g.power_watts) + " W").join("; ") || "-";
  fillTable("nodes", ["Node", "Address", "State", "Head", "Resources", "Available",
                      "Object store", "GPUs", "Heartbeat"],
    state.nodes.map((n) => ({key: n.node_id, cells: [
      n.node_id.slice(0, 12), n.address,
      {text: n.alive ? "ALIVE" : "DEAD" + (n.death_reason ? ": " + n.death_reason : ""),
       className: n.alive ? "alive" : "dead"},
      n.is_head_node ? "yes" : "", shape(n.total), n.alive ? shape(n.available) : "-",
      bytes(n.object_store_bytes), gpus(n),
      n.alive ? duration(n.last_heartbeat_age_ms) + " ago" : "-"]})));
}

function drawResources(state) {
  const total = {}, used = {};
  state.nodes.filter((n) => n.alive).forEach((n) => {
    Object.entries(n.total).forEach(([k, v]) => {
      total[k] = (total[k] || 0) + v;
      used[k] = (used[k] || 0) + v - (n.available[k] || 0);
    });
  });
  fillTable("resources", ["Resource", "Used", "Total"],
    Object.keys(total).sort().map((k) => ({cells: [k,
      k === "memory" || k === "object_store_memory" ? bytes(used[k]) : Math.round(used[k] * 100) / 100,
      k === "memory" || k === "object_store_memory" ? bytes(total[k]) : total[k]]})));
}

function jobsOf(state) {
  const jobs = new Map();
  state.jobs.forEach((j) => jobs.set(j.job_id, {
    id: j.job_id, kind: "submitted " + j.submission_id, state: j.state,
    entry: (j.entrypoint || []).join(" "), where: j.node_address,
    message: j.message || ""}));
  // Drivers' jobs: seen through their leases.
  state.leases.forEach((l) => {
    if (!jobs.has(l.job_id)) {
      jobs.set(l.job_id, {id: l.job_id, kind: "driver", state: "RUNNING", entry: "", where: "",
                          message: ""});
    }
  });
  return [...jobs.values()];
}

function drawJobs(state) {
  const jobs = jobsOf(state);
  if (selectedJob === null && jobs.length > 0) {
    const running = jobs.find((j) => j.state === "RUNNING");
    selectJob((running || jobs[0]).id);
  }
  fillTable("jobs", ["Job", "Kind", "State", "Entrypoint", "Node", "Message"],
    jobs.map((j) => ({key: j.id, cells: [j.id, j.kind, {text: j.state, className: j.state},
                                         j.entry, j.where, j.message]})),
    selectJob);
}

function selectJob(job) {
  selectedJob = job;
  document.querySelectorAll("#jobs tr").forEach((row) => {
    row.classList.toggle("selected", row.dataset.key === job);
  });
  loadOutput();
}

async function loadOutput() {
  if (selectedJob === null) return;
  const job = selectedJob;
  const out = document.getElementById("job-output");
  document.getElementById("output-title").textContent = "Output of job " + job;
  const response = await fetch("/api/jobs/" + encodeURIComponent(job) + "/output",
                               {credentials: "same-origin"});
  if (job !== selectedJob) return;
  if (response.status === 404) {
    out.textContent = "(nothing printed yet)";
    return;
  }
  if (!response.ok) return;
  const data = await response.json();
  // A job with processes of its own (a submitted job's entrypoint, `rayx
  // launch` commands): what they printed, as `rayx job logs` shows it (a
  // driver prints its tasks' lines too). Otherwise its tasks' and actors'.
  const own = data.process_lines.length > 0;
  const shown = own ? data.process_lines : data.lines;
  const dropped = own ? data.process_dropped : data.dropped;
  document.getElementById("output-title").textContent =
      "Output of job " + job + (own ? " (its entrypoint)" : " (its tasks and actors)");
  const lines = shown.map((l) => "(" + l.source + ") " + l.line);
  if (dropped > 0) lines.unshift("(" + dropped + " earlier lines not kept)");
  out.textContent = lines.join("\n");
  out.scrollTop = out.scrollHeight;
}

function drawLeases(state) {
  const byNode = [...state.leases].sort((a, b) => (a.node_address + a.kind).localeCompare(
      b.node_address + b.kind));
  fillTable("leases", ["Node", "Kind", "Name", "Class", "Job", "State", "PID", "Resources", "GPUs"],
    byNode.map((l) => ({cells: [l.node_address, l.kind, l.actor_name || "-", l.class_name || "-",
                                l.job_id, {text: l.state, className: l.state},
                                l.pid, shape(l.resources),
                                l.gpu_ids.length ? l.gpu_ids.join(",") : "-"]})));
}

function drawGroups(state) {
  // The state API names the wire enums; a number (an older head) is looked up.
  const names = state.enums.placement_group_state;
  const strategies = state.enums.placement_strategy;
  const named = (table, v) => (typeof v === "number" ? table[v] || String(v) : v);
  fillTable("groups", ["Group", "Name", "Job", "Strategy", "Bundles", "State", "Why"],
    state.placement_groups.map((g) => {
      const st = named(names, g.state);
      return {cells: [g.placement_group_id.slice(0, 12), g.name || "-", g.job_id,
                      named(strategies, g.strategy),
                      g.bundles.map(shape).join(" "), {text: st, className: st}, g.reason || ""]};
    }));
}

// Collective groups whose ranks run in leased workers: each joined rank at
// its node and pid; a group that lost a member (a rank died, or its actors
// went without destroying it) says which and why.
function drawCollectiveGroups(state) {
  const leases = new Map(state.leases.map((l) => [l.lease_id, l]));
  fillTable("collective-groups", ["Group", "Attempt", "Job", "State", "Ranks"],
    (state.collective_groups || []).map((g) => {
      const ranks = g.members.map((m) => {
        const l = leases.get(m.lease_id);
        return m.rank + "@" + (l ? l.node_address + " pid " + l.pid : m.lease_id.slice(0, 12));
      }).join(", ");
      const ended = g.ended !== "";
      return {key: g.group, cells: [g.group, g.attempt_id.slice(0, 12), g.job_id,
        {text: ended ? "ENDED" : "RUNNING (" + g.members.length + "/" + g.world_size +
                       " joined)", className: ended ? "ENDED" : "RUNNING"},
        ended ? g.ended : ranks]};
    }));
}

function drawDemands(state) {
  const rows = [];
  Object.entries(state.status.pending_demands).forEach(([s, count]) => {
    rows.push({cells: [s, count, {text: "PENDING", className: "PENDING"},
                       "waiting for resources to free up"]});
  });
  Object.entries(state.status.infeasible_demands).forEach(([s, why]) => {
    rows.push({cells: [s, "", {text: "INFEASIBLE", className: "INFEASIBLE"}, why]});
  });
  fillTable("demands", ["Shape", "Requests", "State", "Why"], rows);
}

function svgNode(tag, attributes) {
  const node = document.createElementNS(SVG, tag);
  Object.entries(attributes).forEach(([k, v]) => node.setAttribute(k, String(v)));
  return node;
}

// A line plot of one metric over the run's reports.
function plot(values, metric) {
  const width = 420, height = 200, pad = 36;
  const svg = svgNode("svg", {width: width, height: height, class: "metric-plot",
                              "data-metric": metric, "data-points": values.length});
  svg.appendChild(svgNode("line", {x1: pad, y1: height - pad, x2: width - 8, y2: height - pad,
                                   class: "plot-axis"}));
  svg.appendChild(svgNode("line", {x1: pad, y1: 8, x2: pad, y2: height - pad, class: "plot-axis"}));
  const min = Math.min(...values), max = Math.max(...values);
  const span = max - min || 1;
  const x = (i) => pad + (values.length > 1 ? i / (values.length - 1) : 0.5) * (width - pad - 12);
  const y = (v) => height - pad - ((v - min) / span) * (height - pad - 16);
  const points = values.map((v, i) => x(i).toFixed(1) + "," + y(v).toFixed(1)).join(" ");
  svg.appendChild(svgNode("polyline", {points: points, class: "plot-line"}));
  const label = (text, lx, ly) => {
    const t = svgNode("text", {x: lx, y: ly, class: "plot-label"});
    t.textContent = text;
    svg.appendChild(t);
  };
  label(max.toPrecision(4), 2, 16);
  label(min.toPrecision(4), 2, height - pad);
  label(metric + " over " + values.length + " reports", pad + 8, height - 10);
  return svg;
}

function drawTrain(state) {
  const box = document.getElementById("train-runs");
  box.replaceChildren();
  const runs = state.train_runs;
  if (runs.length === 0) {
    box.appendChild(el("p", "No Train run is reporting.", "empty"));
    return;
  }
  runs.forEach((run) => {
    const div = el("div", null, "train-run");
    div.dataset.run = run.run;
    const history = Array.isArray(run.history) ? run.history : [];
    const last = history.length ? history[history.length - 1] : {};
    const metrics = Object.keys(last);
    const metric = metrics.includes("loss") ? "loss" : metrics[0];
    div.appendChild(el("h3", "Run " + run.run + " (job " + run.job + ", attempt " + run.attempt +
                             ", " + run.reports + " reports)"));
    div.appendChild(el("p", metrics.map((m) => m + " = " + last[m]).join(", ")));
    if (metric !== undefined) {
      const values = history.map((h) => h[metric]).filter((v) => typeof v === "number");
      if (values.length) div.appendChild(plot(values, metric));
    }
    box.appendChild(div);
  });
}

async function refresh() {
  const error = document.getElementById("error");
  try {
    const response = await fetch("/api/state", {credentials: "same-origin"});
    if (response.status === 401) {
      window.location.replace("/login");
      return;
    }
    if (!response.ok) throw new Error("the head answered " + response.status);
    const state = await response.json();
    const alive = state.nodes.filter((n) => n.alive).length;
    document.getElementById("summary").textContent =
        "cluster " + state.status.cluster_id + " · rayx " + state.status.rayx_version + " · " +
        alive + " nodes alive, " + (state.nodes.length - alive) + " dead · up " +
        duration(state.status.head_uptime_ms);
    drawNodes(state);
    drawResources(state);
    drawJobs(state);
    drawTrain(state);
    drawLeases(state);
    drawGroups(state);
    drawCollectiveGroups(state);
    drawDemands(state);
    error.textContent = "";
    document.body.dataset.loaded = "yes";
    loadOutput();
  } catch (e) {
    error.textContent = "cannot read the cluster's state: " + e.message;
  }
}

document.addEventListener("DOMContentLoaded", () => {
  document.getElementById("logout").addEventListener("click", async () => {
    await fetch("/api/logout", {method: "POST", credentials: "same-origin"});
    window.location.replace("/login");
  });
  refresh();
  setInterval(refresh, REFRESH_MS);
});
