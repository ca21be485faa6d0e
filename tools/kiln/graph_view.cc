// Graphviz and interactive HTML views of the main graph. The HTML embeds the graph as JSON and
// lays it out in the page (Sugiyama style: longest-path layers, dummy nodes on long edges,
// barycenter ordering sweeps, then x placement by predecessor/successor averages).
#include "graph_view.h"

#include <nlohmann/json.hpp>
#include <sstream>

#include "ir/text.h"
#include "ops/registry.h"

namespace kiln::cli {
namespace {

std::string join_numbers(const auto& xs) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < xs.size(); ++i) os << (i ? ", " : "") << xs[i];
  os << "]";
  return os.str();
}

std::string attr_text(const Attribute& a) {
  using K = Attribute::Kind;
  switch (a.kind) {
    case K::kInt:
      return std::to_string(a.i);
    case K::kFloat: {
      std::ostringstream os;
      os << a.f;
      return os.str();
    }
    case K::kString:
      return "\"" + a.s + "\"";
    case K::kInts:
      return join_numbers(a.ints);
    case K::kFloats:
      return join_numbers(a.floats);
    case K::kStrings: {
      std::string s = "[";
      for (size_t i = 0; i < a.strings.size(); ++i) s += (i ? ", \"" : "\"") + a.strings[i] + "\"";
      return s + "]";
    }
    case K::kTensor:
      return "tensor " + std::string(dtype_name(a.t.dtype())) + dims_to_string(a.t.dims());
    case K::kGraph:
      return "graph @" + (a.g ? a.g->name : std::string("?"));
    case K::kTensors:
      return std::to_string(a.tensors.size()) + " tensors";
    case K::kGraphs:
      return std::to_string(a.graphs.size()) + " graphs";
    case K::kType:
      return print_type(a.tp);
  }
  return "?";
}

int64_t group_of(const Node& n) {
  const Attribute* a = n.attr("kiln.group");
  return a && a->kind == Attribute::Kind::kInt ? a->i : -1;
}

std::string pattern_of(const Model& m, const Node& n) {
  const OpSchema* s = OpRegistry::global().find(n.domain, n.op_type, m.opset(n.domain));
  return s ? std::string(pattern_kind_name(s->pattern)) : "unknown";
}

std::string dot_quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

nlohmann::json graph_json(const Model& m, const MemoryInfo& mem) {
  const Graph& g = *m.graph;
  std::unordered_map<const Value*, int> producer;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (const Value* v : g.nodes[i]->outputs)
      if (v) producer[v] = static_cast<int>(i);
  std::unordered_map<const Value*, int> input_index;
  nlohmann::json inputs = nlohmann::json::array(), outputs = nlohmann::json::array();
  for (const Value* v : g.inputs) {
    input_index[v] = static_cast<int>(inputs.size());
    inputs.push_back({{"name", v->name}, {"type", print_type(v->type)}});
  }
  for (const Value* v : g.outputs) {
    auto it = producer.find(v);
    auto in = input_index.find(v);
    outputs.push_back({{"name", v->name},
                       {"type", print_type(v->type)},
                       {"src", it == producer.end() ? -1 : it->second},
                       {"input", in == input_index.end() ? -1 : in->second}});
  }
  nlohmann::json nodes = nlohmann::json::array();
  for (const auto& n : g.nodes) {
    nlohmann::json ins = nlohmann::json::array(), outs = nlohmann::json::array(),
                   attrs = nlohmann::json::array();
    for (const Value* v : n->inputs) {
      if (!v) {
        ins.push_back({{"name", "_"}, {"type", ""}, {"src", -1}, {"input", -1}});
        continue;
      }
      auto it = producer.find(v);
      auto in = input_index.find(v);
      std::string kind = v->is_constant()
                             ? "const"
                             : (it == producer.end() && in == input_index.end() ? "outer" : "");
      ins.push_back({{"name", v->name},
                     {"type", print_type(v->type)},
                     {"src", it == producer.end() ? -1 : it->second},
                     {"input", in == input_index.end() ? -1 : in->second},
                     {"kind", kind}});
    }
    for (const Value* v : n->outputs)
      outs.push_back({{"name", v ? v->name : "_"}, {"type", v ? print_type(v->type) : ""}});
    for (const auto& [k, a] : n->attrs) attrs.push_back({k, attr_text(a)});
    nodes.push_back({{"op", n->qualified_op()},
                     {"name", n->name},
                     {"group", group_of(*n)},
                     {"pattern", pattern_of(m, *n)},
                     {"attrs", attrs},
                     {"ins", ins},
                     {"outs", outs}});
  }
  nlohmann::json j;
  j["title"] = m.path.empty() ? g.name : m.path;
  j["inputs"] = inputs;
  j["outputs"] = outputs;
  j["nodes"] = nodes;
  j["memory"] = {{"arena_bytes", mem.arena_bytes},
                 {"intermediate_bytes", mem.intermediate_bytes},
                 {"live_bytes_lower_bound", mem.live_bytes_lower_bound},
                 {"dim_bindings", mem.dim_bindings}};
  return j;
}

constexpr const char* kHtmlHead = R"HTML(<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>kiln graph</title>
<style>
html, body { margin: 0; height: 100%; font: 13px system-ui, sans-serif; overflow: hidden; }
#view { position: absolute; left: 0; top: 0; width: calc(100% - 340px); height: 100%; background: #fafafa; cursor: grab; }
#view.dragging { cursor: grabbing; }
#panel { position: absolute; top: 0; right: 0; width: 340px; bottom: 0; overflow: auto; box-sizing: border-box;
  padding: 10px 12px; border-left: 1px solid #ccc; background: #fff; }
#panel h2 { font-size: 15px; margin: 4px 0 8px; word-break: break-all; }
#panel h3 { font-size: 13px; margin: 12px 0 4px; color: #444; }
#panel table { border-collapse: collapse; width: 100%; }
#panel td { vertical-align: top; padding: 1px 4px; font-family: ui-monospace, monospace; font-size: 11px; word-break: break-all; }
#panel td:first-child { color: #666; width: 45%; }
.op rect { stroke: #555; stroke-width: 1; rx: 4; }
.op text, .io text { font-size: 12px; text-anchor: middle; dominant-baseline: central; pointer-events: none; }
.op.selected rect { stroke: #d00; stroke-width: 3; }
.io ellipse { fill: #fff; stroke: #888; }
.edge { fill: none; stroke: #999; stroke-width: 1.2; }
.edge.hl { stroke: #d00; stroke-width: 2; }
.group { fill-opacity: 0.06; stroke-width: 1.5; stroke-dasharray: 5 3; rx: 8; }
.grouplabel { font-size: 10px; }
.grouppart { fill-opacity: 0.1; stroke-width: 1.2; stroke-dasharray: 4 3; rx: 8; }
.grouplink { fill: none; stroke-width: 16; stroke-opacity: 0.12; stroke-linecap: round; }
.legend span { display: inline-block; padding: 1px 5px; margin: 2px; border: 1px solid #888; border-radius: 3px; font-size: 11px; }
.hint { color: #777; font-size: 11px; }
</style></head>
<body>
<svg id="view" xmlns="http://www.w3.org/2000/svg"><defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5"
 markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#999"/></marker></defs>
<g id="viewport"><g id="groups"></g><g id="edges"></g><g id="nodes"></g></g></svg>
<div id="panel"><h2 id="title"></h2><div id="summary"></div><div class="legend" id="legend"></div>
<p class="hint">Drag to pan, wheel to zoom, click a node for details, 0 resets the view.</p><div id="details"></div></div>
<script type="application/json" id="graph-data">
)HTML";

constexpr const char* kHtmlScript = R"HTML(</script>
<script>
"use strict";
window.addEventListener('error', (e) => { document.body.setAttribute('data-error', String(e.message)); });
const SVGNS = 'http://www.w3.org/2000/svg';
const COLORS = { 'elementwise': '#d9f2d9', 'broadcast': '#e6f5c9', 'injective': '#fff2cc', 'reduction': '#fde0c5',
  'out-fusable': '#cfe2ff', 'opaque': '#e0e0e0', 'unknown': '#ffd6d6' };
function el(tag, attrs, parent) {
  const e = document.createElementNS(SVGNS, tag);
  for (const k in attrs) e.setAttribute(k, attrs[k]);
  if (parent) parent.appendChild(e);
  return e;
}
function html(tag, text, parent) {
  const e = document.createElement(tag);
  if (text !== undefined) e.textContent = text;
  if (parent) parent.appendChild(e);
  return e;
}
function fmtBytes(b) {
  if (b >= 1048576) return (b / 1048576).toFixed(1) + ' MiB';
  if (b >= 1024) return (b / 1024).toFixed(1) + ' KiB';
  return b + ' B';
}

function layout(G) {
  // Vertices: graph inputs, op nodes, graph outputs; edges from producers to consumers.
  const V = [], E = [];
  const inV = G.inputs.map((v, i) => { V.push({ kind: 'in', idx: i, label: v.name }); return V.length - 1; });
  const opV = G.nodes.map((n, i) => { V.push({ kind: 'op', idx: i, label: n.op }); return V.length - 1; });
  const outV = G.outputs.map((v, i) => { V.push({ kind: 'out', idx: i, label: v.name }); return V.length - 1; });
  const seen = new Set();
  function addEdge(a, b, value) {
    const key = a + ':' + b;
    if (seen.has(key)) return;
    seen.add(key);
    E.push({ a: a, b: b, value: value });
  }
  G.nodes.forEach((n, i) => n.ins.forEach((v) => {
    if (v.src >= 0) addEdge(opV[v.src], opV[i], v.name);
    else if (v.input >= 0) addEdge(inV[v.input], opV[i], v.name);
  }));
  G.outputs.forEach((v, i) => {
    if (v.src >= 0) addEdge(opV[v.src], outV[i], v.name);
    else if (v.input >= 0) addEdge(inV[v.input], outV[i], v.name);
  });
  for (const v of V) {
    v.w = v.kind === 'op' ? Math.max(64, 7.2 * v.label.length + 18) : Math.max(50, 6.5 * v.label.length + 20);
    v.h = v.kind === 'op' ? 28 : 24;
    v.preds = []; v.succs = []; v.layer = 0;
  }
  for (const e of E) { V[e.a].succs.push(e.b); V[e.b].preds.push(e.a); }
  // Longest-path layers (vertices are in topological order: inputs, nodes, outputs).
  for (const v of V) for (const p of v.preds) v.layer = Math.max(v.layer, V[p].layer + 1);
  // Dummy vertices on edges that span several layers.
  const L = [];
  const place = (id) => { const l = V[id].layer; (L[l] = L[l] || []).push(id); };
  V.forEach((v, id) => place(id));
  for (const e of E) {
    e.path = [e.a];
    let prev = e.a;
    for (let l = V[e.a].layer + 1; l < V[e.b].layer; ++l) {
      const d = V.length;
      V.push({ kind: 'dummy', w: 12, h: 1, layer: l, preds: [prev], succs: [] });
      V[prev].succs.push(d);
      place(d);
      e.path.push(d);
      prev = d;
    }
    if (prev !== e.a) { V[prev].succs.push(e.b); V[e.b].preds.push(prev); }
    e.path.push(e.b);
  }
  for (let l = 0; l < L.length; ++l) L[l] = L[l] || [];
  // Barycenter ordering sweeps; the adjacency used for ordering includes the dummy chains.
  const adjDown = (id) => V[id].preds.filter((p) => V[p].layer === V[id].layer - 1);
  const adjUp = (id) => V[id].succs.filter((s) => V[s].layer === V[id].layer + 1);
  const setPos = () => L.forEach((layer) => layer.forEach((id, k) => { V[id].pos = k; }));
  setPos();
  for (let it = 0; it < 8; ++it) {
    const down = it % 2 === 0;
    const order = down ? L.map((_, i) => i) : L.map((_, i) => L.length - 1 - i);
    for (const l of order) {
      const bc = (id) => {
        const adj = down ? adjDown(id) : adjUp(id);
        return adj.length ? adj.reduce((s, a) => s + V[a].pos, 0) / adj.length : V[id].pos;
      };
      const keyed = L[l].map((id) => [bc(id), V[id].pos, id]);
      keyed.sort((x, y) => x[0] - y[0] || x[1] - y[1]);
      L[l] = keyed.map((k) => k[2]);
      L[l].forEach((id, k) => { V[id].pos = k; });
    }
  }
  // x placement: pack each layer, then pull vertices toward their neighbours' average.
  const GAP = 24;
  for (const layer of L) {
    let x = 0;
    for (const id of layer) { V[id].x = x + V[id].w / 2; x += V[id].w + GAP; }
  }
  for (let it = 0; it < 6; ++it) {
    const down = it % 2 === 0;
    const order = down ? L.map((_, i) => i) : L.map((_, i) => L.length - 1 - i);
    for (const l of order) {
      const layer = L[l];
      if (!layer.length) continue;
      const want = layer.map((id) => {
        const adj = down ? adjDown(id) : adjUp(id);
        return adj.length ? adj.reduce((s, a) => s + V[a].x, 0) / adj.length : V[id].x;
      });
      const xs = [];
      for (let k = 0; k < layer.length; ++k) {
        const min = k ? xs[k - 1] + V[layer[k - 1]].w / 2 + GAP + V[layer[k]].w / 2 : -Infinity;
        xs.push(Math.max(want[k], min));
      }
      let shift = 0;
      for (let k = 0; k < layer.length; ++k) shift += want[k] - xs[k];
      shift /= layer.length;
      layer.forEach((id, k) => { V[id].x = xs[k] + shift; });
    }
  }
  let minX = Infinity, maxX = -Infinity;
  for (const v of V) { minX = Math.min(minX, v.x - v.w / 2); maxX = Math.max(maxX, v.x + v.w / 2); }
  const LAYER_H = 64;
  for (const v of V) { v.x -= minX - 20; v.y = 30 + v.layer * LAYER_H; }
  return { V: V, E: E, opV: opV, width: maxX - minX + 40, height: 60 + L.length * LAYER_H };
}

function render(G) {
  const lay = layout(G);
  const V = lay.V;
  const gNodes = document.getElementById('nodes'), gEdges = document.getElementById('edges');
  const gGroups = document.getElementById('groups');
  const edgeEls = [];
  for (const e of lay.E) {
    const pts = e.path.map((id) => V[id]);
    let d = 'M' + pts[0].x + ',' + (pts[0].y + pts[0].h / 2);
    for (let k = 1; k < pts.length; ++k) {
      const p = pts[k - 1], q = pts[k];
      const y0 = p.y + p.h / 2, y1 = q.y - q.h / 2, dy = (y1 - y0) / 2;
      d += ' C' + p.x + ',' + (y0 + dy) + ' ' + q.x + ',' + (y1 - dy) + ' ' + q.x + ',' + y1;
      if (k < pts.length - 1) d += ' L' + q.x + ',' + (q.y + q.h / 2);
    }
    const path = el('path', { d: d, class: 'edge', 'marker-end': 'url(#arrow)' }, gEdges);
    el('title', {}, path).textContent = e.value;
    edgeEls.push({ e: e, el: path });
  }
  // Fused groups of two or more nodes: a box around them, or, when the box would take in other
  // nodes too, a halo around each member joined along the group's own edges.
  const groups = new Map();
  G.nodes.forEach((n, i) => {
    if (n.group < 0) return;
    if (!groups.has(n.group)) groups.set(n.group, []);
    groups.get(n.group).push(lay.opV[i]);
  });
  for (const [gid, ids] of groups) {
    if (ids.length < 2) continue;
    const members = ids.map((id) => V[id]);
    const x0 = Math.min(...members.map((v) => v.x - v.w / 2)) - 8, x1 = Math.max(...members.map((v) => v.x + v.w / 2)) + 8;
    const y0 = Math.min(...members.map((v) => v.y - v.h / 2)) - 12, y1 = Math.max(...members.map((v) => v.y + v.h / 2)) + 8;
    const color = 'hsl(' + ((gid * 67) % 360) + ',70%,40%)';
    const inside = new Set(ids);
    const intrudes = V.some((v, id) => v.kind !== 'dummy' && !inside.has(id) && v.x + v.w / 2 > x0 && v.x - v.w / 2 < x1 &&
                                        v.y + v.h / 2 > y0 && v.y - v.h / 2 < y1);
    if (!intrudes) {
      el('rect', { x: x0, y: y0, width: x1 - x0, height: y1 - y0, class: 'group', fill: color, stroke: color,
                   'data-group': gid }, gGroups);
      el('text', { x: x0 + 4, y: y0 + 9, class: 'grouplabel', fill: color }, gGroups).textContent = 'group ' + gid;
      continue;
    }
    const blob = el('g', { class: 'groupblob', 'data-group': gid }, gGroups);
    for (const x of edgeEls)
      if (inside.has(x.e.a) && inside.has(x.e.b))
        el('path', { d: x.el.getAttribute('d'), class: 'grouplink', stroke: color }, blob);
    for (const v of members)
      el('rect', { x: v.x - v.w / 2 - 6, y: v.y - v.h / 2 - 6, width: v.w + 12, height: v.h + 12, class: 'grouppart',
                   fill: color, stroke: color }, blob);
    const top = members.reduce((a, b) => (b.y < a.y || (b.y === a.y && b.x < a.x) ? b : a));
    el('text', { x: top.x - top.w / 2 - 4, y: top.y - top.h / 2 - 9, class: 'grouplabel', fill: color }, blob).textContent =
      'group ' + gid;
  }
  let selected = null;
  V.forEach((v) => {
    if (v.kind === 'dummy') return;
    if (v.kind === 'op') {
      const n = G.nodes[v.idx];
      const g = el('g', { class: 'op', transform: 'translate(' + v.x + ',' + v.y + ')', 'data-index': v.idx }, gNodes);
      el('rect', { x: -v.w / 2, y: -v.h / 2, width: v.w, height: v.h, fill: COLORS[n.pattern] || '#fff' }, g);
      el('text', {}, g).textContent = n.op;
      g.addEventListener('click', () => {
        if (view.moved) return;
        if (selected) selected.classList.remove('selected');
        selected = g;
        g.classList.add('selected');
        for (const x of edgeEls) x.el.classList.toggle('hl', x.e.a === lay.opV[v.idx] || x.e.b === lay.opV[v.idx]);
        showNode(G, v.idx);
      });
    } else {
      const g = el('g', { class: 'io', transform: 'translate(' + v.x + ',' + v.y + ')' }, gNodes);
      el('ellipse', { rx: v.w / 2, ry: v.h / 2 }, g);
      el('text', {}, g).textContent = v.label;
      const info = v.kind === 'in' ? G.inputs[v.idx] : G.outputs[v.idx];
      el('title', {}, g).textContent = (v.kind === 'in' ? 'input ' : 'output ') + info.name + ': ' + info.type;
    }
  });
  return lay;
}

function showNode(G, i) {
  const n = G.nodes[i];
  const box = document.getElementById('details');
  box.textContent = '';
  html('h2', n.op + (n.name ? '  #' + n.name : ''), box);
  const t = html('table', undefined, box);
  const row = (k, v, table) => { const r = html('tr', undefined, table); html('td', k, r); html('td', v, r); };
  row('node', String(i), t);
  row('pattern', n.pattern, t);
  row('group', n.group >= 0 ? String(n.group) : '-', t);
  html('h3', 'attributes', box);
  const ta = html('table', undefined, box);
  if (!n.attrs.length) row('', '(none)', ta);
  for (const [k, v] of n.attrs) row(k, v, ta);
  html('h3', 'inputs', box);
  const ti = html('table', undefined, box);
  for (const v of n.ins) row(v.name + (v.kind ? ' (' + v.kind + ')' : ''), v.type, ti);
  html('h3', 'outputs', box);
  const to = html('table', undefined, box);
  for (const v of n.outs) row(v.name, v.type, to);
}

const view = { s: 1, tx: 20, ty: 10, moved: false };
function applyView() {
  document.getElementById('viewport').setAttribute('transform',
    'translate(' + view.tx + ',' + view.ty + ') scale(' + view.s + ')');
}

function main() {
  const G = JSON.parse(document.getElementById('graph-data').textContent);
  document.getElementById('title').textContent = G.title;
  const groupSizes = new Map();
  for (const n of G.nodes) if (n.group >= 0) groupSizes.set(n.group, (groupSizes.get(n.group) || 0) + 1);
  const fused = [...groupSizes.values()].filter((k) => k > 1).length;
  const sum = document.getElementById('summary');
  const m = G.memory;
  const bindings = Object.entries(m.dim_bindings).map(([k, v]) => k + '=' + v).join(', ');
  sum.textContent = G.nodes.length + ' nodes in ' + groupSizes.size + ' groups (' + fused + ' of several nodes, outlined); arena ' + fmtBytes(m.arena_bytes) +
    ' (live lower bound ' + fmtBytes(m.live_bytes_lower_bound) + ', all intermediates ' +
    fmtBytes(m.intermediate_bytes) + ')' + (bindings ? '; dims bound: ' + bindings : '');
  const legend = document.getElementById('legend');
  for (const k in COLORS) { const s = html('span', k, legend); s.style.background = COLORS[k]; }
  const lay = render(G);
  const svg = document.getElementById('view');
  const fit = () => {
    const W = svg.clientWidth || 800;
    view.s = Math.min(1, (W - 40) / Math.max(1, lay.width));
    view.tx = (W - lay.width * view.s) / 2;
    view.ty = 10;
    applyView();
  };
  fit();
  let drag = null;
  svg.addEventListener('mousedown', (e) => { drag = { x: e.clientX, y: e.clientY, tx: view.tx, ty: view.ty }; view.moved = false; });
  window.addEventListener('mousemove', (e) => {
    if (!drag) return;
    const dx = e.clientX - drag.x, dy = e.clientY - drag.y;
    if (Math.abs(dx) + Math.abs(dy) > 3) { view.moved = true; svg.classList.add('dragging'); }
    view.tx = drag.tx + dx; view.ty = drag.ty + dy;
    applyView();
  });
  window.addEventListener('mouseup', () => { drag = null; svg.classList.remove('dragging'); });
  svg.addEventListener('wheel', (e) => {
    e.preventDefault();
    const r = svg.getBoundingClientRect();
    const px = e.clientX - r.left, py = e.clientY - r.top;
    const f = Math.exp(-e.deltaY * 0.0015);
    const s = Math.min(8, Math.max(0.02, view.s * f));
    view.tx = px - (px - view.tx) * (s / view.s);
    view.ty = py - (py - view.ty) * (s / view.s);
    view.s = s;
    applyView();
  }, { passive: false });
  window.addEventListener('keydown', (e) => { if (e.key === '0') fit(); });
  // file.html#select=K opens node K's details, as a click would (used by the tests).
  const sel = /select=(\d+)/.exec(location.hash);
  if (sel) {
    const g = document.querySelector('#nodes .op[data-index="' + sel[1] + '"]');
    if (g) g.dispatchEvent(new MouseEvent('click'));
  }
  document.body.setAttribute('data-node-count', String(G.nodes.length));
  document.body.setAttribute('data-rendered-nodes', String(document.querySelectorAll('#nodes .op').length));
  document.body.setAttribute('data-ready', '1');
}
try { main(); } catch (e) { document.body.setAttribute('data-error', String(e && e.stack || e)); }
</script>
</body></html>
)HTML";

}  // namespace

void write_dot(const Model& m, std::ostream& out) {
  const Graph& g = *m.graph;
  std::unordered_map<const Value*, std::string> src;
  out << "digraph " << dot_quote(g.name)
      << " {\n  rankdir=TB;\n  node [shape=box, style=\"rounded,filled\", "
      << "fillcolor=\"#eeeeee\", fontname=\"Helvetica\", fontsize=11];\n  edge [fontsize=9, "
         "color=\"#777777\"];\n";
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    const Value* v = g.inputs[i];
    std::string id = "in" + std::to_string(i);
    src[v] = id;
    out << "  " << id << " [shape=ellipse, fillcolor=white, label="
        << dot_quote(v->name + "\n" + print_type(v->type)) << "];\n";
  }
  std::map<int64_t, std::vector<size_t>> groups;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = *g.nodes[i];
    for (const Value* v : n.outputs)
      if (v) src[v] = "n" + std::to_string(i);
    groups[group_of(n)].push_back(i);
  }
  auto node_line = [&](size_t i, const std::string& indent) {
    const Node& n = *g.nodes[i];
    out << indent << "n" << i
        << " [label=" << dot_quote(n.qualified_op() + (n.name.empty() ? "" : "\n" + n.name))
        << "];\n";
  };
  for (const auto& [gid, members] : groups) {
    if (gid < 0 || members.size() < 2) {
      for (size_t i : members) node_line(i, "  ");
      continue;
    }
    out << "  subgraph cluster_" << gid << " {\n    label=\"group " << gid
        << "\"; style=dashed; color=\"#3366cc\";\n";
    for (size_t i : members) node_line(i, "    ");
    out << "  }\n";
  }
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (const Value* v : g.nodes[i]->inputs) {
      if (!v) continue;
      auto it = src.find(v);
      if (it == src.end()) continue;  // constants and captures
      out << "  " << it->second << " -> n" << i << " [label=" << dot_quote(print_type(v->type))
          << "];\n";
    }
  for (size_t i = 0; i < g.outputs.size(); ++i) {
    const Value* v = g.outputs[i];
    out << "  out" << i << " [shape=ellipse, fillcolor=white, label="
        << dot_quote(v->name + "\n" + print_type(v->type)) << "];\n";
    auto it = src.find(v);
    if (it != src.end()) out << "  " << it->second << " -> out" << i << ";\n";
  }
  out << "}\n";
}

void write_html(const Model& m, const MemoryInfo& mem, std::ostream& out) {
  std::string data =
      graph_json(m, mem).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  // Keep the JSON from closing the script element early.
  std::string safe;
  safe.reserve(data.size());
  for (size_t i = 0; i < data.size(); ++i) {
    if (data[i] == '<' && i + 1 < data.size() && data[i + 1] == '/') {
      safe += "<\\/";
      ++i;
    } else {
      safe += data[i];
    }
  }
  out << kHtmlHead << safe << "\n" << kHtmlScript;
}

}  // namespace kiln::cli
