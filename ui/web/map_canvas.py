"""The Papers tab's map widget: a ``gr.HTML`` whose template is a canvas and whose script draws the papers on it,
one dot per paper coloured by topic, a tooltip on hover, a legend that highlights a topic (and sends ``topic:N`` as a
``select`` event: the topic filter follows), and a click that sends the paper's id as a ``select`` event
(``gr.SelectData.value``).

Why not Gradio's ``gr.ScatterPlot``: it draws with Vega-Lite into SVG, one DOM node per point, and SciFact's
5,183 points took ~3 s to draw on top of the page's load (bench/map_render.py); its selection is a brush over
x, not a click on a point. A canvas draws them in milliseconds. The data arrives as JSON text (``ui.web.papers_map.
map_points``): positions on a whole-number grid, rows grouped by topic; the papers' ids, titles and hover texts are
asked of the server in blocks as the mouse reaches them (``server.map_details``, a ``server_functions`` entry of the
``gr.HTML``: ``papers_map.MapPoints.details``). Corpus text is only ever set as ``textContent``.
"""

from __future__ import annotations

from ui.web.papers_map import DETAIL_ROWS, TOPIC_PREFIX

MAP_ELEMENT_ID = "pc-map"
TOPIC_EVENT = "pc-map-topic"  # dispatched on the document to highlight a topic on the map
DETAILS_FUNCTION = "map_details"  # the name of the server function the script asks for hover texts and ids

# What the template renders: the canvas is (re)drawn by MAP_SCRIPT; ``data-points`` says how many are drawn.
MAP_TEMPLATE = (
    '<div class="pc-map-head">Map of the papers, coloured by topic (similar abstracts lie close): hover for a '
    "paper's title, click a point to open it</div>"
    '<div class="pc-map-wrap"><canvas class="pc-map-canvas" data-points="0" role="img" '
    'aria-label="map of the papers"></canvas><div class="pc-map-tip" hidden></div>'
    '<div class="pc-map-note">Loading the map…</div></div><div class="pc-map-legend"></div>'
)

MAP_CSS = """
#pc-map .pc-map-head { font-size: 0.85rem; color: var(--body-text-color-subdued); margin-bottom: 0.3rem; }
#pc-map .pc-map-wrap { position: relative; }
#pc-map .pc-map-canvas { display: block; width: 100%; height: 460px; cursor: crosshair;
  border: 1px solid var(--border-color-primary); border-radius: 6px; background: var(--background-fill-primary); }
#pc-map .pc-map-note { position: absolute; top: 45%; width: 100%; text-align: center;
  color: var(--body-text-color-subdued); pointer-events: none; }
#pc-map .pc-map-tip { position: absolute; z-index: 5; max-width: 340px; padding: 0.3rem 0.45rem; font-size: 0.8rem;
  pointer-events: none; background: var(--background-fill-primary); color: var(--body-text-color);
  border: 1px solid var(--border-color-primary); border-radius: 4px; box-shadow: 0 2px 6px rgba(0, 0, 0, 0.15); }
#pc-map .pc-map-tip b { display: block; margin-bottom: 0.15rem; }
#pc-map .pc-map-legend { display: flex; flex-wrap: wrap; gap: 0.1rem 0.7rem; max-height: 7.5rem; overflow-y: auto;
  margin-top: 0.35rem; font-size: 0.78rem; }
#pc-map .pc-map-legend [role=button] { cursor: pointer; color: var(--body-text-color); }
#pc-map .pc-map-legend [role=button].pc-dim { opacity: 0.4; }
#pc-map .pc-map-swatch { display: inline-block; width: 0.65rem; height: 0.65rem; border-radius: 50%;
  margin-right: 0.25rem; vertical-align: middle; }
"""

# Runs once when the component mounts (Gradio 6 ``js_on_load``: ``element``, ``props``, ``trigger``, ``watch``).
MAP_SCRIPT = r"""
const PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
  "#bcbd22", "#17becf", "#aec7e8", "#ffbb78", "#98df8a", "#ff9896", "#c5b0d5", "#c49c94", "#f7b6d2", "#c7c7c7",
  "#dbdb8d", "#9edae5"];
const NEAR_PX = 9;
const DETAIL_ROWS = __DETAIL_ROWS__, DETAILS = "__DETAILS__";  // papers_map.DETAIL_ROWS, the server function's name
const TOPIC_PREFIX = "__TOPIC_PREFIX__", TOPIC_EVENT = "__TOPIC_EVENT__";  // papers_map.TOPIC_PREFIX, TOPIC_EVENT
let screenX = new Float32Array(0), screenY = new Float32Array(0), picked = -1, focus = 0, legendFor = null;
const colour = (number) => PALETTE[(number - 1) % PALETTE.length];
let parsedFrom = null, parsed = null;
function data() {  // the map's JSON text (ui.web.papers_map.map_points), parsed once per value
  if (props.value !== parsedFrom) {
    parsedFrom = props.value;
    try { parsed = typeof parsedFrom === "string" && parsedFrom ? unpack(JSON.parse(parsedFrom)) : null; }
    catch (error) { parsed = null; }
  }
  return parsed;
}
function unpack(d) {  // row i's topic (an index into d.topics) from the topics' row counts: rows come grouped
  if (!d || !Array.isArray(d.x) || !Array.isArray(d.y) || !Array.isArray(d.topics)) return null;
  const t = new Uint16Array(d.x.length);
  let i = 0;
  d.topics.forEach((topic, index) => { for (let k = 0; k < (topic.rows || 0) && i < t.length; k++) t[i++] = index; });
  return { ...d, t, blocks: new Map(), stale: false };
}

// Ids, titles and hover texts come from the server in blocks of DETAIL_ROWS rows, each asked once.
function block(d, b) {
  if (d.stale) return Promise.reject(new Error("the index has changed"));
  if (!d.blocks.has(b)) {
    const asked = Promise.resolve(server[DETAILS]({ version: d.version, start: b * DETAIL_ROWS }))
      .then((got) => {
        if (got && got.stale) d.stale = true;
        if (!got || got.version !== d.version || !Array.isArray(got.id)) throw new Error("no details");
        asked.done = got;
        return got;
      });
    asked.catch(() => { d.blocks.delete(b); });  // asked again at the next hover
    d.blocks.set(b, asked);
  }
  return d.blocks.get(b);
}
function details(d, i) {  // row i's {id, title, about} if its block is here (else null, and it is asked for)
  const asked = block(d, Math.floor(i / DETAIL_ROWS));
  if (!asked.done) return null;
  const k = i - asked.done.start;
  return { id: asked.done.id[k], title: asked.done.title[k], about: asked.done.about[k] };
}

function legend(d) {
  const box = element.querySelector(".pc-map-legend");
  if (!box || legendFor === d) return;
  legendFor = d;
  box.replaceChildren(...d.topics.map((t) => {
    const item = document.createElement("span");  // not a <button>: the theme's button styles would apply
    item.setAttribute("role", "button");
    item.tabIndex = 0;
    const swatch = document.createElement("span");
    swatch.className = "pc-map-swatch";
    swatch.style.background = colour(t.number);
    item.append(swatch, document.createTextNode(`${t.name} (${t.size})`));
    item.dataset.topic = String(t.number);
    item.title = "show this topic's papers (click again: every topic)";
    return item;
  }));
}

function draw() {
  const canvas = element.querySelector(".pc-map-canvas");
  const note = element.querySelector(".pc-map-note");
  const d = data();
  if (!canvas) return;
  if (!d || !d.x.length) {
    canvas.dataset.points = "0";
    if (note) note.textContent = d ? "No papers to map: the index is empty." : "Loading the map…";
    return;
  }
  const width = canvas.clientWidth, height = canvas.clientHeight;
  if (!width || !height) return;  // a hidden tab: drawn when it is shown (the resize observer)
  if (note) note.textContent = "";
  legend(d);
  const ratio = window.devicePixelRatio || 1;
  canvas.width = Math.round(width * ratio);
  canvas.height = Math.round(height * ratio);
  const ctx = canvas.getContext("2d");
  ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
  ctx.clearRect(0, 0, width, height);
  const n = d.x.length, pad = 12;
  let x0 = Infinity, x1 = -Infinity, y0 = Infinity, y1 = -Infinity;
  for (let i = 0; i < n; i++) {
    x0 = Math.min(x0, d.x[i]); x1 = Math.max(x1, d.x[i]); y0 = Math.min(y0, d.y[i]); y1 = Math.max(y1, d.y[i]);
  }
  const kx = (width - 2 * pad) / ((x1 - x0) || 1), ky = (height - 2 * pad) / ((y1 - y0) || 1);
  screenX = new Float32Array(n); screenY = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    screenX[i] = pad + (d.x[i] - x0) * kx;
    screenY[i] = height - pad - (d.y[i] - y0) * ky;
  }
  const radius = n > 2000 ? 2.2 : 4.5;
  // Rows come grouped by topic: one path and one fill per topic. A focused topic is drawn last, on top.
  const order = [...d.topics.keys()].sort((a, b) => (d.topics[a].number === focus) - (d.topics[b].number === focus));
  const starts = [];
  for (let i = 0, t = -1; i < n; i++) if (d.t[i] !== t) { t = d.t[i]; starts.push([t, i]); }
  const ends = new Map(starts.map(([t, i], k) => [t, [i, k + 1 < starts.length ? starts[k + 1][1] : n]]));
  for (const index of order) {
    const range = ends.get(index);
    if (!range) continue;
    const number = d.topics[index].number;
    ctx.globalAlpha = focus && number !== focus ? 0.12 : 0.8;
    ctx.fillStyle = colour(number);
    ctx.beginPath();
    for (let i = range[0]; i < range[1]; i++) {
      ctx.moveTo(screenX[i] + radius, screenY[i]);
      ctx.arc(screenX[i], screenY[i], radius, 0, 2 * Math.PI);
    }
    ctx.fill();
  }
  ctx.globalAlpha = 1;
  if (picked >= 0 && picked < n) {
    ctx.strokeStyle = "#000"; ctx.lineWidth = 2;
    ctx.beginPath(); ctx.arc(screenX[picked], screenY[picked], radius + 4, 0, 2 * Math.PI); ctx.stroke();
  }
  element.querySelectorAll(".pc-map-legend [role=button]").forEach((b) => {
    b.classList.toggle("pc-dim", Boolean(focus) && Number(b.dataset.topic) !== focus);
  });
  canvas.dataset.points = String(n);
}

function nearest(event) {
  const canvas = element.querySelector(".pc-map-canvas");
  const d = data();
  if (!canvas || !d) return -1;
  const box = canvas.getBoundingClientRect();
  const x = event.clientX - box.left, y = event.clientY - box.top;
  let best = -1, bestDistance = NEAR_PX * NEAR_PX;
  for (let i = 0; i < screenX.length; i++) {
    if (focus && d.topics[d.t[i]].number !== focus) continue;
    const dx = screenX[i] - x, dy = screenY[i] - y, distance = dx * dx + dy * dy;
    if (distance <= bestDistance) { best = i; bestDistance = distance; }
  }
  return best;
}

let hovered = -1, mouseX = 0, mouseY = 0;  // the point under the mouse, the mouse in the map's box
function place(box) {
  const wrap = element.querySelector(".pc-map-wrap").getBoundingClientRect();
  box.style.left = `${Math.max(0, Math.min(mouseX + 12, wrap.width - 350))}px`;
  box.style.top = `${mouseY + 14}px`;
}
function tip(i, d) {  // row i's tooltip; its title and first sentence are filled in when their block comes
  const box = element.querySelector(".pc-map-tip");
  if (!box) return;
  hovered = i;
  if (i < 0) { box.hidden = true; return; }
  const row = d.stale ? null : details(d, i);
  const title = document.createElement("b");
  title.textContent = row ? row.title : "…";
  const topic = document.createElement("div");
  topic.textContent = `topic ${d.topics[d.t[i]].name}`;
  const about = d.stale ? "The index has changed since this map was drawn: reload the page." : row ? row.about : "";
  box.replaceChildren(title, document.createTextNode(about), topic);
  place(box);
  box.hidden = false;
  if (!row && !d.stale) {
    const again = () => { if (hovered === i && data() === d) tip(i, d); };
    block(d, Math.floor(i / DETAIL_ROWS)).then(again, () => { if (d.stale) again(); });  // else: at the next point
  }
}

element.addEventListener("mousemove", (event) => {
  if (!event.target.classList.contains("pc-map-canvas")) return;
  const wrap = element.querySelector(".pc-map-wrap").getBoundingClientRect();
  mouseX = event.clientX - wrap.left;
  mouseY = event.clientY - wrap.top;
  const i = nearest(event), box = element.querySelector(".pc-map-tip");
  if (i !== hovered) tip(i, data());
  else if (i >= 0 && box) place(box);  // the same point: the tooltip follows the mouse
});
element.addEventListener("mouseleave", () => {
  const tip = element.querySelector(".pc-map-tip");
  if (tip) tip.hidden = true;
  hovered = -1;
});
element.addEventListener("click", (event) => {
  const button = event.target.closest(".pc-map-legend [role=button]");
  if (button) {
    const number = Number(button.dataset.topic);
    focus = focus === number ? 0 : number;
    draw();
    // The topic filter follows (and with it the list under the map): "topic:0" is every topic.
    trigger("select", { index: -1, value: `${TOPIC_PREFIX}${focus}`, selected: Boolean(focus) });
    return;
  }
  if (!event.target.classList.contains("pc-map-canvas")) return;
  const i = nearest(event);
  if (i < 0) return;
  picked = i;
  draw();
  const d = data();  // the card needs the paper's id: its block is asked for first if it is not here yet
  block(d, Math.floor(i / DETAIL_ROWS)).then(() => {
    if (data() === d && picked === i) trigger("select", { index: i, value: details(d, i).id, selected: true });
  }, () => {});
});
// The topic filter's choice shown on the map (the app dispatches it on the document as the dropdown changes).
document.addEventListener(TOPIC_EVENT, (event) => {
  const number = Number(event.detail) || 0;
  if (number !== focus) { focus = number; draw(); }
});
watch("value", () => { picked = -1; hovered = -1; focus = 0; legendFor = null; draw(); });
new ResizeObserver(() => draw()).observe(element);
draw();
""".replace("__DETAIL_ROWS__", str(DETAIL_ROWS)).replace("__DETAILS__", DETAILS_FUNCTION).replace(
    "__TOPIC_PREFIX__", TOPIC_PREFIX).replace("__TOPIC_EVENT__", TOPIC_EVENT)

# The topic dropdown's change, run in the page: the map highlights that topic as its legend would.
SHOW_TOPIC_JS = f"""(topic) => {{
  document.dispatchEvent(new CustomEvent("{TOPIC_EVENT}", {{ detail: Number(topic) || 0 }}));
  return topic;
}}"""
