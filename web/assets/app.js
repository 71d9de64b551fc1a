// tpuemu's web view: the pod as its torus, the job list, and a job's steps,
// per-layer table and timeline, kept live by asking the coordinator's JSON
// routes (web/web_view.h) once a second. Plain modules and SVG: no library,
// nothing loaded from anywhere but the coordinator.

const SVG = "http://www.w3.org/2000/svg";
const CELL = 64;           // px between neighbouring chips
const CHIP = 30;           // a chip's square
const PAD = 28;
const PLANE_GAP = 30;      // between z planes of a slice
const SLICE_GAP = 70;      // between slices
const POLL_MS = 1000;
const STEPS_SHOWN = 20;      // the latest steps in the step table
const TIMELINE_SPANS = 6000;  // drawn at most (the latest); the downloaded trace has them all
const HOST_TINTS = ["#e8f0fb", "#fbefe3", "#e6f4ea", "#f5e8f7", "#fdf6d8", "#e3f4f6"];
const IDLE = { ici: "#c5ccd6", dcn: "#9fb0c8" };
const SPAN_COLOURS = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#9c755f"];

// What the page knows; exposed for users' scripts and the tests
// (tests/e2e/web_view_e2e_test.py): `polls` counts the updates it applied.
const view = {
  pod: null, podKey: "", jobs: [], job: null, missing: "", links: {}, linksKey: "", linksAt: 0,
  trace: null, traceLinks: null, stepShown: -1, stepsFetched: "no steps traced yet", traceKey: "", traceAt: 0,
  polls: 0, errors: 0, lastError: "",
};
window.tpuemuView = view;

const $ = (selector) => document.querySelector(selector);

function svg(tag, attrs, parent) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (parent) parent.appendChild(e);
  return e;
}

function titled(e, text) {
  svg("title", {}, e).textContent = text;
  return e;
}

function cell(row, text, cls) {
  const td = document.createElement("td");
  td.textContent = text;
  if (cls) td.className = cls;
  row.appendChild(td);
  return td;
}

function fill(table, headers, rows) {
  const head = table.querySelector("thead");
  head.replaceChildren();
  const hr = head.insertRow();
  for (const h of headers) {
    const th = document.createElement("th");
    th.textContent = h;
    hr.appendChild(th);
  }
  const body = table.querySelector("tbody");
  body.replaceChildren();
  for (const r of rows) {
    const tr = body.insertRow();
    // Words left-aligned, numbers right.
    r.forEach((v, i) => cell(tr, v, i === 0 || (typeof v === "string" && !/^[-\d.]/.test(v)) ? "text" : ""));
  }
}

export function formatBytes(b) {
  if (!b) return "0 B";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (b >= 1024 && i < units.length - 1) { b /= 1024; i++; }
  return `${b >= 100 || i === 0 ? Math.round(b) : b.toPrecision(3)} ${units[i]}`;
}

export function formatSeconds(s) {
  if (s === undefined || s === null) return "";
  const a = Math.abs(s);
  if (a === 0) return "0";
  if (a < 1e-3) return `${(s * 1e6).toPrecision(4)} us`;
  if (a < 1) return `${(s * 1e3).toPrecision(4)} ms`;
  return `${s.toPrecision(4)} s`;
}

// An answer other than 200, its status kept: a job that is gone (404) is
// not an unreachable coordinator.
class HttpError extends Error {
  constructor(message, status) {
    super(message);
    this.status = status;
  }
}

async function get(path) {
  const r = await fetch(path, { cache: "no-store" });
  if (!r.ok) {
    const body = await r.json().catch(() => ({}));
    throw new HttpError(`${path}: ${body.error || r.status}`, r.status);
  }
  return r.json();
}

// ---- the pod ------------------------------------------------------------

function chipPosition(pod, chip) {
  const [X, , Z] = pod.shape;
  const planeW = X * CELL;
  const sliceW = Z * planeW + (Z - 1) * PLANE_GAP;
  return {
    x: PAD + chip.slice * (sliceW + SLICE_GAP) + chip.xyz[2] * (planeW + PLANE_GAP) + chip.xyz[0] * CELL + CELL / 2,
    y: PAD + 22 + chip.xyz[1] * CELL + CELL / 2,
  };
}

// A directed link's path: neighbours on the grid get a straight line, offset
// to its left so that the two directions (and, on a ring of 2, both links
// each way) stay apart; wraparound and z links bow out of the row; DCN links
// swing below the slices.
function linkPath(pod, link, a, b, bottom) {
  const dx = b.x - a.x, dy = b.y - a.y, len = Math.hypot(dx, dy);
  const nx = -dy / len, ny = dx / len;
  const plus = link.dir === "+";
  if (link.kind === "dcn") {
    const depth = bottom + (plus ? 14 : 30) + (link.src % 4) * 4;
    return `M${a.x},${a.y + CHIP / 2} C${a.x},${depth} ${b.x},${depth} ${b.x},${b.y + CHIP / 2}`;
  }
  if (len <= CELL * 1.01) {
    const off = plus ? 4 : 9, trim = CHIP / 2 + 2;
    const ux = dx / len, uy = dy / len;
    const x1 = a.x + ux * trim + nx * off, y1 = a.y + uy * trim + ny * off;
    const x2 = b.x - ux * trim + nx * off, y2 = b.y - uy * trim + ny * off;
    return `M${x1},${y1} L${x2},${y2}`;
  }
  const bulge = (link.axis === "z" ? 0.3 : 0.44) * CELL + (plus ? 0 : 5);
  const cx = (a.x + b.x) / 2 + nx * bulge * 2, cy = (a.y + b.y) / 2 + ny * bulge * 2;
  return `M${a.x},${a.y} Q${cx},${cy} ${b.x},${b.y}`;
}

function drawTorus(pod) {
  const root = $("#torus");
  root.replaceChildren();
  const [X, Y, Z] = pod.shape;
  const planeW = X * CELL;
  const sliceW = Z * planeW + (Z - 1) * PLANE_GAP;
  const bottom = PAD + 22 + Y * CELL;
  const width = 2 * PAD + pod.slices * sliceW + (pod.slices - 1) * SLICE_GAP;
  const height = bottom + (pod.slices > 1 ? 60 : 10);
  root.setAttribute("viewBox", `0 0 ${width} ${height}`);
  root.setAttribute("width", width);
  root.setAttribute("height", height);
  const positions = pod.chips.map((c) => chipPosition(pod, c));

  // Slices and z planes, labelled; each host's chips on a tinted block.
  for (let s = 0; s < pod.slices; s++) {
    for (let z = 0; z < Z; z++) {
      const x0 = PAD + s * (sliceW + SLICE_GAP) + z * (planeW + PLANE_GAP);
      const label = Z > 1 ? `slice ${s}, z=${z}` : `slice ${s}`;
      svg("text", { x: x0 + 4, y: PAD + 10, class: "slice-label" }, root).textContent = label;
    }
  }
  const hostBoxes = new Map();
  pod.chips.forEach((c, i) => {
    const key = `${c.host}/${c.xyz[2]}`;
    const p = positions[i];
    const box = hostBoxes.get(key) || { host: c.host, x0: p.x, y0: p.y, x1: p.x, y1: p.y };
    box.x0 = Math.min(box.x0, p.x); box.y0 = Math.min(box.y0, p.y);
    box.x1 = Math.max(box.x1, p.x); box.y1 = Math.max(box.y1, p.y);
    hostBoxes.set(key, box);
  });
  for (const b of hostBoxes.values()) {
    const m = CHIP / 2 + 6;
    titled(svg("rect", {
      x: b.x0 - m, y: b.y0 - m, width: b.x1 - b.x0 + 2 * m, height: b.y1 - b.y0 + 2 * m, rx: 6,
      fill: HOST_TINTS[b.host % HOST_TINTS.length], "data-host": b.host, class: "host",
    }, root), `host ${b.host} (${pod.workers[b.host].address || "no worker yet"})`);
  }

  const links = svg("g", { id: "links" }, root);
  for (const l of pod.links) {
    const path = svg("path", {
      d: linkPath(pod, l, positions[l.src], positions[l.dst], bottom), class: `link ${l.kind}`,
      "data-link": l.id, "data-kind": l.kind, "data-bytes": 0, stroke: IDLE[l.kind],
    }, links);
    titled(path, `link ${l.id} (${l.kind.toUpperCase()})`);
  }
  const chips = svg("g", { id: "chips" }, root);
  pod.chips.forEach((c, i) => {
    const p = positions[i];
    const g = svg("g", { "data-chip": c.id, "data-host": c.host, "data-slice": c.slice }, chips);
    titled(svg("rect", { x: p.x - CHIP / 2, y: p.y - CHIP / 2, width: CHIP, height: CHIP, rx: 4, class: "chip", fill: "#fff" }, g),
      `chip ${c.id}: slice ${c.slice}, host ${c.host}, (${c.xyz.join(",")})`);
    svg("text", { x: p.x, y: p.y + 4, "text-anchor": "middle" }, g).textContent = c.id;
  });
}

function showWorkers(pod) {
  const ready = $("#pod-ready");
  ready.textContent = pod.ready ? "ready" : "not ready";
  ready.className = `badge ${pod.ready ? "ok" : "bad"}`;
  $("#pod-description").textContent = pod.description;
  const lostHosts = new Set(pod.workers.filter((w) => w.state !== "alive" && w.state !== "slow").map((w) => w.host));
  for (const g of document.querySelectorAll("#torus [data-chip]")) {
    const lost = lostHosts.has(Number(g.dataset.host));
    g.querySelector("rect").classList.toggle("lost", lost);
    g.classList.toggle("lost", lost);
  }
  const body = $("#workers tbody");
  body.replaceChildren();
  for (const w of pod.workers) {
    const tr = body.insertRow();
    tr.dataset.host = w.host;
    tr.dataset.state = w.state;
    cell(tr, w.host); cell(tr, w.slice); cell(tr, w.address || "-", "text");
    cell(tr, w.state, `text state-${{ alive: "succeeded", slow: "slow" }[w.state] || "failed"}`);
    cell(tr, w.resident_bytes ? formatBytes(w.resident_bytes) : "");
  }
}

function heat(t) {
  // From a light orange to a deep red as a link nears the job's busiest.
  const lo = [253, 212, 158], hi = [215, 48, 31];
  return `rgb(${lo.map((v, i) => Math.round(v + (hi[i] - v) * t)).join(",")})`;
}

// The selected job's links (a training job's: the link spans of the step the
// timeline shows, or of every step kept) from light orange to red at its busiest.
function colourLinks() {
  const job = view.job;
  // A collective's or matmul's result counts each link's bytes, not its busy time.
  const bytesOnly = job && job.kind !== "train";
  const asked = $("#colour-by").value;
  const metric = bytesOnly ? "bytes" : asked;
  const links = (view.job?.kind === "train" ? view.traceLinks : view.links) || {};
  const values = Object.values(links).map((l) => l[metric] || 0);
  const max = Math.max(0, ...values);
  for (const path of document.querySelectorAll("#torus [data-link]")) {
    const use = links[path.dataset.link] || {};
    const v = use[metric] || 0;
    path.dataset.bytes = use.bytes || 0;
    path.dataset.busy = use.busy_s || 0;
    path.setAttribute("stroke", v > 0 && max > 0 ? heat(v / max) : IDLE[path.dataset.kind]);
    path.querySelector("title").textContent = `link ${path.dataset.link} (${path.dataset.kind.toUpperCase()}): ` +
      `${formatBytes(use.bytes || 0)}` + (use.busy_s ? `, busy ${formatSeconds(use.busy_s)}` : "");
    if (v > 0) path.parentNode.appendChild(path);  // hot links drawn on top
  }
  $("#links-of").textContent = job ? `of ${job.id} (${metric === "bytes" ? "emulated bytes" : "emulated busy time"}` +
    `${bytesOnly && asked !== metric ? `: a ${job.kind}'s result counts no busy time` : ""}` +
    `${job.kind !== "train" ? "" : view.stepShown >= 0 ? `, step ${view.stepShown}` : `, ${view.stepsFetched}`})`
    : `of no job: ${view.missing ? `${view.missing}; ` : ""}choose one in the list`;
}

// ---- jobs ---------------------------------------------------------------

function selectedId() {
  const m = location.hash.match(/job=([A-Za-z0-9_.-]+)/);
  return m ? m[1] : null;
}

function showJobs(list) {
  const body = $("#job-table tbody");
  body.replaceChildren();
  const selected = selectedId();
  for (const j of [...list.jobs].reverse()) {  // the newest first
    const tr = body.insertRow();
    tr.dataset.job = j.id;
    tr.dataset.state = j.state;
    if (j.id === selected) tr.className = "selected";
    cell(tr, j.id, "text");
    cell(tr, j.kind, "text");
    cell(tr, j.state, `text state-${j.state}`);
    cell(tr, j.queue_position ? `#${j.queue_position}` : "");
    cell(tr, j.placement ? j.placement.text : "-", "text");
    cell(tr, j.kind === "train" ? `${j.steps_done}/${j.steps_total}` : "");
    cell(tr, j.what, "text");
    tr.addEventListener("click", () => { location.hash = `job=${j.id}`; });
  }
  $("#no-jobs").hidden = list.jobs.length > 0;
}

// A job's figures as `tpuemu status --json` has them (views/job_json.cc).
function resultRows(job) {
  const r = job.result;
  if (job.kind === "collective" && r) {
    const rows = [["op", r.op], ["axes", r.axes], ["bytes", formatBytes(r.bytes)], ["algorithm", r.algorithm],
      ["emulated", formatSeconds(r.emulated_s)], ["predicted (closed form)", formatSeconds(r.predicted_s)],
      ["emulated / predicted", r.ratio?.toFixed(3)], ["emulated bus bandwidth", `${r.emulated_busbw_gbps?.toFixed(1)} GB/s`],
      ["correct", String(r.correct)]];
    if (r.faults?.length) rows.push(["faults on purpose", r.faults.join("; ")]);
    return rows;
  }
  if (job.kind === "matmul" && r) {
    return [["expression", r.expr], ["mesh", r.mesh], ["plan", r.plan_summary],
      ["predicted", formatSeconds(r.predicted_s?.total)], ["emulated", formatSeconds(r.emulated_s?.total)]];
  }
  if (job.kind === "train" && job.summary) {
    const rows = [["mesh", job.summary.mesh]];
    if (job.summary.param_l2) rows.push(["final parameters L2", job.summary.param_l2.toPrecision(9)]);
    const last = (job.steps || []).at(-1);
    if (last?.faults?.length) rows.push(["faults on purpose (latest step)", last.faults.join("; ")]);
    return rows;
  }
  return [];
}

function showJob(job) {
  $("#job-section").hidden = false;
  $("#job-title").textContent = `${job.id}: ${job.kind}`;
  const why = job.error || job.waiting_for || "";
  $("#job-state").textContent = `${job.state}${job.placement ? ` on ${job.placement.text}` : ""}${why ? `: ${why}` : ""}`;
  $("#job-state").className = `state-${job.state}`;
  const count = $("#step-count");
  count.dataset.steps = job.steps_done || 0;
  count.textContent = job.kind === "train" ? `${job.steps_done} of ${job.steps_total} steps done` : "";

  const result = $("#job-result");
  result.replaceChildren();
  const rows = resultRows(job);
  if (rows.length) {
    const t = document.createElement("table");
    for (const [k, v] of rows) {
      const tr = t.insertRow();
      cell(tr, k, "text");
      cell(tr, v ?? "", "text");
    }
    result.appendChild(t);
  }

  const train = job.kind === "train";
  for (const id of ["#steps-title", "#steps", "#per-layer-title", "#per-layer", "#timeline-title", "#timeline", "#timeline-legend"]) {
    $(id).hidden = !train;
  }
  $("#trace-download").parentNode.hidden = !train;
  if (!train) return;
  const steps = job.steps || [];
  const axes = [...new Set(steps.flatMap((s) => Object.keys(s.exposed_comm_s || {})))].sort();
  $("#steps-title").textContent = steps.length < job.steps_done ? `Steps (the latest ${steps.length})` : "Steps";
  fill($("#steps"), ["step", "loss", "emulated step", "compute", ...axes.map((a) => `exposed ${a}`), "MFU", "wall"],
    steps.map((s) => [s.step, s.loss.toPrecision(7), formatSeconds(s.emulated_step_s), formatSeconds(s.compute_s),
      ...axes.map((a) => formatSeconds((s.exposed_comm_s || {})[a] || 0)), `${(100 * s.mfu).toFixed(1)}%`,
      formatSeconds(s.wall_s)]));
  const layers = (job.summary && job.summary.per_layer) || [];
  $("#per-layer-title").hidden = $("#per-layer").hidden = !layers.length;  // known once the job has ended
  fill($("#per-layer"), ["", "formula", "predicted bytes", "emulated bytes", "predicted", "emulated", "on which links"],
    layers.map((l) => [l.what, l.formula, l.what === "compute" ? "" : formatBytes(l.predicted_bytes),
      l.what === "compute" ? "" : formatBytes(l.emulated_bytes), formatSeconds(l.predicted_s),
      formatSeconds(l.emulated_s), l.time_formula || ""]));
  $("#trace-download").href = `/api/jobs/${job.id}/trace.json`;
  $("#trace-download").setAttribute("download", `${job.id}-trace.json`);
}

// ---- the timeline ---------------------------------------------------------

const stepOf = (span) => Number((span.name.match(/^step (\d+):/) || [])[1] ?? -1);

// The selected step's spans (or those of every step fetched, the latest TIMELINE_SPANS)
// on a track per chip and per link.
function drawTimeline() {
  const trace = view.trace;
  const root = $("#timeline");
  root.replaceChildren();
  if (!trace) return;
  const names = new Map();
  const spans = [];
  for (const e of trace.traceEvents) {
    if (e.ph === "M" && e.name === "thread_name") names.set(`${e.pid}/${e.tid}`, e.args.name);
    if (e.ph === "X") spans.push(e);
  }
  const picker = $("#timeline-step");
  const steps = [...new Set(spans.map(stepOf))];
  const chosen = picker.value;
  picker.replaceChildren(new Option("the latest step", "latest"), new Option(`the latest ${STEPS_SHOWN} steps`, "all"),
    ...steps.map((k) => new Option(`step ${k}`, String(k))));
  picker.value = [...picker.options].some((o) => o.value === chosen) ? chosen : "latest";
  const step = picker.value === "latest" ? steps[steps.length - 1] : Number(picker.value);
  const inStep = picker.value === "all" ? spans : spans.filter((e) => stepOf(e) === step);
  // The torus shows the same spans' link traffic (from the trace already here,
  // not asked for again).
  view.traceLinks = {};
  view.stepShown = picker.value === "all" || step === undefined ? -1 : step;
  view.stepsFetched = !steps.length ? "no steps traced yet"
    : steps.length === 1 ? `step ${steps[0]}` : `steps ${steps[0]}-${steps[steps.length - 1]}`;
  // The trace names chips by the job's own ids; the torus by the pod's.
  const onPod = (chip) => view.job?.pod_chips?.[chip] ?? chip;
  for (const e of inStep) {
    // A link's track, or a second lane of it ("link 3->4 x+, lane 2": spans overlapping without nesting).
    const track = (names.get(`${e.pid}/${e.tid}`) || "").replace(/, lane \d+$/, "");
    const m = track.match(/^link (\d+)->(\d+) (.+)$/);
    if (!m) continue;
    const use = view.traceLinks[`${onPod(+m[1])}->${onPod(+m[2])} ${m[3]}`] ||= { bytes: 0, busy_s: 0 };
    use.bytes += (e.args && e.args.bytes) || 0;
    use.busy_s += e.dur / 1e6;
  }
  colourLinks();
  const shown = inStep.slice(-TIMELINE_SPANS);
  $("#timeline-note").textContent = shown.length < inStep.length
    ? `the latest ${shown.length} of ${inStep.length} spans drawn` : `${shown.length} spans`;
  if (!shown.length) {
    $("#timeline-note").textContent = "no spans kept: the coordinator keeps traces in memory, so a job it ran before " +
      "its last restart has none, and its links above are not coloured";
    return;
  }
  const tracks = [...new Set(shown.map((e) => `${e.pid}/${e.tid}`))]
    .sort((a, b) => (names.get(a) || a).localeCompare(names.get(b) || b, undefined, { numeric: true }));
  const t0 = Math.min(...shown.map((e) => e.ts));
  const t1 = Math.max(...shown.map((e) => e.ts + e.dur));
  const left = 110, width = 1000, row = 14;
  root.setAttribute("viewBox", `0 0 ${left + width + 10} ${tracks.length * row + 24}`);
  root.setAttribute("width", left + width + 10);
  root.setAttribute("height", tracks.length * row + 24);
  const x = (t) => left + ((t - t0) / Math.max(t1 - t0, 1e-9)) * width;
  const rowOf = new Map(tracks.map((t, i) => [t, i]));
  tracks.forEach((t, i) => {
    svg("text", { x: 2, y: i * row + 11, "data-track": names.get(t) || t }, root).textContent = names.get(t) || t;
  });
  const colours = new Map();
  // Spans come by start within a track, an enclosing one first: each nested
  // one is drawn thinner, on top of the one holding it.
  const open = new Map();  // track -> the ends of the spans open at the last start, innermost last
  for (const e of shown) {
    const key = `${e.pid}/${e.tid}`;
    const ends = open.get(key) || [];
    while (ends.length && ends[ends.length - 1] <= e.ts + 1e-6) ends.pop();  // touching, up to rounding (us)
    const depth = Math.min(ends.length, 4);
    ends.push(e.ts + e.dur);
    open.set(key, ends);
    // Chips' spans coloured by what they did ("step 3: forward matmul"), links' by their kind.
    const track = names.get(`${e.pid}/${e.tid}`) || "";
    const base = track.startsWith("link ") ? (track.includes(" dcn") ? "DCN link" : "ICI link")
      : e.name.replace(/^step \d+: /, "").split(" (")[0];
    if (!colours.has(base)) colours.set(base, SPAN_COLOURS[colours.size % SPAN_COLOURS.length]);
    const r = svg("rect", {
      x: x(e.ts), y: rowOf.get(key) * row + 2 + depth, width: Math.max(0.5, x(e.ts + e.dur) - x(e.ts)),
      height: row - 4 - 2 * depth, fill: colours.get(base), class: "span",
    }, root);
    titled(r, `${names.get(`${e.pid}/${e.tid}`)}: ${e.name}, ${formatSeconds(e.dur / 1e6)}` +
      (e.args && e.args.bytes ? `, ${formatBytes(e.args.bytes)}` : ""));
  }
  const legend = $("#timeline-legend");
  legend.replaceChildren();
  for (const [name, colour] of colours) {
    const swatch = document.createElement("span");
    swatch.className = "swatch";
    swatch.style.borderTopColor = colour;
    legend.append(swatch, ` ${name}  `);
  }
  svg("text", { x: left, y: tracks.length * row + 18 }, root).textContent = `${formatSeconds(t0 / 1e6)}`;
  svg("text", { x: left + width, y: tracks.length * row + 18, "text-anchor": "end" }, root).textContent =
    `${formatSeconds(t1 / 1e6)} (emulated)`;
}

// ---- the loop -------------------------------------------------------------

async function refresh() {
  const pod = await get("/api/pod");
  const podKey = `${pod.description}|${pod.chips.length}|${pod.links.length}`;
  if (podKey !== view.podKey) {
    drawTorus(pod);
    view.podKey = podKey;
    view.linksKey = "";
  }
  view.pod = pod;
  showWorkers(pod);
  view.jobs = await get("/api/jobs");
  showJobs(view.jobs);

  const id = selectedId();
  const job = id ? await get(`/api/jobs/${id}?steps=${STEPS_SHOWN}`).catch((e) => {
    if (e.status !== 404) throw e;
    view.missing = `${id} is not kept by this coordinator (it keeps the latest finished jobs)`;
    return null;
  }) : null;
  if (!job) {
    if (!id) view.missing = "";
    view.job = null;
    view.links = {};
    $("#job-section").hidden = true;
  } else {
    view.missing = "";
    view.job = job;
    showJob(job);
    // A running job's links and trace are asked for at most every 2 s;
    // once it has ended, once more.
    const key = `${job.id}|${job.state}|${job.steps_done}`;
    const now = Date.now();
    // Collectives and matmuls: their result's links; a training job's come from its trace.
    if (job.kind !== "train" && key !== view.linksKey && (job.state !== "running" || now - view.linksAt > 2000)) {
      view.links = (await get(`/api/jobs/${id}/links`)).links;
      view.linksKey = key;
      view.linksAt = now;
    }
    if (job.kind === "train" && key !== view.traceKey && (job.state !== "running" || now - view.traceAt > 2000)) {
      view.trace = await get(`/api/jobs/${id}/trace.json?steps=${STEPS_SHOWN}`);
      drawTimeline();
      view.traceKey = key;
      view.traceAt = now;
    }
  }
  colourLinks();
  view.polls++;
}

async function loop() {
  const live = $("#live");
  try {
    await refresh();
    live.textContent = "live";
    live.className = "badge ok";
    live.title = "the page asks the coordinator for news every second";
  } catch (e) {
    view.errors++;
    view.lastError = String(e);
    // A refused token is not a stopped coordinator, and what the page last
    // heard of the pod is no longer known.
    live.textContent = e.status === 401 ? "token refused: open the page with ?token=TOKEN again"
                                        : "coordinator unreachable";
    live.className = "badge bad";
    live.title = String(e);
    const ready = $("#pod-ready");
    ready.textContent = "pod state unknown";
    ready.className = "badge";
  }
  setTimeout(loop, POLL_MS);
}

// The page's answer set the token's cookie: the token leaves the address
// bar (and the browser's history, and any link copied from it).
const query = new URLSearchParams(location.search);
if (query.has("token")) {
  query.delete("token");
  const rest = query.toString();
  history.replaceState(null, "", location.pathname + (rest ? `?${rest}` : "") + location.hash);
}

$("#colour-by").addEventListener("change", colourLinks);
$("#timeline-step").addEventListener("change", drawTimeline);
window.addEventListener("hashchange", () => {
  view.linksKey = "";
  view.traceKey = "";
  view.trace = null;
  view.traceLinks = null;
});
loop();
