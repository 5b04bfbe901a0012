// The memories page: views over the JSON endpoints of soulgraph.memories.web.app.
// Every memory text, tag, id and reason reaches the page as a text node (textContent or
// createTextNode), never as markup: a memory may hold anything, "<script>" included.
"use strict";

const state = { session: null, reveal: false, graph: null };
const SVG = "http://www.w3.org/2000/svg";

function $(id) { return document.getElementById(id); }

// An element; string and number children become text nodes, null ones are left out.
function el(tag, props, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (key === "dataset") Object.assign(node.dataset, value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  append(node, children);
  return node;
}

function append(node, children) {
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.appendChild(typeof child === "object" ? child : document.createTextNode(String(child)));
  }
  return node;
}

function svgEl(tag, attrs, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value !== null && value !== undefined) node.setAttribute(key, String(value));
  }
  if (text !== undefined) node.textContent = text;
  return node;
}

function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); return node; }

function toast(message, bad) {
  const box = $("toast");
  box.textContent = message;
  box.className = bad ? "shown bad" : "shown";
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => { box.className = ""; }, bad ? 6000 : 2500);
}

async function api(path, params) {
  const query = new URLSearchParams();
  for (const [key, value] of Object.entries(params || {})) {
    if (Array.isArray(value)) value.forEach((v) => query.append(key, v));
    else if (value !== "" && value !== null && value !== undefined && value !== false) query.append(key, value);
  }
  if (state.reveal) query.set("show_flagged", "1");
  const text = query.toString();
  const response = await fetch(path + (text ? "?" + text : ""), { credentials: "same-origin" });
  const answer = await response.json().catch(() => ({ error: response.statusText }));
  if (!response.ok) throw new Error(answer.error || response.statusText);
  return answer;
}

async function post(path, body) {
  const response = await fetch(path, {
    method: "POST", credentials: "same-origin",
    headers: { "Content-Type": "application/json", "X-CSRF-Token": state.session.csrf },
    body: JSON.stringify(body || {}),
  });
  const answer = await response.json().catch(() => ({ error: response.statusText }));
  if (!response.ok) throw new Error(answer.error || response.statusText);
  return answer;
}

// ---------------------------------------------------------------- confirmation dialog
// Resolves to the fields' values when confirmed, null when cancelled.
function confirmDialog({ title, text, fields, ok, danger }) {
  const dialog = $("confirm");
  $("confirm-title").textContent = title;
  $("confirm-text").textContent = text || "";
  $("confirm-error").textContent = "";
  const box = clear($("confirm-fields"));
  const inputs = {};
  for (const field of fields || []) {
    let input;
    if (field.type === "textarea") input = el("textarea", { name: field.name });
    else if (field.type === "select") {
      input = el("select", { name: field.name }, field.options.map((o) => el("option", { value: o }, o)));
    } else if (field.type === "checkbox") input = el("input", { type: "checkbox", name: field.name });
    else input = el("input", { type: "text", name: field.name, placeholder: field.placeholder || "" });
    if (field.type === "checkbox") input.checked = !!field.value;
    else input.value = field.value === undefined ? "" : field.value;
    inputs[field.name] = input;
    box.appendChild(field.type === "checkbox"
      ? el("p", {}, el("label", {}, input, " " + field.label))
      : el("p", {}, el("label", {}, field.label, el("br"), input)));
  }
  const okButton = $("confirm-ok");
  okButton.textContent = ok || "Confirm";
  okButton.className = danger ? "danger" : "";
  return new Promise((resolve) => {
    const done = (value) => {
      $("confirm-form").removeEventListener("submit", submitted);
      $("confirm-cancel").removeEventListener("click", cancelled);
      dialog.removeEventListener("cancel", cancelled);
      if (dialog.open) dialog.close();
      resolve(value);
    };
    const submitted = (event) => {
      event.preventDefault();
      const values = {};
      for (const [name, input] of Object.entries(inputs)) values[name] = input.type === "checkbox" ? input.checked : input.value;
      const field = (fields || []).find((f) => f.required && !String(values[f.name]).trim());
      if (field) { $("confirm-error").textContent = field.label + " is needed"; return; }
      done(values);
    };
    const cancelled = (event) => { if (event) event.preventDefault(); done(null); };
    $("confirm-form").addEventListener("submit", submitted);
    $("confirm-cancel").addEventListener("click", cancelled);
    dialog.addEventListener("cancel", cancelled);
    dialog.showModal();
    const first = Object.values(inputs)[0];
    (first || okButton).focus();
  });
}

// ---------------------------------------------------------------- memories as elements
function badges(item) {
  return [
    el("span", { class: "id" }, item.id),
    el("span", { class: "badge" }, item.kind),
    el("span", { class: "badge scope" }, item.scope),
    item.status !== "active" ? el("span", { class: "badge status-" + item.status }, item.status) : null,
    item.pinned ? el("span", { class: "badge pinned" }, "pinned") : null,
    item.flagged ? el("span", { class: "badge flagged" }, item.withheld ? "flagged, withheld" : "flagged") : null,
    item.hypothesis ? el("span", { class: "badge" }, "hypothesis") : null,
    el("span", {}, item.created_at || ""),
    item.score !== undefined ? el("span", {}, "score " + item.score + (item.via ? " via " + item.via : "")) : null,
    item.tags && item.tags.length ? el("span", {}, "tags: " + item.tags.join(", ")) : null,
  ];
}

function memoryItem(item) {
  return el("li", {
    class: item.withheld ? "withheld" : null, dataset: { id: item.id },
    onclick: () => { location.hash = "#/memory/" + encodeURIComponent(item.id); },
  }, el("div", { class: "meta" }, badges(item)), el("div", { class: "content" }, item.content));
}

// ---------------------------------------------------------------- search
function searchParams() {
  const params = {
    q: $("q").value.trim(), kind: $("f-kind").value, scope: $("f-scope").value, tag: $("f-tag").value.trim(),
    since: $("f-since").value, until: $("f-until").value, pinned: $("f-pinned").value,
    flagged: $("f-flagged").checked ? "1" : "", as: $("f-as").value.trim(),
  };
  const status = $("f-status").value;
  if (status === "*") params.all = "1"; else if (status) params.status = status;
  return params;
}

function fillSearch(params) {
  $("q").value = params.get("q") || "";
  $("f-kind").value = params.get("kind") || "";
  $("f-scope").value = params.get("scope") || "";
  $("f-tag").value = params.get("tag") || "";
  $("f-since").value = params.get("since") || "";
  $("f-until").value = params.get("until") || "";
  $("f-pinned").value = params.get("pinned") || "";
  $("f-flagged").checked = params.get("flagged") === "1";
  $("f-as").value = params.get("as") || "";
  $("f-status").value = params.get("all") === "1" ? "*" : (params.get("status") || "");
}

async function showSearch(params) {
  fillSearch(params);
  const list = $("results");
  $("search-summary").textContent = "…";
  const answer = await api("/api/search", Object.fromEntries(params.entries()));
  clear(list);
  answer.results.forEach((item) => list.appendChild(memoryItem(item)));
  $("search-summary").textContent = answer.query
    ? answer.results.length + " found for \u201c" + answer.query + "\u201d" + (answer.vectors ? " (words and vectors)" : " (words)")
    : answer.results.length + " of " + answer.total + " memories, newest first";
}

// ---------------------------------------------------------------- one memory
function links(title, items) {
  if (!items || !items.length) return null;
  return [el("h2", {}, title), el("ol", { class: "memories links" }, items.map((link) =>
    el("li", { dataset: { id: link.id }, onclick: () => { location.hash = "#/memory/" + encodeURIComponent(link.id); } },
      el("div", { class: "meta" }, el("span", { class: "id" }, link.id), link.kind ? el("span", { class: "badge" }, link.kind) : null,
        link.status && link.status !== "active" ? el("span", { class: "badge status-" + link.status }, link.status) : null),
      el("div", { class: "content" }, link.content === null ? "(forgotten)" : link.content))))];
}

function field(name, value) {
  if (value === null || value === undefined || value === "") return null;
  return [el("dt", {}, name), el("dd", {}, typeof value === "object" ? JSON.stringify(value) : String(value))];
}

function historyLine(entry) {
  const parts = [entry.at || "", entry.action || ""];
  for (const key of ["node", "by", "writer", "reason"]) if (entry[key]) parts.push(key + ": " + entry[key]);
  return el("li", {}, parts.join("  "));
}

async function change(id, action, body, message) {
  try {
    const answer = await post("/api/memory/" + encodeURIComponent(id) + "/" + action, body);
    toast(message(answer));
    return answer;
  } catch (error) {
    toast(error.message, true);
    return null;
  }
}

function editActions(item) {
  if (!state.session.allow_edits) return el("p", { class: "summary" }, "Read-only: start the server with --allow-edits to change memories.");
  const id = item.id;
  const reload = () => route();
  const buttons = [];
  if (item.status !== "superseded" && !item.hypothesis) {
    buttons.push(el("button", { id: "act-edit", type: "button", onclick: async () => {
      const values = await confirmDialog({
        title: "Edit " + id, ok: "Save a new version",
        text: "A new memory with this text supersedes " + id + ", which stays for history, out of recall.",
        fields: [{ name: "content", label: "Text", type: "textarea", value: item.withheld ? "" : item.content, required: true },
          { name: "kind", label: "Kind", type: "select", options: state.session.kinds, value: item.kind },
          { name: "tags", label: "Tags (comma-separated)", value: item.withheld ? "" : (item.tags || []).join(", ") },
          { name: "reason", label: "Why (kept in the audit trail)" }],
      });
      if (!values) return;
      const body = { content: values.content, kind: values.kind, reason: values.reason,
        tags: values.tags.split(",").map((t) => t.trim()).filter(Boolean) };
      const done = await change(id, "edit", body, (a) => id + " edited: the new version is " + a.new);
      if (done) location.hash = "#/memory/" + encodeURIComponent(done.new);
    } }, "Edit"));
  }
  if (item.status === "active" && !item.hypothesis) {
    buttons.push(el("button", { id: "act-supersede", type: "button", onclick: async () => {
      const values = await confirmDialog({
        title: "Replace " + id, ok: "Replace",
        text: "Another memory that already says it right replaces " + id + ", which stays for history, out of recall.",
        fields: [{ name: "by", label: "The id of the memory that replaces it", required: true },
          { name: "reason", label: "Why (kept in the audit trail)" }],
      });
      if (values && await change(id, "supersede", { by: values.by, reason: values.reason },
        (a) => id + " is superseded by " + a.superseded_by)) reload();
    } }, "Replaced by…"));
  }
  const pinAction = item.pinned ? "unpin" : "pin";
  buttons.push(el("button", { id: "act-" + pinAction, type: "button", onclick: async () => {
    const values = await confirmDialog({
      title: (item.pinned ? "Unpin " : "Pin ") + id,
      text: item.pinned ? "An ordinary memory again: it fades as others do." : "An axiom: it never fades and comes first in every prime.",
      fields: [{ name: "reason", label: "Why (kept in the audit trail)" }],
    });
    if (values && await change(id, pinAction, { reason: values.reason }, () => id + (item.pinned ? " unpinned" : " pinned"))) reload();
  } }, item.pinned ? "Unpin" : "Pin"));
  const archiveAction = item.status === "archived" ? "unarchive" : "archive";
  if (item.status === "active" || item.status === "archived") {
    buttons.push(el("button", { id: "act-" + archiveAction, type: "button", onclick: async () => {
      const values = await confirmDialog({
        title: (archiveAction === "archive" ? "Archive " : "Bring back ") + id,
        text: archiveAction === "archive" ? "Out of recall and prompts; kept and searchable." : "Back in recall.",
        fields: [{ name: "reason", label: "Why (kept in the audit trail)" }],
      });
      if (values && await change(id, archiveAction, { reason: values.reason }, () => id + " " + archiveAction + "d")) reload();
    } }, archiveAction === "archive" ? "Archive" : "Unarchive"));
  }
  buttons.push(el("button", { id: "act-forget", class: "danger", type: "button", onclick: async () => {
    const values = await confirmDialog({
      title: "Forget " + id, ok: "Forget", danger: true,
      text: "Without \u201cfor good\u201d it is archived with the reason. For good, it is removed from soul.json, the journal, "
        + "the store's copies and the markdown files; only an audit entry with the id, the time and the reason stays.",
      fields: [{ name: "reason", label: "Why it must go (kept in the audit trail)", required: true },
        { name: "hard", label: "for good, from every file (cannot be undone)", type: "checkbox" }],
    });
    if (!values) return;
    const done = await change(id, "forget", { reason: values.reason, hard: values.hard },
      (a) => id + (a.hard ? " forgotten for good" : " forgotten (archived)"));
    if (done) { if (done.hard) location.hash = "#/search"; else reload(); }
  } }, "Forget"));
  return el("div", { class: "actions" }, buttons);
}

async function showMemory(id) {
  const box = $("memory");
  let item;
  try { item = await api("/api/memory/" + encodeURIComponent(id)); } catch (error) {
    clear(box).appendChild(el("p", { class: "error" }, error.message));
    return;
  }
  const p = item.provenance || {};
  clear(box).appendChild(el("div", { class: "card" + (item.withheld ? " withheld" : ""), dataset: { id: item.id } },
    el("div", { class: "meta" }, badges(item)),
    el("div", { class: "content", id: "memory-content" }, item.content),
    item.withheld ? el("button", { id: "reveal-one", type: "button", onclick: async () => {
      if (await askReveal()) route();
    } }, "Reveal this text") : null,
    el("div", { class: "actions" },
      el("button", { id: "act-graph", type: "button", onclick: () => { location.hash = "#/graph/" + encodeURIComponent(item.id); } }, "Graph around it")),
    editActions(item),
    el("dl", {},
      field("source", p.source), field("source ref", p.source_ref), field("writer", p.writer),
      field("first seen", p.first_seen_at), field("last confirmed", p.last_confirmed_at),
      field("confidence", item.confidence), field("importance", item.importance), field("strength now", item.strength),
      field("used", item.access_count), field("last used", item.last_accessed), field("valid from", item.valid_from),
      field("valid to", item.valid_to), field("privacy", item.privacy), field("superseded by", item.superseded_by),
      field("supersedes", item.supersedes && item.supersedes.length ? item.supersedes.join(", ") : null),
      field("flagged rules", item.flagged ? item.flagged.join(", ") : null),
      Object.keys(item.metadata || {}).length ? field("metadata", item.metadata) : null),
    links("Built on", item.parents), links("Built upon by", item.children),
    el("h2", {}, "History"), el("ol", { class: "audit", id: "memory-history" }, (item.history || []).map(historyLine))));
}

// ---------------------------------------------------------------- graph
const NODE_W = 190, NODE_H = 46, COL = 240, ROW = 62;

function short(text, n) { text = String(text || "").replace(/\s+/g, " "); return text.length > n ? text.slice(0, n - 1) + "\u2026" : text; }

async function showGraph(id, depth) {
  $("graph-id").value = id || "";
  if (depth) $("graph-depth").value = depth;
  if (!id) {
    drawGraph(null);
    $("graph-info").textContent = "Give a memory id, or open a memory and choose \u201cGraph around it\u201d.";
    return;
  }
  let answer;
  try { answer = await api("/api/graph/" + encodeURIComponent(id), { depth: $("graph-depth").value }); } catch (error) {
    drawGraph(null);
    $("graph-info").textContent = error.message;
    return;
  }
  state.graph = { center: answer.center, nodes: new Map(), edges: new Map(), expanded: new Set([answer.center]),
    selected: answer.center, view: { x: 0, y: 0, k: 1 } };
  merge(answer, 0);
  drawGraph(state.graph);
  info(state.graph.nodes.get(answer.center), answer.cut);
}

function merge(answer, offset) {
  const g = state.graph;
  for (const node of answer.nodes) {
    if (!g.nodes.has(node.id)) g.nodes.set(node.id, { ...node, step: node.step + offset });
  }
  for (const edge of answer.edges) g.edges.set(edge.from + ">" + edge.to + ">" + edge.kind, edge);
}

async function expand(id) {
  const g = state.graph;
  const node = g.nodes.get(id);
  let answer;
  try { answer = await api("/api/graph/" + encodeURIComponent(id), { depth: 1 }); } catch (error) { toast(error.message, true); return; }
  const before = g.nodes.size;
  merge(answer, node.step);
  g.expanded.add(id);
  drawGraph(g);
  toast(id + ": " + (g.nodes.size - before) + " more shown");
}

// Columns by step: parents to the left of the memory drawn first, children to its right; a
// memory built on another drawn one goes at least one column right of it (relaxed a few rounds).
function layout(g) {
  const step = new Map([...g.nodes.values()].map((n) => [n.id, n.step]));
  const links = [...g.edges.values()].filter((e) => step.has(e.from) && step.has(e.to));
  for (let round = 0; round < 8; round++) {
    let moved = false;
    for (const e of links) {
      const a = step.get(e.from), b = step.get(e.to);
      if (b > a) continue;
      if (e.to !== g.center && b >= 0) { step.set(e.to, a + 1); moved = true; }
      else if (e.from !== g.center && a <= 0) { step.set(e.from, b - 1); moved = true; }
    }
    if (!moved) break;
  }
  const columns = new Map();
  for (const node of g.nodes.values()) {
    const at = step.get(node.id);
    if (!columns.has(at)) columns.set(at, []);
    columns.get(at).push(node);
  }
  const place = new Map();
  const number = (id) => parseInt(String(id).replace(/\D/g, ""), 10) || 0;
  for (const [step, nodes] of columns) {
    nodes.sort((a, b) => number(a.id) - number(b.id));
    nodes.forEach((node, i) => place.set(node.id, { x: step * COL, y: (i - (nodes.length - 1) / 2) * ROW }));
  }
  return place;
}

function drawGraph(g) {
  const svg = clear($("graph"));
  const defs = svgEl("defs");
  const marker = svgEl("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 10, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" });
  marker.appendChild(svgEl("path", { d: "M 0 0 L 10 5 L 0 10 z", fill: "#9aa7b8" }));
  defs.appendChild(marker);
  svg.appendChild(defs);
  if (!g) return;
  const viewport = svgEl("g", { id: "viewport" });
  svg.appendChild(viewport);
  const place = layout(g);
  const width = svg.clientWidth || 900, height = svg.clientHeight || 500;
  const apply = () => viewport.setAttribute("transform",
    "translate(" + (width / 2 + g.view.x) + " " + (height / 2 + g.view.y) + ") scale(" + g.view.k + ")");
  apply();
  for (const edge of g.edges.values()) {
    const a = place.get(edge.from), b = place.get(edge.to);
    if (!a || !b) continue;
    const x1 = a.x + NODE_W / 2, y1 = a.y, x2 = b.x - NODE_W / 2, y2 = b.y;
    const mid = (x1 + x2) / 2;
    const d = x2 >= x1 ? `M ${x1} ${y1} C ${mid} ${y1}, ${mid} ${y2}, ${x2} ${y2}`
      : `M ${x1} ${y1} C ${x1 + 60} ${y1 - 40}, ${x2 - 60} ${y2 - 40}, ${x2} ${y2}`;
    viewport.appendChild(svgEl("path", { class: "edge " + edge.kind, d, "data-from": edge.from, "data-to": edge.to }));
  }
  for (const node of g.nodes.values()) {
    const at = place.get(node.id);
    const classes = ["node", "status-" + node.status];
    if (node.id === g.center) classes.push("center");
    if (node.id === g.selected) classes.push("selected");
    if (node.withheld) classes.push("withheld");
    const group = svgEl("g", { class: classes.join(" "), "data-id": node.id, transform: `translate(${at.x - NODE_W / 2} ${at.y - NODE_H / 2})` });
    group.appendChild(svgEl("rect", { width: NODE_W, height: NODE_H, rx: 5 }));
    group.appendChild(svgEl("text", { x: 7, y: 15, class: "nid" }, short(node.id + "  " + node.kind + (node.pinned ? "  pinned" : ""), 30)));
    group.appendChild(svgEl("text", { x: 7, y: 31 }, short(node.content, 30)));
    const hidden = (node.parents + node.children) - [...g.edges.values()].filter((e) => e.kind === "parent" && (e.from === node.id || e.to === node.id)).length;
    if (!g.expanded.has(node.id) && hidden > 0) group.appendChild(svgEl("text", { x: NODE_W - 7, y: 42, "text-anchor": "end", class: "more" }, "+" + hidden));
    group.appendChild(svgEl("title", {}, node.id + ": " + node.content));
    group.addEventListener("click", (event) => {
      if (g.dragged) return;
      event.stopPropagation();
      g.selected = node.id;
      info(node);
      if (!g.expanded.has(node.id)) expand(node.id); else drawGraph(g);
    });
    group.addEventListener("dblclick", (event) => { event.stopPropagation(); location.hash = "#/memory/" + encodeURIComponent(node.id); });
    viewport.appendChild(group);
  }
  // Pan by dragging, zoom with the wheel.
  svg.onpointerdown = (event) => {
    g.drag = { x: event.clientX, y: event.clientY, vx: g.view.x, vy: g.view.y };
    g.dragged = false;
  };
  svg.onpointermove = (event) => {
    if (!g.drag) return;
    const dx = event.clientX - g.drag.x, dy = event.clientY - g.drag.y;
    if (!g.dragged && Math.abs(dx) + Math.abs(dy) < 4) return;
    if (!g.dragged) { g.dragged = true; svg.setPointerCapture(event.pointerId); svg.classList.add("dragging"); }
    g.view.x = g.drag.vx + dx; g.view.y = g.drag.vy + dy;
    apply();
  };
  svg.onpointerup = () => { g.drag = null; svg.classList.remove("dragging"); setTimeout(() => { g.dragged = false; }, 0); };
  svg.onwheel = (event) => {
    event.preventDefault();
    g.view.k = Math.min(3, Math.max(0.2, g.view.k * (event.deltaY < 0 ? 1.1 : 1 / 1.1)));
    apply();
  };
}

function info(node, cut) {
  const box = clear($("graph-info"));
  if (!node) return;
  append(box, [el("div", { class: "meta" }, badges(node)), el("div", { class: "content", id: "graph-selected" }, node.content),
    el("button", { type: "button", id: "graph-open", onclick: () => { location.hash = "#/memory/" + encodeURIComponent(node.id); } }, "Open " + node.id),
    cut ? el("p", { class: "summary" }, "Only the nearest memories are drawn; click one to go further.") : null]);
}

// ---------------------------------------------------------------- timeline
const PALETTE = ["#2f5fb3", "#c0671f", "#2c7a3f", "#8a1c7c", "#b3962f", "#3a8c97", "#a4441b", "#6b5fb3", "#6f7d3a", "#999"];

async function showTimeline() {
  const by = $("timeline-by").value;
  const answer = await api("/api/timeline", { all: $("timeline-all").checked ? "1" : "" });
  const totals = new Map();
  for (const day of answer.days) for (const [key, n] of Object.entries(day[by])) totals.set(key, (totals.get(key) || 0) + n);
  let keys = [...totals.entries()].sort((a, b) => b[1] - a[1]).map((e) => e[0]);
  const other = keys.length > PALETTE.length ? keys.slice(PALETTE.length - 1) : [];
  keys = other.length ? [...keys.slice(0, PALETTE.length - 1), "other"] : keys;
  const colour = (key) => PALETTE[keys.indexOf(key)];
  const bucket = (key) => (other.includes(key) ? "other" : key);
  const svg = clear($("timeline"));
  const width = svg.clientWidth || 900, height = svg.clientHeight || 280, pad = 30;
  const most = Math.max(1, ...answer.days.map((d) => d.total));
  const step = (width - 2 * pad) / Math.max(1, answer.days.length);
  answer.days.forEach((day, i) => {
    let y = height - pad;
    const stacked = new Map();
    for (const [key, n] of Object.entries(day[by])) stacked.set(bucket(key), (stacked.get(bucket(key)) || 0) + n);
    for (const key of keys) {
      const n = stacked.get(key);
      if (!n) continue;
      const h = (n / most) * (height - 2 * pad);
      y -= h;
      const bar = svgEl("rect", { x: pad + i * step, y, width: Math.max(1, step - 1), height: h, fill: colour(key), "data-day": day.day });
      bar.appendChild(svgEl("title", {}, day.day + ": " + n + " " + key));
      svg.appendChild(bar);
    }
  });
  svg.appendChild(svgEl("text", { x: pad, y: 14, "font-size": 11 }, most + " a day at most"));
  if (answer.days.length) {
    svg.appendChild(svgEl("text", { x: pad, y: height - 10, "font-size": 11 }, answer.days[0].day));
    svg.appendChild(svgEl("text", { x: width - pad, y: height - 10, "font-size": 11, "text-anchor": "end" }, answer.days[answer.days.length - 1].day));
  }
  const legend = clear($("timeline-legend"));
  keys.forEach((key) => { const s = el("span", {}, key); s.style.setProperty("--swatch", colour(key)); legend.appendChild(s); });
  const table = clear($("timeline-table"));
  table.appendChild(el("tr", {}, el("th", {}, "day"), el("th", { class: "n" }, "all"), keys.map((k) => el("th", { class: "n" }, k))));
  for (const day of answer.days.slice().reverse().slice(0, 60)) {
    const counts = new Map();
    for (const [key, n] of Object.entries(day[by])) counts.set(bucket(key), (counts.get(bucket(key)) || 0) + n);
    table.appendChild(el("tr", {}, el("td", {}, day.day), el("td", { class: "n" }, day.total), keys.map((k) => el("td", { class: "n" }, counts.get(k) || ""))));
  }
}

// ---------------------------------------------------------------- pinned and the snapshot
async function showPinned() {
  const answer = await api("/api/pinned", { as: $("pinned-as").value.trim() });
  const list = clear($("pinned"));
  answer.pinned.forEach((item) => list.appendChild(memoryItem(item)));
  if (!answer.pinned.length) list.appendChild(el("li", {}, "No pinned memories."));
  $("snapshot").textContent = answer.snapshot || "(empty)";
  $("snapshot-size").textContent = answer.snapshot_chars + " of " + answer.max_chars + " characters"
    + (answer.as ? ", as " + answer.as + "'s server would show it" : ", every user's memories");
}

// ---------------------------------------------------------------- health
async function showHealth() {
  const [report, history] = await Promise.all([api("/api/health"), api("/api/history", { limit: 30 })]);
  const table = clear($("health"));
  const row = (key, value) => table.appendChild(el("tr", {}, el("th", {}, key),
    el("td", {}, value === null || value === undefined ? "\u2014" : typeof value === "object" ? JSON.stringify(value) : String(value))));
  row("ok", report.ok ? "yes" : "NO: " + (report.problem || ""));
  for (const key of ["soul_file", "nodes", "edges", "pinned", "hypotheses", "schema", "snapshot_seq", "snapshot_bytes",
    "last_good_seq", "last_compaction", "journal_modified"]) row(key.replace(/_/g, " "), report[key]);
  if (report.journal) for (const [key, value] of Object.entries(report.journal)) row("journal " + key.replace(/_/g, " "), value);
  row("last backup", report.last_backup ? report.last_backup.at + " " + report.last_backup.path : "none beside the soul file");
  row("backups", report.backup_note);
  if (report.note) row("note", report.note);
  const audit = clear($("audit"));
  history.entries.slice().reverse().forEach((entry) => audit.appendChild(historyLine(entry)));
}

// ---------------------------------------------------------------- routing
async function askReveal() {
  if (state.reveal) return true;
  const ok = await confirmDialog({
    title: "Reveal flagged memories?", ok: "Reveal",
    text: "These memories read like prompt injection and are withheld from every prompt. Their text is shown here as plain text, for you to judge.",
  });
  if (!ok) { $("reveal").checked = false; return false; }
  state.reveal = true;
  $("reveal").checked = true;
  return true;
}

function show(view) {
  for (const section of document.querySelectorAll(".view")) section.classList.toggle("current", section.id === "view-" + view);
  for (const link of document.querySelectorAll("#nav a")) link.classList.toggle("current", link.dataset.view === view);
}

async function route() {
  const hash = location.hash.replace(/^#\/?/, "") || "search";
  const [path, query] = hash.split("?");
  const parts = path.split("/").map(decodeURIComponent);
  const params = new URLSearchParams(query || "");
  const view = parts[0];
  try {
    if (view === "memory") { show("memory"); await showMemory(parts[1]); }
    else if (view === "graph") { show("graph"); await showGraph(parts[1], params.get("depth")); }
    else if (view === "timeline") { show("timeline"); await showTimeline(); }
    else if (view === "pinned") { show("pinned"); await showPinned(); }
    else if (view === "health") { show("health"); await showHealth(); }
    else { show("search"); await showSearch(params); }
    document.body.dataset.ready = view;
  } catch (error) {
    toast(error.message, true);
  }
}

async function start() {
  try { state.session = await api("/api/session"); } catch (error) {
    document.body.textContent = "Refused: " + error.message;
    return;
  }
  const s = state.session;
  $("soul-file").textContent = s.soul_file;
  $("mode").textContent = s.allow_edits ? "edits allowed" : "read-only";
  $("mode").className = s.allow_edits ? "edits" : "";
  s.kinds.forEach((k) => $("f-kind").appendChild(el("option", { value: k }, k)));
  s.scopes.forEach((k) => $("f-scope").appendChild(el("option", { value: k }, k)));
  s.statuses.filter((k) => k !== "active").forEach((k) => $("f-status").appendChild(el("option", { value: k }, k)));
  $("search-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const params = new URLSearchParams();
    for (const [key, value] of Object.entries(searchParams())) if (value) params.set(key, value);
    const next = "#/search?" + params.toString();
    if (location.hash === next) route(); else location.hash = next;
  });
  $("graph-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const next = "#/graph/" + encodeURIComponent($("graph-id").value.trim()) + "?depth=" + $("graph-depth").value;
    if (location.hash === next) route(); else location.hash = next;
  });
  $("timeline-by").addEventListener("change", () => showTimeline().catch((e) => toast(e.message, true)));
  $("timeline-all").addEventListener("change", () => showTimeline().catch((e) => toast(e.message, true)));
  $("pinned-go").addEventListener("click", () => showPinned().catch((e) => toast(e.message, true)));
  $("reveal").addEventListener("change", async () => {
    if ($("reveal").checked) { if (await askReveal()) route(); } else { state.reveal = false; route(); }
  });
  window.addEventListener("hashchange", route);
  await route();
}

start();
