// The venue page: every building as a facade with its live summary; pan and zoom; past the
// indoor zoom the building most centred in view opens and its floor goes live; following an
// asset keeps it centred across floors and buildings. What it asks the daemon for follows
// what it shows: the focused floor's changes (one stream, reopened when the focus moves),
// the summaries of the buildings in view (one summaries-only stream, reopened when the set
// changes) and, while following, the followed asset's changes.
"use strict";
(function () {
  const body = document.body;
  const dataset = body.dataset.dataset, venue = body.dataset.venue;
  const styleFields = JSON.parse(body.dataset.styleFields || "[]");
  const svgNS = "http://www.w3.org/2000/svg";
  const map = document.getElementById("map");
  const world = document.getElementById("world");
  const facadeLayer = document.getElementById("facades");
  const floorLayer = document.getElementById("floor");
  const assetLayer = document.getElementById("assets");
  const labelLayer = document.getElementById("labels");
  const banner = document.getElementById("banner");

  // --- State ------------------------------------------------------------------
  let layout = null;            // GET /v1/venues/{dataset}/{venue}
  let projection = null;        // source coordinates <-> metres
  const buildings = new Map();  // building id -> {info, group, path, label, bounds, centre, summary}
  const camera = { x: 0, y: 0, zoom: 17 };
  let viewport = "overview";    // overview, idle, following, transitioning
  let autoFocus = true;
  let focus = null;             // {building, floor}
  let lastElevation = null;     // the elevation of the floor shown last
  const lastChosen = new Map(); // building -> the floor chosen there last
  let following = null;         // location id
  let followed = null;          // the followed location's latest record
  let animation = null;
  const shapes = new Map();     // location id -> {group, shape, title, label, anchor, name}
  const records = new Map();    // location id -> latest record on the focused floor
  let ruleTitles = new Map();
  let floorStream = null, summaryStream = null, followStream = null;
  let summaryScope = "";
  window.livedataFrames = 0;    // frames drawn, for the tests' frame rate
  // With `measure` in the URL the page keeps, for the scale tests, when it was first drawn,
  // when the focused floor last went live after a focus change, and how long after its
  // newest live value each change reached the screen.
  const measuring = new URLSearchParams(location.search).has("measure");
  const stats = { readyAt: null, focusAt: null, liveAt: null, latencies: [], summaryAt: new Map() };
  if (measuring) window.livedataStats = stats;
  let drawnPending = [];
  function measureDrawn(record) {
    if (!measuring || !record.live) return;
    let newest = 0;
    for (const value of Object.values(record.live)) newest = Math.max(newest, Date.parse(value.timestamp) || 0);
    if (newest === 0) return;
    if (drawnPending.length === 0) requestAnimationFrame(() => {
      const now = Date.now();
      for (const t of drawnPending) stats.latencies.push(now - t);
      drawnPending = [];
    });
    drawnPending.push(newest);
  }

  // --- Projection -------------------------------------------------------------
  // Longitude/latitude when every point is in range and the venue spans less than a degree;
  // plain metres otherwise. Metres from the venue's north-west corner, y down.
  function makeProjection(points) {
    let minX = Infinity, minY = Infinity, maxX = -Infinity, maxY = -Infinity;
    for (const [x, y] of points) { minX = Math.min(minX, x); maxX = Math.max(maxX, x); minY = Math.min(minY, y); maxY = Math.max(maxY, y); }
    const degrees = minX >= -180 && maxX <= 180 && minY >= -90 && maxY <= 90 && maxX - minX < 1 && maxY - minY < 1;
    const latitude = degrees ? (minY + maxY) / 2 : 0;
    const sx = degrees ? 111320 * Math.cos(latitude * Math.PI / 180) : 1, sy = degrees ? 110540 : 1;
    return {
      degrees, latitude,
      at: ([x, y]) => [(x - minX) * sx, (maxY - y) * sy],
      back: ([x, y]) => [x / sx + minX, maxY - y / sy],
      width: (maxX - minX) * sx, height: (maxY - minY) * sy,
    };
  }

  // Zoom levels as a web map's: a level up doubles the scale; at level z a pixel is
  // 156543 × cos(latitude) / 2^z metres.
  function pixelsPerMetre(zoom) {
    return Math.pow(2, zoom) / (156543.03 * Math.cos((projection ? projection.latitude : 0) * Math.PI / 180));
  }

  function size() { return [map.clientWidth || 800, map.clientHeight || 600]; }

  function toScreen([x, y]) {
    const [w, h] = size(), s = pixelsPerMetre(camera.zoom);
    return [(x - camera.x) * s + w / 2, (y - camera.y) * s + h / 2];
  }

  function toWorld([px, py]) {
    const [w, h] = size(), s = pixelsPerMetre(camera.zoom);
    return [(px - w / 2) / s + camera.x, (py - h / 2) / s + camera.y];
  }

  function viewBounds() {
    const [w, h] = size();
    const [x0, y0] = toWorld([0, 0]), [x1, y1] = toWorld([w, h]);
    return { x0, y0, x1, y1 };
  }

  // --- Drawing the camera -----------------------------------------------------
  let frameRequested = false;
  let lastFontZoom = null;
  function requestFrame() {
    if (frameRequested) return;
    frameRequested = true;
    requestAnimationFrame(drawFrame);
  }

  function drawFrame() {
    frameRequested = false;
    window.livedataFrames++;
    const [w, h] = size(), s = pixelsPerMetre(camera.zoom);
    world.setAttribute("transform", `translate(${(w / 2).toFixed(1)} ${(h / 2).toFixed(1)}) scale(${s.toFixed(6)}) translate(${(-camera.x).toFixed(3)} ${(-camera.y).toFixed(3)})`);
    // Text on the floor keeps a readable size: set once the zoom settles by a quarter level.
    if (!map.classList.contains("moving") && (lastFontZoom === null || Math.abs(lastFontZoom - camera.zoom) > 0.25)) {
      lastFontZoom = camera.zoom;
      floorLayer.style.fontSize = (11 / s).toFixed(4) + "px";
      for (const dot of assetLayer.querySelectorAll("circle")) dot.setAttribute("r", (6 / s).toFixed(4));
      for (const dot of floorLayer.querySelectorAll("circle.asset-dot")) dot.setAttribute("r", (5 / s).toFixed(4));
    }
    for (const item of buildings.values()) {
      // An open building's label stands above its outline, off the floor it shows.
      const open = focus && focus.building === item.info.building;
      const [x, y] = toScreen(open ? [item.centre[0], item.bounds.y0] : item.centre);
      item.label.setAttribute("transform", `translate(${x.toFixed(1)} ${(open ? y - 26 : y).toFixed(1)})`);
    }
    document.getElementById("zoom-level").textContent = camera.zoom.toFixed(1);
  }

  // While the camera moves the floor's labels are left out and its shapes drawn without
  // antialiasing: a frame then repaints thousands of shapes without their text.
  let movingTimer = null;
  function cameraMoved() {
    if (!map.classList.contains("moving")) map.classList.add("moving");
    clearTimeout(movingTimer);
    movingTimer = setTimeout(() => { map.classList.remove("moving"); requestFrame(); }, 150);
    requestFrame();
    scheduleViewWork();
  }

  // What depends on what is in view runs once the camera rests for a moment.
  let viewTimer = null;
  function scheduleViewWork() {
    clearTimeout(viewTimer);
    viewTimer = setTimeout(() => { updateFocus(); updateSummaryScope(); writeURL(); }, 120);
  }

  function setViewport(state) {
    viewport = state;
    body.dataset.viewport = state;
    document.getElementById("viewport-state").textContent = state;
  }

  // --- Camera moves -------------------------------------------------------------
  function clampZoom(zoom) { return Math.min(23, Math.max(12, zoom)); }

  function zoomAround(point, zoom) {
    const before = toWorld(point);
    camera.zoom = clampZoom(zoom);
    const after = toWorld(point);
    camera.x += before[0] - after[0];
    camera.y += before[1] - after[1];
  }

  // A person moved the camera: following and the overview end.
  function userMoved() {
    cancelAnimation();
    if (following) stopFollowing();
    else if (viewport !== "idle") setViewport("idle");
  }

  function cancelAnimation() {
    if (animation) { cancelAnimationFrame(animation.frame); animation = null; }
  }

  // An animated move to `target`; the viewport is `transitioning` until it ends in `then`.
  function flyTo(target, then, duration = 450) {
    cancelAnimation();
    const from = { x: camera.x, y: camera.y, zoom: camera.zoom };
    const start = performance.now();
    setViewport("transitioning");
    const step = (now) => {
      const t = Math.min(1, (now - start) / duration), e = t < 0.5 ? 2 * t * t : 1 - Math.pow(-2 * t + 2, 2) / 2;
      camera.x = from.x + (target.x - from.x) * e;
      camera.y = from.y + (target.y - from.y) * e;
      camera.zoom = from.zoom + (target.zoom - from.zoom) * e;
      requestFrame();
      if (t < 1) { animation.frame = requestAnimationFrame(step); return; }
      animation = null;
      setViewport(then);
      scheduleViewWork();
    };
    animation = { frame: requestAnimationFrame(step) };
  }

  function overviewCamera() {
    const [w, h] = size();
    const width = Math.max(projection.width, 10), height = Math.max(projection.height, 10);
    const s = Math.min(w / (width * 1.15), h / (height * 1.15));
    const zoom = Math.log2(s * 156543.03 * Math.cos(projection.latitude * Math.PI / 180));
    return { x: projection.width / 2, y: projection.height / 2, zoom: clampZoom(zoom) };
  }

  function showOverview(animated) {
    if (following) stopFollowing(true);
    const target = overviewCamera();
    if (animated) flyTo(target, "overview");
    else { Object.assign(camera, target); setViewport("overview"); cameraMoved(); }
  }

  // Wheel: zoom around the pointer.
  map.addEventListener("wheel", (event) => {
    event.preventDefault();
    userMoved();
    const rect = map.getBoundingClientRect();
    const delta = event.deltaMode === 1 ? event.deltaY * 33 : event.deltaY;
    zoomAround([event.clientX - rect.left, event.clientY - rect.top], camera.zoom - delta * 0.0025);
    cameraMoved();
  }, { passive: false });

  // Drag with one pointer, pinch with two.
  const pointers = new Map();
  let pinch = null;
  map.addEventListener("pointerdown", (event) => {
    map.setPointerCapture(event.pointerId);
    pointers.set(event.pointerId, [event.clientX, event.clientY]);
    pointers.get(event.pointerId).moved = false;
    if (pointers.size === 2) {
      const [a, b] = [...pointers.values()];
      pinch = { distance: Math.hypot(a[0] - b[0], a[1] - b[1]), zoom: camera.zoom };
    }
  });
  map.addEventListener("pointermove", (event) => {
    const last = pointers.get(event.pointerId);
    if (!last) return;
    const rect = map.getBoundingClientRect();
    if (pointers.size === 2 && pinch) {
      pointers.set(event.pointerId, Object.assign([event.clientX, event.clientY], { moved: true }));
      const [a, b] = [...pointers.values()];
      const distance = Math.hypot(a[0] - b[0], a[1] - b[1]);
      userMoved();
      zoomAround([(a[0] + b[0]) / 2 - rect.left, (a[1] + b[1]) / 2 - rect.top], pinch.zoom + Math.log2(distance / Math.max(pinch.distance, 1)));
      cameraMoved();
      return;
    }
    const dx = event.clientX - last[0], dy = event.clientY - last[1];
    if (!last.moved && Math.hypot(dx, dy) < 3) return;
    if (!last.moved) userMoved();
    map.classList.add("dragging");
    const s = pixelsPerMetre(camera.zoom);
    camera.x -= dx / s;
    camera.y -= dy / s;
    pointers.set(event.pointerId, Object.assign([event.clientX, event.clientY], { moved: true }));
    cameraMoved();
  });
  const pointerEnd = (event) => {
    const last = pointers.get(event.pointerId);
    pointers.delete(event.pointerId);
    if (pointers.size < 2) pinch = null;
    map.classList.remove("dragging");
    if (last && !last.moved && event.type === "pointerup") click(event);
  };
  map.addEventListener("pointerup", pointerEnd);
  map.addEventListener("pointercancel", pointerEnd);

  // Keyboard: arrows pan an eighth of the view, + and − zoom, 0 or Home the whole venue,
  // Escape stops following.
  map.addEventListener("keydown", (event) => {
    const [w, h] = size(), s = pixelsPerMetre(camera.zoom);
    const pan = { ArrowLeft: [-w / 8, 0], ArrowRight: [w / 8, 0], ArrowUp: [0, -h / 8], ArrowDown: [0, h / 8] }[event.key];
    if (pan) {
      userMoved();
      camera.x += pan[0] / s;
      camera.y += pan[1] / s;
    } else if (event.key === "+" || event.key === "=") {
      userMoved();
      camera.zoom = clampZoom(camera.zoom + 0.5);
    } else if (event.key === "-" || event.key === "_") {
      userMoved();
      camera.zoom = clampZoom(camera.zoom - 0.5);
    } else if (event.key === "0" || event.key === "Home") {
      showOverview(true);
      event.preventDefault();
      return;
    } else if (event.key === "Escape") {
      if (following) stopFollowing();
      return;
    } else return;
    event.preventDefault();
    cameraMoved();
  });

  document.getElementById("zoom-in").addEventListener("click", () => { userMoved(); flyTo({ x: camera.x, y: camera.y, zoom: clampZoom(camera.zoom + 1) }, "idle", 250); });
  document.getElementById("zoom-out").addEventListener("click", () => { userMoved(); flyTo({ x: camera.x, y: camera.y, zoom: clampZoom(camera.zoom - 1) }, "idle", 250); });
  document.getElementById("overview").addEventListener("click", () => showOverview(true));
  window.addEventListener("resize", requestFrame);

  // A click (a press without a drag): an asset is followed; with auto focus off, a
  // facade takes the focus.
  function click(event) {
    const target = document.elementFromPoint(event.clientX, event.clientY);
    const asset = target && target.closest("[data-asset]");
    if (asset) { follow(asset.dataset.asset); return; }
    const building = target && target.closest(".building");
    if (building && !autoFocus) {
      const item = buildings.get(building.dataset.building);
      const zoom = Math.max(camera.zoom, layout.view.indoorZoom);
      focusBuilding(item.info.building);
      flyTo({ x: item.centre[0], y: item.centre[1], zoom }, "idle");
    }
  }

  // --- Buildings ------------------------------------------------------------------
  function pathData(rings) {
    return rings.map((ring) => ring.map((p, i) => (i === 0 ? "M" : "L") + projection.at(p).map((v) => v.toFixed(2)).join(" ")).join(" ") + " Z").join(" ");
  }

  function drawBuildings() {
    const points = [];
    for (const b of layout.buildings) for (const ring of b.footprint) for (const p of ring) points.push(p);
    document.getElementById("no-geometry").hidden = points.length > 0;
    if (points.length === 0) return false;
    projection = makeProjection(points);
    for (const info of layout.buildings) {
      const group = document.createElementNS(svgNS, "g");
      group.setAttribute("class", "building");
      group.dataset.building = info.building;
      const path = document.createElementNS(svgNS, "path");
      path.setAttribute("class", "facade");
      path.setAttribute("d", pathData(info.footprint));
      const title = document.createElementNS(svgNS, "title");
      title.textContent = "Building " + (info.name || info.building);
      group.append(title, path);
      facadeLayer.appendChild(group);
      let x0 = Infinity, y0 = Infinity, x1 = -Infinity, y1 = -Infinity, area = 0, cx = 0, cy = 0;
      for (const ring of info.footprint) {
        const pts = ring.map(projection.at);
        for (const [x, y] of pts) { x0 = Math.min(x0, x); x1 = Math.max(x1, x); y0 = Math.min(y0, y); y1 = Math.max(y1, y); }
        for (let i = 0; i + 1 < pts.length; i++) {
          const c = pts[i][0] * pts[i + 1][1] - pts[i + 1][0] * pts[i][1];
          area += c; cx += (pts[i][0] + pts[i + 1][0]) * c; cy += (pts[i][1] + pts[i + 1][1]) * c;
        }
      }
      const centre = area !== 0 ? [cx / (3 * area), cy / (3 * area)] : [(x0 + x1) / 2, (y0 + y1) / 2];
      const label = document.createElementNS(svgNS, "text");
      label.dataset.building = info.building;
      const name = document.createElementNS(svgNS, "tspan");
      name.setAttribute("x", "0");
      name.textContent = info.name || info.building;
      const line = document.createElementNS(svgNS, "tspan");
      line.setAttribute("x", "0");
      line.setAttribute("dy", "1.2em");
      line.setAttribute("class", "sub");
      line.textContent = "no reports yet";
      label.append(name, line);
      labelLayer.appendChild(label);
      buildings.set(info.building, { info, group, path, label, line, title, bounds: { x0, y0, x1, y1 }, rings: info.footprint.map((r) => r.map(projection.at)), centre, summary: null });
    }
    return true;
  }

  function summaryText(summary) {
    if (!summary || !summary.locations) return "no reports yet";
    const states = Object.keys(summary.states || {}).sort().filter((s) => s !== "none").map((s) => s + " " + summary.states[s]);
    const people = summary.capacity > 0 ? summary.people + "/" + summary.capacity + " people" : summary.people + " people";
    return (states.length ? states.join(" · ") + " · " : "") + people;
  }

  // On the map a facade says its people against capacity (or its locations), to stay short
  // among its neighbours; the list beside the map and the facade's title say everything.
  function shortText(summary) {
    if (!summary || !summary.locations) return "no reports yet";
    return summary.capacity > 0 ? summary.people + "/" + summary.capacity + " people" : summary.locations + " locations";
  }

  function renderBuildingSummary(item) {
    const text = summaryText(item.summary);
    item.line.textContent = shortText(item.summary);
    item.title.textContent = "Building " + (item.info.name || item.info.building) + ": " + text;
    item.group.dataset.summary = text;
    const s = item.summary;
    item.group.classList.toggle("busy", !!(s && s.capacity > 0 && s.people / s.capacity >= 0.5));
    const entry = document.querySelector(`#buildings li[data-building="${CSS.escape(item.info.building)}"]`);
    if (entry) entry.textContent = (item.info.name || item.info.building) + ": " + text;
  }

  function inView(item, bounds) {
    const b = item.bounds;
    return b.x1 >= bounds.x0 && b.x0 <= bounds.x1 && b.y1 >= bounds.y0 && b.y0 <= bounds.y1;
  }

  function contains(rings, [x, y]) {
    let inside = false;
    for (const ring of rings) {
      for (let i = 0, j = ring.length - 1; i < ring.length; j = i++) {
        const [xi, yi] = ring[i], [xj, yj] = ring[j];
        if ((yi > y) !== (yj > y) && x < ((xj - xi) * (y - yi)) / (yj - yi) + xi) inside = !inside;
      }
    }
    return inside;
  }

  // The building most centred in view: the one under the centre, else the nearest whose
  // outline is in view.
  function mostCentred() {
    const centre = [camera.x, camera.y], bounds = viewBounds();
    let best = null, bestDistance = Infinity;
    for (const item of buildings.values()) {
      if (contains(item.rings, centre)) return item;
      if (!inView(item, bounds)) continue;
      const d = Math.hypot(item.centre[0] - centre[0], item.centre[1] - centre[1]);
      if (d < bestDistance) { best = item; bestDistance = d; }
    }
    return best;
  }

  // --- Focus ----------------------------------------------------------------------
  function updateFocus() {
    if (!layout || following) return;
    if (camera.zoom < layout.view.outdoorZoom) { if (focus) unfocus(); return; }
    if (!autoFocus || camera.zoom < layout.view.indoorZoom) return;
    const item = mostCentred();
    if (item && (!focus || focus.building !== item.info.building)) focusBuilding(item.info.building);
  }

  // The floor a building opens on: the one last chosen there, else the one at the
  // elevation of the floor left behind, else its default.
  function floorOnFocus(info) {
    const chosen = lastChosen.get(info.building);
    if (chosen && info.floors.some((f) => f.floor === chosen)) return chosen;
    if (lastElevation !== null) {
      let best = null;
      for (const f of info.floors) {
        if (f.elevation === null || f.elevation === undefined) continue;
        const d = Math.abs(f.elevation - lastElevation);
        if (d < 1 && (!best || d < best.d)) best = { floor: f.floor, d };
      }
      if (best) return best.floor;
    }
    return info.defaultFloor || (info.floors[0] && info.floors[0].floor);
  }

  function focusBuilding(building, floor) {
    const item = buildings.get(building);
    if (!item) return;
    showFloor(building, floor || floorOnFocus(item.info));
  }

  function unfocus() {
    focus = null;
    for (const item of buildings.values()) item.group.classList.remove("open");
    requestFrame();
    closeFloorStream();
    floorLayer.replaceChildren();
    shapes.clear();
    records.clear();
    body.dataset.focus = "";
    body.dataset.live = "";
    document.getElementById("focus-title").textContent = "";
    renderFloorButtons();
    document.getElementById("summary").textContent = "";
    writeURL();
  }

  function showFloor(building, floor) {
    if (!floor) return;
    if (focus && focus.building === building && focus.floor === floor) return;
    focus = { building, floor };
    stats.focusAt = performance.now();
    stats.liveAt = null;
    const item = buildings.get(building);
    const info = item.info.floors.find((f) => f.floor === floor);
    if (info && info.elevation !== null && info.elevation !== undefined) lastElevation = info.elevation;
    for (const other of buildings.values()) other.group.classList.toggle("open", other === item);
    requestFrame();
    body.dataset.focus = building + "/" + floor;
    body.dataset.live = "";
    document.getElementById("focus-title").textContent = "· building " + (item.info.name || building) + " · floor " + floor
      + (info && info.elevation != null ? " (" + info.elevation + " m)" : "");
    renderFloorButtons();
    openFloor(building, floor);
    writeURL();
  }

  function renderFloorButtons() {
    const list = document.getElementById("floors");
    list.replaceChildren();
    document.getElementById("floors-hint").hidden = !!focus;
    if (!focus) return;
    const info = buildings.get(focus.building).info;
    for (const f of info.floors.slice().reverse()) {
      const button = document.createElement("button");
      button.type = "button";
      button.dataset.floor = f.floor;
      button.textContent = f.floor;
      if (f.elevation != null) button.title = f.elevation + " m";
      button.setAttribute("aria-pressed", String(f.floor === focus.floor));
      button.addEventListener("click", () => {
        lastChosen.set(focus.building, f.floor);
        showFloor(focus.building, f.floor);
      });
      list.appendChild(button);
    }
  }

  // --- The focused floor, live -----------------------------------------------------
  let floorGeneration = 0;
  function closeFloorStream() {
    floorGeneration++;
    if (floorStream) { floorStream.close(); floorStream = null; }
  }

  async function openFloor(building, floor) {
    closeFloorStream();
    const generation = floorGeneration;
    const scope = new URLSearchParams({ dataset, venue, building, floor }).toString();
    floorLayer.replaceChildren();
    shapes.clear();
    records.clear();
    let features = [];
    try { features = (await (await fetch("/v1/geometry?" + scope)).json()).features; } catch (e) { /* drawn as it reports */ }
    if (generation !== floorGeneration) return;
    drawFloor(features);
    const stream = new EventSource("/v1/events?" + scope);
    floorStream = stream;
    stream.addEventListener("open", () => { banner.hidden = true; });
    stream.addEventListener("error", () => { banner.hidden = false; });
    stream.addEventListener("snapshot", (e) => {
      banner.hidden = true;
      const snapshot = JSON.parse(e.data);
      ruleTitles = new Map();
      for (const entry of snapshot.legend.entries) for (const rule of entry.rules) ruleTitles.set(rule, entry.title);
      records.clear();
      for (const record of snapshot.locations) records.set(record.location, record);
      for (const id of shapes.keys()) render(id);
      for (const record of snapshot.locations) placeAsset(record);
      renderFloorSummary(snapshot.summaries.find((s) => s.floor === floor));
      updateFollowChoices();
      body.dataset.live = building + "/" + floor;
      stats.liveAt = performance.now();
    });
    stream.addEventListener("change", (e) => {
      const change = JSON.parse(e.data);
      if (change.topic.building !== building || change.topic.floor !== floor) { removeLocation(change.location); return; }
      records.set(change.location, change);
      render(change.location);
      placeAsset(change);
      measureDrawn(change);
      // Only a location with a position can join the list of assets to follow.
      if (change.position) updateFollowChoices();
    });
    stream.addEventListener("remove", (e) => removeLocation(JSON.parse(e.data).location));
    stream.addEventListener("summary", (e) => {
      const summary = JSON.parse(e.data);
      if (summary.floor === floor) renderFloorSummary(summary);
    });
  }

  function removeLocation(id) {
    if (!records.delete(id)) return;
    render(id);
    const dot = floorLayer.querySelector(`circle.asset-dot[data-asset="${CSS.escape(id)}"]`);
    if (dot) dot.remove();
  }

  function renderFloorSummary(summary) {
    document.getElementById("summary").textContent = summary ? "This floor: " + summary.locations + " locations; " + summaryText(summary) + "." : "";
  }

  function drawFloor(features) {
    for (const feature of features) {
      const id = feature.properties.id;
      const group = document.createElementNS(svgNS, "g");
      group.setAttribute("class", "loc");
      group.setAttribute("data-location", id);
      const title = document.createElementNS(svgNS, "title");
      group.appendChild(title);
      const g = feature.geometry;
      let shape, anchor;
      if (g.type === "Point") {
        shape = document.createElementNS(svgNS, "circle");
        anchor = projection.at(g.coordinates);
        shape.setAttribute("cx", anchor[0]);
        shape.setAttribute("cy", anchor[1]);
        shape.setAttribute("r", (5 / pixelsPerMetre(camera.zoom)).toFixed(4));
        shape.setAttribute("class", "shape asset-dot");
        group.dataset.asset = id;
      } else {
        const polygons = g.type === "Polygon" ? [g.coordinates] : g.coordinates;
        shape = document.createElementNS(svgNS, "path");
        shape.setAttribute("d", polygons.map(pathData).join(" "));
        shape.setAttribute("fill-rule", "evenodd");
        shape.setAttribute("class", "shape");
        const ring = polygons[0][0].map(projection.at);
        anchor = ring.slice(0, -1).reduce((a, p) => [a[0] + p[0] / (ring.length - 1), a[1] + p[1] / (ring.length - 1)], [0, 0]);
      }
      group.appendChild(shape);
      const label = document.createElementNS(svgNS, "text");
      label.setAttribute("x", anchor[0]);
      label.setAttribute("y", anchor[1]);
      group.appendChild(label);
      floorLayer.appendChild(group);
      shapes.set(id, { group, shape, title, label, anchor, name: feature.properties.name || id });
    }
    lastFontZoom = null;
    requestFrame();
  }

  // A location that reports a position is drawn there (an asset), on its floor.
  function placeAsset(record) {
    if (!record.position || !projection.degrees) return;
    const [x, y] = projection.at([record.position.longitude, record.position.latitude]);
    let dot = floorLayer.querySelector(`circle.asset-dot[data-asset="${CSS.escape(record.location)}"]`);
    const item = shapes.get(record.location);
    if (item && item.shape.tagName === "circle") dot = item.shape;
    if (!dot) {
      dot = document.createElementNS(svgNS, "circle");
      dot.setAttribute("class", "asset-dot");
      dot.dataset.asset = record.location;
      dot.setAttribute("r", (5 / pixelsPerMetre(camera.zoom)).toFixed(4));
      const title = document.createElementNS(svgNS, "title");
      title.textContent = record.location + ": follow it";
      dot.appendChild(title);
      floorLayer.appendChild(dot);
    }
    dot.setAttribute("cx", x.toFixed(2));
    dot.setAttribute("cy", y.toFixed(2));
  }

  function stateOf(record) {
    if (!record || !record.rules || record.rules.length === 0) return "none";
    return ruleTitles.get(record.rules[record.rules.length - 1]) || "none";
  }

  // A location's style, drawn from the daemon's table of style fields (as the floor page).
  function render(id) {
    const item = shapes.get(id);
    if (!item) return;
    const record = records.get(id);
    const style = (record && record.style) || {};
    const state = record ? stateOf(record) : "no report";
    const hidden = new Set(), content = {}, attributes = [];
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
    const label = content.label !== undefined && !hidden.has("label") ? String(content.label) : "";
    item.label.textContent = label;
    const parts = [item.name + ": " + state];
    if (label) parts.push(label);
    item.title.textContent = parts.join(" · ");
    const elements = { location: item.group, shape: item.shape, label: item.label };
    for (const [part, attribute, value] of attributes) {
      // The zoom range is the map's to apply, not the floor's: left as data attributes.
      if (elements[part]) elements[part].setAttribute(attribute, value);
    }
    if (item.shape.tagName === "circle") item.shape.setAttribute("class", "shape asset-dot");
  }

  // --- Following an asset ------------------------------------------------------------
  function updateFollowChoices() {
    const select = document.getElementById("follow");
    const ids = new Set([...records.values()].filter((r) => r.position).map((r) => r.location));
    if (following) ids.add(following);
    const current = new Set([...select.options].map((o) => o.value).filter((v) => v));
    if (ids.size === current.size && [...ids].every((id) => current.has(id))) { select.value = following || ""; return; }
    select.replaceChildren(new Option("nothing", ""));
    for (const id of [...ids].sort()) select.appendChild(new Option(id, id));
    select.value = following || "";
  }

  document.getElementById("follow").addEventListener("change", (e) => { if (e.target.value) follow(e.target.value); else stopFollowing(); });

  function follow(id) {
    if (following === id) return;
    stopFollowing(true);
    following = id;
    followed = null;
    body.dataset.following = id;
    updateFollowChoices();
    const stream = new EventSource("/v1/events?" + new URLSearchParams({ dataset, venue, location: id }).toString());
    followStream = stream;
    const take = (record) => {
      if (!record || following !== id) return;
      followed = record;
      moveToFollowed(true);
    };
    stream.addEventListener("snapshot", (e) => take(JSON.parse(e.data).locations.find((r) => r.location === id)));
    stream.addEventListener("change", (e) => take(JSON.parse(e.data)));
    setViewport("following");
    writeURL();
  }

  function stopFollowing(quietly) {
    if (!following) return;
    if (followStream) { followStream.close(); followStream = null; }
    for (const dot of assetLayer.querySelectorAll("circle")) dot.remove();
    following = null;
    followed = null;
    body.dataset.following = "";
    updateFollowChoices();
    if (!quietly) setViewport("idle");
    writeURL();
  }

  // The view goes where the followed asset is: its building and floor in focus, the camera
  // on its position (animated when it jumped further than the view's half).
  function moveToFollowed(animated) {
    const record = followed;
    const topic = record.topic;
    if (!focus || focus.building !== topic.building || focus.floor !== topic.floor) {
      if (buildings.has(topic.building)) showFloor(topic.building, topic.floor);
    }
    if (!record.position || !projection.degrees) {
      const item = buildings.get(topic.building);
      if (item) centreOn(item.centre, animated);
      return;
    }
    const at = projection.at([record.position.longitude, record.position.latitude]);
    let marker = assetLayer.querySelector("circle");
    if (!marker) {
      marker = document.createElementNS(svgNS, "circle");
      marker.setAttribute("class", "asset-dot followed");
      marker.setAttribute("r", (6 / pixelsPerMetre(camera.zoom)).toFixed(4));
      assetLayer.appendChild(marker);
    }
    marker.dataset.asset = record.location;
    marker.setAttribute("cx", at[0].toFixed(2));
    marker.setAttribute("cy", at[1].toFixed(2));
    centreOn(at, animated);
  }

  function centreOn(at, animated) {
    const zoom = Math.max(camera.zoom, layout.view.indoorZoom);
    const [w] = size(), s = pixelsPerMetre(camera.zoom);
    const far = Math.hypot(at[0] - camera.x, at[1] - camera.y) * s > w / 2;
    if (animated && (far || zoom !== camera.zoom)) flyTo({ x: at[0], y: at[1], zoom }, "following");
    else {
      cancelAnimation();
      camera.x = at[0]; camera.y = at[1]; camera.zoom = zoom;
      setViewport("following");
      cameraMoved();
    }
  }

  // --- Summaries of the buildings in view ---------------------------------------------
  function updateSummaryScope() {
    if (!layout) return;
    const bounds = viewBounds();
    const visible = [...buildings.values()].filter((item) => inView(item, bounds)).map((item) => item.info.building).sort();
    const list = document.getElementById("buildings");
    const key = visible.join("\u0000");
    if (key === summaryScope && summaryStream) return;
    summaryScope = key;
    list.replaceChildren(...visible.map((b) => {
      const li = document.createElement("li");
      li.dataset.building = b;
      return li;
    }));
    for (const b of visible) renderBuildingSummary(buildings.get(b));
    if (summaryStream) { summaryStream.close(); summaryStream = null; }
    if (visible.length === 0) return;
    const query = new URLSearchParams({ dataset, venue, only: "summaries" });
    for (const b of visible) query.append("building", b);
    const stream = new EventSource("/v1/events?" + query.toString());
    summaryStream = stream;
    const take = (summary) => {
      if (summary.floor !== undefined && summary.floor !== null) return;
      const item = buildings.get(summary.building);
      if (!item) return;
      item.summary = summary;
      renderBuildingSummary(item);
      if (measuring) stats.summaryAt.set(summary.building, Date.now());
    };
    stream.addEventListener("open", () => { banner.hidden = true; });
    stream.addEventListener("error", () => { banner.hidden = false; });
    stream.addEventListener("snapshot", (e) => { banner.hidden = true; JSON.parse(e.data).summaries.forEach(take); body.dataset.summaries = "live"; });
    stream.addEventListener("summary", (e) => take(JSON.parse(e.data)));
  }

  // --- The URL holds the view ---------------------------------------------------------
  let urlTimer = null;
  function writeURL() {
    clearTimeout(urlTimer);
    urlTimer = setTimeout(() => {
      if (!projection) return;
      const query = new URLSearchParams();
      if (focus) { query.set("building", focus.building); query.set("floor", focus.floor); }
      const [x, y] = projection.back([camera.x, camera.y]);
      const digits = projection.degrees ? 7 : 2;
      query.set("center", x.toFixed(digits) + "," + y.toFixed(digits));
      query.set("zoom", camera.zoom.toFixed(2));
      if (!autoFocus) query.set("autoFocus", "false");
      if (following) query.set("follow", following);
      history.replaceState(null, "", location.pathname + "?" + query.toString());
    }, 200);
  }

  document.getElementById("auto-focus").addEventListener("change", (e) => {
    autoFocus = e.target.checked;
    writeURL();
    updateFocus();
  });

  // --- Start ------------------------------------------------------------------------
  async function start() {
    try {
      const response = await fetch("/v1/venues/" + encodeURIComponent(dataset) + "/" + encodeURIComponent(venue));
      layout = await response.json();
    } catch (e) {
      banner.hidden = false;
      setTimeout(start, 1000);
      return;
    }
    if (!drawBuildings()) { body.dataset.ready = "true"; return; }
    const query = new URLSearchParams(location.search);
    autoFocus = query.has("autoFocus") ? query.get("autoFocus") !== "false" : layout.view.autoFocus;
    document.getElementById("auto-focus").checked = autoFocus;
    const center = (query.get("center") || "").split(",").map(parseFloat);
    const zoom = parseFloat(query.get("zoom"));
    if (center.length === 2 && center.every(isFinite) && isFinite(zoom)) {
      [camera.x, camera.y] = projection.at(center);
      camera.zoom = clampZoom(zoom);
      setViewport("idle");
    } else {
      Object.assign(camera, overviewCamera());
      setViewport("overview");
    }
    drawFrame();
    if (query.get("building") && buildings.has(query.get("building"))) {
      const building = query.get("building"), floor = query.get("floor");
      if (floor) lastChosen.set(building, floor);
      focusBuilding(building, floor || undefined);
    }
    updateSummaryScope();
    updateFocus();
    if (query.get("follow")) follow(query.get("follow"));
    body.dataset.ready = "true";
    stats.readyAt = performance.now();
  }

  start();
})();
