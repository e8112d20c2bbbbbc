// svcnet topology page: lists then watches Services, EndpointSlices, pods
// and nodes through the origin that served the page (the API server, via
// kubectl proxy for a user), keeps compact indexes of them, and renders
// virtualised lists that stay fast with tens of thousands of objects.
// No framework, nothing loaded from elsewhere.
"use strict";

(() => {
  const FIRST_PAGE = 500;    // objects in a list's first page: the lists draw early
  const PAGE = 2500;         // and in each later page: fewer round trips
  const ROW = 24;            // row height in px (topology.css .row)
  const OVERSCAN = 8;        // rows drawn beyond the visible ones
  const MAX_BACKOFF = 30000; // ms between failed list/watch attempts

  // The API's root: the page lives at <root>/svcnet/topology/.
  const here = location.pathname;
  const at = here.lastIndexOf("/svcnet/topology");
  const ROOT = at >= 0 ? here.slice(0, at) : "";

  // ---- state -----------------------------------------------------------

  const store = {
    services: new Map(),    // "ns/name" → service
    slices: new Map(),      // "ns/name" → EndpointSlice
    slicesBySvc: new Map(), // service key → Set of slice keys
    pods: new Map(),        // "ns/name" → pod
    nodes: new Map(),       // name → node
  };
  const view = {
    query: [],              // lower-case terms the search box holds
    problems: false,        // show only Services with problems
    selected: "",           // the selected Service's key
    servicesOrder: null,    // Service keys sorted; null when stale
    podsOrder: null,
    listsDirty: true,
    detailDirty: true,
  };

  // ---- compact objects ---------------------------------------------------

  const keyOf = (m) => (m.namespace ? m.namespace + "/" + m.name : m.name);

  function condition(conds, type) {
    for (const c of conds || []) if (c.type === type) return c.status === "True";
    return false;
  }

  function compactService(o) {
    const m = o.metadata, s = o.spec || {};
    const key = keyOf(m);
    const lb = ((o.status || {}).loadBalancer || {}).ingress || [];
    return {
      key, ns: m.namespace, name: m.name, lower: key.toLowerCase(),
      type: s.type || "ClusterIP",
      clusterIP: s.clusterIP || "",
      clusterIPs: s.clusterIPs || (s.clusterIP ? [s.clusterIP] : []),
      externalName: s.externalName || "",
      ports: (s.ports || []).map((p) => ({
        name: p.name || "", port: p.port, protocol: p.protocol || "TCP",
        targetPort: p.targetPort === undefined ? p.port : p.targetPort, nodePort: p.nodePort || 0,
      })),
      selector: s.selector || null,
      loadBalancer: lb.map((i) => i.ip || i.hostname).filter(Boolean),
    };
  }

  function compactSlice(o) {
    const m = o.metadata;
    const svc = (m.labels || {})["kubernetes.io/service-name"];
    return {
      key: keyOf(m), ns: m.namespace, name: m.name,
      service: svc ? m.namespace + "/" + svc : "",
      addressType: o.addressType || "",
      ports: (o.ports || []).map((p) => (p.name ? p.name + ":" : "") + p.port + "/" + (p.protocol || "TCP")),
      endpoints: (o.endpoints || []).map((e) => {
        const c = e.conditions || {};
        const ref = e.targetRef;
        return {
          addresses: e.addresses || [],
          ready: c.ready !== false, // unset is ready (discovery.k8s.io/v1)
          terminating: c.terminating === true,
          pod: ref && ref.kind === "Pod" ? (ref.namespace || m.namespace) + "/" + ref.name : "",
          node: e.nodeName || "",
        };
      }),
    };
  }

  function compactPod(o) {
    const m = o.metadata, st = o.status || {};
    const key = keyOf(m);
    return {
      key, ns: m.namespace, name: m.name, lower: key.toLowerCase(),
      labels: m.labels || {},
      node: (o.spec || {}).nodeName || "",
      ip: st.podIP || "",
      phase: st.phase || "Pending",
      ready: condition(st.conditions, "Ready"),
      deleting: !!m.deletionTimestamp,
    };
  }

  function compactNode(o) {
    const st = o.status || {};
    const internal = (st.addresses || []).find((a) => a.type === "InternalIP");
    return { key: o.metadata.name, name: o.metadata.name, ready: condition(st.conditions, "Ready"), ip: internal ? internal.address : "" };
  }

  // ---- resources: a store each, kept by list + watch --------------------

  const resources = [
    { name: "services", path: "/api/v1/services", items: store.services, compact: compactService },
    { name: "endpointslices", path: "/apis/discovery.k8s.io/v1/endpointslices", items: store.slices, compact: compactSlice },
    { name: "pods", path: "/api/v1/pods", items: store.pods, compact: compactPod },
    { name: "nodes", path: "/api/v1/nodes", items: store.nodes, compact: compactNode },
  ];
  for (const r of resources) { r.state = "listing"; r.listed = false; r.error = ""; }

  function touched(r, obj) {
    switch (r.name) {
      case "services": if (obj.key === view.selected) view.detailDirty = true; break;
      case "endpointslices": if (obj.service === view.selected) view.detailDirty = true; break;
      case "pods": if (view.selected.startsWith(obj.ns + "/")) view.detailDirty = true; break;
      default: view.detailDirty = true;
    }
  }

  function put(r, obj) {
    const old = r.items.get(obj.key);
    r.items.set(obj.key, obj);
    if (!old) {
      if (r.name === "services") view.servicesOrder = null;
      if (r.name === "pods") view.podsOrder = null;
    }
    if (r.name === "endpointslices") {
      if (old && old.service !== obj.service) unindexSlice(old);
      if (obj.service) {
        let set = store.slicesBySvc.get(obj.service);
        if (!set) store.slicesBySvc.set(obj.service, (set = new Set()));
        set.add(obj.key);
      }
      if (old) touched(r, old);
    }
    touched(r, obj);
    view.listsDirty = true;
  }

  function remove(r, key) {
    const old = r.items.get(key);
    if (!old) return;
    r.items.delete(key);
    if (r.name === "services") view.servicesOrder = null;
    if (r.name === "pods") view.podsOrder = null;
    if (r.name === "endpointslices") unindexSlice(old);
    touched(r, old);
    view.listsDirty = true;
  }

  function unindexSlice(s) {
    const set = store.slicesBySvc.get(s.service);
    if (!set) return;
    set.delete(s.key);
    if (set.size === 0) store.slicesBySvc.delete(s.service);
  }

  const sleep = (ms) => new Promise((res) => setTimeout(res, ms));

  async function failure(resp) {
    let msg = resp.status + " " + resp.statusText;
    try {
      const st = await resp.json();
      if (st && st.message) msg = st.message;
    } catch (_) { /* not a Status */ }
    const e = new Error(msg);
    e.status = resp.status;
    return e;
  }

  // list reads every page, adding objects as they come (the lists draw
  // early), then forgets what the list no longer has; it returns the
  // list's resourceVersion.
  async function list(r) {
    const seen = new Set();
    let cont = "";
    for (;;) {
      const url = ROOT + r.path + "?limit=" + (cont ? PAGE + "&continue=" + encodeURIComponent(cont) : FIRST_PAGE);
      const resp = await fetch(url, { headers: { Accept: "application/json" } });
      if (resp.status === 410 && cont) { // the continue token expired: start again
        cont = "";
        seen.clear();
        continue;
      }
      if (!resp.ok) throw await failure(resp);
      const l = await resp.json();
      for (const o of l.items || []) {
        const obj = r.compact(o);
        seen.add(obj.key);
        put(r, obj);
      }
      schedule();
      cont = (l.metadata && l.metadata.continue) || "";
      if (!cont) {
        for (const k of [...r.items.keys()]) if (!seen.has(k)) remove(r, k);
        return l.metadata.resourceVersion;
      }
    }
  }

  // watch applies the events from rv on; it returns the last
  // resourceVersion seen when the server ends the stream, or null when
  // rv is too old (410 Gone) and the resource must be listed again.
  async function watch(r, rv) {
    const url = ROOT + r.path + "?watch=1&allowWatchBookmarks=true&resourceVersion=" + encodeURIComponent(rv);
    const resp = await fetch(url, { headers: { Accept: "application/json" } });
    if (resp.status === 410) return null;
    if (!resp.ok) throw await failure(resp);
    setState(r, "live");
    const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
    let buf = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return rv;
      buf += value;
      const lines = buf.split("\n");
      buf = lines.pop();
      for (const line of lines) {
        if (!line.trim()) continue;
        const ev = JSON.parse(line);
        const o = ev.object || {};
        if (ev.type === "ERROR") {
          if (o.code === 410) return null;
          throw new Error(o.message || "watch error");
        }
        if (o.metadata && o.metadata.resourceVersion) rv = o.metadata.resourceVersion;
        if (ev.type === "BOOKMARK") continue;
        if (ev.type === "DELETED") remove(r, keyOf(o.metadata));
        else put(r, r.compact(o));
        schedule();
      }
    }
  }

  // keep lists and watches one resource for as long as the page is open:
  // a watch the server ends resumes where it was, one refused as too old
  // lists again, and a failure lists again after a backoff.
  async function keep(r) {
    let backoff = 500;
    for (;;) {
      try {
        setState(r, "listing");
        let rv = await list(r);
        if (!r.listed) { r.listed = true; schedule(); }
        backoff = 500;
        while (rv !== null) rv = await watch(r, rv);
      } catch (e) {
        setState(r, "error", e.message || String(e));
        await sleep(backoff);
        backoff = Math.min(backoff * 2, MAX_BACKOFF);
      }
    }
  }

  function setState(r, state, error) {
    r.state = state;
    r.error = error || "";
    const el = document.getElementById("status");
    const failed = resources.filter((x) => x.state === "error");
    if (failed.length) {
      el.dataset.state = "error";
      el.textContent = failed.map((x) => x.name + ": " + x.error).join("; ") + " (retrying)";
    } else if (resources.every((x) => x.state === "live")) {
      el.dataset.state = "live";
      el.textContent = "live";
    } else {
      el.dataset.state = "listing";
      el.textContent = "listing " + resources.filter((x) => x.state !== "live").map((x) => x.name).join(", ") + "…";
    }
  }

  // ---- derived facts ------------------------------------------------------

  // endpoints counts a Service's endpoints across its slices, a pod once
  // (dual-stack slices list it in each family).
  function endpoints(svcKey) {
    const set = store.slicesBySvc.get(svcKey);
    const all = new Map();
    if (set) {
      for (const sk of set) {
        const s = store.slices.get(sk);
        for (const e of s.endpoints) {
          const id = e.pod || s.addressType + ":" + e.addresses.join(",");
          const prev = all.get(id);
          all.set(id, prev === undefined ? e.ready : prev || e.ready);
        }
      }
    }
    let ready = 0;
    for (const r of all.values()) if (r) ready++;
    return { ready, total: all.size };
  }

  // health is "empty" (no ready endpoint), "notready" (some endpoints
  // not ready), "ok", or "none" (ExternalName: no endpoints by design).
  function health(svc, eps) {
    if (svc.type === "ExternalName") return "none";
    if (eps.ready === 0) return "empty";
    if (eps.ready < eps.total) return "notready";
    return "ok";
  }

  function matches(lower) {
    for (const t of view.query) if (!lower.includes(t)) return false;
    return true;
  }

  function byKey(a, b) { return a.key < b.key ? -1 : a.key > b.key ? 1 : 0; }

  // The orders hold keys (objects are replaced on every change); they are
  // sorted again only when keys come or go.
  function visibleServices() {
    if (!view.servicesOrder) view.servicesOrder = [...store.services.keys()].sort();
    let out = view.servicesOrder.map((k) => store.services.get(k));
    if (view.query.length) out = out.filter((s) => matches(s.lower));
    if (view.problems) out = out.filter((s) => { const h = health(s, endpoints(s.key)); return h === "empty" || h === "notready"; });
    return out;
  }

  function visiblePods() {
    if (!view.podsOrder) view.podsOrder = [...store.pods.keys()].sort();
    let out = view.podsOrder.map((k) => store.pods.get(k));
    if (view.query.length) out = out.filter((p) => matches(p.lower));
    if (view.problems) out = out.filter((p) => !p.ready);
    return out;
  }

  // ---- DOM helpers -------------------------------------------------------

  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === "class") e.className = v;
      else if (k.startsWith("data-")) e.dataset[k.slice(5).replace(/-([a-z])/g, (_, c) => c.toUpperCase())] = v;
      else e.setAttribute(k, v);
    }
    for (const c of children) {
      if (c === undefined || c === null || c === false) continue;
      e.append(c instanceof Node ? c : String(c));
    }
    return e;
  }

  function setSpans(row, n) {
    if (row.childElementCount === n) return row.children;
    row.replaceChildren(...Array.from({ length: n }, () => document.createElement("span")));
    return row.children;
  }

  function clearData(row) {
    for (const k of Object.keys(row.dataset)) delete row.dataset[k];
  }

  // VirtualList draws only the rows in view (plus a few), at fixed
  // heights, reusing their elements.
  class VirtualList {
    constructor(container, draw) {
      this.c = container;
      this.drawRow = draw;
      this.items = [];
      this.rows = [];
      this.spacer = el("div", { class: "vspacer" });
      this.c.append(this.spacer);
      this.c.addEventListener("scroll", () => this.draw(), { passive: true });
      new ResizeObserver(() => this.draw()).observe(this.c);
    }
    set(items) {
      this.items = items;
      this.spacer.style.height = items.length * ROW + "px";
      this.draw();
    }
    draw() {
      const top = this.c.scrollTop, height = this.c.clientHeight || window.innerHeight;
      const first = Math.max(0, Math.floor(top / ROW) - OVERSCAN);
      const last = Math.min(this.items.length, Math.ceil((top + height) / ROW) + OVERSCAN);
      const n = Math.max(0, last - first);
      while (this.rows.length < n) {
        const r = el("div", { class: "row" });
        this.spacer.append(r);
        this.rows.push(r);
      }
      for (let i = 0; i < this.rows.length; i++) {
        const r = this.rows[i];
        if (i < n) {
          r.hidden = false;
          r.style.transform = "translateY(" + (first + i) * ROW + "px)";
          this.drawRow(r, this.items[first + i]);
        } else if (!r.hidden) {
          r.hidden = true;
          clearData(r);
        }
      }
    }
    indexOf(pred) { return this.items.findIndex(pred); }
    scrollTo(i) {
      const top = i * ROW, bottom = top + ROW;
      if (top < this.c.scrollTop) this.c.scrollTop = top;
      else if (bottom > this.c.scrollTop + this.c.clientHeight) this.c.scrollTop = bottom - this.c.clientHeight;
    }
  }

  function drawService(row, s) {
    const eps = endpoints(s.key);
    const h = health(s, eps);
    const [name, type, ip, count] = setSpans(row, 4);
    row.className = "row" + (h === "empty" ? " empty" : "") + (eps.ready < eps.total ? " notready" : "") + (s.key === view.selected ? " selected" : "");
    clearData(row);
    row.dataset.service = s.key;
    row.dataset.ready = eps.ready;
    row.dataset.total = eps.total;
    if (h === "empty") row.dataset.empty = "true";
    if (eps.ready < eps.total) row.dataset.notready = "true";
    row.setAttribute("role", "option");
    row.setAttribute("aria-selected", s.key === view.selected ? "true" : "false");
    name.replaceChildren(el("span", { class: "ns" }, s.ns + "/"), s.name);
    name.title = s.key;
    type.textContent = s.type;
    ip.className = "ip";
    ip.textContent = s.type === "ExternalName" ? s.externalName : s.clusterIP;
    count.className = "eps";
    count.textContent = h === "none" ? "–" : eps.ready === 0 && eps.total === 0 ? "0 ready" : eps.ready + "/" + eps.total + " ready";
  }

  function drawPod(row, p) {
    const [name, node, ip, ready] = setSpans(row, 4);
    const n = store.nodes.get(p.node);
    row.className = "row" + (p.ready ? "" : " notready");
    clearData(row);
    row.dataset.pod = p.key;
    row.dataset.ready = p.ready ? "true" : "false";
    row.dataset.node = p.node;
    name.replaceChildren(el("span", { class: "ns" }, p.ns + "/"), p.name);
    name.title = p.key;
    node.textContent = p.node ? p.node + (n && !n.ready ? " (NotReady)" : "") : "—";
    node.className = n && !n.ready ? "bad" : "";
    ip.className = "ip";
    ip.textContent = p.ip || "—";
    ready.className = "eps";
    ready.textContent = p.deleting ? "Terminating" : p.ready ? "Ready" : p.phase === "Running" ? "NotReady" : p.phase;
  }

  // ---- detail panel ------------------------------------------------------

  function nodeCell(name) {
    if (!name) return "—";
    const n = store.nodes.get(name);
    if (!n) return el("span", { "data-node": name }, name, el("span", { class: "muted" }, " (unknown)"));
    return el("span", { "data-node": name, class: n.ready ? "" : "bad" }, name, n.ready ? "" : " (NotReady)");
  }

  function selects(selector, labels) {
    for (const [k, v] of Object.entries(selector)) if (labels[k] !== v) return false;
    return true;
  }

  function drawDetail() {
    const box = document.getElementById("detail");
    const svc = store.services.get(view.selected);
    if (!view.selected) return;
    if (!svc) {
      box.replaceChildren(el("p", { class: "hint" }, "Service " + view.selected + " does not exist (any more)."));
      box.dataset.detail = view.selected;
      return;
    }
    const eps = endpoints(svc.key);
    const h = health(svc, eps);
    const facts = el("dl", { class: "facts" },
      el("dt", {}, "type"), el("dd", {}, svc.type),
      el("dt", {}, "cluster IPs"), el("dd", { class: "mono" }, svc.clusterIPs.join(", ") || "—"),
      el("dt", {}, "ports"), el("dd", { class: "mono" }, svc.ports.map((p) => (p.name ? p.name + " " : "") + p.port + "/" + p.protocol + " → " + p.targetPort + (p.nodePort ? " (node port " + p.nodePort + ")" : "")).join(", ") || "—"),
      el("dt", {}, "selector"), el("dd", { class: "mono" }, svc.selector ? Object.entries(svc.selector).map(([k, v]) => k + "=" + v).join(",") : "none (EndpointSlices kept by hand)"),
      svc.externalName && el("dt", {}, "external name"), svc.externalName && el("dd", { class: "mono" }, svc.externalName),
      svc.loadBalancer.length > 0 && el("dt", {}, "load balancer"), svc.loadBalancer.length > 0 && el("dd", { class: "mono" }, svc.loadBalancer.join(", ")),
    );
    let verdict;
    if (h === "none") verdict = el("p", { class: "verdict" }, "ExternalName: DNS answers with a CNAME; no endpoints.");
    else if (h === "empty") verdict = el("p", { class: "verdict empty", "data-verdict": "empty" }, eps.total ? "0 of " + eps.total + " endpoints ready: connections are refused." : "No endpoints: connections to this Service are refused.");
    else if (h === "notready") verdict = el("p", { class: "verdict notready", "data-verdict": "notready" }, eps.ready + " of " + eps.total + " endpoints ready: the others get no traffic.");
    else verdict = el("p", { class: "verdict healthy", "data-verdict": "ok" }, eps.ready + " of " + eps.total + " endpoints ready.");

    // EndpointSlices → endpoints.
    const sliceKeys = [...(store.slicesBySvc.get(svc.key) || [])].sort();
    const slicesSec = el("section", { id: "detail-slices" }, el("h3", {}, "EndpointSlices (" + sliceKeys.length + ")"));
    if (!sliceKeys.length) slicesSec.append(el("p", { class: "muted" }, "none"));
    const nodesUsed = new Map();
    for (const k of sliceKeys) {
      const s = store.slices.get(k);
      const table = el("table", {}, el("tr", {}, el("th", {}, "address"), el("th", {}, "ready"), el("th", {}, "pod"), el("th", {}, "node")));
      for (const e of s.endpoints) {
        if (e.node) nodesUsed.set(e.node, (nodesUsed.get(e.node) || 0) + 1);
        table.append(el("tr", { class: e.ready ? "" : "notready", "data-endpoint": e.addresses[0] || "", "data-ready": e.ready ? "true" : "false" },
          el("td", { class: "mono" }, e.addresses.join(", ")),
          el("td", { class: e.ready ? "ok" : "warn" }, e.ready ? "ready" : "not ready", e.terminating ? " (terminating)" : ""),
          el("td", {}, e.pod || "—"),
          el("td", {}, nodeCell(e.node))));
      }
      if (!s.endpoints.length) table.append(el("tr", {}, el("td", { colspan: "4", class: "muted" }, "no endpoints")));
      slicesSec.append(el("div", { class: "slice", "data-slice": s.key },
        el("h4", {}, s.name, el("span", { class: "muted" }, " " + s.addressType + " · " + (s.ports.join(", ") || "no ports"))), table));
    }

    // Pods: those the selector selects, and those the slices name.
    const inSlices = new Set();
    for (const k of sliceKeys) for (const e of store.slices.get(k).endpoints) if (e.pod) inSlices.add(e.pod);
    const pods = [];
    if (svc.selector && Object.keys(svc.selector).length) {
      for (const p of store.pods.values()) if (p.ns === svc.ns && selects(svc.selector, p.labels)) pods.push(p);
    }
    for (const k of inSlices) { const p = store.pods.get(k); if (p && !pods.includes(p)) pods.push(p); }
    pods.sort(byKey);
    const podsSec = el("section", { id: "detail-pods" }, el("h3", {}, "Pods (" + pods.length + ")"));
    if (!pods.length) podsSec.append(el("p", { class: "muted" }, svc.selector ? "The selector selects no pod in " + svc.ns + "." : "No pods."));
    else {
      const table = el("table", {}, el("tr", {}, el("th", {}, "pod"), el("th", {}, "status"), el("th", {}, "pod IP"), el("th", {}, "node"), el("th", {}, "endpoint")));
      for (const p of pods) {
        if (p.node && !nodesUsed.has(p.node)) nodesUsed.set(p.node, 0);
        table.append(el("tr", { class: p.ready ? "" : "notready", "data-pod": p.key, "data-ready": p.ready ? "true" : "false" },
          el("td", {}, p.name),
          el("td", { class: p.ready ? "ok" : "warn" }, p.deleting ? "Terminating" : p.ready ? "Ready" : p.phase === "Running" ? "NotReady" : p.phase),
          el("td", { class: "mono" }, p.ip || "—"),
          el("td", {}, nodeCell(p.node)),
          el("td", {}, inSlices.has(p.key) ? "yes" : el("span", { class: "warn" }, "no"))));
      }
      podsSec.append(table);
    }

    const nodesSec = el("section", { id: "detail-nodes" }, el("h3", {}, "Nodes (" + nodesUsed.size + ")"));
    if (!nodesUsed.size) nodesSec.append(el("p", { class: "muted" }, "none"));
    for (const name of [...nodesUsed.keys()].sort()) {
      const n = store.nodes.get(name);
      nodesSec.append(el("div", { "data-node": name }, el("strong", {}, name), " ",
        n ? el("span", { class: n.ready ? "ok" : "bad" }, n.ready ? "Ready" : "NotReady") : el("span", { class: "muted" }, "unknown"),
        n && n.ip ? el("span", { class: "muted mono" }, " " + n.ip) : "",
        el("span", { class: "muted" }, " · " + nodesUsed.get(name) + " endpoint(s)")));
    }

    box.dataset.detail = svc.key;
    box.replaceChildren(el("h2", {}, svc.key), facts, verdict, slicesSec, podsSec, nodesSec);
  }

  // ---- the doctor --------------------------------------------------------

  let diagnosing = null; // the AbortController of the diagnosis in flight

  async function diagnose(key) {
    const sec = document.getElementById("diagnosis");
    if (diagnosing) diagnosing.abort();
    const ctrl = new AbortController();
    diagnosing = ctrl;
    const again = el("button", { type: "button", id: "rediagnose" }, "run again");
    again.addEventListener("click", () => diagnose(key));
    const head = el("h3", {}, "Diagnosis", again);
    sec.hidden = false;
    sec.dataset.service = key;
    sec.dataset.state = "loading";
    sec.replaceChildren(head, el("p", { class: "muted" }, "The doctor is looking…"));
    const [ns, name] = key.split("/");
    try {
      const resp = await fetch("api/namespaces/" + encodeURIComponent(ns) + "/services/" + encodeURIComponent(name) + "/doctor",
        { headers: { Accept: "application/json" }, signal: ctrl.signal });
      if (!resp.ok) throw await failure(resp);
      const d = await resp.json();
      if (diagnosing !== ctrl) return;
      sec.replaceChildren(head, ...drawDiagnosis(d));
      sec.dataset.state = "done";
    } catch (e) {
      if (diagnosing !== ctrl || e.name === "AbortError") return;
      sec.replaceChildren(head, el("p", { class: "bad" }, "The doctor could not run: " + (e.message || e)));
      sec.dataset.state = "error";
    }
  }

  function drawDiagnosis(d) {
    const r = d.report || {};
    const out = [];
    const findings = r.findings || [];
    out.push(el("p", { class: r.healthy ? "ok" : "bad", "data-healthy": r.healthy ? "true" : "false" },
      r.healthy ? "Healthy" + (findings.length ? " (with notes)" : "") : "Not healthy"));
    if (findings.length) {
      const ul = el("ul", { class: "findings" });
      for (const f of findings) {
        const ev = el("dl", {});
        for (const e of f.evidence || []) ev.append(el("dt", {}, e.name), el("dd", {}, e.value));
        ul.append(el("li", { class: "finding sev-" + f.severity, "data-finding": f.code, "data-severity": f.severity },
          el("span", { class: "sev" }, f.severity), el("code", {}, f.code), el("p", {}, f.sentence), (f.evidence || []).length ? ev : null));
      }
      out.push(ul);
    }
    out.push(el("h4", {}, "Frontends → backends, per node"));
    const nodes = d.dataPlane || [];
    if (!nodes.length) out.push(el("p", { class: "muted" }, "No node reported its data plane."));
    for (const n of nodes) {
      const box = el("div", { "data-dataplane": n.node }, el("strong", {}, n.node));
      if (n.error) box.append(el("p", { class: "bad" }, n.error));
      else box.append(el("pre", { class: "lines" }, (n.lines || []).length ? n.lines.join("\n") : "(no frontends for this Service)"));
      out.push(box);
    }
    if ((r.dns || []).length) {
      out.push(el("h4", {}, "DNS records"));
      out.push(el("pre", { class: "lines" }, r.dns.map((x) => x.name + " " + x.type + " " + ((x.answers || []).join(" ") || "(no answer)")).join("\n")));
    }
    return out;
  }

  // ---- rendering -----------------------------------------------------------

  let servicesList, podsList;
  let pending = false;

  function schedule() {
    if (pending) return;
    pending = true;
    requestAnimationFrame(flush);
    setTimeout(flush, 100); // rAF pauses in a hidden tab
  }

  function flush() {
    if (!pending) return;
    pending = false;
    if (view.listsDirty) {
      view.listsDirty = false;
      const svcs = visibleServices(), pods = visiblePods();
      servicesList.set(svcs);
      podsList.set(pods);
      document.getElementById("services-count").textContent = countText(svcs.length, store.services.size);
      document.getElementById("pods-count").textContent = countText(pods.length, store.pods.size);
      let ready = 0;
      for (const n of store.nodes.values()) if (n.ready) ready++;
      const ns = document.getElementById("nodes-summary");
      ns.textContent = "nodes " + ready + "/" + store.nodes.size + " Ready";
      ns.className = ready < store.nodes.size ? "bad" : "";
    }
    if (view.detailDirty) {
      view.detailDirty = false;
      drawDetail();
    }
    if (!window.topologyReady && resources.every((r) => r.listed)) {
      window.topologyFirstRenderMs = performance.now();
      window.topologyReady = true;
      document.body.dataset.ready = "true";
    }
  }

  function countText(shown, all) { return shown === all ? String(all) : shown + " of " + all; }

  function select(key) {
    if (!key || key === view.selected) return;
    view.selected = key;
    view.detailDirty = true;
    view.listsDirty = true;
    history.replaceState(null, "", "#" + encodeURIComponent(key));
    schedule();
    diagnose(key);
  }

  function start() {
    servicesList = new VirtualList(document.getElementById("services"), drawService);
    podsList = new VirtualList(document.getElementById("pods"), drawPod);
    const svcBox = document.getElementById("services");
    svcBox.addEventListener("click", (e) => {
      const row = e.target.closest("[data-service]");
      if (row) select(row.dataset.service);
    });
    svcBox.addEventListener("keydown", (e) => {
      if (e.key !== "ArrowDown" && e.key !== "ArrowUp") return;
      e.preventDefault();
      const items = servicesList.items;
      let i = servicesList.indexOf((s) => s.key === view.selected) + (e.key === "ArrowDown" ? 1 : -1);
      i = Math.max(0, Math.min(items.length - 1, i));
      if (items[i]) { select(items[i].key); servicesList.scrollTo(i); }
    });
    const search = document.getElementById("search");
    search.addEventListener("input", () => {
      view.query = search.value.toLowerCase().split(/\s+/).filter(Boolean);
      view.listsDirty = true;
      schedule();
    });
    document.getElementById("problems").addEventListener("change", (e) => {
      view.problems = e.target.checked;
      view.listsDirty = true;
      schedule();
    });
    if (location.hash.length > 1) select(decodeURIComponent(location.hash.slice(1)));
    setState(resources[0], "listing");
    for (const r of resources) keep(r);
  }

  // For tests and benchmarks: what the page holds.
  window.topology = {
    counts: () => ({ services: store.services.size, endpointSlices: store.slices.size, pods: store.pods.size, nodes: store.nodes.size }),
    select,
  };

  start();
})();
