// cronstable dashboard: polls this coordinator's JSON API and renders it. No framework, no
// build step; every value from the API is inserted as text, never as markup.
'use strict';

const REFRESH_MS = 2000;
const WINDOW_MS = 60 * 60 * 1000;
let openJob = null;

const $ = (sel) => document.querySelector(sel);

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === 'class') e.className = v;
    else if (k.startsWith('data-')) e.setAttribute(k, v);
    else e[k] = v;
  }
  for (const c of children) {
    if (c === null || c === undefined) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

async function getJson(path) {
  const r = await fetch(path, { headers: { Accept: 'application/json' } });
  const body = await r.json().catch(() => ({}));
  if (!r.ok) throw new Error(body.error || `${path}: HTTP ${r.status}`);
  return body;
}

function span(a) {
  if (a < 60) return `${a}s`;
  if (a < 3600) return `${Math.round(a / 60)}m`;
  if (a < 48 * 3600) return `${Math.round(a / 3600)}h`;
  return `${Math.round(a / 86400)}d`;
}

// A time relative to now: `in 5s`, `3m ago`, `in 28d`.
function ago(iso) {
  if (!iso) return '—';
  const s = Math.round((Date.parse(iso) - Date.now()) / 1000);
  if (s === 0) return 'now';
  return s > 0 ? `in ${span(s)}` : `${span(-s)} ago`;
}

// A time known to be past (a finished run, a poll): the server's clock may run a little ahead
// of the browser's, which must not turn into `in 0s`.
function since(iso) {
  if (!iso) return '—';
  const s = Math.round((Date.now() - Date.parse(iso)) / 1000);
  return s < 2 ? 'just now' : `${span(s)} ago`;
}

// How long this coordinator has been up (from the server's own count, so the browser's
// clock does not matter), and how many starts came before it when state.path counts them:
// a crash loop shows as a short uptime beside a climbing count.
function uptimeText(p) {
  if (!p) return '—';
  const up = `${span(p.uptime_seconds)} (since ${p.started_at})`;
  if (p.restarts === null || p.restarts === undefined) return up;
  return `${up} · ${p.restarts === 1 ? '1 restart' : `${p.restarts} restarts`} before`;
}

function roleOf(c) {
  if (!c.enabled) return ['election off: every node runs every job', ''];
  if (c.manager_error) return ['no manager', 'nq'];
  if (c.elect_leader === false) return ['election off', ''];
  if (c.distribution === 'spread') return [c.quorate ? 'spread (per-job owner)' : 'no quorum', c.quorate ? 'spread' : 'nq'];
  if (!c.quorate) return ['no quorum', 'nq'];
  return c.is_leader ? ['leader', 'leader'] : ['follower', ''];
}

// `/cluster` nulls an unreachable peer's name and last-seen time, yet that is exactly when an
// operator needs to know which node went away: remember both per host while the page is open.
const peerMemory = new Map();

function peerItem(p) {
  const known = peerMemory.get(p.host) || {};
  if (p.node_name) known.name = p.node_name;
  if (p.last_seen) known.seen = p.last_seen;
  peerMemory.set(p.host, known);
  const name = p.node_name || known.name;
  const seen = p.last_seen || known.seen;
  const stale = !p.node_name && Boolean(known.name);
  return el('li', { class: 'peer', 'data-status': p.status, 'data-host': p.host },
    el('span', { class: 'dot ' + p.status, title: p.status }),
    el('strong', { title: stale ? 'the name this peer reported before it became unreachable' : '' }, name || p.host),
    el('span', { class: 'muted host', title: p.host }, name ? p.host : ''),
    el('span', { class: 'peer-state' }, el('span', { class: 'peer-status ' + p.status }, p.status),
      el('span', { class: 'muted' }, seen ? ` · ${stale ? 'last ' : ''}seen ${since(seen)}` : ' · never seen')),
    p.last_error ? el('span', { class: 'peer-err' }, p.last_error) : null);
}

function renderCluster(c) {
  // Without a cluster section `/cluster` is the bare seed body, with no node name; the self
  // entry of `/fleet` (rendered next) fills it in.
  if (c.node_name) $('#node-name').textContent = c.node_name;
  $('#backend').textContent = c.enabled ? c.backend : 'none';
  const [role, cls] = roleOf(c);
  const roleEl = $('#role');
  roleEl.textContent = role;
  roleEl.className = 'role ' + cls;
  const peers = c.peers || [];
  const agreed = peers.filter((p) => p.status === 'agreed').length;
  $('#quorum').textContent = c.enabled ? `${c.quorum} of ${c.cluster_size}${c.quorate ? ' (quorate)' : ' (not quorate)'}` : '—';
  $('#tally').textContent = c.backend === 'gossip' ? `${agreed + 1} of ${peers.length + 1} agree (this node included)` : '—';
  $('#leader').textContent = c.leader || (c.enabled ? 'none' : '—');
  $('#uptime').textContent = uptimeText(c.process);
  const list = $('#peers');
  list.replaceChildren(...peers.map(peerItem));
  const lease = $('#lease');
  if (c.lease) {
    lease.hidden = false;
    lease.replaceChildren(el('strong', {}, 'lease'), ...Object.entries(c.lease).map(([k, v]) =>
      el('div', {}, el('span', { class: 'label' }, k), ' ', v === null ? '—' : String(v))));
  } else lease.hidden = true;
  const banners = [];
  if (c.conflict_names && c.conflict_names.length) banners.push(`Duplicate node name: ${c.conflict_names.join(', ')}. Leader jobs are paused until it clears.`);
  if (c.size_conflict) banners.push(`Cluster size conflict: a reachable peer declares ${(c.conflicting_sizes || []).join(', ')}. Leader jobs are paused.`);
  if (c.policy_conflict) banners.push(`Coordination policy conflict: ${(c.conflicting_policies || []).join('; ')}. Leader jobs are paused.`);
  if (c.manager_error) banners.push(`The cluster manager is not running: ${c.manager_error}`);
  if (c.candidates_truncated) banners.push(`Candidate advertisement truncated (${c.candidates_truncated} candidates).`);
  $('#banners').replaceChildren(...banners.map((b) => el('div', { class: 'banner' }, b)));
}

// A job's state: running or not, and how its last finished run went. A frequent job is
// running at most refreshes, so its last result is shown beside `running` too.
function runCell(j) {
  const r = j.lastRun;
  const last = r ? el('span', { class: r.succeeded ? 'ok' : 'bad' }, `${r.succeeded ? 'ok' : exitText(r)} · ${since(r.finishedAt)}`) : null;
  if (j.running) return el('span', {}, el('span', { class: 'run' }, 'running'), last ? ' · last ' : null, last);
  if (last) return last;
  return el('span', { class: 'muted' }, j.lastDecision ? `${j.lastDecision.verdict}: ${j.lastDecision.reason}` : 'never');
}

// The newest breach of a job's expectation this node found (it judges the job), as a mark
// beside the name: which, and how long ago; the reason on hover.
function breachMark(j) {
  const b = (j.breaches || [])[0];
  if (!b) return null;
  return el('span', { class: 'bad breach', title: `${b.scheduledAt}: ${b.why}` }, ` ${b.breach.replace('_', ' ')} ${since(b.foundAt)}`);
}

function expectText(e) {
  if (!e) return null;
  const s = (ms) => (ms % 60000 === 0 ? `${ms / 60000} min` : `${ms / 1000} s`);
  return [e.completeWithinMs ? `done within ${s(e.completeWithinMs)}` : null, e.maxDurationMs ? `runs at most ${s(e.maxDurationMs)}` : null].filter(Boolean).join(', ');
}

function exitText(r) {
  if (r.timedOut) return 'timed out';
  if (r.signal) return `signal ${r.signal}`;
  return `exit ${r.exitCode}`;
}

function renderJobs(data) {
  $('#job-set-id').textContent = data.job_set_id;
  const jobs = data.jobs || [];
  const hasPolicy = jobs.some((j) => 'clusterPolicy' in j);
  const hasOwner = jobs.some((j) => 'clusterOwner' in j);
  document.querySelectorAll('.col-policy').forEach((e) => { e.hidden = !hasPolicy; });
  document.querySelectorAll('.col-owner').forEach((e) => { e.hidden = !hasOwner; });
  $('#no-jobs').hidden = jobs.length > 0;
  $('#jobs-table tbody').replaceChildren(...jobs.map((j) => {
    const tr = el('tr', { 'data-job': j.name },
      el('td', {}, el('strong', {}, j.name), breachMark(j)), el('td', {}, el('code', {}, j.schedule)),
      hasPolicy ? el('td', {}, j.clusterPolicy || '') : null,
      hasOwner ? el('td', {}, j.clusterOwner || '—') : null,
      el('td', { title: j.nextFire || (j.neverFires ? 'the schedule names no day that comes' : '') },
        j.nextFire ? ago(j.nextFire) : (j.neverFires ? 'never' : '—')), el('td', {}, runCell(j)));
    tr.addEventListener('click', () => openDrawer(j.name));
    return tr;
  }));
}

// This node's load from `/node`: CPU (blank until a second sample gives a rate), memory, and
// the coordinator's own footprint. Peers' figures come from `/fleet` (peerLoadLine).
function loadLine(n) {
  if (!n) return null;
  if (n.error) return el('span', { class: 'bad load' }, n.error);
  const pct = (v) => (v === null || v === undefined ? '…' : `${v}%`);
  const mib = (b) => (b ? `${Math.round(b / 1048576)} MiB` : '…');
  const up = n.process.uptime_seconds === undefined ? '' : ` · up ${span(n.process.uptime_seconds)}`;
  return el('span', { class: 'muted load' },
    `cpu ${pct(n.cpu_percent)} of ${n.cpus} CPUs · memory ${pct(n.memory_used_percent)} used · coordinator ${pct(n.process.cpu_percent)} cpu, ${mib(n.process.rss_bytes)}${up}`);
}

// A peer's CPU/memory from its `/fleet` entry: `node_stats` is absent without
// cluster.observability (nothing shown) and null when that node sent no usable figures.
function peerLoadLine(s) {
  if (s === undefined) return null;
  if (s === null) return el('span', { class: 'muted load' }, 'no stats for that node');
  const pct = (v) => (v === null || v === undefined ? '…' : `${v}%`);
  const up = s.started_at_s ? ` · up ${span(Math.max(0, Math.round(Date.now() / 1000 - s.started_at_s)))}` : '';
  return el('span', { class: 'muted load' },
    `cpu ${pct(s.cpu_percent)} of ${s.cpus} CPUs · memory ${pct(s.memory_used_percent)} used${up}`);
}

function renderFleet(f, node) {
  const me = f.nodes.find((n) => n.self);
  if (me && me.node_name) $('#node-name').textContent = me.node_name;
  const box = $('#fleet');
  if (!f.enabled) {
    box.replaceChildren(el('p', { class: 'muted' }, 'This backend exchanges nothing node to node, so only this node is shown.'),
      ...f.nodes.map((n) => fleetNode(n, node)));
    return;
  }
  const error = f.mesh_error ? [el('p', { class: 'bad' }, `The observability mesh is not running: ${f.mesh_error}`)] : [];
  box.replaceChildren(...error, ...f.nodes.map((n) => fleetNode(n, node)));
}

function fleetNode(n, node) {
  const jobs = n.jobs === null
    ? el('p', { class: 'muted' }, 'no data for that node')
    : n.jobs.length === 0
      ? el('p', { class: 'muted' }, 'no jobs registered')
      : el('ul', { class: 'fleet-jobs' }, ...n.jobs.map((j) => el('li', {}, el('span', { class: 'muted' }, `${j.name} `), runCell(j))));
  const name = n.node_name || (peerMemory.get(n.host) || {}).name || n.host;
  return el('div', { class: 'fleet-node', 'data-node': name },
    el('h3', {}, el('span', { class: 'dot ' + n.status }), name, el('span', { class: 'muted' }, n.self ? '(this node)' : n.status),
      n.self ? loadLine(node) : peerLoadLine(n.node_stats)), jobs);
}

async function openDrawer(name) {
  openJob = name;
  $('#drawer').hidden = false;
  $('#drawer-title').textContent = name;
  $('#run-now-result').textContent = '';
  await refreshDrawer();
}

async function refreshDrawer() {
  if (!openJob) return;
  const name = openJob;
  const enc = encodeURIComponent(name);
  const [j, f] = await Promise.all([getJson(`/jobs/${enc}`), getJson(`/jobs/${enc}/firings?from=${Date.now() - WINDOW_MS}`)]);
  if (openJob !== name) return;
  const facts = [['schedule', j.schedule], ['command', j.command], ['policy', j.clusterPolicy || 'election off'],
    ['owner', 'clusterOwner' in j ? (j.clusterOwner || 'none') : null], ['next fire', j.nextFire ? `${j.nextFire} (${ago(j.nextFire)})` : (j.neverFires ? 'never (the schedule names no day that comes)' : '—')],
    ['timezone', j.timezone || 'UTC'], ['concurrency', j.concurrencyPolicy], ['retries', j.retries], ['executor', j.executor],
    ['expect', expectText(j.expect)],
    ['breaches', (j.breaches || []).length ? j.breaches.map((b) => `${b.breach} · ${b.scheduledAt} · ${b.why}`).join('\n') : null]];
  $('#drawer-facts').replaceChildren(...facts.filter(([, v]) => v !== null && v !== undefined).flatMap(([k, v]) => [el('dt', {}, k), el('dd', {}, String(v))]));
  $('#timeline').replaceChildren(timeline(f));
  const runs = (j.history || []).filter((r) => r.event === 'finished');
  $('#history tbody').replaceChildren(...(runs.length ? runs.flatMap((r) => {
    const row = el('tr', { class: 'run-row', 'data-kind': r.kind },
      el('td', { title: r.scheduledAt }, r.scheduledAt), el('td', {}, r.kind + (r.attempt > 1 ? ` #${r.attempt}` : '')),
      el('td', {}, r.node), el('td', { class: r.succeeded ? 'ok' : 'bad' }, r.succeeded ? 'ok' : exitText(r)), el('td', {}, `${r.durationMs} ms`));
    const tail = r.outputTail ? el('tr', {}, el('td', { colSpan: 5 }, el('pre', { class: 'tail' }, r.outputTail))) : null;
    return tail ? [row, tail] : [row];
  }) : [el('tr', {}, el('td', { colSpan: 5, class: 'muted' }, 'no finished runs recorded on this node'))]));
}

// Targets as thick bars along the top, this node's runs as thin bars below: green met, red
// missed, like the schedule plots of partition tests.
function timeline(f) {
  const NS = 'http://www.w3.org/2000/svg';
  const svg = document.createElementNS(NS, 'svg');
  const from = Date.parse(f.from), to = Date.parse(f.to), span = Math.max(1, to - from);
  svg.setAttribute('viewBox', '0 0 1000 64');
  svg.setAttribute('role', 'img');
  svg.setAttribute('preserveAspectRatio', 'none');
  const x = (t) => ((t - from) / span) * 1000;
  const rect = (x0, y, w, h, cls, title) => {
    const r = document.createElementNS(NS, 'rect');
    // A run of a few milliseconds is still drawn wide enough to see, and kept inside the plot.
    const width = Math.max(3, w);
    r.setAttribute('x', Math.min(x0, 1000 - width).toFixed(1)); r.setAttribute('y', y); r.setAttribute('width', width.toFixed(1)); r.setAttribute('height', h);
    r.setAttribute('fill', { ran: '#2e9d57', running: '#3b78c2', elsewhere: '#b7c7db', unknown: '#e3e6ea', catchup: '#c08a1e' }[cls] || '#d23c3c');
    const t = document.createElementNS(NS, 'title'); t.textContent = title; r.append(t);
    svg.append(r);
  };
  for (const fi of f.firings) {
    const t = fi.scheduledAtMs;
    const where = fi.ranOn && fi.ranOn.length ? ` · ran on ${fi.ranOn.join(', ')}` : '';
    const late = fi.catchUp ? ' · caught up late' : '';
    rect(x(t), 6, 4, 22, fi.outcome, `${fi.scheduledAt}: ${fi.outcome}${fi.reason ? ' (' + fi.reason + ')' : ''}${where}${late}`);
    // A caught-up instant gets a mark above its bar.
    if (fi.catchUp) rect(x(t), 0, 4, 4, 'catchup', `${fi.scheduledAt}: caught up late`);
    if (fi.run) {
      const s = Date.parse(fi.run.startedAt), e = Date.parse(fi.run.finishedAt);
      rect(x(s), 36, x(e) - x(s), 8, fi.run.succeeded ? 'ran' : 'failed', `run ${fi.run.startedAt} – ${fi.run.finishedAt}: ${fi.run.succeeded ? 'ok' : exitText(fi.run)}`);
    }
  }
  for (const r of f.otherRuns || []) {
    const s = Date.parse(r.startedAt), e = Date.parse(r.finishedAt);
    rect(x(s), 50, x(e) - x(s), 8, r.succeeded ? 'ran' : 'failed', `${r.kind} run ${r.startedAt}`);
  }
  const box = el('div', { class: 'timeline' }, svg,
    el('div', { class: 'axis muted' }, el('span', {}, '1 h ago'),
      f.firings.length ? null : el('span', {}, 'no scheduled instants in this window'), el('span', {}, 'now')));
  return box;
}

async function runNow() {
  if (!openJob) return;
  const out = $('#run-now-result');
  out.textContent = 'starting…';
  try {
    const r = await fetch(`/jobs/${encodeURIComponent(openJob)}/start`, { method: 'POST' });
    const body = await r.json().catch(() => ({}));
    out.textContent = r.ok ? `started (${body.request_id})` : `could not start: ${body.error || 'HTTP ' + r.status}`;
    out.className = r.ok ? 'ok' : 'bad';
  } catch (e) {
    out.textContent = `could not start: ${e.message}`;
    out.className = 'bad';
  }
}

async function refresh() {
  try {
    const [c, j, f, n] = await Promise.all([getJson('/cluster'), getJson('/jobs'), getJson('/fleet'), getJson('/node')]);
    renderCluster(c); renderJobs(j); renderFleet(f, n);
    await refreshDrawer();
    const s = $('#refresh-state');
    s.textContent = 'live · ' + new Date().toLocaleTimeString();
    s.className = 'muted';
  } catch (e) {
    const s = $('#refresh-state');
    s.textContent = 'refresh failed: ' + e.message;
    s.className = 'bad';
  }
}

$('#run-now').addEventListener('click', runNow);
$('#drawer-close').addEventListener('click', () => { openJob = null; $('#drawer').hidden = true; });
refresh();
setInterval(refresh, REFRESH_MS);
