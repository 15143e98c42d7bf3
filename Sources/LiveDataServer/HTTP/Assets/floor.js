"use strict";
(function () {
  const body = document.body;
  const scope = { dataset: body.dataset.dataset, venue: body.dataset.venue, building: body.dataset.building, floor: body.dataset.floor };
  const query = new URLSearchParams(scope).toString();
  const svgNS = "http://www.w3.org/2000/svg";
  const plan = document.getElementById("plan");
  const shapes = new Map();   // location id -> {group, shape, title, label, badge, name, anchor}
  const records = new Map();  // location id -> the latest derived change or record
  let legend = { entries: [] };
  let ruleTitles = new Map();
  let zoom = 19;
  let unit = 1;
  // The daemon's table of style fields, in field order: how each is drawn (`drawing`: none,
  // shows, content or attribute) and on which part of a location. The script draws every
  // field from it and names no field itself.
  const styleFields = JSON.parse(body.dataset.styleFields || "[]");

  // --- Geometry ---------------------------------------------------------------
  function project(features) {
    const points = [];
    const walk = (c) => { if (typeof c[0] === "number") points.push(c); else c.forEach(walk); };
    features.forEach((f) => walk(f.geometry.coordinates));
    if (points.length === 0) return null;
    let minX = Infinity, minY = Infinity, maxX = -Infinity, maxY = -Infinity;
    for (const [x, y] of points) { minX = Math.min(minX, x); maxX = Math.max(maxX, x); minY = Math.min(minY, y); maxY = Math.max(maxY, y); }
    // Longitude/latitude when every point is in range and the floor spans less than
    // a tenth of a degree; plain metres otherwise.
    const degrees = minX >= -180 && maxX <= 180 && minY >= -90 && maxY <= 90 && maxX - minX < 0.1 && maxY - minY < 0.1;
    const scaleX = degrees ? 111320 * Math.cos(((minY + maxY) / 2) * Math.PI / 180) : 1;
    const scaleY = degrees ? 110540 : 1;
    return { at: ([x, y]) => [(x - minX) * scaleX, (maxY - y) * scaleY], width: Math.max((maxX - minX) * scaleX, 1), height: Math.max((maxY - minY) * scaleY, 1) };
  }

  function pathData(rings, at) {
    return rings.map((ring) => ring.map((p, i) => (i === 0 ? "M" : "L") + at(p).map((v) => v.toFixed(2)).join(" ")).join(" ") + " Z").join(" ");
  }

  function centroid(ring, at) {
    let x = 0, y = 0;
    const n = ring.length - 1;
    for (let i = 0; i < n; i++) { const [px, py] = at(ring[i]); x += px; y += py; }
    return [x / n, y / n];
  }

  function draw(features) {
    plan.replaceChildren();
    shapes.clear();
    const projection = project(features);
    document.getElementById("no-geometry").hidden = projection !== null;
    if (!projection) return;
    const pad = Math.max(projection.width, projection.height) * 0.03;
    plan.dataset.width = projection.width + 2 * pad;
    plan.dataset.height = projection.height + 2 * pad;
    plan.dataset.pad = pad;
    unit = Math.max(projection.width, projection.height) / 60;
    const at = (p) => { const [x, y] = projection.at(p); return [x + pad, y + pad]; };
    for (const feature of features) {
      const id = feature.properties.id;
      const group = document.createElementNS(svgNS, "g");
      group.setAttribute("class", "loc");
      group.setAttribute("data-location", id);
      group.setAttribute("tabindex", "0");
      group.setAttribute("role", "img");
      const title = document.createElementNS(svgNS, "title");
      group.appendChild(title);
      let shape, anchor;
      const g = feature.geometry;
      if (g.type === "Point") {
        shape = document.createElementNS(svgNS, "circle");
        anchor = at(g.coordinates);
        shape.setAttribute("cx", anchor[0]);
        shape.setAttribute("cy", anchor[1]);
        shape.setAttribute("r", unit * 0.8);
      } else {
        const polygons = g.type === "Polygon" ? [g.coordinates] : g.coordinates;
        shape = document.createElementNS(svgNS, "path");
        shape.setAttribute("d", polygons.map((rings) => pathData(rings, at)).join(" "));
        shape.setAttribute("fill-rule", "evenodd");
        anchor = centroid(polygons[0][0], at);
      }
      shape.setAttribute("class", "shape");
      group.appendChild(shape);
      const label = document.createElementNS(svgNS, "text");
      label.setAttribute("x", anchor[0]);
      label.setAttribute("y", anchor[1]);
      label.style.fontSize = (unit * 1.1) + "px";
      group.appendChild(label);
      plan.appendChild(group);
      shapes.set(id, { group, shape, title, label, badge: null, anchor, name: feature.properties.name || id });
    }
    applyZoom();
    for (const id of shapes.keys()) render(id);
  }

  // --- Styles -------------------------------------------------------------------
  function stateOf(record) {
    if (!record || !record.rules || record.rules.length === 0) return "none";
    return ruleTitles.get(record.rules[record.rules.length - 1]) || "none";
  }

  function render(id) {
    const item = shapes.get(id);
    if (!item) return;
    const record = records.get(id);
    const style = (record && record.style) || {};
    const state = record ? stateOf(record) : "no report";
    const hidden = new Set();  // the parts a flag hides
    const content = {};        // part -> value: the label's text, the badge, the icon's name
    const attributes = [];     // [part, attribute, value]
    for (const field of styleFields) {
      const value = style[field.name];
      switch (field.drawing) {
        case "shows": if (value === false) hidden.add(field.part); break;
        case "content": if (value !== undefined && value !== null) content[field.part] = value; break;
        case "attribute": attributes.push([field.part, field.attribute, value ?? field.unset]); break;
      }
    }
    item.group.classList.toggle("hidden-style", hidden.has("location"));
    item.shape.style.display = hidden.has("shape") ? "none" : "";
    item.group.dataset.state = state;
    const label = content.label !== undefined ? String(content.label) : "";
    item.label.textContent = hidden.has("label") ? "" : label;
    const badge = content.badge && !hidden.has("badge") ? content.badge : null;
    const parts = [item.name + ": " + state];
    if (label) parts.push(label);
    if (badge && badge.text) parts.push("badge " + badge.text);
    if (content.icon && !hidden.has("icon")) parts.push("icon " + content.icon);
    item.title.textContent = parts.join(" · ");
    item.group.setAttribute("aria-label", parts.join(", "));
    renderBadge(item, badge);
    const elements = { location: item.group, shape: item.shape, label: item.label, badge: item.badge };
    for (const [part, attribute, value] of attributes) if (elements[part]) elements[part].setAttribute(attribute, value);
    zoomVisibility(item.group);
  }

  function renderBadge(item, badge) {
    if (item.badge) { item.badge.remove(); item.badge = null; }
    if (!badge || !badge.text) return;
    const group = document.createElementNS(svgNS, "g");
    group.setAttribute("class", "badge");
    const size = unit * 1.2;
    const width = size * (0.6 * badge.text.length + 0.8);
    const rect = document.createElementNS(svgNS, "rect");
    rect.setAttribute("x", item.anchor[0] - width / 2);
    rect.setAttribute("y", item.anchor[1] + size * 0.7);
    rect.setAttribute("width", width);
    rect.setAttribute("height", size * 1.3);
    rect.setAttribute("rx", size * 0.4);
    rect.setAttribute("fill", badge.backgroundColor || "#ffffff");
    const text = document.createElementNS(svgNS, "text");
    text.setAttribute("x", item.anchor[0]);
    text.setAttribute("y", item.anchor[1] + size * 1.35);
    text.setAttribute("fill", badge.textColor || "#1d2330");
    text.style.fontSize = size + "px";
    text.textContent = badge.text;
    group.append(rect, text);
    item.group.appendChild(group);
    item.badge = group;
  }

  // --- Legend and summary -------------------------------------------------------
  function renderLegend() {
    const counts = new Map();
    for (const [id, record] of records) { if (shapes.size === 0 || shapes.has(id)) { const s = stateOf(record); counts.set(s, (counts.get(s) || 0) + 1); } }
    const list = document.getElementById("legend");
    list.replaceChildren();
    const entries = legend.entries.map((e) => ({ title: e.title, swatch: e.swatch })).concat([{ title: "none", swatch: null }]);
    for (const entry of entries) {
      const li = document.createElement("li");
      li.dataset.state = entry.title;
      const swatch = document.createElement("span");
      swatch.className = "swatch";
      swatch.style.background = entry.swatch || "#E0E0E0";
      swatch.setAttribute("aria-hidden", "true");
      const name = document.createElement("span");
      name.textContent = entry.title;
      const count = document.createElement("span");
      count.className = "count";
      count.textContent = counts.get(entry.title) || 0;
      li.append(swatch, name, count);
      list.appendChild(li);
    }
  }

  function renderSummary(summary) {
    if (!summary) return;
    const states = Object.entries(summary.states).map(([k, v]) => k + " " + v).join(", ");
    const people = summary.capacity > 0 ? summary.people + " of " + summary.capacity + " people" : summary.people + " people";
    document.getElementById("summary").textContent = summary.locations + " locations: " + (states || "no states") + "; " + people + ".";
  }

  function isThisFloor(topic) {
    return topic.dataset === scope.dataset && topic.venue === scope.venue && topic.building === scope.building && topic.floor === scope.floor;
  }

  // --- Zoom ---------------------------------------------------------------------
  function zoomVisibility(group) {
    // The zoom range, as the style fields drawn as these attributes of the location set it.
    const from = parseFloat(group.getAttribute("data-zoom-from")), to = parseFloat(group.getAttribute("data-zoom-to"));
    group.classList.toggle("hidden-zoom", (!isNaN(from) && zoom < from) || (!isNaN(to) && zoom > to));
  }

  function applyZoom() {
    document.getElementById("zoom").value = zoom;
    document.getElementById("zoom-level").textContent = zoom;
    const width = parseFloat(plan.dataset.width || 100), height = parseFloat(plan.dataset.height || 100);
    // Level 19 shows the whole floor; each level up doubles the scale.
    const factor = Math.pow(2, zoom - 19);
    const w = width / factor, h = height / factor;
    plan.setAttribute("viewBox", [(width - w) / 2, (height - h) / 2, w, h].map((v) => v.toFixed(2)).join(" "));
    for (const item of shapes.values()) zoomVisibility(item.group);
  }

  document.getElementById("zoom").addEventListener("input", (e) => { zoom = parseInt(e.target.value, 10); applyZoom(); });
  document.getElementById("zoom-in").addEventListener("click", () => { zoom = Math.min(22, zoom + 1); applyZoom(); });
  document.getElementById("zoom-out").addEventListener("click", () => { zoom = Math.max(15, zoom - 1); applyZoom(); });

  // --- Layers -------------------------------------------------------------------
  const tokenInput = document.getElementById("token");
  tokenInput.value = sessionStorage.getItem("livedata-token") || "";
  tokenInput.addEventListener("input", () => { sessionStorage.setItem("livedata-token", tokenInput.value); loadLayers(); });

  async function loadLayers() {
    const list = document.getElementById("layers");
    const message = document.getElementById("layer-message");
    try {
      const response = await fetch("/v1/layers");
      const layers = (await response.json()).layers;
      list.replaceChildren();
      if (layers.length === 0) { list.textContent = "The rules name no layers."; return; }
      for (const layer of layers) {
        const li = document.createElement("li");
        const box = document.createElement("input");
        box.type = "checkbox";
        box.id = "layer-" + layer.name;
        box.checked = !layer.hidden;
        box.disabled = !tokenInput.value;
        const label = document.createElement("label");
        label.htmlFor = box.id;
        label.textContent = layer.name;
        box.addEventListener("change", async () => {
          message.textContent = "";
          const put = await fetch("/v1/layers/" + encodeURIComponent(layer.name), {
            method: "PUT", headers: { "Authorization": "Bearer " + tokenInput.value, "Content-Type": "application/json" },
            body: JSON.stringify({ hidden: !box.checked }) });
          if (!put.ok) {
            box.checked = !box.checked;
            message.textContent = put.status === 401 || put.status === 403 ? "The token was refused." : "The layer could not be changed (" + put.status + ").";
          }
        });
        li.append(box, label);
        list.appendChild(li);
      }
      if (!tokenInput.value) message.textContent = "Enter the daemon's HTTP token to switch layers.";
    } catch (e) { message.textContent = "Layers could not be read."; }
  }

  // --- Floor picker -------------------------------------------------------------
  async function loadFloors() {
    const picker = document.getElementById("floor-picker");
    try {
      const summaries = (await (await fetch("/v1/venues")).json()).summaries.filter((s) => s.floor !== undefined);
      picker.replaceChildren();
      for (const s of summaries) {
        const option = document.createElement("option");
        option.value = "/floors/" + [s.dataset, s.venue, s.building, s.floor].map(encodeURIComponent).join("/");
        option.textContent = s.venue + " · " + s.building + " · " + s.floor;
        option.selected = s.dataset === scope.dataset && s.venue === scope.venue && s.building === scope.building && s.floor === scope.floor;
        picker.appendChild(option);
      }
    } catch (e) { /* the picker stays empty; the page still works */ }
  }
  document.getElementById("floor-picker").addEventListener("change", (e) => { if (e.target.value) location.href = e.target.value; });

  // --- Live feed ----------------------------------------------------------------
  const banner = document.getElementById("banner");
  let geometryLoaded = false;

  async function loadGeometry() {
    const response = await fetch("/v1/geometry?" + query);
    draw((await response.json()).features);
    geometryLoaded = true;
  }

  function connect() {
    const events = new EventSource("/v1/events?" + query);
    events.addEventListener("open", () => { banner.hidden = true; });
    events.addEventListener("error", () => { banner.hidden = false; });
    events.addEventListener("snapshot", async (e) => {
      banner.hidden = true;
      const snapshot = JSON.parse(e.data);
      legend = snapshot.legend;
      ruleTitles = new Map();
      for (const entry of legend.entries) for (const rule of entry.rules) ruleTitles.set(rule, entry.title);
      records.clear();
      for (const record of snapshot.locations) records.set(record.location, record);
      const floorSummary = snapshot.summaries.find((s) => s.floor === scope.floor);
      renderSummary(floorSummary);
      // Locations that reported since the shapes were read may have shapes now.
      const missing = snapshot.locations.some((r) => !shapes.has(r.location));
      if (!geometryLoaded || missing) await loadGeometry();
      for (const id of shapes.keys()) render(id);
      renderLegend();
      body.dataset.ready = "true";
    });
    events.addEventListener("change", (e) => {
      banner.hidden = true;
      const change = JSON.parse(e.data);
      if (!isThisFloor(change.topic)) { if (records.delete(change.location)) { render(change.location); renderLegend(); } return; }
      records.set(change.location, change);
      if (!shapes.has(change.location) && geometryLoaded) loadGeometry();
      render(change.location);
      renderLegend();
    });
    events.addEventListener("remove", (e) => {
      const removal = JSON.parse(e.data);
      if (records.delete(removal.location)) { render(removal.location); renderLegend(); }
    });
    events.addEventListener("summary", (e) => {
      const summary = JSON.parse(e.data);
      if (summary.floor === scope.floor) renderSummary(summary);
    });
  }

  loadLayers();
  loadFloors();
  connect();
})();
