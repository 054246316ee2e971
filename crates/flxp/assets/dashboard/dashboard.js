// flxp dashboard: reads and acts through flxp's own GraphQL API (POST /graphql) with the bearer
// token the user logs in with, and follows runs on GET /events. No framework, no build step: the
// page is plain DOM built with h(), which sets text (never HTML), so names from the cluster cannot
// inject markup. The token lives in this tab's sessionStorage only: never in a URL, never logged.
(function () {
  'use strict';

  var TOKEN_KEY = 'flxp.token';
  var ZONE_KEY = 'flxp.zone';
  var S = { token: null, role: null, zones: [], zone: null, catalog: null, live: null, listeners: [], actions: [], tasks: {} };

  // ---- small helpers -------------------------------------------------------------------------

  function $(id) { return document.getElementById(id); }

  // h('div', {class: 'x', onclick: f}, child, 'text', [more]) -> element
  function h(tag, attrs) {
    var el = document.createElement(tag);
    if (attrs) {
      Object.keys(attrs).forEach(function (k) {
        var v = attrs[k];
        if (v === null || v === undefined || v === false) return;
        if (k.slice(0, 2) === 'on') el.addEventListener(k.slice(2), v);
        else if (k === 'text') el.textContent = v;
        else el.setAttribute(k, v === true ? '' : String(v));
      });
    }
    for (var i = 2; i < arguments.length; i++) append(el, arguments[i]);
    return el;
  }
  function append(el, c) {
    if (c === null || c === undefined || c === false) return;
    if (Array.isArray(c)) { c.forEach(function (x) { append(el, x); }); return; }
    el.appendChild(typeof c === 'object' ? c : document.createTextNode(String(c)));
  }

  var GiB = 1024 * 1024 * 1024;
  function bytes(n) {
    if (n === null || n === undefined) return '–';
    if (n >= 1024 * GiB) return (n / 1024 / GiB).toFixed(1) + ' TiB';
    if (n >= GiB) return (n / GiB).toFixed(1) + ' GiB';
    return (n / 1024 / 1024).toFixed(0) + ' MiB';
  }
  function pct(x) { return (Math.round(x * 10) / 10).toFixed(1) + ' %'; }
  // Spreads are differences of percentages: percentage points, as the CLI prints them.
  function pp(x) { return (Math.round(x * 10) / 10).toFixed(1) + ' pp'; }
  // A random key per submission: the API creates one VM per key, however often it arrives.
  function newKey() {
    var a = new Uint8Array(16);
    crypto.getRandomValues(a);
    return Array.prototype.map.call(a, function (b) { return ('0' + b.toString(16)).slice(-2); }).join('');
  }
  // Runs work() with the button disabled until it settles: a second click does nothing.
  function busy(btn, work) {
    if (btn.disabled) return Promise.resolve();
    btn.disabled = true;
    btn.setAttribute('aria-busy', 'true');
    return Promise.resolve().then(work).then(function (x) { return x; }, function (e) { return e; }).then(function (x) {
      btn.disabled = false;
      btn.removeAttribute('aria-busy');
      return x;
    });
  }
  // Calls fn(event) for each live event of the zone shown, until the view changes.
  function onLive(fn) { S.listeners.push(fn); }
  function num(x, d) { return (x === null || x === undefined) ? '–' : Number(x).toFixed(d === undefined ? 1 : d); }
  function clamp(x) { return Math.max(0, Math.min(100, x)); }
  function time(t) { return t ? new Date(t * 1000).toLocaleString() : '–'; }

  function bar(parts, label) {
    var b = h('div', { class: 'bar', role: 'img', 'aria-label': label });
    parts.forEach(function (p) {
      var s = h('span', { class: p.cls });
      s.style.width = clamp(p.pct) + '%';
      if (p.left !== undefined) { s.style.left = clamp(p.left) + '%'; s.style.width = '2px'; }
      b.appendChild(s);
    });
    return b;
  }

  function table(headers, rows, attrs) {
    return h('div', { class: 'table-wrap' },
      h('table', attrs || null,
        h('thead', null, h('tr', null, headers.map(function (x) {
          return h('th', { scope: 'col', class: x.cls || null }, x.text || x);
        }))),
        h('tbody', null, rows)));
  }

  function list(items, cls) {
    if (!items || !items.length) return h('p', { class: 'hint' }, 'none');
    return h('ul', { class: 'list ' + (cls || '') }, items.map(function (x) { return h('li', null, x); }));
  }

  // ---- API -----------------------------------------------------------------------------------

  function ApiError(message, code) { this.message = message; this.code = code; }

  function gql(query, variables) {
    return fetch('/graphql', {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Authorization: 'Bearer ' + S.token },
      body: JSON.stringify({ query: query, variables: variables || {} }),
      cache: 'no-store',
    }).then(function (r) {
      return r.json().catch(function () { return { errors: [{ message: 'HTTP ' + r.status }] }; })
        .then(function (body) {
          if (r.status === 401) { logout('The token was not accepted: log in again.'); }
          if (body.errors && body.errors.length) {
            var e = body.errors[0];
            throw new ApiError(e.message, (e.extensions && e.extensions.code) || 'ERROR');
          }
          return body.data;
        });
    });
  }

  function errorBox(e) {
    var code = e && e.code ? e.code : 'ERROR';
    return h('p', { class: 'error', role: 'alert', 'data-code': code },
      code + ': ' + (e && e.message ? e.message : String(e)));
  }

  // Reads GET /events (server-sent events) with the token in a header; calls onEvent per event
  // until `signal` aborts. Resolves `ready` once the server accepted the stream.
  function follow(signal, onEvent) {
    var ready;
    var readyP = new Promise(function (res) { ready = res; });
    var done = fetch('/events', {
      headers: { Authorization: 'Bearer ' + S.token, Accept: 'text/event-stream' },
      signal: signal, cache: 'no-store',
    }).then(function (r) {
      ready(r.ok);
      if (!r.ok || !r.body) return;
      var reader = r.body.getReader();
      var dec = new TextDecoder();
      var buf = '';
      function pump() {
        return reader.read().then(function (x) {
          if (x.done) return;
          buf += dec.decode(x.value, { stream: true });
          var i;
          while ((i = buf.indexOf('\n\n')) >= 0) {
            var chunk = buf.slice(0, i);
            buf = buf.slice(i + 2);
            var data = chunk.split('\n').filter(function (l) { return l.indexOf('data:') === 0; })
              .map(function (l) { return l.slice(5).replace(/^ /, ''); }).join('\n');
            if (data) { try { onEvent(JSON.parse(data)); } catch (e) { /* not JSON */ } }
          }
          return pump();
        });
      }
      return pump();
    }).catch(function () { ready(false); });
    return { ready: readyP, done: done };
  }

  // ---- session -------------------------------------------------------------------------------

  function showLogin(message) {
    $('nav').hidden = true;
    $('tasks').hidden = true;
    $('session').hidden = true;
    $('view').textContent = '';
    $('login').hidden = false;
    $('login-error').textContent = message || '';
    $('token').value = '';
    $('token').focus();
  }

  function logout(message) {
    try { sessionStorage.removeItem(TOKEN_KEY); } catch (e) { /* storage off */ }
    S.token = null;
    if (S.live) { S.live.abort(); S.live = null; }
    showLogin(message);
  }

  function login(token) {
    S.token = token;
    return gql('{ role zones { name reachable simulated power } catalog { computeProfiles { id cores sockets memory } storageProfiles { id storage disk } images networks policies defaultPolicy } }')
      .then(function (d) {
        try { sessionStorage.setItem(TOKEN_KEY, token); } catch (e) { /* storage off */ }
        S.role = d.role; S.zones = d.zones; S.catalog = d.catalog;
        var saved = null;
        try { saved = sessionStorage.getItem(ZONE_KEY); } catch (e) { /* storage off */ }
        S.zone = d.zones.some(function (z) { return z.name === saved; }) ? saved : (d.zones[0] || {}).name;
        var sel = $('zone');
        sel.textContent = '';
        d.zones.forEach(function (z) {
          sel.appendChild(h('option', { value: z.name, selected: z.name === S.zone },
            z.name + (z.simulated ? ' (simulated)' : '') + (z.reachable ? '' : ' – not answering')));
        });
        $('role').textContent = S.role;
        $('role').className = 'badge ' + (S.role === 'operator' ? 'warn' : '');
        $('login').hidden = true;
        $('tasks').hidden = false;
        $('nav').hidden = false;
        $('session').hidden = false;
        startLive();
        if (!location.hash || location.hash === '#/') location.hash = '#/overview';
        else route();
      });
  }

  // ---- live ----------------------------------------------------------------------------------

  // One stream for the whole session: the task pane and the view shown listen to it. It
  // reconnects after a break (the server restarting, a proxy's timeout).
  function startLive() {
    if (S.live) S.live.abort();
    var ctrl = new AbortController();
    S.live = ctrl;
    var stream = follow(ctrl.signal, dispatch);
    S.liveReady = stream.ready;
    stream.done.then(function () {
      if (S.live === ctrl && S.token) setTimeout(function () { if (S.live === ctrl) startLive(); }, 2000);
    });
  }

  function dispatch(e) {
    if (e.zone && e.zone !== S.zone) return;
    taskPane(e);
    S.listeners.slice().forEach(function (fn) { try { fn(e); } catch (x) { /* a view's bug stays there */ } });
  }

  // Coalesces bursts of events into one call of fn after `ms`.
  function debounce(fn, ms) {
    var t = null;
    return function () { if (t) clearTimeout(t); t = setTimeout(function () { t = null; fn(); }, ms); };
  }

  var ACTION_TEXT = {
    'run-started': function (e) {
      if (e.goal === 'rolling') return 'flxp: rolling maintenance started: ' + e.nodes.join(', ');
      return 'flxp: ' + e.goal + ' started, ' + e.migrations + ' migrations planned';
    },
    'run-ended': function (e) {
      var text = 'flxp: ' + (e.goal === 'rolling' ? 'rolling maintenance ' + e.outcome + ', ' : e.goal + ' ended, ') + e.done + ' done, ' + e.failed + ' failed';
      return e.error ? text + ': ' + e.error : text;
    },
    'rolling-step': function (e) { return 'flxp: rolling maintenance: ' + e.summary; },
    created: function (e) { return 'flxp: created VM ' + e.vmid + ' (' + e.name + ') on ' + e.node; },
    maintenance: function (e) { return 'flxp: maintenance ' + (e.on ? 'set on ' : 'cleared on ') + e.node + (e.changed ? '' : ' (no change)'); },
    round: function (e) { return 'daemon round: ' + e.summary; },
    power: function (e) { return 'flxp: ' + e.summary; },
    started: function (e) { return 'flxp: migrating ' + e.vmid + (e.name ? ' ' + e.name : '') + ' ' + (e.from || '') + ' → ' + (e.to || ''); },
    done: function (e) { return 'flxp: migrated ' + e.vmid + ' in ' + num(e.secs) + ' s'; },
    failed: function (e) { return 'flxp: migration of ' + e.vmid + ' failed: ' + e.error; },
  };

  // The task pane: flxp's actions as they happen, and the zone's Proxmox tasks with their state,
  // in the style of Proxmox's task log.
  function taskPane(e) {
    var pane = $('tasks');
    if (!pane) return;
    var text = ACTION_TEXT[e.event];
    if (text) {
      S.actions.unshift({ at: e.time ? e.time * 1000 : Date.now(), text: text(e), kind: e.event });
      S.actions.length = Math.min(S.actions.length, 50);
      var ul = $('action-list');
      ul.textContent = '';
      S.actions.forEach(function (a) {
        ul.appendChild(h('li', { 'data-kind': a.kind }, h('time', null, new Date(a.at).toLocaleTimeString()), ' ', a.text));
      });
    }
    if (e.event === 'tasks') {
      var body = $('ptask-rows');
      body.textContent = '';
      e.tasks.forEach(function (t) {
        var running = !t.endtime && (!t.status || t.status === 'running');
        var state = running ? (t.fraction !== undefined && t.fraction !== null ? Math.round(100 * t.fraction) + ' %' : 'running') : t.status;
        body.appendChild(h('tr', { 'data-upid': t.upid, 'data-type': t.type, 'data-state': running ? 'running' : (t.status === 'OK' ? 'ok' : 'error') },
          h('td', null, time(t.starttime)), h('td', null, t.node), h('td', null, t.type + ' ' + (t.id || '') + (t.target ? ' → ' + t.target : '')),
          h('td', null, t.user), h('td', { class: running ? 'warn' : (t.status === 'OK' ? 'ok' : 'error') }, state)));
      });
      $('tasks-count').textContent = String(e.tasks.filter(function (t) { return !t.endtime; }).length);
    }
  }

  // ---- views ---------------------------------------------------------------------------------

  function view(title) {
    S.listeners = [];
    var v = $('view');
    v.textContent = '';
    var sec = h('section', { 'aria-labelledby': 'view-title' }, h('h1', { id: 'view-title' }, title));
    v.appendChild(sec);
    return sec;
  }
  function loading(sec) { var p = h('p', { class: 'hint' }, 'Loading…'); sec.appendChild(p); return p; }

  var STATE_FIELDS = 'maintenanceState { state safeToReboot summary stopped running { vmid name node reason } }';
  var NODE_FIELDS = 'name status maintenance mem maxmem memPercent cpu maxcpu cpuPercent committedMem running guests labels taints softTaints violations { rule node vmids message } ' + STATE_FIELDS;

  // Whether a node in maintenance is safe to reboot, and each guest still running there with why.
  function maintenanceBox(state, left, prefix) {
    if (!state) return null;
    var guests = left || state.running;
    return h('div', { class: 'maintenance-state', 'data-state': state.state, 'data-safe': String(state.safeToReboot) },
      h('p', { class: state.safeToReboot ? 'ok' : 'warn' }, state.summary),
      guests.length ? list(guests.map(function (g) { return prefix + g.vmid + ' ' + g.name + ': ' + g.reason; }), 'warn') : null);
  }

  // Events after which a zone's figures are worth reading again.
  var CHANGES = ['zone', 'created', 'maintenance', 'run-ended', 'round', 'done', 'power'];

  function overview() {
    var sec = view('Zone ' + S.zone);
    var body = h('div', { id: 'overview-body' });
    sec.appendChild(body);
    var redraw = debounce(function () { drawOverview(body, true); }, 500);
    onLive(function (e) { if (CHANGES.indexOf(e.event) >= 0) redraw(); });
    drawOverview(body, false);
  }

  function drawOverview(out, again) {
    var sec = again ? h('div') : out;
    var wait = again ? h('p') : loading(sec);
    gql('query($z: String!) { status(zone: $z) { imbalance threshold metric measure memorySpread cpuSpread running guests conflicts warnings violations { rule node vmids message } ha { node state managed } nodes { ' + NODE_FIELDS + ' } } }', { z: S.zone })
      .then(function (d) {
        wait.remove();
        var st = d.status;
        var over = st.imbalance > st.threshold;
        sec.appendChild(h('div', { class: 'card', id: 'zone-summary', 'data-imbalance': st.imbalance, 'data-threshold': st.threshold },
          h('dl', { class: 'kv' },
            h('div', null, h('dt', null, 'Imbalance (' + st.measure + ' of ' + st.metric + ')'),
              h('dd', { id: 'imbalance' }, num(st.imbalance, 2) + ' / threshold ' + num(st.threshold, 2) + ' ',
                h('span', { class: 'badge ' + (over ? 'warn' : 'ok') }, over ? 'above threshold' : 'balanced'))),
            h('div', null, h('dt', null, 'Memory spread'), h('dd', { id: 'memory-spread' }, pp(st.memorySpread))),
            h('div', null, h('dt', null, 'CPU spread'), h('dd', { id: 'cpu-spread' }, pp(st.cpuSpread))),
            h('div', null, h('dt', null, 'Guests (running / all)'), h('dd', { id: 'guest-total' }, st.running + ' / ' + st.guests)),
            h('div', null, h('dt', null, 'Broken rules'), h('dd', { id: 'violation-count' }, String(st.violations.length))),
            h('div', null, h('dt', null, 'Rule conflicts'), h('dd', null, String(st.conflicts.length))))));
        if (st.violations.length || st.conflicts.length || st.warnings.length) {
          sec.appendChild(h('div', { class: 'card' },
            h('h2', null, 'Broken rules'), list(st.violations.map(function (v) { return v.rule + ' on ' + v.node + ': ' + v.message; }), 'error'),
            h('h2', null, 'Rule conflicts'), list(st.conflicts),
            h('h2', null, 'Warnings'), list(st.warnings, 'warn')));
        }
        var ha = {};
        st.ha.forEach(function (x) { ha[x.node] = x; });
        sec.appendChild(h('div', { class: 'grid', id: 'nodes' }, st.nodes.map(function (n) { return nodeCard(n, ha[n.name]); })));
        sec.appendChild(h('p', { class: 'hint', id: 'updated', 'data-at': Date.now() }, 'Updated ' + new Date().toLocaleTimeString() + ' (live).'));
        if (again) { out.textContent = ''; append(out, Array.prototype.slice.call(sec.childNodes)); }
      })
      .catch(function (e) { if (again) return; wait.replaceWith(errorBox(e)); });
  }

  function nodeCard(n, ha) {
    // An offline node reports nothing: its figures are unknown, not zero.
    var known = n.status === 'online' && n.maxmem > 0;
    var memPct = n.maxmem ? 100 * n.mem / n.maxmem : 0;
    var comPct = n.maxmem ? 100 * n.committedMem / n.maxmem : 0;
    var badges = [h('span', { class: 'badge ' + (n.status === 'online' ? 'ok' : 'bad') }, n.status)];
    if (n.maintenance.length) badges.push(h('span', { class: 'badge warn', title: n.maintenance.join('; ') }, 'maintenance'));
    if (ha && ha.state) badges.push(h('span', { class: 'badge' }, 'HA ' + ha.state));
    if (n.violations.length) badges.push(h('span', { class: 'badge bad' }, n.violations.length + ' broken'));
    return h('article', {
      class: 'card node', 'data-node': n.name, 'data-mem': n.mem, 'data-maxmem': n.maxmem,
      'data-committed': n.committedMem, 'data-cpu-percent': n.cpuPercent, 'data-guests': n.guests,
    },
      h('h2', null, h('a', { href: '#/node/' + encodeURIComponent(n.name) }, n.name), badges),
      h('div', { class: 'barline' }, h('span', { class: 'label' }, 'Memory'),
        bar([{ cls: 'committed', pct: comPct }, { cls: 'used', pct: memPct }],
          'memory used ' + pct(memPct) + ', committed ' + pct(comPct)),
        h('span', { class: 'figure mem' }, known ? bytes(n.mem) + ' used · ' + bytes(n.committedMem) + ' committed · ' + bytes(n.maxmem) : 'unknown (node ' + n.status + ')')),
      h('div', { class: 'barline' }, h('span', { class: 'label' }, 'CPU'),
        bar([{ cls: 'cpu', pct: n.cpuPercent }], 'CPU ' + pct(n.cpuPercent)),
        h('span', { class: 'figure cpu' }, known ? pct(n.cpuPercent) + ' of ' + num(n.maxcpu, 0) + ' CPUs' : 'unknown')),
      h('p', { class: 'hint' },
        h('span', { class: 'guests' }, n.guests + ' guests'), ' (' + n.running + ' running)',
        ha ? ' · ' + ha.managed + ' HA-managed' : '',
        n.labels.length ? ' · labels ' + n.labels.join(', ') : '',
        n.taints.length ? ' · taints ' + n.taints.join(', ') : '',
        n.softTaints.length ? h('span', { class: 'soft-taints' }, ' · soft taints (avoided) ' + n.softTaints.join(', ')) : ''),
      maintenanceBox(n.maintenanceState, null, 'still here: '),
      n.violations.length ? list(n.violations.map(function (v) { return v.rule + ': ' + v.message; }), 'error') : null);
  }

  function nodeView(name) {
    var sec = view('Node ' + name);
    var body = h('div', { id: 'node-body' });
    sec.appendChild(body);
    var redraw = debounce(function () { drawNode(body, name, true); }, 500);
    onLive(function (e) { if (CHANGES.indexOf(e.event) >= 0) redraw(); });
    drawNode(body, name, false);
  }

  // What an operator can do to a node from its page, each confirmed first.
  function nodeActions(self) {
    var marked = self.maintenance.some(function (m) { return m.indexOf('flxp.maintenance') >= 0; });
    var out = h('div', { id: 'node-actions-out', role: 'status' });
    function setMaintenance(on) {
      return function (ev) {
        var btn = ev.currentTarget;
        var consequences = on ?
          [h('p', null, 'Writes flxp.maintenance into the notes of ' + self.name + '. The daemon (with [daemon] evacuate) then moves its guests away, and no new VM is placed there until the mark is cleared.')] :
          [h('p', null, 'Removes flxp.maintenance from the notes of ' + self.name + '. The node takes new VMs again, and balancing may move guests back to it.')];
        confirmRun((on ? 'Set maintenance on ' : 'Clear maintenance on ') + self.name, consequences, on ? 'Set maintenance' : 'Clear maintenance').then(function (ok) {
          if (!ok) return;
          busy(btn, function () {
            out.textContent = '';
            return gql('mutation($z: String!, $n: String!, $on: Boolean!) { maintenance(zone: $z, node: $n, on: $on) }', { z: S.zone, n: self.name, on: on })
              .then(function (d) {
                out.appendChild(h('p', { class: 'ok', id: 'maintenance-done', 'data-on': String(on) },
                  (on ? 'Maintenance set on ' : 'Maintenance cleared on ') + self.name + (d.maintenance ? '.' : ' (it already was).')));
              })
              .catch(function (e) { out.appendChild(errorBox(e)); });
          });
        });
      };
    }
    function power(action) {
      return function (ev) {
        var btn = ev.currentTarget;
        var body = action === 'SHUTDOWN' ?
          [h('p', null, 'Switches ' + self.name + ' off through Proxmox. flxp refuses unless the node is in maintenance, holds no guest and more than half the nodes stay online.')] :
          [h('p', null, 'Sends Wake-on-LAN to ' + self.name + '. It stays in maintenance until you clear the mark.')];
        confirmRun((action === 'SHUTDOWN' ? 'Shut down ' : 'Wake ') + self.name, body, action === 'SHUTDOWN' ? 'Shut down' : 'Wake').then(function (ok) {
          if (!ok) return;
          busy(btn, function () {
            out.textContent = '';
            return gql('mutation($z: String!, $n: String!, $a: PowerAction!) { power(zone: $z, node: $n, action: $a) }', { z: S.zone, n: self.name, a: action })
              .then(function (d) { out.appendChild(h('p', { class: 'ok', id: 'power-done' }, d.power + '.')); })
              .catch(function (e) { out.appendChild(errorBox(e)); });
          });
        });
      };
    }
    var zone = S.zones.filter(function (z) { return z.name === S.zone; })[0] || {};
    var powerButtons = !zone.power ? null : self.status === 'online' ?
      h('button', { type: 'button', id: 'power-off', class: 'danger', onclick: power('SHUTDOWN') }, 'Shut down…') :
      h('button', { type: 'button', id: 'power-on', onclick: power('WAKE') }, 'Wake…');
    var note = S.role === 'operator' ? null : h('p', { class: 'hint' }, 'Your token is a viewer token: flxp will refuse these actions.');
    return h('div', { class: 'card', id: 'node-actions' }, h('h2', null, 'Actions'), note,
      h('div', { class: 'actions-row' },
        marked ? h('button', { type: 'button', id: 'maintenance-off', onclick: setMaintenance(false) }, 'Clear maintenance…') :
          h('button', { type: 'button', id: 'maintenance-on', class: 'danger', onclick: setMaintenance(true) }, 'Set maintenance…'),
        h('a', { class: 'button danger', id: 'evacuate-node', href: '#/evacuate/' + encodeURIComponent(self.name) }, 'Evacuate this node…'),
        powerButtons),
      out);
  }

  function drawNode(out, name, again) {
    var sec = again ? h('div') : out;
    sec.appendChild(h('p', null, h('a', { href: '#/overview' }, '← zone ' + S.zone)));
    var wait = again ? h('p') : loading(sec);
    gql('query($z: String!) { nodes(zone: $z) { name status maintenance ' + STATE_FIELDS + ' } guests(zone: $z) { vmid name type node status template maxcpu maxmem mem tags lock haManaged } guestRules(zone: $z) { vmid rules ignored } }', { z: S.zone })
      .then(function (d) {
        wait.remove();
        var self = d.nodes.filter(function (n) { return n.name === name; })[0];
        if (self) sec.appendChild(nodeActions(self));
        if (self && self.maintenanceState) {
          sec.appendChild(h('div', { class: 'card', id: 'node-maintenance' }, h('h2', null, 'In maintenance'),
            maintenanceBox(self.maintenanceState, null, 'still here: ')));
        }
        var rules = {};
        d.guestRules.forEach(function (r) { rules[r.vmid] = r; });
        var gs = d.guests.filter(function (g) { return g.node === name; });
        sec.appendChild(h('p', { id: 'node-guest-count' }, gs.length + ' guests on ' + name));
        sec.appendChild(table(['VMID', 'Name', 'Type', 'State', { text: 'vCPUs', cls: 'num' }, { text: 'Memory', cls: 'num' }, 'Tags', 'Rules'],
          gs.map(function (g) {
            var r = rules[g.vmid] || { rules: [], ignored: false };
            return h('tr', { 'data-vmid': g.vmid },
              h('td', null, String(g.vmid)), h('td', null, g.name), h('td', null, g.type + (g.template ? ' (template)' : '')),
              h('td', null, g.status + (g.lock ? ' (lock ' + g.lock + ')' : '') + (g.haManaged ? ' · HA' : '')),
              h('td', { class: 'num' }, num(g.maxcpu, 0)), h('td', { class: 'num', 'data-maxmem': g.maxmem }, bytes(g.maxmem)),
              h('td', null, h('span', { class: 'tags' }, g.tags.map(function (t) { return h('code', null, t); }))),
              h('td', null, r.rules.join(', ') + (r.ignored ? ' (ignored by balance)' : '')));
          }), { id: 'guest-table' }));
        if (again) { out.textContent = ''; append(out, Array.prototype.slice.call(sec.childNodes)); }
      })
      .catch(function (e) { if (again) return; wait.replaceWith(errorBox(e)); });
  }

  var PLAN_FIELDS = 'method metric imbalanceBefore imbalanceAfter threshold summary warnings leftRunning { vmid name node reason } migrations { vmid type name from to reason purpose online bytes wave imbalanceAfter } unplaced { vmid name node rule reason } violationsBefore { rule node message } violationsAfter { rule node message } nodesBefore { node memPercent guests } nodesAfter { node memPercent guests } fingerprint';

  // What carrying a plan out does, for its confirmation: each migration, the bytes to copy, the
  // containers that restart (downtime) and the marks set.
  function consequences(plan, marks) {
    var total = plan.migrations.reduce(function (t, m) { return t + m.bytes; }, 0);
    var restarts = plan.migrations.filter(function (m) { return m.type === 'lxc' && m.online; });
    return [
      h('p', { id: 'confirm-summary' }, plan.migrations.length + ' migrations, ' + bytes(total) + ' to copy.'),
      h('ul', { class: 'list', id: 'confirm-migrations' }, plan.migrations.map(function (m) {
        var how = !m.online ? 'offline' : (m.type === 'lxc' ? 'restart' : 'live');
        return h('li', { 'data-vmid': m.vmid }, m.vmid + ' ' + m.name + ': ' + m.from + ' → ' + m.to + ' (' + how + ', ' + bytes(m.bytes) + ')');
      })),
      h('p', { id: 'confirm-restarts', class: restarts.length ? 'warn' : null }, restarts.length ?
        'Containers that restart (down while they move): ' + restarts.map(function (m) { return m.vmid + ' ' + m.name; }).join(', ') + '.' :
        'No container restarts.'),
      h('p', { id: 'confirm-marks', class: marks.length ? 'warn' : null }, marks.length ? marks.join(' ') : 'No node is marked.'),
    ];
  }

  // Which migrations differ between the plan shown before and the plan now.
  function planChanges(old, now) {
    function key(m) { return m.vmid + ' ' + m.name + ': ' + m.from + ' → ' + m.to; }
    var a = old.migrations.map(key), b = now.migrations.map(key);
    var items = a.filter(function (x) { return b.indexOf(x) < 0; }).map(function (x) { return 'no longer planned: ' + x; })
      .concat(b.filter(function (x) { return a.indexOf(x) < 0; }).map(function (x) { return 'newly planned: ' + x; }));
    return h('div', { class: 'card warn-card', id: 'plan-changed', role: 'alert' },
      h('h2', null, 'The cluster changed: this is the plan now'),
      h('p', null, 'The plan shown before was carried out already or made on a cluster that has changed since; flxp refused to carry it out as it stood. Check the new plan.'),
      list(items.length ? items : ['the same migrations as before (the cluster changed elsewhere)']));
  }

  function planView(sec, plan, carry) {
    var box = h('div', { class: 'card', id: 'plan', 'data-migrations': plan.migrations.length });
    box.appendChild(h('p', { id: 'plan-summary' }, plan.summary));
    box.appendChild(h('dl', { class: 'kv' },
      h('div', null, h('dt', null, 'Method'), h('dd', null, plan.method)),
      h('div', null, h('dt', null, 'Imbalance before → after'), h('dd', { id: 'plan-imbalance' }, num(plan.imbalanceBefore, 2) + ' → ' + num(plan.imbalanceAfter, 2))),
      h('div', null, h('dt', null, 'Threshold'), h('dd', null, num(plan.threshold, 2))),
      h('div', null, h('dt', null, 'Migrations'), h('dd', { id: 'plan-count' }, String(plan.migrations.length)))));
    if (plan.warnings.length) box.appendChild(h('div', null, h('h2', null, 'Warnings'), list(plan.warnings, 'warn')));
    if (plan.leftRunning.length) box.appendChild(h('div', { id: 'plan-left-running' }, h('h2', null, 'Would stay running (not safe to reboot)'),
      list(plan.leftRunning.map(function (l) { return l.vmid + ' ' + l.name + ': ' + l.reason; }), 'warn')));
    if (plan.unplaced.length) box.appendChild(h('div', null, h('h2', null, 'Cannot move'), list(plan.unplaced.map(function (u) { return u.vmid + ' (' + u.name + ') on ' + u.node + ', ' + u.rule + ': ' + u.reason; }), 'error')));
    sec.appendChild(box);

    var before = plan.nodesBefore || [];
    var after = {};
    (plan.nodesAfter || []).forEach(function (n) { after[n.node] = n; });
    if (before.length) {
      sec.appendChild(h('div', { class: 'card' }, h('h2', null, 'Memory per node, before and after'),
        h('div', { class: 'compare', id: 'before-after' }, before.map(function (b) {
          var a = after[b.node] || b;
          return [
            h('span', null, b.node),
            h('div', null,
              bar([{ cls: 'used', pct: b.memPercent }], b.node + ' before ' + pct(b.memPercent)),
              bar([{ cls: 'after', pct: a.memPercent }], b.node + ' after ' + pct(a.memPercent)),
              h('span', { class: 'hint', 'data-node': b.node, 'data-before': b.memPercent, 'data-after': a.memPercent },
                pct(b.memPercent) + ' → ' + pct(a.memPercent) + ' · guests ' + b.guests + ' → ' + a.guests)),
          ];
        })),
        h('p', { class: 'hint' }, 'Upper (blue) bar: now; lower (purple) bar: after every migration. Loads as the plan measures them (' + (plan.metric || 'memory') + ').')));
    }
    if (plan.migrations.length) {
      sec.appendChild(h('div', { class: 'card' }, h('h2', null, 'Migrations'),
        table(['#', 'Guest', 'From → to', 'Purpose', 'Reason'], plan.migrations.map(function (m, i) {
          return h('tr', { 'data-vmid': m.vmid },
            h('td', null, String(i + 1)), h('td', null, m.vmid + ' ' + m.name + (m.online ? '' : ' (offline)')),
            h('td', null, m.from + ' → ' + m.to), h('td', null, m.purpose), h('td', null, m.reason));
        }), { id: 'migration-table' })));
      if (carry) {
        var note = S.role === 'operator' ? null :
          h('p', { class: 'hint' }, 'Your token is a viewer token: flxp will refuse to carry this out.');
        sec.appendChild(h('div', { class: 'card' },
          h('button', { type: 'button', class: 'danger', id: 'carry-out', onclick: carry }, 'Carry out…'), note,
          h('div', { id: 'run' })));
      }
    } else {
      sec.appendChild(h('p', { id: 'nothing-to-do', class: 'ok' }, 'Nothing to carry out.'));
    }
  }

  function balanceView(old) {
    var sec = view('Balance ' + S.zone + ': what would flxp do now');
    var wait = loading(sec);
    gql('query($z: String!) { rebalancePlan(zone: $z) { ' + PLAN_FIELDS + ' } }', { z: S.zone })
      .then(function (d) {
        wait.remove();
        var plan = d.rebalancePlan;
        if (old) sec.appendChild(planChanges(old, plan));
        planView(sec, plan, function () {
          run('Rebalance zone ' + S.zone, consequences(plan, []),
            'mutation($z: String!, $f: String) { rebalance(zone: $z, dryRun: false, fingerprint: $f) { executed done failed plan { migrations { vmid } } } }',
            { z: S.zone, f: plan.fingerprint }, 'rebalance', function () { balanceView(plan); });
        });
      })
      .catch(function (e) { wait.replaceWith(errorBox(e)); });
  }

  function evacuateView(chosen) {
    var sec = view('Evacuate a node of ' + S.zone);
    // This view's own list: a view drawn again meanwhile (a live update) has its own, and the
    // answer for this one must not fill that one twice.
    var select = h('select', { id: 'evac-node', required: true });
    var form = h('form', { class: 'stack', id: 'evacuate-form' },
      h('label', { for: 'evac-node' }, 'Node'), select,
      h('div', { class: 'full' }, h('button', { type: 'submit', class: 'primary' }, 'Plan the evacuation')));
    sec.appendChild(h('div', { class: 'card' }, form));
    var out = h('div', { id: 'evac-out' });
    sec.appendChild(out);
    function planFor(node, old) {
      out.textContent = '';
      var wait = loading(out);
      gql('query($z: String!, $n: String!) { evacuationPlan(zone: $z, node: $n) { ' + PLAN_FIELDS + ' } }', { z: S.zone, n: node })
        .then(function (d) {
          wait.remove();
          var plan = d.evacuationPlan;
          if (old) out.appendChild(planChanges(old, plan));
          var stays = plan.leftRunning.length ?
            plan.leftRunning.length + ' running guests would stay: ' + plan.leftRunning.map(function (l) { return l.vmid + ' ' + l.name; }).join(', ') + '.' : 'No running guest would stay.';
          planView(out, plan, function () {
            var c = consequences(plan, ['Node ' + node + ' is marked flxp.maintenance in its notes: it takes no new VM until the mark is cleared (on its page).']);
            c.push(h('p', { id: 'confirm-stays' }, stays));
            run('Evacuate ' + node, c,
              'mutation($z: String!, $n: String!, $f: String) { evacuate(zone: $z, node: $n, dryRun: false, fingerprint: $f) { executed done failed plan { migrations { vmid } } leftRunning { vmid name node reason } nodeState { state safeToReboot summary stopped running { vmid } } } }',
              { z: S.zone, n: node, f: plan.fingerprint }, 'evacuate', function () { planFor(node, plan); });
          });
        })
        .catch(function (e) { wait.replaceWith(errorBox(e)); });
    }
    gql('query($z: String!) { nodes(zone: $z) { name status guests } }', { z: S.zone }).then(function (d) {
      select.textContent = '';
      d.nodes.forEach(function (n) { select.appendChild(h('option', { value: n.name, selected: n.name === chosen }, n.name + ' (' + n.guests + ' guests)')); });
      if (chosen) planFor(chosen);
    }).catch(function (e) { out.appendChild(errorBox(e)); });
    form.addEventListener('submit', function (ev) {
      ev.preventDefault();
      planFor(select.value);
    });
  }

  // ---- rolling maintenance -------------------------------------------------------------------

  // What a node's step in a rolling maintenance means, as the page names it.
  var ROLLING_STATE = {
    evacuating: ['evacuating', 'in maintenance, its guests moving to the other nodes'],
    hook: ['hook', 'empty: the hook of the server\'s config runs'],
    hooked: ['rebooting', 'hook done: the reboot is next'],
    rebooting: ['rebooting', 'asking Proxmox to reboot it'],
    waiting: ['waiting', 'rebooting: waiting until it is back online and the cluster quorate'],
    returning: ['returning', 'back: maintenance cleared, its guests going home'],
    done: ['done', 'done'],
  };

  function secs(n) {
    if (n < 60) return n + ' s';
    if (n < 3600) return Math.round(n / 60) + ' min';
    return (n / 3600).toFixed(1) + ' h';
  }

  // The progress of the zone's rolling maintenance, as kept in Proxmox (so a reload, or another
  // tab, shows the same), with each node's maintenance state. Read again every few seconds
  // while the view is shown.
  function rollingProgressBox(sec) {
    var box = h('div', { class: 'card', id: 'rolling-progress' }, h('h2', null, 'Progress'), h('p', { class: 'hint' }, 'Loading…'));
    var seen = false;
    function draw() {
      if (!document.body.contains(box)) return;
      gql('query($z: String!) { rollingProgress(zone: $z) { node step boot error } nodes(zone: $z) { name status ' + STATE_FIELDS + ' } }', { z: S.zone })
        .then(function (d) {
          var nodes = {};
          d.nodes.forEach(function (n) { nodes[n.name] = n; });
          var p = d.rollingProgress;
          var failed = p.filter(function (x) { return x.error; });
          var open = p.filter(function (x) { return x.step !== 'done'; });
          var state = failed.length ? 'stopped' : (open.length ? 'running' : (p.length ? 'finishing' : (seen ? 'finished' : 'idle')));
          if (p.length) seen = true;
          var text = {
            stopped: 'Stopped: ' + failed.map(function (x) { return x.node + ' at ' + x.step; }).join(', ') + '. Fix the cause and start it again: it continues where it stopped.',
            running: 'Running: ' + open.map(function (x) { return x.node + ' ' + (ROLLING_STATE[x.step] || [x.step])[0]; }).join(', ') + '.',
            finishing: 'Every node reached is done.',
            finished: 'Finished: every node done.',
            idle: 'No rolling maintenance in progress.',
          }[state];
          box.textContent = '';
          box.appendChild(h('h2', null, 'Progress'));
          box.appendChild(h('p', { id: 'rolling-status', role: 'status', 'data-state': state, class: state === 'stopped' ? 'error' : (state === 'running' ? 'warn' : 'ok') }, text));
          if (p.length) {
            box.appendChild(table(['Node', 'State', 'Detail', 'On the node'], p.map(function (x) {
              var word = x.error ? 'failed' : (ROLLING_STATE[x.step] || [x.step])[0];
              var detail = x.error ? 'stopped at ' + x.step + ': ' + x.error : (ROLLING_STATE[x.step] || [x.step, x.step])[1];
              var n = nodes[x.node] || {};
              return h('tr', { 'data-node': x.node, 'data-state': word, 'data-step': x.step },
                h('td', null, x.node),
                h('td', { class: 'state ' + (x.error ? 'error' : (x.step === 'done' ? 'ok' : 'warn')) }, word),
                h('td', { class: 'detail' }, detail),
                h('td', null, n.status && n.status !== 'online' ? h('p', { class: 'warn' }, n.status) : null,
                  maintenanceBox(n.maintenanceState, null, 'still here: ')));
            }), { id: 'rolling-table' }));
          }
          box.appendChild(h('p', { class: 'hint' }, 'Read from Proxmox ' + new Date().toLocaleTimeString() + '.'));
        })
        .catch(function (e) { box.appendChild(errorBox(e)); })
        .then(function () { setTimeout(draw, 2000); });
    }
    sec.appendChild(box);
    draw();
  }

  function rollingView() {
    var sec = view('Rolling maintenance of ' + S.zone);
    sec.appendChild(h('p', { class: 'hint' }, 'Each node in turn: emptied (rules kept), the hook of the server\'s config, a reboot, back online and quorate, maintenance cleared, its guests back home. One node is out at a time (up to [rolling] parallel in the server\'s config); a node goes out only while quorum, the other nodes\' room and N+1 headroom allow. Progress is kept in Proxmox: a reload, flxp restarting or the CLI (flxp rolling) carry on the same run.'));
    rollingProgressBox(sec);
    var boxes = h('div', { class: 'checks', id: 'rl-nodes' });
    var form = h('form', { class: 'stack', id: 'rolling-form' },
      h('span', { class: 'label' }, 'Nodes'), boxes,
      field('rl-reboot', 'Reboot each node', h('input', { type: 'checkbox', checked: true })),
      h('div', { class: 'full' }, h('button', { type: 'submit', class: 'primary' }, 'Plan the schedule (dry run)')));
    sec.appendChild(h('div', { class: 'card' }, form));
    var out = h('div', { id: 'rolling-out' });
    sec.appendChild(out);
    var names = [];
    gql('query($z: String!) { nodes(zone: $z) { name guests } }', { z: S.zone }).then(function (d) {
      names = d.nodes.map(function (n) { return n.name; }).sort();
      boxes.textContent = '';
      d.nodes.slice().sort(function (a, b) { return a.name < b.name ? -1 : 1; }).forEach(function (n) {
        var id = 'rl-node-' + n.name;
        boxes.appendChild(h('label', { for: id }, h('input', { type: 'checkbox', id: id, name: 'rl-node', value: n.name, checked: true }), ' ' + n.name + ' (' + n.guests + ' guests)'));
      });
    }).catch(function (e) { out.appendChild(errorBox(e)); });
    function chosen() {
      var c = Array.prototype.filter.call(boxes.querySelectorAll('input[name=rl-node]'), function (x) { return x.checked; })
        .map(function (x) { return x.value; });
      // Every node: none named, as the CLI does.
      return c.length === names.length ? [] : c;
    }
    form.addEventListener('submit', function (ev) {
      ev.preventDefault();
      var nodes = chosen();
      var reboot = $('rl-reboot').checked;
      if (!nodes.length && !names.length) return;
      out.textContent = '';
      var wait = loading(out);
      gql('query($z: String!, $n: [String!]!, $r: Boolean!) { rollingSchedule(zone: $z, nodes: $n, reboot: $r) { migrations bytes estimatedSecs unmet hook reboot parallel nodes { node doneBefore bytes estimatedSecs steps wave heldBack plan { migrations { vmid name from to bytes online type } unplaced { vmid name reason } leftRunning { vmid name reason } } } } }', { z: S.zone, n: nodes, r: reboot })
        .then(function (d) { wait.remove(); scheduleView(out, d.rollingSchedule, nodes, reboot); })
        .catch(function (e) { wait.replaceWith(errorBox(e)); });
    });
  }

  // The dry run's schedule, and the action that starts the run once confirmed.
  function scheduleView(out, sc, nodes, reboot) {
    var box = h('div', { class: 'card', id: 'rolling-schedule', 'data-migrations': sc.migrations, 'data-bytes': sc.bytes, 'data-unmet': String(sc.unmet) });
    box.appendChild(h('h2', null, 'Schedule'));
    box.appendChild(h('p', { id: 'rolling-hook' }, sc.hook ? 'Hook (from the server\'s config): ' + sc.hook + ' NODE' : 'No hook is configured ([rolling] hook in the server\'s config).'));
    box.appendChild(h('p', { id: 'rolling-total' }, sc.migrations + ' migrations out (as many back home), ' + bytes(sc.bytes) + ' to copy, about ' + secs(sc.estimatedSecs) + ' of migrations' + (reboot ? ', and a reboot per node.' : ', no reboot.')));
    if (sc.parallel > 1) box.appendChild(h('p', { id: 'rolling-parallel' }, 'Up to ' + sc.parallel + ' nodes out at a time ([rolling] parallel), fewer where quorum, room, N+1 headroom or the rules demand: the nodes of a wave are out together.'));
    box.appendChild(table(['#', 'Wave', 'Node', 'Migrations', 'To copy', 'About', 'Then'], sc.nodes.map(function (n, i) {
      var p = n.plan;
      var moves = p ? p.migrations.map(function (m) { return m.vmid + ' ' + m.name + ' → ' + m.to + ' (' + bytes(m.bytes) + (m.online ? '' : ', offline') + ')'; }) : [];
      var stuck = p ? p.unplaced.map(function (u) { return u.vmid + ' ' + u.name + ' fits on no other node: ' + u.reason; }) : [];
      var left = p ? p.leftRunning.map(function (l) { return l.vmid + ' ' + l.name + ' would stay running: ' + l.reason; }) : [];
      return h('tr', { 'data-node': n.node, 'data-migrations': p ? p.migrations.length : 0, 'data-bytes': n.bytes, 'data-secs': n.estimatedSecs, 'data-done-before': String(n.doneBefore), 'data-wave': n.wave },
        h('td', null, String(i + 1)), h('td', null, n.wave ? String(n.wave) : '–'),
        h('td', null, n.node, n.heldBack ? h('p', { class: 'hint held-back' }, 'not out with the wave before: ' + n.heldBack) : null),
        h('td', null, n.doneBefore ? 'done by an earlier run: skipped' : [String(p.migrations.length), moves.length ? list(moves) : null, stuck.length ? list(stuck, 'error') : null, left.length ? list(left, 'warn') : null]),
        h('td', { class: 'num' }, bytes(n.bytes)), h('td', { class: 'num' }, secs(n.estimatedSecs)),
        h('td', null, n.steps.join(' → ')));
    }), { id: 'rolling-schedule-table' }));
    if (sc.unmet) box.appendChild(h('p', { class: 'error', id: 'rolling-unmet' }, 'A guest fits on no other node: the run would stop at its node, with nothing changed there.'));
    var note = S.role === 'operator' ? null : h('p', { class: 'hint' }, 'Your token is a viewer token: flxp will refuse to start this.');
    var start = h('button', { type: 'button', class: 'danger', id: 'rolling-start' }, 'Start the rolling maintenance…');
    var res = h('div', { id: 'rolling-started', role: 'status' });
    box.appendChild(h('div', null, start, note, res));
    out.appendChild(box);
    start.addEventListener('click', function () {
      var todo = sc.nodes.filter(function (n) { return !n.doneBefore; });
      var body = [
        h('p', { id: 'confirm-summary' }, todo.length + ' nodes, ' + (sc.parallel > 1 ? 'up to ' + sc.parallel + ' at a time: ' : 'one at a time: ') + sc.migrations + ' migrations out and as many back home, ' + bytes(sc.bytes) + ' to copy.'),
        h('ul', { class: 'list' }, todo.map(function (n) { return h('li', null, n.node + ': ' + n.plan.migrations.length + ' migrations, then ' + n.steps.join(' → ')); })),
        h('p', { class: 'warn' }, (reboot ? 'Each node is rebooted through Proxmox. ' : '') + (sc.hook ? 'The hook runs on each: ' + sc.hook + '. ' : '') + 'The run stops at the first failure and says why here.'),
      ];
      confirmRun('Start the rolling maintenance', body, 'Start').then(function (ok) {
        if (!ok) return;
        busy(start, function () {
          res.textContent = '';
          return gql('mutation($z: String!, $n: [String!]!, $r: Boolean!) { rollingMaintenance(zone: $z, nodes: $n, reboot: $r) { node step } }', { z: S.zone, n: nodes, r: reboot })
            .then(function () {
              res.appendChild(h('p', { class: 'ok', id: 'rolling-running' }, 'Started: the progress above follows it.'));
              start.hidden = true;
              var p = $('rolling-progress');
              if (p) p.scrollIntoView({ block: 'start' });
            })
            .catch(function (e) { res.appendChild(errorBox(e)); });
        });
      });
    });
  }

  function confirmRun(title, body, okLabel) {
    var d = $('confirm');
    $('confirm-title').textContent = title + '?';
    var text = $('confirm-text');
    text.textContent = '';
    append(text, body);
    $('confirm-ok').textContent = okLabel || 'Carry out';
    return new Promise(function (res) {
      d.addEventListener('close', function once() {
        d.removeEventListener('close', once);
        res(d.returnValue === 'ok');
      });
      d.returnValue = '';
      d.showModal();
    });
  }

  // Carries out a plan: confirm, subscribe to /events, send the mutation, follow every migration.
  function run(title, body, mutation, vars, field, replan) {
    var btn = $('carry-out');
    if (btn.disabled) return;
    confirmRun(title, body).then(function (ok) {
      if (!ok || btn.disabled) return;
      var box = $('run');
      btn.disabled = true;
      box.textContent = '';
      var status = h('p', { id: 'run-status', 'data-state': 'starting', role: 'status' }, 'Starting…');
      var rows = h('tbody');
      box.appendChild(status);
      status.scrollIntoView({ block: 'center' });
      box.appendChild(h('div', { class: 'table-wrap' }, h('table', { id: 'run-table' },
        h('thead', null, h('tr', null, ['Guest', 'From → to', 'Progress', 'State'].map(function (x) { return h('th', { scope: 'col' }, x); }))), rows)));
      var byVmid = {};
      function row(e) {
        if (!byVmid[e.vmid]) {
          var fill = h('span', { class: 'used' });
          fill.style.width = '0%';
          var r = {
            tr: h('tr', { 'data-vmid': e.vmid, 'data-state': 'running' }),
            fill: fill, state: h('td', null, 'running'), route: h('td', null, (e.from || '') + ' → ' + (e.to || '')),
          };
          r.tr.appendChild(h('td', null, e.vmid + (e.name ? ' ' + e.name : '')));
          r.tr.appendChild(r.route);
          r.tr.appendChild(h('td', null, h('div', { class: 'bar', role: 'img', 'aria-label': 'progress' }, fill)));
          r.tr.appendChild(r.state);
          rows.appendChild(r.tr);
          byVmid[e.vmid] = r;
        }
        return byVmid[e.vmid];
      }
      var counts = { done: 0, failed: 0 };
      var ended;
      var endedP = new Promise(function (res) { ended = res; });
      var finished = false;
      onLive(function (e) {
        // A rolling maintenance is followed in its own view.
        if (finished || e.goal === 'rolling') return;
        var r;
        switch (e.event) {
          case 'run-started': status.textContent = 'Running: ' + e.migrations + ' migrations planned.'; status.dataset.state = 'running'; break;
          case 'started': r = row(e); r.state.textContent = 'running'; break;
          case 'progress': r = row(e); r.fill.style.width = clamp(100 * e.fraction) + '%'; break;
          case 'done': r = row(e); r.fill.style.width = '100%'; r.tr.dataset.state = 'done'; r.state.textContent = 'done in ' + num(e.secs) + ' s'; r.state.className = 'ok'; counts.done++; break;
          case 'failed': r = row(e); r.tr.dataset.state = 'failed'; r.state.textContent = 'failed: ' + e.error; r.state.className = 'error'; counts.failed++; break;
          case 'skipped': r = row(e); r.tr.dataset.state = 'skipped'; r.state.textContent = 'skipped: ' + e.reason; break;
          case 'replanned': box.insertBefore(h('p', { class: 'warn' }, 'Replanned: ' + e.reason + ' (' + e.migrations + ' migrations)'), rows.parentNode.parentNode); break;
          case 'run-ended': ended(); break;
          default: break;
        }
        if (status.dataset.state === 'running') status.textContent = 'Running: ' + counts.done + ' done, ' + counts.failed + ' failed so far.';
      });
      (S.liveReady || Promise.resolve()).then(function () {
        return gql(mutation, vars);
      }).then(function (d) {
        // The answer and the stream's last events travel on two connections: let the stream
        // catch up (a few seconds at most) so every row shows how its migration ended.
        return Promise.race([endedP, new Promise(function (res) { setTimeout(res, 5000); })])
          .then(function () { return d; });
      }).then(function (d) {
        var r = d[field];
        status.textContent = 'Finished: ' + r.done + ' done, ' + r.failed.length + ' failed.';
        status.dataset.state = 'finished';
        status.dataset.done = r.done;
        if (r.failed.length) box.appendChild(list(r.failed, 'error'));
        // An evacuation says what it left: the node read again after the run.
        if (r.nodeState) {
          var left = maintenanceBox(r.nodeState, r.leftRunning, 'still here: ');
          left.id = 'left-running';
          box.appendChild(left);
        }
        box.appendChild(h('p', null, h('button', { type: 'button', id: 'plan-again', onclick: route }, 'Plan again on the cluster as it is now')));
        // Carried out: this plan is history, never to be carried out again from here.
        btn.hidden = true;
        btn.dataset.state = 'carried-out';
        return true;
      }).catch(function (e) {
        status.textContent = '';
        status.dataset.state = 'refused';
        status.appendChild(errorBox(e));
        if (e.code === 'STALE_PLAN' && replan) { replan(); return true; }
        return false;
      }).then(function (keep) {
        finished = true;
        if (!keep) btn.disabled = false;
      });
    });
  }

  function field(id, label, input, hint) {
    input.id = id;
    return [h('label', { for: id }, label), h('div', null, input, hint ? h('div', { class: 'hint' }, hint) : null)];
  }
  function options(sel, items, none) {
    if (none) sel.appendChild(h('option', { value: '' }, none));
    items.forEach(function (x) { sel.appendChild(h('option', { value: x.value !== undefined ? x.value : x }, x.label || x)); });
    return sel;
  }
  function tagsOf(text) { return text.split(/[\s,]+/).filter(Boolean); }

  function placeView() {
    var sec = view('What-if placement in ' + S.zone);
    var c = S.catalog;
    var host = options(h('select'), [], 'let flxp choose');
    var form = h('form', { class: 'stack', id: 'place-form' },
      field('pl-profile', 'Compute profile', options(h('select'), c.computeProfiles.map(function (p) {
        return { value: p.id, label: p.id + ' (' + p.cores * p.sockets + ' vCPU, ' + bytes(p.memory) + ')' };
      }), 'none: memory and cores below')),
      field('pl-memory', 'Memory', h('input', { type: 'text', placeholder: '4GiB', value: '4GiB' }), 'e.g. 4GiB, 512MiB'),
      field('pl-cores', 'Cores', h('input', { type: 'number', min: 1, value: 2 })),
      field('pl-tags', 'Tags', h('input', { type: 'text', placeholder: 'flxp.anti-affinity.web' }), 'space or comma separated'),
      field('pl-policy', 'Policy', options(h('select'), c.policies, 'default (' + c.defaultPolicy + ')')),
      field('pl-host', 'Host', host),
      h('div', { class: 'full' }, h('button', { type: 'submit', class: 'primary' }, 'Where would it go?')));
    sec.appendChild(h('div', { class: 'card' }, form));
    var out = h('div', { id: 'place-out' });
    sec.appendChild(out);
    gql('query($z: String!) { nodes(zone: $z) { name } }', { z: S.zone }).then(function (d) {
      options(host, d.nodes.map(function (n) { return n.name; }));
    }).catch(function (e) { out.appendChild(errorBox(e)); });
    form.addEventListener('submit', function (ev) {
      ev.preventDefault();
      var req = { tags: tagsOf($('pl-tags').value) };
      if ($('pl-profile').value) req.computeProfile = $('pl-profile').value;
      else { req.memory = $('pl-memory').value; req.cores = parseInt($('pl-cores').value, 10); }
      if ($('pl-policy').value) req.policy = $('pl-policy').value;
      if ($('pl-host').value) req.host = $('pl-host').value;
      out.textContent = '';
      var wait = loading(out);
      gql('query($z: String!, $r: PlacementInput!) { placement(zone: $z, request: $r, explain: true) { node policy warnings candidates { node feasible reasons score scores { scorer score weight } } } }', { z: S.zone, r: req })
        .then(function (d) {
          wait.remove();
          var p = d.placement;
          out.appendChild(h('div', { class: 'card' },
            h('p', { id: 'place-choice', 'data-node': p.node || '' }, p.node ? h('strong', null, 'Chosen node: ' + p.node) : h('strong', { class: 'error' }, 'No node can take it.'),
              ' (policy ' + p.policy + ')'),
            decided(p),
            p.warnings.length ? list(p.warnings, 'warn') : null,
            table(['Node', 'Verdict', { text: 'Score', cls: 'num' }, 'Score shares (weighted)', 'Why'], p.candidates.map(function (cd) {
              // Each scorer's part of the total is its score times its weight.
              var total = cd.scores.reduce(function (s, x) { return s + x.score * x.weight; }, 0) || 1;
              var shares = h('div', { class: 'shares', role: 'img', 'aria-label': cd.scores.map(function (x) { return x.scorer + ' ' + num(x.score) + ' × ' + num(x.weight, 0); }).join(', ') },
                cd.scores.map(function (x) { var s = h('span', { title: x.scorer + ' ' + num(x.score) + ' × weight ' + num(x.weight, 0), 'data-scorer': x.scorer, 'data-share': (100 * x.score * x.weight / total).toFixed(1) }); s.style.width = (100 * x.score * x.weight / total) + '%'; return s; }));
              return h('tr', { class: cd.node === p.node ? 'chosen' : null, 'data-node': cd.node, 'data-feasible': String(cd.feasible) },
                h('td', null, cd.node), h('td', null, cd.feasible ? h('span', { class: 'ok' }, 'fits') : h('span', { class: 'error' }, 'refused')),
                h('td', { class: 'num' }, cd.score === null ? '–' : num(cd.score)),
                h('td', null, cd.scores.length ? [shares, h('div', { class: 'hint' }, cd.scores.map(function (x) { return x.scorer + ' ' + num(x.score) + ' × ' + num(x.weight, 0); }).join(' · '))] : '–'),
                h('td', null, cd.reasons.length ? list(cd.reasons) : ''));
            }), { id: 'candidates' })));
        })
        .catch(function (e) { wait.replaceWith(errorBox(e)); });
    });
  }

  // One line on what decided a placement: the scorer whose weighted score set the chosen node
  // furthest ahead of the runner-up.
  function decided(p) {
    var scored = p.candidates.filter(function (c) { return c.feasible && c.score !== null; });
    if (!p.node || scored.length < 2) {
      var only = scored.length === 1 ? 'the only node that fits' : (p.node ? 'chosen' : 'no node fits');
      return h('p', { id: 'place-decided' }, p.node ? p.node + ': ' + only + '.' : only + '.');
    }
    var win = scored.filter(function (c) { return c.node === p.node; })[0] || scored[0];
    var next = scored.filter(function (c) { return c !== win; })[0];
    var theirs = {};
    next.scores.forEach(function (x) { theirs[x.scorer] = x; });
    var best = null;
    win.scores.forEach(function (x) {
      var o = theirs[x.scorer];
      var lead = (x.score - (o ? o.score : 0)) * x.weight;
      if (!best || lead > best.lead) best = { x: x, o: o, lead: lead };
    });
    var text = p.node + ' over ' + next.node + ' (' + num(win.score) + ' to ' + num(next.score) + ')';
    if (best) text += ': decided by ' + best.x.scorer + ' (weight ' + num(best.x.weight, 0) + ', ' + num(best.x.score) + ' to ' + num(best.o ? best.o.score : 0) + ')';
    return h('p', { id: 'place-decided', 'data-scorer': best ? best.x.scorer : '' }, text + '.');
  }

  function createView() {
    var sec = view('Create a VM in ' + S.zone);
    var c = S.catalog;
    if (S.role !== 'operator') sec.appendChild(h('p', { class: 'hint' }, 'Your token is a viewer token: flxp will refuse to create VMs.'));
    var missing = [];
    if (!c.images.length) missing.push('no image ([images.<id>] with a template VMID)');
    if (!c.computeProfiles.length) missing.push('no compute profile ([compute-profiles.<id>])');
    if (!c.storageProfiles.length) missing.push('no storage profile ([storage-profiles.<id>])');
    if (missing.length) {
      sec.appendChild(h('div', { class: 'card', id: 'create-missing', role: 'alert' },
        h('p', { class: 'warn' }, 'VMs cannot be created here yet: the config has ' + missing.join(', ') + '. Add them to flxp.toml (see the guide, "Creating VMs") and restart flxp serve.')));
    }
    var form = h('form', { class: 'stack', id: 'create-form' },
      // Chromium compiles `pattern` with the `v` flag, where a bare `-` in a class is an error.
      field('cv-name', 'Name', h('input', { type: 'text', required: true, pattern: '[A-Za-z0-9][A-Za-z0-9.\\-]*', title: 'letters, digits, dots and hyphens; starting with a letter or digit', autocomplete: 'off' }),
        'letters, digits, dots and hyphens (a DNS name)'),
      field('cv-image', 'Image', options(h('select', { required: true }), c.images)),
      field('cv-compute', 'Compute profile', options(h('select', { required: true }), c.computeProfiles.map(function (p) {
        return { value: p.id, label: p.id + ' (' + p.cores * p.sockets + ' vCPU, ' + bytes(p.memory) + ')' };
      }))),
      field('cv-storage', 'Storage profile', options(h('select', { required: true }), c.storageProfiles.map(function (p) {
        return { value: p.id, label: p.id + ' (' + p.storage + ', ' + bytes(p.disk) + ')' };
      }))),
      field('cv-network', 'Network', options(h('select'), c.networks, 'no interface')),
      field('cv-key', 'SSH public key', h('textarea', { rows: 2, spellcheck: 'false' })),
      field('cv-user', 'User', h('input', { type: 'text', autocomplete: 'off' })),
      field('cv-password', 'Password', h('input', { type: 'password', autocomplete: 'new-password' })),
      field('cv-tags', 'Tags', h('input', { type: 'text' }), 'space or comma separated; flxp rules among them'),
      field('cv-policy', 'Policy', options(h('select'), c.policies, 'default (' + c.defaultPolicy + ')')),
      field('cv-backup', 'Include in backups', h('input', { type: 'checkbox', checked: true })),
      h('div', { class: 'full' }, h('button', { type: 'submit', class: 'primary', id: 'create-submit', disabled: missing.length > 0 }, 'Create VM')));
    sec.appendChild(h('div', { class: 'card' }, form));
    var out = h('div', { id: 'create-out', role: 'status' });
    sec.appendChild(out);
    form.addEventListener('submit', function (ev) {
      ev.preventDefault();
      var o = {
        image: $('cv-image').value, computeProfile: $('cv-compute').value, storageProfile: $('cv-storage').value,
        interfaces: $('cv-network').value ? [{ network: $('cv-network').value }] : [],
        tags: tagsOf($('cv-tags').value), backup: $('cv-backup').checked,
      };
      if ($('cv-key').value.trim()) o.sshPublicKey = $('cv-key').value.trim();
      if ($('cv-user').value) o.user = $('cv-user').value;
      if ($('cv-password').value) o.password = $('cv-password').value;
      if ($('cv-policy').value) o.policy = $('cv-policy').value;
      // One key per submission: a repeated request (a retry, a second tab) creates no second VM.
      var key = newKey();
      busy($('create-submit'), function () {
        out.textContent = 'Creating…';
        return gql('mutation($z: String!, $n: String!, $o: CreateVMOptions!, $k: String) { createVM(zone: $z, name: $n, options: $o, idempotencyKey: $k) { id name host { name } warnings } }', { z: S.zone, n: $('cv-name').value, o: o, k: key })
          .then(function (d) {
            var vm = d.createVM;
            out.textContent = '';
            out.appendChild(h('p', { class: 'ok', id: 'created', 'data-vmid': vm.id }, 'Created VM ' + vm.id + ' (' + vm.name + ') on ' + vm.host.name + '.'));
            if (vm.warnings.length) out.appendChild(list(vm.warnings, 'warn'));
          })
          .catch(function (e) { out.textContent = ''; out.appendChild(errorBox(e)); });
      });
    });
  }

  // What a record of the audit log did, in a few words.
  function auditWhat(e) {
    var a = e.args || {}, r = e.result || {};
    var bits = [];
    if (a.node) bits.push(a.node);
    if (a.name) bits.push(a.name);
    if (e.action === 'maintenance' && a.on !== undefined) bits.push(a.on ? 'on' : 'off');
    if (r.done !== undefined) bits.push(r.done + ' moved' + (r.failed && r.failed.length ? ', ' + r.failed.length + ' failed' : ''));
    if (r.vmid) bits.push('VM ' + r.vmid + ' on ' + r.node);
    return bits.join(' · ');
  }

  // The guest a task is about, as a person reads it: the new VM of a clone, not its template.
  function taskGuest(t) {
    if (t.type === 'qmclone') return t.newVmid ? t.newVmid + (t.newName ? ' ' + t.newName : '') + ' (from template ' + t.id + ')' : 'clone of template ' + t.id;
    return t.id;
  }

  function historyView() {
    var sec = view('History of ' + S.zone);
    sec.appendChild(h('h2', null, 'Actions through flxp'));
    sec.appendChild(h('p', { class: 'hint' }, 'flxp\'s audit log: what each API token asked for, and what came of it.'));
    var audit = h('div');
    sec.appendChild(audit);
    var waitAudit = loading(audit);
    gql('query($z: String!) { auditLog(zone: $z, limit: 100) { time token role action outcome error args result } }', { z: S.zone })
      .then(function (d) {
        waitAudit.remove();
        if (!d.auditLog.length) { audit.appendChild(h('p', { id: 'no-audit' }, 'No action recorded.')); return; }
        audit.appendChild(table(['When', 'Action', 'Token', 'Role', 'What', 'Result'], d.auditLog.map(function (e) {
          return h('tr', null,
            h('td', null, time(e.time)), h('td', null, e.action), h('td', null, e.token), h('td', null, e.role),
            h('td', null, auditWhat(e)),
            h('td', { class: e.outcome === 'ok' ? 'ok' : 'error', title: e.error || null }, e.outcome + (e.error ? ': ' + e.error : '')));
        }), { id: 'audit-table' }));
      })
      .catch(function (e) { waitAudit.replaceWith(errorBox(e)); });
    sec.appendChild(h('h2', null, 'Proxmox tasks'));
    sec.appendChild(h('p', { class: 'hint' }, 'Recent migrations and creations from Proxmox\'s task history.'));
    var body = h('div', { id: 'history-body' });
    sec.appendChild(body);
    var redraw = debounce(function () { drawHistory(body); }, 500);
    onLive(function (e) { if (e.event === 'tasks' || e.event === 'created') redraw(); });
    loading(body);
    drawHistory(body);
  }

  function drawHistory(sec) {
    gql('query($z: String!) { tasks(zone: $z, limit: 100) { upid node type id user starttime endtime status target newVmid newName } }', { z: S.zone })
      .then(function (d) {
        sec.textContent = '';
        if (!d.tasks.length) { sec.appendChild(h('p', { id: 'no-tasks' }, 'No migrations or creations in the task history.')); return; }
        sec.appendChild(table(['Started', 'Type', 'Guest', 'Node', 'By', 'Took', 'Result'], d.tasks.map(function (t) {
          var took = t.endtime && t.starttime ? (t.endtime - t.starttime) + ' s' : 'running';
          var where = t.target ? t.node + ' → ' + t.target : t.node;
          return h('tr', { 'data-upid': t.upid, 'data-type': t.type },
            h('td', null, time(t.starttime)), h('td', null, t.type), h('td', { class: 'guest' }, taskGuest(t)), h('td', { class: 'where' }, where),
            h('td', null, t.user), h('td', null, took),
            h('td', { class: t.status && t.status !== 'OK' ? 'error' : 'ok' }, t.status || 'running'));
        }), { id: 'task-table' }));
      })
      .catch(function (e) { sec.textContent = ''; sec.appendChild(errorBox(e)); });
  }

  // ---- routing -------------------------------------------------------------------------------

  var VIEWS = { overview: overview, balance: balanceView, evacuate: evacuateView, rolling: rollingView, place: placeView, create: createView, history: historyView };

  function route() {
    if (!S.token) return;
    // In-page anchors (the skip link) are not views.
    if (location.hash && location.hash.indexOf('#/') !== 0) return;
    var parts = (location.hash || '#/overview').slice(2).split('/');
    var name = parts[0] || 'overview';
    document.querySelectorAll('#nav a[data-view]').forEach(function (a) {
      if (a.dataset.view === name || (name === 'node' && a.dataset.view === 'overview')) a.setAttribute('aria-current', 'page');
      else a.removeAttribute('aria-current');
    });
    if (name === 'node' && parts[1]) nodeView(decodeURIComponent(parts[1]));
    else if (name === 'evacuate' && parts[1]) evacuateView(decodeURIComponent(parts[1]));
    else (VIEWS[name] || overview)();
    document.title = 'flxp · ' + name + ' · ' + S.zone;
  }

  window.addEventListener('hashchange', route);
  $('zone').addEventListener('change', function () {
    S.zone = $('zone').value;
    try { sessionStorage.setItem(ZONE_KEY, S.zone); } catch (e) { /* storage off */ }
    route();
  });
  $('logout').addEventListener('click', function () { logout(''); });
  $('login-form').addEventListener('submit', function (ev) {
    ev.preventDefault();
    var t = $('token').value.trim();
    $('login-error').textContent = '';
    login(t).catch(function (e) {
      S.token = null;
      showLogin(e.code === 'UNAUTHENTICATED' || e.message.indexOf('401') >= 0 ? 'This token is not accepted.' : e.message);
    });
  });

  var saved = null;
  try { saved = sessionStorage.getItem(TOKEN_KEY); } catch (e) { /* storage off */ }
  if (saved) login(saved).catch(function () { logout('Log in again.'); });
  else showLogin('');
}());
