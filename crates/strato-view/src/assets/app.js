// strato view: the timeline page. It asks the server what is visible (/api/range, level of
// detail: exact events and per-pixel summaries), never the whole trace, and draws it on one
// canvas. Times are ns since the server's origin (see /api/lanes). Text from the trace is put
// in the page with textContent only.
'use strict';

// Each level's colour comes from /api/lanes (`level_colours`): the report's, one palette.
const GUTTER = 260, RULER = 26, ROW = 16, COUNTER_H = 36, GROUP_H = 18;

const S = {
  lanes: [], laneById: new Map(), levels: [], levelColours: [], ranks: [], events: 0,
  start: 0, end: 1, t0: 0, t1: 1, scrollY: 0,
  collapsed: new Set(), layout: [], contentH: 0,
  data: null, seq: 0, pending: null, answerMs: 0,
  selected: null, details: null, range: null, drag: null, mouseX: null,
  steps: [], path: null, marks: [], colls: null, stragglers: null,
};

const canvas = document.getElementById('canvas');
const ctx = canvas.getContext('2d');
const statusEl = document.getElementById('status');
const detailsEl = document.getElementById('details');
const searchEl = document.getElementById('search');

function fmtNs(ns) {
  const a = Math.abs(ns);
  if (a >= 1e9) return (ns / 1e9).toFixed(3) + ' s';
  if (a >= 1e6) return (ns / 1e6).toFixed(3) + ' ms';
  if (a >= 1e3) return (ns / 1e3).toFixed(3) + ' us';
  return Math.round(ns) + ' ns';
}

function groupKey(l) {
  const rank = l.rank === null || l.rank === undefined ? 'source ' + l.rank_index : 'rank ' + l.rank;
  // A baseline's lanes (`--baseline`) sit under the run's of the same rank.
  return (l.baseline ? 'baseline \u00b7 ' : '') + rank + ' \u00b7 ' + l.group;
}

function laneHeight(l) {
  return l.kind === 'counter' ? COUNTER_H : Math.max(1, l.rows) * ROW + 4;
}

// The vertical layout: group headers and the lanes of unfolded groups.
function layOut() {
  const items = [];
  let y = 0, lastGroup = null;
  for (const l of S.lanes) {
    const g = groupKey(l);
    if (g !== lastGroup) {
      const count = S.lanes.filter((x) => groupKey(x) === g).length;
      items.push({ kind: 'group', key: g, y, h: GROUP_H, count, rank: l.baseline ? null : (l.rank ?? l.rank_index) });
      y += GROUP_H;
      lastGroup = g;
    }
    if (S.collapsed.has(g)) continue;
    const h = laneHeight(l);
    items.push({ kind: 'lane', lane: l, y, h });
    y += h;
  }
  S.layout = items;
  S.contentH = y;
}

function plotWidth() { return Math.max(1, canvas.width / devicePixelRatio - GUTTER); }
function plotHeight() { return Math.max(1, canvas.height / devicePixelRatio - RULER); }
function xOf(t) { return GUTTER + (t - S.t0) / (S.t1 - S.t0) * plotWidth(); }
function tOf(x) { return S.t0 + (x - GUTTER) / plotWidth() * (S.t1 - S.t0); }

function visibleLanes() {
  const top = S.scrollY, bottom = S.scrollY + plotHeight();
  return S.layout.filter((it) => it.kind === 'lane' && it.y + it.h > top && it.y < bottom);
}

function resize() {
  const r = canvas.getBoundingClientRect();
  canvas.width = Math.max(1, Math.floor(r.width * devicePixelRatio));
  canvas.height = Math.max(1, Math.floor(r.height * devicePixelRatio));
  ctx.setTransform(devicePixelRatio, 0, 0, devicePixelRatio, 0, 0);
  request();
  draw();
}

// The token of the URL strato view printed; the page's answer also set it as a cookie.
const TOKEN = new URLSearchParams(location.search).get('token');

async function getJson(url) {
  const withToken = TOKEN ? url + (url.includes('?') ? '&' : '?') + 'token=' + encodeURIComponent(TOKEN) : url;
  const res = await fetch(withToken, { credentials: 'same-origin' });
  const body = await res.json();
  if (!res.ok) throw new Error(body.error || res.statusText);
  return body;
}

// Asks for the visible window, at most one request in flight per change (the newest wins).
function request() {
  clearTimeout(S.pending);
  S.pending = setTimeout(async () => {
    const lanes = visibleLanes().map((it) => it.lane.id);
    const seq = ++S.seq;
    if (lanes.length === 0) { S.data = null; draw(); return; }
    const t0 = Math.floor(S.t0), t1 = Math.max(Math.ceil(S.t1), t0 + 1);
    const px = Math.min(16384, Math.max(1, Math.round(plotWidth())));
    const began = performance.now();
    try {
      const data = await getJson(`api/range?t0=${t0}&t1=${t1}&px=${px}&lanes=${lanes.join(',')}`);
      if (seq !== S.seq) return;
      S.answerMs = performance.now() - began;
      S.data = data;
      S.data.byLane = new Map(data.lanes.map((l) => [l.id, l]));
      if (document.getElementById('coll').checked) {
        const c = await getJson(`api/collectives?t0=${t0}&t1=${t1}`);
        if (seq !== S.seq) return;
        S.colls = c;
      }
      draw();
      document.body.dataset.ready = '1';
    } catch (e) {
      statusEl.textContent = 'error: ' + e.message;
    }
  }, 30);
  saveHash();
}

function niceStep(span, px) {
  const raw = span / Math.max(1, px / 110);
  const p = Math.pow(10, Math.floor(Math.log10(raw)));
  for (const m of [1, 2, 5, 10]) if (m * p >= raw) return m * p;
  return 10 * p;
}

function drawRuler(w) {
  ctx.fillStyle = '#f3f3f3';
  ctx.fillRect(0, 0, w, RULER);
  ctx.strokeStyle = '#bbb';
  ctx.beginPath(); ctx.moveTo(0, RULER - 0.5); ctx.lineTo(w, RULER - 0.5); ctx.stroke();
  S.steps.forEach((st, i) => {
    const a = Math.min(...st.ranks.map((r) => r.start_ns)), b = Math.max(...st.ranks.map((r) => r.end_ns));
    const x0 = Math.max(GUTTER, xOf(a)), x1 = Math.min(w, xOf(b));
    if (x1 <= x0) return;
    ctx.fillStyle = i % 2 ? '#dfe7f1' : '#ecf1f7';
    ctx.fillRect(x0, 0, x1 - x0, RULER - 1);
    if (x1 - x0 > 40) { ctx.fillStyle = '#456'; ctx.font = '10px system-ui, sans-serif'; ctx.fillText('#' + st.number, x0 + 2, RULER - 1); }
  });
  const step = niceStep(S.t1 - S.t0, plotWidth());
  ctx.fillStyle = '#333';
  ctx.font = '11px system-ui, sans-serif';
  for (let t = Math.ceil(S.t0 / step) * step; t <= S.t1; t += step) {
    const x = xOf(t);
    ctx.fillRect(x, RULER - 7, 1, 7);
    ctx.fillText(fmtNs(t), x + 3, RULER - 10);
  }
  ctx.fillText('window ' + fmtNs(S.t1 - S.t0), 6, RULER - 10);
}

function draw() {
  const w = canvas.width / devicePixelRatio, h = canvas.height / devicePixelRatio;
  ctx.clearRect(0, 0, w, h);
  let exact = 0, summarised = 0;
  ctx.save();
  ctx.beginPath(); ctx.rect(0, RULER, w, h - RULER); ctx.clip();
  const ys = new Map();
  for (const it of S.layout) {
    const y = RULER + it.y - S.scrollY;
    if (y + it.h < RULER || y > h) continue;
    if (it.kind === 'group') {
      ctx.fillStyle = '#e4e8ee';
      ctx.fillRect(0, y, w, it.h);
      ctx.fillStyle = '#222';
      ctx.font = 'bold 12px system-ui, sans-serif';
      const mark = S.collapsed.has(it.key) ? '\u25b8 ' : '\u25be ';
      const label = mark + it.key + ' (' + it.count + ')';
      ctx.fillText(label, 6, y + 13);
      // The job's straggler (advise's finding), on each of its groups.
      if (S.stragglers && S.stragglers.has(it.rank)) {
        const x = 6 + ctx.measureText(label).width + 10;
        ctx.fillStyle = '#EE7733';
        ctx.fillText('\u2691 straggler: ' + S.stragglers.get(it.rank), x, y + 13);
      }
      continue;
    }
    const lane = it.lane;
    ys.set(lane.id, y);
    ctx.fillStyle = '#fafafa';
    ctx.fillRect(0, y, GUTTER, it.h);
    ctx.strokeStyle = '#eee';
    ctx.beginPath(); ctx.moveTo(0, y + it.h - 0.5); ctx.lineTo(w, y + it.h - 0.5); ctx.stroke();
    ctx.fillStyle = '#333';
    ctx.font = '12px system-ui, sans-serif';
    ctx.fillText(lane.name.slice(0, 38), 14, y + 12);
    const d = S.data && S.data.byLane.get(lane.id);
    if (!d) continue;
    const scale = plotWidth() / (S.t1 - S.t0);
    const bw = S.data.bucket_ns * scale;
    for (const row of d.rows) {
      const ry = y + 2 + row.row * ROW;
      for (const [k, count, busy] of row.buckets) {
        const x = xOf(S.data.t0 + k * S.data.bucket_ns);
        const fill = Math.min(1, busy / S.data.bucket_ns);
        ctx.fillStyle = `rgba(70, 90, 120, ${0.25 + 0.75 * fill})`;
        ctx.fillRect(x, ry, Math.max(1, bw), ROW - 2);
        summarised += count;
      }
      for (const ev of row.events) {
        const [id, t0, t1, name, level] = ev;
        const x0 = Math.max(GUTTER, xOf(t0)), x1 = Math.min(w, xOf(t1));
        const ew = Math.max(1, x1 - x0);
        ctx.fillStyle = S.levelColours[level] || '#888';
        ctx.fillRect(x0, ry, ew, ROW - 2);
        if (S.selected === id) {
          ctx.strokeStyle = '#000'; ctx.lineWidth = 2;
          ctx.strokeRect(x0, ry, ew, ROW - 2); ctx.lineWidth = 1;
        }
        if (ew > 40) {
          ctx.fillStyle = '#000';
          ctx.font = '11px system-ui, sans-serif';
          ctx.save(); ctx.beginPath(); ctx.rect(x0, ry, ew, ROW); ctx.clip();
          ctx.fillText(S.data.names[name], x0 + 2, ry + 11);
          ctx.restore();
        }
        exact++;
      }
    }
    if (d.counters) drawCounter(d.counters, y, it.h);
    if (d.instants) drawInstants(d.instants, y);
  }
  // Overlays stay inside the plot (never over the lane names).
  ctx.save();
  ctx.beginPath(); ctx.rect(GUTTER, RULER, w - GUTTER, h - RULER); ctx.clip();
  drawFlows(ys);
  drawPath(ys);
  drawCollectives(ys);
  for (const [a, b] of S.marks) {
    const x0 = Math.max(GUTTER, xOf(a)), x1 = Math.min(w, xOf(b));
    if (x1 < GUTTER || x0 > w) continue;
    ctx.fillStyle = 'rgba(204, 51, 17, 0.12)';
    ctx.fillRect(x0, RULER, Math.max(2, x1 - x0), h - RULER);
  }
  ctx.restore();
  if (S.range) {
    const a = xOf(Math.min(S.range[0], S.range[1])), b = xOf(Math.max(S.range[0], S.range[1]));
    ctx.fillStyle = 'rgba(0, 114, 178, 0.15)';
    ctx.fillRect(a, RULER, b - a, h - RULER);
  }
  ctx.restore();
  // The gutter's edge and the ruler on top.
  ctx.fillStyle = '#ccc';
  ctx.fillRect(GUTTER - 1, RULER, 1, h - RULER);
  drawRuler(w);
  statusEl.textContent = `${S.lanes.length} lanes \u00b7 ${S.events.toLocaleString()} events \u00b7 ` +
    `window ${fmtNs(S.t1 - S.t0)} \u00b7 drawn ${exact.toLocaleString()} exact, ` +
    `${summarised.toLocaleString()} summarised \u00b7 answer ${S.answerMs.toFixed(0)} ms`;
  statusEl.dataset.exact = String(exact);
  statusEl.dataset.summarised = String(summarised);
}

function drawCounter(c, y, h) {
  const pts = c.exact ? c.exact.map(([t, v]) => [t, v, v])
    : c.buckets.map(([k, lo, hi]) => [S.data.t0 + k * S.data.bucket_ns, lo, hi]);
  const vals = pts.flatMap((p) => [p[1], p[2]]).filter((v) => v !== null);
  if (vals.length === 0) return;
  const lo = Math.min(...vals), hi = Math.max(...vals), span = hi - lo || 1;
  const yOf = (v) => y + h - 4 - (v - lo) / span * (h - 8);
  ctx.strokeStyle = '#0072B2';
  ctx.fillStyle = 'rgba(0, 114, 178, 0.25)';
  ctx.beginPath();
  pts.forEach(([t, a, b], i) => {
    if (a === null) return;
    const x = Math.max(GUTTER, xOf(t));
    if (i === 0) ctx.moveTo(x, yOf(b)); else ctx.lineTo(x, yOf(b));
    if (a !== b) ctx.fillRect(x, yOf(b), 1, yOf(a) - yOf(b));
  });
  ctx.stroke();
  ctx.fillStyle = '#333';
  ctx.font = '10px system-ui, sans-serif';
  ctx.fillText(String(hi), GUTTER + 4, y + 10);
}

function drawInstants(c, y) {
  ctx.fillStyle = '#D55E00';
  const at = c.exact ? c.exact.map((e) => e[0]) : c.buckets.map(([k]) => S.data.t0 + k * S.data.bucket_ns);
  for (const t of at) {
    const x = xOf(t);
    if (x < GUTTER) continue;
    ctx.beginPath(); ctx.moveTo(x, y + 2); ctx.lineTo(x - 3, y + 8); ctx.lineTo(x + 3, y + 8); ctx.fill();
  }
}

// The selected event's flows as arrows, where both ends are on screen.
function drawFlows(ys) {
  const d = S.details;
  if (!d) return;
  ctx.strokeStyle = '#CC3311';
  ctx.fillStyle = '#CC3311';
  for (const f of d.flows) {
    if (!f.from || !f.to || !ys.has(f.from.lane) || !ys.has(f.to.lane)) continue;
    const rowY = (end) => ys.get(end.lane) + 2 + (end.event ? end.event.row : 0) * ROW + ROW / 2;
    const x0 = xOf(f.from.ts), y0 = rowY(f.from), x1 = xOf(f.to.ts), y1 = rowY(f.to);
    ctx.beginPath(); ctx.moveTo(x0, y0);
    ctx.bezierCurveTo(x0 + 30, y0, x1 - 30, y1, x1, y1); ctx.stroke();
    ctx.beginPath(); ctx.moveTo(x1, y1); ctx.lineTo(x1 - 7, y1 - 4); ctx.lineTo(x1 - 7, y1 + 4); ctx.fill();
  }
}

// The critical path's events outlined, joined in order of start on each rank.
function drawPath(ys) {
  if (!S.path || !document.getElementById('cp').checked) return;
  ctx.strokeStyle = 'rgba(204, 51, 17, 0.85)';
  ctx.lineWidth = 1;
  let drawn = 0;
  for (const rank of S.path.ranks) {
    // Each event outlined; a line where the path moves to another lane (a launch reaching
    // its kernel, a wait on the device, a collective's peer).
    let last = null;
    for (const ev of rank.events) {
      if (!ys.has(ev.lane)) { last = null; continue; }
      const y = ys.get(ev.lane) + 2 + ev.row * ROW;
      const x0 = xOf(ev.start_ns), x1 = Math.max(x0 + 2, xOf(ev.end_ns));
      ctx.strokeRect(x0, y, x1 - x0, ROW - 2);
      if (last && last.lane !== ev.lane) {
        ctx.beginPath(); ctx.moveTo(last.x, last.y); ctx.lineTo(x0, y + ROW / 2); ctx.stroke();
      }
      last = { lane: ev.lane, x: x1, y: y + ROW / 2 };
      drawn++;
    }
  }
  // Its edges between ranks: from the late peer's kernel (its arrival) to this rank's kernel
  // at the time the last member arrived, dashed, with the wait they stand for.
  // An end may be off screen (ranks far apart): the line goes off the canvas towards it.
  let peers = 0;
  ctx.strokeStyle = '#EE7733';
  ctx.fillStyle = '#EE7733';
  ctx.setLineDash([4, 3]);
  for (const rank of S.path.ranks) {
    for (const p of rank.late_peers || []) {
      if (!p.from || !p.to) continue;
      const fromY = laneY(p.from.lane), toY = laneY(p.to.lane);
      if (fromY === null || toY === null || (!ys.has(p.from.lane) && !ys.has(p.to.lane))) continue;
      const rowY = (e) => laneY(e.lane) + 2 + e.row * ROW + ROW / 2;
      const x0 = xOf(p.from.start_ns), y0 = rowY(p.from), x1 = xOf(p.arrived_ns), y1 = rowY(p.to);
      ctx.beginPath(); ctx.moveTo(x0, y0); ctx.lineTo(x1, y1); ctx.stroke();
      ctx.beginPath(); ctx.moveTo(x1, y1); ctx.lineTo(x1 - 7, y1 - 4); ctx.lineTo(x1 - 7, y1 + 4); ctx.fill();
      ctx.font = '11px system-ui, sans-serif';
      ctx.fillText(`waited ${fmtNs(p.waited_ns)} for rank ${p.peer}`, x1 + 4, y1 + (y0 < y1 ? -ROW / 2 - 2 : ROW));
      peers++;
    }
  }
  ctx.setLineDash([]);
  ctx.lineWidth = 1;
  statusEl.dataset.pathDrawn = String(drawn);
  statusEl.dataset.peerEdges = String(peers);
}

// Collectives: each member kernel's wait for the last rank shaded, the members linked (when
// few enough are on screen to tell apart), the last rank's kernel marked.
function drawCollectives(ys) {
  if (!S.colls || !document.getElementById('coll').checked) return;
  const list = S.colls.collectives;
  let linked = 0;
  for (const c of list) {
    const pts = [];
    for (const m of c.members) {
      if (!ys.has(m.lane)) continue;
      const y = ys.get(m.lane) + 2 + m.row * ROW;
      const x0 = xOf(m.start_ns);
      if (m.wait_ns) {
        ctx.fillStyle = 'rgba(0, 0, 0, 0.35)';
        ctx.fillRect(x0, y, Math.max(1, xOf(m.start_ns + m.wait_ns) - x0), ROW - 2);
      }
      if (c.last !== null && m.rank === c.last) {
        ctx.fillStyle = '#E69F00';
        ctx.beginPath(); ctx.moveTo(x0, y - 1); ctx.lineTo(x0 - 5, y - 8); ctx.lineTo(x0 + 5, y - 8); ctx.fill();
      }
      pts.push([x0, y + ROW / 2]);
    }
    if (list.length <= 300 && pts.length > 1) {
      ctx.strokeStyle = 'rgba(136, 34, 85, 0.7)';
      ctx.beginPath();
      pts.sort((p, q) => p[1] - q[1]).forEach(([x, y], i) => (i ? ctx.lineTo(x, y) : ctx.moveTo(x, y)));
      ctx.stroke();
      linked++;
    }
  }
  statusEl.dataset.collectives = String(list.length);
  statusEl.dataset.linked = String(linked);
}

async function loadPath() {
  const step = document.getElementById('step').value;
  try { S.path = await getJson('api/critical-path?step=' + encodeURIComponent(step)); } catch (e) { statusEl.textContent = 'error: ' + e.message; return; }
  detailsEl.replaceChildren();
  detailsEl.dataset.event = '';
  S.details = null;
  detailsEl.append(el('h2', 'Critical path' + (S.path.step === null ? ' of the whole trace' : ' of ProfilerStep#' + S.path.step), { id: 'path-title' }));
  for (const r of S.path.ranks) {
    detailsEl.append(el('h3', `rank ${r.rank}: ${fmtNs(r.length_ns)}, ${r.events.length} events`));
    const table = el('table');
    for (const [kind, ns] of Object.entries(r.by_kind)) {
      if (!ns) continue;
      const tr = el('tr'); tr.append(el('td', kind), el('td', fmtNs(ns))); table.append(tr);
    }
    detailsEl.append(table);
    for (const p of r.late_peers || []) {
      // Click: the edge and the two kernels on screen.
      const line = el('p', `waited ${fmtNs(p.waited_ns)} for rank ${p.peer} in ${p.collective}`, { class: 'peer' });
      if (p.from && p.to) {
        const t0 = Math.min(p.from.start_ns, p.to.start_ns), t1 = Math.max(p.from.end_ns, p.to.end_ns, p.arrived_ns);
        line.addEventListener('click', () => { scrollToLane(p.to.lane); showRange(t0 - (t1 - t0) / 4, t1 + (t1 - t0) / 4); });
      }
      detailsEl.append(line);
    }
  }
  draw();
}

// The stragglers advise finds (its `stragglers` findings: the rank of each one's step
// evidence), marked on their ranks' group headers.
function markStragglers(findings) {
  S.stragglers = new Map();
  for (const f of findings) {
    if (f.rule !== 'stragglers') continue;
    const step = (f.evidence || []).find((e) => e.kind === 'step');
    if (step) S.stragglers.set(step.rank, f.message.split(';')[0]);
  }
  statusEl.dataset.stragglers = String(S.stragglers.size);
  draw();
}

// With the collectives overlay: advise's answer, asked once (the server keeps it).
async function loadStragglers() {
  if (S.stragglers) return;
  try { markStragglers((await getJson('api/findings')).findings); } catch (e) { statusEl.textContent = 'error: ' + e.message; }
}

async function showFindings() {
  let d;
  try { d = await getJson('api/findings'); } catch (e) { statusEl.textContent = 'error: ' + e.message; return; }
  markStragglers(d.findings);
  S.details = null;
  detailsEl.replaceChildren();
  detailsEl.dataset.event = '';
  detailsEl.append(el('h2', `Findings (${d.findings.length})`, { id: 'findings-title' }));
  const ol = el('ol', null, { id: 'findings-list' });
  for (const f of d.findings) {
    const li = el('li');
    const a = el('a', `${f.severity}: ${f.rule} · ${fmtNs(f.time_ns)} (${Number(f.share_pct).toFixed(1)} %)`);
    a.addEventListener('click', () => {
      const ev = f.evidence || [];
      S.marks = ev.map((e) => [e.start_ns, e.end_ns]);
      if (ev.length) {
        const a0 = Math.min(...ev.map((e) => e.start_ns)), b0 = Math.max(...ev.map((e) => e.end_ns));
        const pad = Math.max((b0 - a0) * 0.1, 1000);
        showRange(a0 - pad, b0 + pad);
      } else draw();
    });
    li.append(a, el('div', f.message));
    if (f.estimated_gain_ns !== null && f.estimated_gain_ns !== undefined) li.append(el('div', 'estimated gain ' + fmtNs(f.estimated_gain_ns)));
    ol.append(li);
  }
  detailsEl.append(ol);
}

// `strato diff`'s numbers, the baseline (A) against this run (B), in the side panel: the
// window and device time, then the operations and kernels that changed most; an operation's
// or a kernel's name searches for it.
async function showDiff() {
  let d;
  try { d = await getJson('api/diff'); } catch (e) { statusEl.textContent = 'error: ' + e.message; return; }
  S.details = null;
  detailsEl.replaceChildren();
  detailsEl.dataset.event = '';
  detailsEl.append(el('h2', `${d.b.label} against the baseline ${d.a.label}`, { id: 'diff-title' }));
  const change = (x) => `${fmtNs(x.a_ns)} \u2192 ${fmtNs(x.b_ns)} (${x.delta_ns >= 0 ? '+' : ''}${fmtNs(x.delta_ns)}${x.delta_pct === null ? '' : ', ' + (x.delta_pct >= 0 ? '+' : '') + x.delta_pct.toFixed(1) + ' %'})`;
  detailsEl.append(el('p', 'window: ' + change(d.window)), el('p', 'device time: ' + change(d.device_time)));
  let rows = 0;
  for (const [title, list, key, total] of [['operations', d.operations, 'operation', d.operations_total], ['kernels', d.kernels, 'name', d.kernels_total]]) {
    const shown = list.slice(0, 40);
    detailsEl.append(el('h3', `${title}: the ${shown.length} of ${total} that changed most`));
    const table = el('table', null, { class: 'diff', id: 'diff-' + title });
    table.append(el('tr')); table.lastChild.append(el('th', 'name'), el('th', 'baseline'), el('th', 'this run'), el('th', 'change'));
    for (const o of shown) {
      const tr = el('tr');
      const name = el('a', o[key] ?? o.operation, { title: 'search for it' });
      name.addEventListener('click', () => { searchEl.value = name.textContent; search('next'); });
      const td = el('td'); td.append(name);
      tr.append(td, el('td', fmtNs(o.a_ns)), el('td', fmtNs(o.b_ns)),
        el('td', `${o.delta_ns >= 0 ? '+' : ''}${fmtNs(o.delta_ns)} (${o.change})`));
      table.append(tr);
      rows += 1;
    }
    detailsEl.append(table);
  }
  detailsEl.dataset.diff = String(rows);
}

function clampView() {
  const full = Math.max(1, S.end - S.start);
  let span = Math.min(Math.max(S.t1 - S.t0, 10), full * 1.2);
  let t0 = Math.min(Math.max(S.t0, S.start - full * 0.1), S.end + full * 0.1 - span);
  S.t0 = t0; S.t1 = t0 + span;
  S.scrollY = Math.max(0, Math.min(S.scrollY, Math.max(0, S.contentH - plotHeight() + ROW)));
}

function zoom(factor, atX) {
  const t = tOf(atX === null || atX === undefined ? GUTTER + plotWidth() / 2 : atX);
  S.t0 = t - (t - S.t0) * factor;
  S.t1 = t + (S.t1 - t) * factor;
  clampView(); request(); draw();
}

function pan(dt) {
  S.t0 += dt; S.t1 += dt;
  clampView(); request(); draw();
}

function showRange(t0, t1) {
  S.t0 = t0; S.t1 = Math.max(t1, t0 + 10);
  clampView(); request(); draw();
}

// The canvas y of a lane's top, on screen or not; null when its group is folded.
function laneY(id) {
  const it = S.layout.find((x) => x.kind !== 'group' && x.lane.id === id);
  return it ? RULER + it.y - S.scrollY : null;
}

// Scrolls so that a lane is in the upper third of the timeline (unless already on screen).
function scrollToLane(id) {
  const it = S.layout.find((x) => x.kind !== 'group' && x.lane.id === id);
  if (!it) return;
  const h = plotHeight();
  if (it.y >= S.scrollY && it.y + it.h <= S.scrollY + h) return;
  S.scrollY = Math.max(0, it.y - h / 3);
}

function laneAt(y) {
  const cy = y - RULER + S.scrollY;
  return S.layout.find((it) => cy >= it.y && cy < it.y + it.h) || null;
}

function eventAt(x, y) {
  const it = laneAt(y);
  if (!it || it.kind !== 'lane' || !S.data) return null;
  const d = S.data.byLane.get(it.lane.id);
  if (!d) return null;
  const row = Math.floor((y - RULER + S.scrollY - it.y - 2) / ROW);
  const t = tOf(x), slack = 2 * (S.t1 - S.t0) / plotWidth();
  for (const r of d.rows) {
    if (r.row !== row) continue;
    for (const ev of r.events) if (ev[1] - slack <= t && t <= ev[2] + slack) return ev[0];
  }
  return null;
}

function el(tag, text, attrs) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  if (attrs) for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  return e;
}

function link(ev) {
  const a = el('a', ev.name);
  a.addEventListener('click', () => select(ev.id, true));
  return a;
}

function laneName(id) {
  const l = S.laneById.get(id);
  return l ? groupKey(l) + ' \u00b7 ' + l.name : 'lane ' + id;
}

async function select(id, reveal) {
  S.selected = id;
  let d;
  try { d = await getJson('api/event/' + id); } catch (e) { statusEl.textContent = 'error: ' + e.message; return; }
  S.details = d;
  if (reveal) {
    const pad = Math.max((d.end_ns - d.start_ns) * 2, 2000);
    S.t0 = d.start_ns - pad; S.t1 = d.end_ns + pad;
    const it = S.layout.find((x) => x.kind === 'lane' && x.lane.id === d.lane);
    if (it && (it.y < S.scrollY || it.y > S.scrollY + plotHeight() - it.h)) S.scrollY = it.y - 40;
    clampView(); request();
  }
  renderDetails(d);
  draw();
  saveHash();
}

function renderDetails(d) {
  detailsEl.replaceChildren();
  detailsEl.dataset.event = String(d.id);
  detailsEl.append(el('h2', d.name, { id: 'event-name' }));
  const table = el('table');
  const sw = el('span', null, { class: 'swatch' });
  sw.style.background = S.levelColours[S.levels.indexOf(d.level)] || '#888';
  const rows = [
    ['level', d.level], ['category', d.category], ['lane', laneName(d.lane)],
    ['start', fmtNs(d.start_ns)], ['duration', fmtNs(d.duration_ns)],
    ['correlation', d.correlation], ['external id', d.external_id], ['id', d.id],
    // Its rank moved onto the job's one clock, and a baseline's step lined up with the run's
    // (the recorded start is start - shift).
    ['clock shift', d.clock_shift_ns ? fmtNs(d.clock_shift_ns) + (d.aligned_shift_ns !== undefined
      ? ' (its rank onto its job\'s clock, and ' + fmtNs(d.aligned_shift_ns) + ' lining its step up with the run\'s)'
      : ' (its rank, onto the job\'s clock)') : null],
  ];
  for (const [k, v] of rows) {
    if (v === null || v === undefined) continue;
    const tr = el('tr');
    tr.append(el('td', k));
    const td = el('td', v);
    if (k === 'level') td.prepend(sw);
    tr.append(td);
    table.append(tr);
  }
  detailsEl.append(table);
  if (d.chain.length) {
    detailsEl.append(el('h3', 'Inside'));
    const ol = el('ol');
    for (const c of d.chain) { const li = el('li'); li.append(link(c)); ol.append(li); }
    detailsEl.append(ol);
  }
  if (d.flows.length) {
    detailsEl.append(el('h3', 'Flows'));
    const ul = el('ul', null, { id: 'flows' });
    for (const f of d.flows) {
      const li = el('li', f.category + ' #' + f.id + ': ');
      for (const [label, end] of [['from', f.from], ['to', f.to]]) {
        if (!end) continue;
        li.append(label + ' ');
        if (end.event && end.event.id !== d.id) li.append(link(end.event));
        else li.append(end.event ? 'this event' : laneName(end.lane) + ' at ' + fmtNs(end.ts));
        li.append(' ');
      }
      ul.append(li);
    }
    detailsEl.append(ul);
  }
  if (d.replayed) {
    // A graph launch: the device ops it replayed (each attributed to its captured launch on
    // the graph-capture lane, when the capture is known).
    detailsEl.append(el('h3', `Replayed by this graph launch (${d.replayed_total})`));
    const ul = el('ul', null, { id: 'replayed' });
    for (const c of d.replayed) {
      const li = el('li');
      li.append(link(c), ' \u00b7 ' + c.level + ' \u00b7 ' + fmtNs(c.end_ns - c.start_ns));
      ul.append(li);
    }
    if (d.replayed_total > d.replayed.length) ul.append(el('li', `${d.replayed_total - d.replayed.length} more`));
    detailsEl.append(ul);
  }
  if (d.correlated.length) {
    detailsEl.append(el('h3', 'Same correlation (launch and device work)'));
    const ul = el('ul', null, { id: 'correlated' });
    for (const c of d.correlated) {
      const li = el('li');
      li.append(link(c), ' \u00b7 ' + c.level + ' \u00b7 ' + fmtNs(c.end_ns - c.start_ns));
      ul.append(li);
    }
    detailsEl.append(ul);
  }
  if (d.args !== null) {
    detailsEl.append(el('h3', 'Arguments'));
    detailsEl.append(el('pre', JSON.stringify(d.args, null, 1)));
  }
}

async function aggregate(t0, t1) {
  const lanes = S.layout.filter((it) => it.kind === 'lane').map((it) => it.lane.id);
  const a = Math.floor(Math.min(t0, t1)), b = Math.max(Math.ceil(Math.max(t0, t1)), a + 1);
  let d;
  try { d = await getJson(`api/aggregate?t0=${a}&t1=${b}&lanes=${lanes.join(',')}`); } catch (e) { statusEl.textContent = 'error: ' + e.message; return; }
  S.details = null;
  detailsEl.replaceChildren();
  detailsEl.dataset.event = '';
  detailsEl.append(el('h2', 'Range ' + fmtNs(a) + ' \u2013 ' + fmtNs(b), { id: 'range-title' }));
  detailsEl.append(el('p', `${d.count.toLocaleString()} events, ${fmtNs(d.total_ns)} inside the range (unfolded lanes)`));
  const table = el('table', null, { id: 'aggregate' });
  for (const n of d.names) {
    const tr = el('tr');
    tr.append(el('td', fmtNs(n.total_ns)), el('td', n.count + ' \u00d7 ' + n.name));
    table.append(tr);
  }
  if (d.others.count) {
    const tr = el('tr');
    tr.append(el('td', fmtNs(d.others.total_ns)), el('td', `${d.others.count} events of ${d.others.names} other names`));
    table.append(tr);
  }
  detailsEl.append(table);
}

async function search(dir) {
  const q = searchEl.value.trim();
  if (!q) return;
  const from = S.details ? S.details.start_ns : (dir === 'prev' ? S.t1 : S.t0);
  let d;
  try { d = await getJson(`api/search?q=${encodeURIComponent(q)}&dir=${dir}&from=${Math.round(from)}`); } catch (e) { statusEl.textContent = 'error: ' + e.message; return; }
  if (!d.found) { statusEl.textContent = `no ${dir === 'prev' ? 'earlier' : 'later'} match for \u201c${q}\u201d`; return; }
  const g = groupKey(S.laneById.get(d.found.lane));
  if (S.collapsed.delete(g)) layOut();
  select(d.found.id, true);
}

function saveHash() {
  const parts = [`t0=${Math.round(S.t0)}`, `t1=${Math.round(S.t1)}`];
  if (S.selected !== null) parts.push('event=' + S.selected);
  history.replaceState(null, '', '#' + parts.join('&'));
}

canvas.addEventListener('wheel', (e) => {
  e.preventDefault();
  if (e.ctrlKey || e.metaKey) zoom(Math.exp(e.deltaY * 0.002), e.offsetX);
  else if (Math.abs(e.deltaX) > Math.abs(e.deltaY)) pan(e.deltaX / plotWidth() * (S.t1 - S.t0));
  else { S.scrollY += e.deltaY; clampView(); request(); draw(); }
}, { passive: false });

canvas.addEventListener('mousedown', (e) => {
  canvas.focus();
  S.drag = { x: e.offsetX, y: e.offsetY, t0: S.t0, t1: S.t1, scrollY: S.scrollY, shift: e.shiftKey, moved: false };
  if (e.shiftKey) S.range = [tOf(e.offsetX), tOf(e.offsetX)];
});
window.addEventListener('mousemove', (e) => {
  const r = canvas.getBoundingClientRect();
  S.mouseX = e.clientX - r.left;
  const g = S.drag;
  if (!g) return;
  const x = e.clientX - r.left, y = e.clientY - r.top;
  if (Math.abs(x - g.x) + Math.abs(y - g.y) > 3) g.moved = true;
  if (g.shift) { S.range[1] = tOf(x); draw(); return; }
  const dt = (x - g.x) / plotWidth() * (g.t1 - g.t0);
  S.t0 = g.t0 - dt; S.t1 = g.t1 - dt; S.scrollY = g.scrollY - (y - g.y);
  clampView(); request(); draw();
});
window.addEventListener('mouseup', (e) => {
  const g = S.drag;
  S.drag = null;
  if (!g) return;
  if (g.shift && g.moved) { aggregate(S.range[0], S.range[1]); return; }
  S.range = null;
  if (g.moved) return;
  const r = canvas.getBoundingClientRect();
  const x = e.clientX - r.left, y = e.clientY - r.top;
  const it = laneAt(y);
  if (it && it.kind === 'group') {
    if (!S.collapsed.delete(it.key)) S.collapsed.add(it.key);
    layOut(); clampView(); request(); draw();
    return;
  }
  if (x < GUTTER) return;
  const id = eventAt(x, y);
  if (id !== null) select(id, false);
});

window.addEventListener('keydown', (e) => {
  if (e.target === searchEl) {
    if (e.key === 'Enter') search(e.shiftKey ? 'prev' : 'next');
    return;
  }
  const k = e.key.toLowerCase();
  const atX = S.mouseX !== null && S.mouseX > GUTTER ? S.mouseX : null;
  if (k === 'w') zoom(0.8, atX);
  else if (k === 's') zoom(1.25, atX);
  else if (k === 'a') pan(-(S.t1 - S.t0) * 0.1);
  else if (k === 'd') pan((S.t1 - S.t0) * 0.1);
  else if (k === '0') showRange(S.start, S.end);
  else return;
  e.preventDefault();
});

document.getElementById('next').addEventListener('click', () => search('next'));
document.getElementById('prev').addEventListener('click', () => search('prev'));
document.getElementById('home').addEventListener('click', () => showRange(S.start, S.end));
document.getElementById('cp').addEventListener('change', (e) => { if (e.target.checked) loadPath(); else draw(); });
document.getElementById('step').addEventListener('change', () => { document.getElementById('cp').checked = true; loadPath(); });
document.getElementById('findings').addEventListener('click', showFindings);
document.getElementById('diff').addEventListener('click', showDiff);
document.getElementById('coll').addEventListener('change', (e) => { if (e.target.checked) loadStragglers(); request(); draw(); });
window.addEventListener('resize', resize);
// A link followed while the page is open (the report's links reuse this tab): the same
// fields as when the page opens.
window.addEventListener('hashchange', () => applyHash(false));

// Scrolls to the first lane of job rank `rank` (the trace's rank index when no lane gives the
// job rank).
function scrollToRank(rank) {
  const lane = S.lanes.find((l) => l.rank === rank) || S.lanes.find((l) => l.rank_index === rank);
  if (lane) scrollToLane(lane.id);
}

// What the URL's fragment asks for: `t0`/`t1` the range shown, `mark=a,b` a range outlined,
// `rank` its lanes scrolled to, `path[=step]` the critical path, `findings` the findings list,
// `collectives` the collectives overlay, `event` an event selected, `q` a search. The report's
// links into the viewer are made of these.
function applyHash(opening) {
  // What was asked (the view rewrites its fragment as it moves).
  statusEl.dataset.hash = location.hash;
  const hash = new URLSearchParams(location.hash.slice(1));
  const ranged = hash.has('t0') && hash.has('t1');
  if (ranged) { S.t0 = Number(hash.get('t0')); S.t1 = Number(hash.get('t1')); }
  if (hash.has('mark')) {
    const [a, b] = hash.get('mark').split(',').map(Number);
    if (Number.isFinite(a) && Number.isFinite(b)) S.marks = [[a, b]];
  }
  if (hash.has('rank')) scrollToRank(Number(hash.get('rank')));
  if (ranged && !opening) { clampView(); request(); }
  const stepSelect = document.getElementById('step');
  if (hash.has('path')) { document.getElementById('cp').checked = true; if (hash.get('path')) stepSelect.value = hash.get('path'); loadPath(); }
  if (hash.has('findings')) showFindings();
  if (hash.has('diff')) showDiff();
  if (hash.has('collectives')) { document.getElementById('coll').checked = true; loadStragglers(); request(); }
  if (hash.has('event') && Number(hash.get('event')) !== S.selected) select(Number(hash.get('event')), !ranged);
  if (hash.has('q')) { searchEl.value = hash.get('q'); search('next'); }
  draw();
}

async function main() {
  const meta = await getJson('api/lanes');
  S.lanes = meta.lanes;
  S.laneById = new Map(meta.lanes.map((l) => [l.id, l]));
  S.levels = meta.levels;
  S.levelColours = meta.level_colours;
  S.ranks = meta.ranks;
  S.events = meta.events;
  S.start = meta.start_ns; S.end = Math.max(meta.end_ns, 1);
  S.baseline = meta.baseline;
  if (meta.baseline) {
    const button = document.getElementById('diff');
    button.hidden = false;
    button.title = `strato diff: ${meta.baseline.label} (the baseline, lanes marked "baseline") against this run; ${meta.baseline.aligned_on}`;
  }
  S.t0 = S.start; S.t1 = S.end;
  S.steps = (await getJson('api/steps')).steps;
  const stepSelect = document.getElementById('step');
  for (const st of S.steps) stepSelect.append(el('option', st.name, { value: String(st.number) }));
  stepSelect.append(el('option', 'whole trace', { value: 'whole' }));
  layOut();
  applyHash(true);
  resize();
}

// For browser tests and the console: where an event is drawn (page coordinates), if it is.
window.stratoView = {
  state: S,
  eventBox(id) {
    if (!S.data) return null;
    const r = canvas.getBoundingClientRect();
    for (const it of S.layout) {
      if (it.kind !== 'lane') continue;
      const d = S.data.byLane.get(it.lane.id);
      if (!d) continue;
      for (const row of d.rows) {
        for (const ev of row.events) {
          if (ev[0] !== id) continue;
          const x0 = Math.max(GUTTER, xOf(ev[1])), x1 = Math.min(plotWidth() + GUTTER, xOf(ev[2]));
          const y = RULER + it.y - S.scrollY + 2 + row.row * ROW;
          if (y < RULER || y > plotHeight() + RULER) return null;
          return { x: r.left + (x0 + x1) / 2, y: r.top + y + ROW / 2, width: x1 - x0 };
        }
      }
    }
    return null;
  },
};

main().catch((e) => { statusEl.textContent = 'error: ' + e.message; });
